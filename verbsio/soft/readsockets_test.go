package soft_test

import (
	"testing"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// TestProgressReadsSocketsInUse checks that progress reads only the
// sockets of GIDs a QP is bound to: udp_lo binds 127.0.0.1 and ::1, and a
// poll that read both would pay a system call more on every round trip.
func TestProgressReadsSocketsInUse(t *testing.T) {
	dev, err := verbsio.OpenWith("udp_lo", verbsio.OpenOptions{UDPPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	read, bound := dev.Impl().(*soft.Context).ReadSockets()
	if read != 0 || bound < 1 {
		t.Errorf("a context without QPs reads %d of its %d sockets, want 0 of at least 1", read, bound)
	}
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}})
	for _, side := range []*verbstest.Side{p.A, p.B} {
		read, bound := side.Ctx.Impl().(*soft.Context).ReadSockets()
		if read != 1 || bound < 1 {
			t.Errorf("a context with one connected QP reads %d of its %d sockets, want 1", read, bound)
		}
	}
	// Still a working pair: one WRITE completes.
	p.A.QP.PostSend([]verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)},
		Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}})
	if wc := verbstest.PollOne(t, p.A.CQ); wc.Status != verbsio.StatusSuccess {
		t.Fatal(wc.Status)
	}
}
