package reports

import (
	"fmt"
	"math/bits"
)

// PeakWindow is the window perftest's BW-peak search settles on: from the
// post of message First to the completion of message Last.
type PeakWindow struct {
	First, Last int
	Ns          int64 // completed[Last] - posted[First]
	Messages    int64 // Last - First + 1
}

// NsPerMessage returns the window's average time per message.
func (w PeakWindow) NsPerMessage() float64 {
	return float64(w.Ns) / float64(w.Messages)
}

// FindPeakWindow runs perftest's peak search over per-message timestamps
// (nanoseconds, len(posted) == len(completed) == iterations × QPs): for each
// window start i = 0, postList, 2·postList, ... (the messages whose post
// perftest stamps) and each end j = roundUp(i+1, cqMod)−1, +cqMod, ... (the
// completions perftest stamps, one per CQE), plus j = n−1 when n is not a
// multiple of cqMod, it takes (completed[j] − posted[i]) / (j − i + 1) and
// returns the window where that is smallest. Only those indices are read,
// so unstamped entries may hold anything.
//
// Two deliberate differences from perftest: the ratio is compared exactly
// (perftest truncates it to whole cycles, under a nanosecond at GHz cycle
// rates but a whole tick at rperf's nanosecond ticks), and no window
// (0,0) is assumed when cqMod > 1 (perftest seeds its minimum with
// tcompleted[0] − tposted[0], an entry it never stamps in that case).
// The search costs O(n²/(postList·cqMod)).
func FindPeakWindow(posted, completed []int64, postList, cqMod int) (PeakWindow, error) {
	n := len(posted)
	switch {
	case n == 0 || len(completed) != n:
		return PeakWindow{}, fmt.Errorf("bw peak: need equal, nonempty posted and completed (got %d, %d)", n, len(completed))
	case postList < 1 || cqMod < 1:
		return PeakWindow{}, fmt.Errorf("bw peak: post list %d and cq moderation %d must be >= 1", postList, cqMod)
	}
	best := PeakWindow{First: -1}
	var bestNs, bestK uint64 // best.Ns and best.Messages, as uint64
	for i := 0; i < n; i += postList {
		p := posted[i]
		last := n - 1
		if n%cqMod == 0 {
			last = -1 // already among the cqMod steps
		}
		for j := roundUp(i+1, cqMod) - 1; ; j += cqMod {
			if j >= n {
				if last < 0 {
					break
				}
				j, last = last, -1 // the last message's CQE is always requested
			}
			t := completed[j] - p
			if t <= 0 {
				return PeakWindow{}, fmt.Errorf("bw peak: completion of message %d (%d ns) is not after post of message %d (%d ns)",
					j, completed[j], i, p)
			}
			k := uint64(j - i + 1)
			// t/k < bestNs/bestK  ⇔  t·bestK < bestNs·k, compared in 128 bits.
			ahi, alo := bits.Mul64(uint64(t), bestK)
			bhi, blo := bits.Mul64(bestNs, k)
			if best.First < 0 || ahi < bhi || ahi == bhi && alo < blo {
				best = PeakWindow{First: i, Last: j, Ns: t, Messages: int64(k)}
				bestNs, bestK = uint64(t), k
			}
		}
	}
	return best, nil
}

// roundUp rounds v up to a multiple of a (perftest's ROUND_UP).
func roundUp(v, a int) int {
	return (v + a - 1) / a * a
}

// BWPeak returns perftest's peak bandwidth, the rate of the best window of
// [FindPeakWindow]: bytes per message over its time per message.
func BWPeak(bytes int64, posted, completed []int64, postList, cqMod int) (BWRates, PeakWindow, error) {
	w, err := FindPeakWindow(posted, completed, postList, cqMod)
	if err != nil {
		return BWRates{}, PeakWindow{}, err
	}
	r, err := BWAverage(bytes, w.Messages, w.Ns)
	return r, w, err
}
