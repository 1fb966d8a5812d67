package soft_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// TestUDPPacedStream paces a stream on udp_lo: 2000 messages of 4 KiB at
// 100 Mb/s (0.655 s), 128 outstanding, every 16th signaled, the receiver
// reposting on its own goroutine. The stream follows the rate, message by
// message, and nothing is resent: while the pacer holds the next message
// back, the requester does not probe with the last one.
//
// The bounds hold on a loaded machine (two CPUs shared with other test
// runs). The engine paces when it runs, so a sender that waits for a CPU
// is late; it catches up at most one packet (pace.TakeDue) and never runs
// ahead of the rate, and a receiver that waits holds acknowledgements back
// (a stall longer than the 128-message window stops the sender). The test
// locks the sender and the receiver to their threads and reads from the
// kernel how long each waited for a CPU (schedstat), and it captures the
// packets as they leave (AF_PACKET on lo, kernel timestamps), so the
// receiver's scheduling does not move them:
//   - achieved rate: never above the request (3% for the clock and the
//     first message) and, over the stream's time less what the two
//     threads waited for a CPU, at least 90% of it (judged when that is
//     at least half the stream: the waits may overlap, and a machine that
//     kept the threads off the CPUs longer leaves too little to judge);
//   - gaps between packets on the wire, judged always: the median within
//     10% of the rate's (327.68 us: a pacer slower or faster than the rate
//     moves it however loaded the machine); a quarter or more under half
//     of it (a pacer that lets packets out in pairs or bursts) or a quarter
//     or more over twice it (one that keeps a wrong schedule) fails. A
//     loaded machine adds a long gap where the sender waited and a short
//     one after it, which checkGaps excuses as a pair, and a receiver
//     that waited long enough to close the window a long gap alone, as
//     many as its time off the CPUs (schedstat) accounts for.
func TestUDPPacedStream(t *testing.T) {
	for _, op := range []verbsio.Opcode{verbsio.OpSend, verbsio.OpRDMAWrite} {
		t.Run(op.String(), func(t *testing.T) {
			runtime.LockOSThread() // the sender: its waits for a CPU are measured
			defer runtime.UnlockOSThread()
			sender := openThreadClock(t, unix.Gettid())
			// A retransmission timeout of 4.3 s (timeout 20): a receiver
			// kept off the CPUs by other load for longer than perftest's
			// 67 ms must not make the sender resend (the tail probe, which
			// this test is about, does not depend on it).
			p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, NoProgress: true,
				BufSize: 1 << 16, CQE: 4096, Cap: verbsio.QPCap{MaxSendWR: 129, MaxRecvWR: 1024}, Connect: verbsio.ConnectOptions{Timeout: 20}})
			wire := openCapture(t, "lo")
			wire.stamp(t)
			wire.keepUDPTo(t, p.B.LID)
			attr := verbsio.QPAttr{State: verbsio.QPStateRTS, RateLimit: 100_000, MaxBurstSize: 4096, TypicalPktSize: 4096}
			if err := p.A.QP.Modify(&attr, verbsio.QPAttrState|verbsio.QPAttrRateLimit); err != nil {
				t.Fatal(err)
			}
			rwr := []verbsio.RecvWR{{SGL: []verbsio.SGE{p.B.MR.SGE(0, 4096)}}}
			for i := 0; i < 512; i++ {
				p.B.QP.PostRecv(rwr)
			}
			wr := []verbsio.SendWR{{Opcode: op, SGL: []verbsio.SGE{p.A.MR.SGE(0, 4096)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}}
			const total, window = 2000, 128
			gap := time.Duration(4096 * 8 * float64(time.Second) / 100e6) // 327.68 us
			stop, stopped, tids := make(chan struct{}), make(chan struct{}), make(chan int, 1)
			defer func() { close(stop); <-stopped }() // before the pair closes
			go func() {                               // the receiver, on its own locked thread
				defer close(stopped)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				tids <- unix.Gettid()
				rwcs := make([]verbsio.WC, 1)
				for {
					select {
					case <-stop:
						return
					default:
					}
					m, _ := p.B.CQ.Poll(rwcs)
					for i := 0; i < m; i++ {
						p.B.QP.PostRecv(rwr)
					}
				}
			}()
			receiver := openThreadClock(t, <-tids)
			wcs := make([]verbsio.WC, 16)
			posted, done := 0, 0
			waited0, start := sender.waited()+receiver.waited(), time.Now()
			rran0 := receiver.ran()
			deadline := start.Add(20 * time.Second)
			for done < total {
				for posted < total && posted-done < window {
					wr[0].Flags = 0
					if (posted+1)%16 == 0 {
						wr[0].Flags = verbsio.SendSignaled
					}
					if _, err := p.A.QP.PostSend(wr); err != nil {
						t.Fatal(err)
					}
					posted++
				}
				n, err := p.A.CQ.Poll(wcs)
				if err != nil {
					t.Fatal(err)
				}
				for _, wc := range wcs[:n] {
					if wc.Status != verbsio.StatusSuccess {
						t.Fatalf("after %d of %d messages: %s", done, total, wc.Status)
					}
					done += 16
				}
				if time.Now().After(deadline) {
					t.Fatalf("stuck after %d of %d", done, total)
				}
			}
			el, waited := time.Since(start), sender.waited()+receiver.waited()-waited0
			// The receiver off the CPUs (for whatever reason: waiting
			// for one, or parked by the Go scheduler) holds its
			// acknowledgements back, and the sender's window of 128
			// closes at most once per 128 intervals of that.
			rxStalls := int64((el - (receiver.ran() - rran0)) / (window * gap))
			c := p.A.Ctx.Impl().(*soft.Context).Counters()
			// The first message leaves at once (a full bucket), the
			// other 1999 at the rate.
			want := time.Duration(total-1) * gap
			ran := el - waited
			t.Logf("%d messages in %v (%.1f%% of the rate), the threads waiting for a CPU %v of it in all",
				total, el, 100*float64(want)/float64(el), waited)
			if el < want*97/100 {
				t.Errorf("%v for %d paced messages, faster than the rate allows (%v)", el, total, want)
			}
			switch {
			case ran < el/2:
				t.Logf("the threads waited for a CPU more than half the stream: its duration says nothing about the pacer; the gaps between packets do")
			case float64(want) < 0.90*float64(ran):
				t.Errorf("%v for %d paced messages, %v of it with the threads able to run: %.1f%% of the rate, want at least 90%% (%v)",
					el, total, ran, 100*float64(want)/float64(ran), want)
			}
			if c["retransmitted"] != 0 || c["sent_pkts"] != total {
				t.Errorf("%d packets sent, %d of them again, for %d one-packet messages on a clean loopback (%v)", c["sent_pkts"], c["retransmitted"], total, c)
			}
			sent := wire.departures(p.B.LID)
			if len(sent) != total {
				t.Fatalf("%d packets to port %d captured, want %d", len(sent), p.B.LID, total)
			}
			checkGaps(t, sent, gap, 1, 0, rxStalls)
		})
	}
}

// checkGaps checks the gaps between successive departures against want,
// for a pacer whose bucket holds burst packets and which credits a late
// sender up to catchUp of lateness (0: one burst's):
// the median within 10%, fewer than a quarter under half of it and fewer
// than a quarter over twice it, after excusing what a busy machine does
// to a working pacer. A sender that lost its CPU for more than an
// interval leaves one gap long and, catching up the lateness of one
// packet, the next one short: a short gap right after one over one and a
// half intervals is such a catch-up, not a burst, and a long gap followed
// by a catch-up is such a stall, not a wrong schedule; with catchUp, the
// catch-up after a gap g is up to burst + min(g, catchUp)/want short
// gaps (the packets the stall held back), and the median is that of the
// gaps that are no catch-up (a busy machine makes most gaps catch-ups).
// A receiver that
// lost its CPU long enough to close the window leaves a long gap with no
// catch-up; rxStalls of those are excused. A pacer that lets packets out
// in pairs (long, short, long, short) is excused here but moves the
// median, which is judged as it is.
func checkGaps(t *testing.T, at []time.Time, want time.Duration, burst int, catchUp time.Duration, rxStalls int64) {
	t.Helper()
	checkGapsWaited(t, at, nil, want, burst, catchUp, rxStalls)
}

// checkGapsWaited is checkGaps knowing, per gap (waited[i]: between at[i]
// and at[i+1]), how long the sender waited for a CPU within it: a gap
// with a wait over a tenth of the rate's gap is the scheduler's, not the
// pacer's, and is not judged (a wait under that cannot alone move a gap
// out of the median's 10%). nil: no waits known.
func checkGapsWaited(t *testing.T, at []time.Time, waited []time.Duration, want time.Duration, burst int, catchUp time.Duration, rxStalls int64) {
	t.Helper()
	gaps := make([]time.Duration, 0, len(at))
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	// after is how many short gaps may still be the catch-up of the last
	// late packet (up to what the bucket holds, pace.TakeDue).
	var short, caught, long, stalls, sched int64
	after := 0
	judged := gaps // with catchUp: the gaps that are no catch-up
	if catchUp > 0 || waited != nil {
		judged = nil
	}
	for i, g := range gaps {
		if waited != nil && waited[i] > want/10 {
			sched++
			if after = 0; g > want*3/2 {
				after = burst + int(min(g, catchUp)/want)
			}
			continue
		}
		switch {
		case g < want/2 && after > 0:
			caught++
			after--
			continue
		case g < want/2:
			short++
		case g > 2*want && i+1 < len(gaps) && gaps[i+1] < want/2:
			stalls++
		case g > 2*want:
			long++
		}
		after = 0
		if g > want*3/2 {
			after = burst + int(min(g, catchUp)/want)
		}
		if catchUp > 0 || waited != nil {
			judged = append(judged, g)
		}
	}
	excused := min(long, rxStalls)
	n := int64(len(gaps))
	if waited != nil {
		t.Logf("%d of %d gaps with the sender waiting over %v for a CPU in them: the scheduler's, not judged", sched, n, want/10)
		if len(judged) < 20 {
			t.Logf("%d gaps left to judge: too few (the sender waited for a CPU in nearly every gap)", len(judged))
			return
		}
	}
	sorted := slices.Sorted(slices.Values(judged))
	q := func(f float64) time.Duration { return sorted[int(f*float64(len(sorted)-1))] }
	if catchUp > 0 || waited != nil {
		t.Logf("percentiles of the %d gaps that are no catch-up:", len(judged))
	}
	t.Logf("gaps on the wire: p10 %v, p25 %v, median %v, p75 %v, p90 %v (want %v); under half: %d, and %d catching up after a late one; over twice: %d before a catch-up (a sender stall), %d others, %d of them excused (the receiver's time off the CPUs accounts for up to %d); of %d",
		q(.1), q(.25), q(.5), q(.75), q(.9), want, short, caught, stalls, long, excused, rxStalls, n)
	if med := q(.5); med < want*90/100 || med > want*110/100 {
		t.Errorf("median gap %v, want %v ± 10%%", med, want)
	}
	if short*4 >= n {
		t.Errorf("%d of %d gaps under %v (half the rate's), not after a late packet: packets leave in bursts", short, n, want/2)
	}
	if (long-excused)*4 >= n {
		t.Errorf("%d of %d gaps over %v (twice the rate's) with no catch-up after them, %d more than the receiver's time off the CPUs explains: the pacer holds packets too long",
			long, n, 2*want, long-excused)
	}
}

// threadClock reads how long a thread has waited for a CPU: the second
// field of its schedstat (run delay, ns).
type threadClock struct {
	f   *os.File
	buf [128]byte
}

func openThreadClock(t *testing.T, tid int) *threadClock {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("the kernel keeps no schedstat (CONFIG_SCHED_INFO), so this test cannot tell what load took from the pacer")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &threadClock{f: f}
}

func (c *threadClock) waited() time.Duration { return time.Duration(c.field(1)) }

// ran is how long the thread ran on a CPU: the first field of its
// schedstat.
func (c *threadClock) ran() time.Duration { return time.Duration(c.field(0)) }

func (c *threadClock) field(i int) int64 {
	n, _ := c.f.ReadAt(c.buf[:], 0)
	fields := bytes.Fields(c.buf[:n])
	if len(fields) <= i {
		return 0
	}
	d, _ := strconv.ParseInt(string(fields[i]), 10, 64)
	return d
}
