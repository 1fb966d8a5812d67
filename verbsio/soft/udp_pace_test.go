package soft_test

import (
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// TestUDPPacedStream paces a stream on udp_lo: 2000 messages of 4 KiB at
// 100 Mb/s (0.655 s), 128 outstanding, every 16th signaled, the receiver
// reposting on its own goroutine. The stream never beats the rate and
// nothing is resent: while the pacer holds the next message back, the
// requester does not probe with the last one.
func TestUDPPacedStream(t *testing.T) {
	for _, op := range []verbsio.Opcode{verbsio.OpSend, verbsio.OpRDMAWrite} {
		t.Run(op.String(), func(t *testing.T) {
			p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, NoProgress: true,
				BufSize: 1 << 16, CQE: 4096, Cap: verbsio.QPCap{MaxSendWR: 129, MaxRecvWR: 1024}})
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
			stop, stopped := make(chan struct{}), make(chan struct{})
			defer func() { close(stop); <-stopped }() // before the pair closes
			go func() {                               // the receiver, on its own goroutine
				defer close(stopped)
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
			wcs := make([]verbsio.WC, 16)
			posted, done := 0, 0
			start := time.Now()
			deadline := time.Now().Add(20 * time.Second)
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
			el := time.Since(start)
			c := p.A.Ctx.Impl().(*soft.Context).Counters()
			t.Logf("%d messages in %v; sender %v", total, el, c)
			// The first message leaves at once (a full bucket), the
			// other 1999 at the rate.
			want := time.Duration(float64((total-1)*4096*8) / 100e6 * float64(time.Second))
			if el < want*97/100 {
				t.Errorf("%v for %d paced messages, faster than the rate allows (%v)", el, total, want)
			}
			// How close to the rate it comes depends on the CPUs this
			// machine gives the busy pollers (BenchmarkPacing and rperf
			// pacing measure it); what must hold is the limit and that
			// nothing is sent twice.
			if c["retransmitted"] != 0 || c["sent_pkts"] != total {
				t.Errorf("%d packets sent, %d of them again, for %d one-packet messages on a clean loopback", c["sent_pkts"], c["retransmitted"], total)
			}
		})
	}
}
