package soft_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// TestUDPacing paces UD SENDs at 1 Mb/s on both fabrics, as the device's
// packet pacing caps (QP types RC, UC, UD) promise: of 21 sends of 1 KiB
// the first 4 leave at once (the engine's bucket holds at least 4 KiB,
// and starts full), the other 17 at the rate: never faster, and over the
// time the sending thread was not kept waiting for a CPU (see
// TestUDPPacedStream), at least 90% of it.
func TestUDPacing(t *testing.T) {
	for _, dev := range []string{"shm0", "udp_lo"} {
		t.Run(dev, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			sender := openThreadClock(t, unix.Gettid())
			p := verbstest.NewPair(t, verbstest.PairConfig{Device: dev, Type: verbsio.QPTypeUD, Open: verbsio.OpenOptions{UDPPort: -1},
				Cap: verbsio.QPCap{MaxSendWR: 64, MaxRecvWR: 64}})
			attr := verbsio.QPAttr{State: verbsio.QPStateRTS, RateLimit: 1000, MaxBurstSize: 1024, TypicalPktSize: 1024}
			if err := p.A.QP.Modify(&attr, verbsio.QPAttrState|verbsio.QPAttrRateLimit); err != nil {
				t.Fatal(err)
			}
			ah, err := p.A.PD.CreateAH(verbsio.AHAttr{DLID: p.B.LID, PortNum: 1, IsGlobal: true, DGID: p.B.GID, HopLimit: 64})
			if err != nil {
				t.Fatal(err)
			}
			const n = 21
			for i := 0; i < n; i++ {
				p.B.QP.PostRecv([]verbsio.RecvWR{{ID: uint64(i), SGL: []verbsio.SGE{p.B.MR.SGE(i*2048, 2048)}}})
			}
			wrs := make([]verbsio.SendWR, n)
			for i := range wrs {
				wrs[i] = verbsio.SendWR{ID: uint64(i), Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 1024)},
					UD: verbsio.UDAddr{AH: ah, RemoteQPN: p.B.QP.QPN(), RemoteQKey: verbsio.DefaultQKey}}
			}
			waited0, start := sender.waited(), time.Now()
			if _, err := p.A.QP.PostSend(wrs); err != nil {
				t.Fatal(err)
			}
			if _, err := verbstest.Poll(p.A.CQ, n, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			// 17 x 1024 B at 125,000 B/s = 139 ms.
			el, want := time.Since(start), 17*8192*time.Microsecond
			ran := el - (sender.waited() - waited0)
			if el < want*97/100 {
				t.Errorf("%d paced UD sends took %v, faster than the rate allows (%v)", n, el, want)
			}
			if float64(want) < 0.90*float64(ran) {
				t.Errorf("%d paced UD sends took %v, %v of it with the sender able to run: %.1f%% of the rate, want at least 90%% (%v)",
					n, el, ran, 100*float64(want)/float64(ran), want)
			}
		})
	}
}
