package soft_test

import (
	"testing"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// TestFastPathAllocs asserts that posting and polling allocate nothing, for
// every opcode and for inline sends.
func TestFastPathAllocs(t *testing.T) {
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "shm0", Cap: verbsio.QPCap{MaxInlineData: 64}})
	remote := verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}
	cases := []struct {
		name string
		wr   verbsio.SendWR
		recv bool
	}{
		{"write", verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}, Remote: remote}, false},
		{"write inline", verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled | verbsio.SendInline, SGL: []verbsio.SGE{p.A.MR.SGE(0, 32)}, Remote: remote}, false},
		{"write imm", verbsio.SendWR{Opcode: verbsio.OpRDMAWriteImm, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}, Remote: remote}, true},
		{"read", verbsio.SendWR{Opcode: verbsio.OpRDMARead, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}, Remote: remote}, false},
		{"fetch_add", verbsio.SendWR{Opcode: verbsio.OpAtomicFetchAdd, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 8)}, Remote: remote}, false},
		{"cmp_swp", verbsio.SendWR{Opcode: verbsio.OpAtomicCmpSwp, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 8)}, Remote: remote}, false},
		{"send", verbsio.SendWR{Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}}, true},
		{"send inline", verbsio.SendWR{Opcode: verbsio.OpSendImm, Flags: verbsio.SendSignaled | verbsio.SendInline, SGL: []verbsio.SGE{p.A.MR.SGE(0, 16)}}, true},
	}
	wrs := make([]verbsio.SendWR, 1)
	recvs := []verbsio.RecvWR{{SGL: []verbsio.SGE{p.B.MR.SGE(4096, 128)}}}
	wcs := make([]verbsio.WC, 4)
	for _, c := range cases {
		wrs[0] = c.wr
		run := func() {
			if c.recv {
				if _, err := p.B.QP.PostRecv(recvs); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := p.A.QP.PostSend(wrs); err != nil {
				t.Fatal(err)
			}
			if n, err := p.A.CQ.Poll(wcs); n != 1 || err != nil || wcs[0].Status != verbsio.StatusSuccess {
				t.Fatalf("%s: %d %v %+v", c.name, n, err, wcs[0])
			}
			if c.recv {
				if n, err := p.B.CQ.Poll(wcs); n != 1 || err != nil {
					t.Fatalf("%s recv: %d %v", c.name, n, err)
				}
			}
		}
		run() // first use maps the peer's regions
		if a := testing.AllocsPerRun(1000, run); a != 0 {
			t.Errorf("%s: %.1f allocations per post+poll, want 0", c.name, a)
		}
	}
	// An empty poll does not allocate either.
	if a := testing.AllocsPerRun(1000, func() { p.A.CQ.Poll(wcs) }); a != 0 {
		t.Errorf("empty poll: %.1f allocations", a)
	}
}
