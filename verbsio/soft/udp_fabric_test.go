package soft_test

import (
	"slices"
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

// TestQueryOnlyReportsTSO: a context opened for queries only (rdiag's)
// reports the same TSO capability and send paths as one that binds its
// sockets.
func TestQueryOnlyReportsTSO(t *testing.T) {
	attrs := make([]verbsio.DeviceAttr, 2)
	for i, o := range []verbsio.OpenOptions{{UDPPort: -1}, {QueryOnly: true}} {
		dev, err := verbsio.OpenWith("udp_lo", o)
		if err != nil {
			t.Fatal(err)
		}
		attrs[i], err = dev.QueryDevice()
		dev.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if attrs[0].TSO.MaxTSO == 0 {
		t.Skip("this kernel has no UDP GSO, so neither context has TSO")
	}
	if attrs[1].TSO.MaxTSO != attrs[0].TSO.MaxTSO || !slices.Equal(attrs[1].SendPaths, attrs[0].SendPaths) {
		t.Errorf("query-only context: max_tso %d, send paths %v; bound context: %d, %v",
			attrs[1].TSO.MaxTSO, attrs[1].SendPaths, attrs[0].TSO.MaxTSO, attrs[0].SendPaths)
	}
}
