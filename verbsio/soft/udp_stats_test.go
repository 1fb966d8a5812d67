package soft_test

import (
	"os"
	"testing"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// TestLiveStats checks that a udp-fabric context publishes its counters
// for other processes and withdraws them when it closes.
func TestLiveStats(t *testing.T) {
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}})
	p.A.QP.PostSend([]verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 100)},
		Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}})
	verbstest.PollOne(t, p.A.CQ)
	find := func() []soft.ContextStats {
		all, err := soft.LiveStats()
		if err != nil {
			t.Fatal(err)
		}
		var mine []soft.ContextStats
		for _, s := range all {
			if s.PID == os.Getpid() {
				mine = append(mine, s)
			}
		}
		return mine
	}
	mine := find()
	if len(mine) != 2 {
		t.Fatalf("%d contexts of this process published, want 2: %+v", len(mine), mine)
	}
	var sent, rcvd uint64
	for _, s := range mine {
		if s.Device != "udp_lo" || s.Netdev != "lo" || s.UDPPort == 0 {
			t.Errorf("stats header %+v", s)
		}
		sent += s.Counters["sent_pkts"]
		rcvd += s.Counters["rcvd_pkts"]
	}
	if sent < 2 || rcvd < 2 {
		t.Errorf("sent %d, received %d packets; want at least the write and its ACK", sent, rcvd)
	}
	p.A.Ctx.Close()
	p.B.Ctx.Close()
	if left := find(); len(left) != 0 {
		t.Errorf("closed contexts still published: %+v", left)
	}
}
