package soft_test

import (
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft"
	"golang.org/x/sys/unix"
)

// TestRawPacedStream paces a RAW_PACKET QP at 10 and 100 Mb/s (1,514-byte
// frames: 1.2 ms and 121 us apart) and checks when the frames left, by the
// send completions' stamps (taken as the engine hands each frame to the
// kernel), and that every one arrived: the stream never runs ahead of the
// rate (no frame leaves before its time in the schedule, less the bucket's
// burst, however late the sender was: a late sender catches up, never
// gets ahead), and follows it, as TestUDPPacedStream judges it (the duration less
// what the sender waited for a CPU, and the gaps between frames: median
// within 10%, fewer than a quarter under half or over twice the rate's).
// The receiver's kernel stamps are no judge of the pacer on a loaded
// machine: its delayed softirq processes frames sent a millisecond apart
// together and stamps them microseconds apart.
func TestRawPacedStream(t *testing.T) {
	for _, c := range []struct {
		kbps   uint32
		frames int
	}{{10_000, 300}, {100_000, 1500}} {
		t.Run(strconv.Itoa(int(c.kbps/1000))+"Mbps", func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			sender := openThreadClock(t, unix.Gettid())
			w := newRawWire(t, netns.Options{}, verbsio.OpenOptions{}, verbsio.WCExTS)
			qa := w.a.rawQP(t, 2048, 1)
			qb := w.b.rawQP(t, 16, 2048)
			fl := mustFlow(t, qb, w.b.udpTo(7000, 0))
			defer fl.Destroy()
			w.b.postRecvs(t, qb, 0, c.frames, 2048)
			attr := verbsio.QPAttr{State: verbsio.QPStateRTS, RateLimit: c.kbps, MaxBurstSize: 1514, TypicalPktSize: 1514}
			if err := qa.Modify(&attr, verbsio.QPAttrState|verbsio.QPAttrRateLimit); err != nil {
				t.Fatal(err)
			}
			f := udpFrame(t, w.a, w.b, 1, 7000, 0, 1472)
			copy(w.a.buf, f)
			wrs := make([]verbsio.SendWR, c.frames)
			for i := range wrs {
				wrs[i] = verbsio.SendWR{ID: uint64(i), Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{w.a.mr.SGE(0, len(f))}}
			}
			at := make([]time.Time, 0, c.frames)
			gap := time.Duration(float64(len(f)*8) * float64(time.Second) / (float64(c.kbps) * 1000))
			waited0, start := sender.waited(), time.Now()
			if n, err := qa.PostSend(wrs); err != nil || n != len(wrs) {
				t.Fatalf("posted %d of %d: %v", n, len(wrs), err)
			}
			// Room for every completion: a poll that finds the ring
			// empty drives the engine and returns all it completed, so
			// a frame is sent in the poll that returns it (the first
			// ones in the post). waits[j] is the sender's wait for a CPU
			// up to the j-th poll that returned any (0: the post);
			// pollOf[k] is frame k's.
			wcs := make([]verbsio.WC, c.frames)
			waits := make([]time.Duration, 1, c.frames+1)
			pollOf := make([]int, 0, c.frames)
			last := false
			for deadline := start.Add(20 * time.Second); !last; {
				n, err := w.a.cq.Poll(wcs)
				if err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					waits = append(waits, sender.waited()-waited0)
				}
				for _, wc := range wcs[:n] {
					if wc.Status != verbsio.StatusSuccess {
						t.Fatalf("send %+v", wc)
					}
					at = append(at, time.Unix(0, int64(wc.Timestamp)))
					pollOf = append(pollOf, len(waits)-1)
					last = last || wc.ID == uint64(c.frames-1)
				}
				if time.Now().After(deadline) {
					t.Fatal("the paced stream did not finish in 20 s")
				}
			}
			el, waited := time.Since(start), sender.waited()-waited0
			if _, err := pollN(w.b.cq, c.frames, 5*time.Second); err != nil {
				t.Fatalf("the receiver: %v", err)
			}
			if len(at) != c.frames {
				t.Fatalf("%d send completions for %d frames", len(at), c.frames)
			}
			// The sender's wait for a CPU within each gap's polls (the
			// one before the earlier frame's to the later frame's): the
			// scheduler's share of the gap. Completions come in the order
			// sent, stamped per batch.
			var gapWaits []time.Duration
			if slices.IsSortedFunc(at, func(a, b time.Time) int { return a.Compare(b) }) {
				gapWaits = make([]time.Duration, len(at)-1)
				for k := range gapWaits {
					gapWaits[k] = waits[pollOf[k+1]] - waits[pollOf[k]-1]
				}
			} else {
				t.Logf("the send stamps are out of order (a clock step?): the gaps are judged without the sender's waits")
				slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
			}
			span := at[len(at)-1].Sub(at[0])
			want := time.Duration(c.frames-1) * gap
			t.Logf("%d frames in %v as sent (%.2f%% of the rate), the sender waiting for a CPU %v of %v",
				c.frames, span, 100*float64(want)/float64(span), waited, el)
			// Faster than the rate is judged by the schedule below, from
			// the post: the span from the first frame's stamp is none (the
			// stamp may come late, by the first batch's queueing or a
			// preemption before it, and shorten the span by as much).
			// Never ahead of the schedule, catch-ups included: frame k
			// leaves no sooner than the rate allows k+1 frames less the
			// bucket's 4 KiB (paceMinBurst), from the pacer's first frame,
			// which left after start (taken before the post). A stamp is
			// taken after the pacer let its frame go, so it is never
			// earlier than the pacer's decision; the first frame's stamp is
			// no origin (it may come late: whatever runs between the pacer
			// and the system call, the batch's queueing or a preemption,
			// delays it: 130 us once in CI with io=xdp, the sender waiting
			// 1 ms for a CPU in all). Slack: the bucket's 5 us tolerance
			// (pace.LateTolerance) and the clock's reading.
			burst := time.Duration(float64(4096*8) * float64(time.Second) / (float64(c.kbps) * 1000))
			for k, a := range at {
				if early := time.Duration(k+1)*gap - burst - a.Sub(start); early > 10*time.Microsecond {
					t.Errorf("frame %d left %v after the post, %v ahead of the schedule (the first %v after the post)", k, a.Sub(start), early, at[0].Sub(start))
					break
				}
			}
			if ran := el - waited; ran >= el/2 && float64(want) < 0.90*float64(ran) {
				t.Errorf("%v for %d paced frames, %v of it with the sender able to run: %.1f%% of the rate, want at least 90%%",
					el, c.frames, ran, 100*float64(want)/float64(ran))
			}
			// The engine's bucket holds at least 4 KiB (paceMinBurst), more
			// than the 1,514 bytes asked: three frames leave together when
			// the sender comes back from a stall, with the frames the stall
			// held back (up to 10 ms of them, rawPaceCatchUp).
			checkGapsWaited(t, at, gapWaits, gap, 3, soft.RawPaceCatchUp, 0)
		})
	}
}
