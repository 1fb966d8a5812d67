package mad

import "time"

// Duration returns the time an IBTA 5-bit timeout field t stands for:
// 4.096 us * 2^t (the CM response timeouts, the MRA service timeout, the
// local ACK timeout and the target ACK delay all use it).
func Duration(t uint8) time.Duration {
	return time.Duration(4096<<(t&31)) * time.Nanosecond
}

// LinuxTimeout returns the time Linux's CM actually waits for a timeout
// field t: it approximates 4.096 us * 2^t by 2^(t-8) ms, at least 1 ms
// (cm_convert_to_ms). A REQ with response timeout 20 is retried every
// 4096 ms plus twice the path's packet life time.
func LinuxTimeout(t uint8) time.Duration {
	if t < 8 {
		return time.Millisecond
	}
	return time.Duration(1<<(t-8)) * time.Millisecond
}

// ACKTimeout returns the QP local ACK timeout Linux derives from the CA's
// ACK delay and the path's packet life time, both 5-bit timeout encodings:
// 4.096 us * 2^result approximates 4.096 us * 2^ackDelay + 2 * 4.096 us *
// 2^lifeTime by taking the larger term and adding one when the other is
// within a factor of two (cm_ack_timeout). The result is at most 31.
func ACKTimeout(ackDelay, lifeTime uint8) uint8 {
	t := int(lifeTime) + 1
	d := int(ackDelay)
	if t >= d {
		if d >= t-1 {
			t++
		}
	} else {
		if t >= d-1 {
			t = d + 1
		} else {
			t = d
		}
	}
	return uint8(min(31, t))
}
