package soft_test

import (
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// TestUDPDestroyWithWorkOutstanding destroys a udp_lo RC QP whose WRITEs
// await acknowledgements from a peer that is gone (its retransmission
// timer armed), then keeps driving the context for longer than the
// timeout, in the foreground and in background progress: the destroyed
// QP is never driven again (it was, and read freed rings).
func TestUDPDestroyWithWorkOutstanding(t *testing.T) {
	for _, bg := range []bool{false, true} {
		p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, NoProgress: true,
			Connect: verbsio.ConnectOptions{Timeout: 1}}) // 8 us: timers fire at once
		p.B.Ctx.Close()
		wr := []verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)},
			Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}}
		for i := 0; i < 4; i++ {
			if _, err := p.A.QP.PostSend(wr); err != nil {
				t.Fatal(err)
			}
		}
		// A second QP on the same CQ keeps the context's progress busy.
		other, err := p.A.PD.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: p.A.CQ, RecvCQ: p.A.CQ,
			Cap: verbsio.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Destroy()
		if err := p.A.QP.Destroy(); err != nil {
			t.Fatal(err)
		}
		stop := func() {}
		if bg {
			stop = p.A.Ctx.StartProgress()
		}
		wcs := make([]verbsio.WC, 8)
		for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
			if _, err := p.A.CQ.Poll(wcs); err != nil {
				t.Fatal(err)
			}
		}
		stop()
	}
}
