package soft_test

import (
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// allocCase is one request the no-allocation tests post and complete.
type allocCase struct {
	name string
	wr   verbsio.SendWR
	recv bool // the peer must have a receive posted and completes one
}

// assertNoAllocs posts each case, waits for its completion (and the
// peer's receive) and asserts the whole round allocates nothing, after
// one round to warm up (the first use maps the peer's regions).
func assertNoAllocs(t *testing.T, p *verbstest.Pair, cases []allocCase, runs int) {
	t.Helper()
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
			deadline := time.Now().Add(5 * time.Second)
			for {
				n, err := p.A.CQ.Poll(wcs)
				if err != nil {
					t.Fatal(err)
				}
				if n == 1 {
					if wcs[0].Status != verbsio.StatusSuccess {
						t.Fatalf("%s: %s", c.name, wcs[0].Status)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: no completion", c.name)
				}
			}
			if c.recv {
				for n, _ := p.B.CQ.Poll(wcs); n == 0; n, _ = p.B.CQ.Poll(wcs) {
					if time.Now().After(deadline) {
						t.Fatalf("%s: no receive completion", c.name)
					}
				}
			}
		}
		run()
		if a := testing.AllocsPerRun(runs, run); a != 0 {
			t.Errorf("%s: %.2f allocations per post and poll, want 0", c.name, a)
		}
	}
	// An empty poll does not allocate either.
	if a := testing.AllocsPerRun(runs, func() { p.A.CQ.Poll(wcs) }); a != 0 {
		t.Errorf("empty poll: %.2f allocations", a)
	}
}

// TestFastPathAllocs asserts that posting and polling allocate nothing on
// the shm fabric, for every opcode and for inline sends.
func TestFastPathAllocs(t *testing.T) {
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "shm0", Cap: verbsio.QPCap{MaxInlineData: 64}})
	remote := verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}
	assertNoAllocs(t, p, []allocCase{
		{"write", verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}, Remote: remote}, false},
		{"write inline", verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled | verbsio.SendInline, SGL: []verbsio.SGE{p.A.MR.SGE(0, 32)}, Remote: remote}, false},
		{"write imm", verbsio.SendWR{Opcode: verbsio.OpRDMAWriteImm, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}, Remote: remote}, true},
		{"read", verbsio.SendWR{Opcode: verbsio.OpRDMARead, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}, Remote: remote}, false},
		{"fetch_add", verbsio.SendWR{Opcode: verbsio.OpAtomicFetchAdd, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 8)}, Remote: remote}, false},
		{"cmp_swp", verbsio.SendWR{Opcode: verbsio.OpAtomicCmpSwp, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 8)}, Remote: remote}, false},
		{"send", verbsio.SendWR{Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}}, true},
		{"send inline", verbsio.SendWR{Opcode: verbsio.OpSendImm, Flags: verbsio.SendSignaled | verbsio.SendInline, SGL: []verbsio.SGE{p.A.MR.SGE(0, 16)}}, true},
	}, 1000)
}

// TestUDPFastPathAllocs asserts that the udp fabric posts, transmits,
// receives, acknowledges and completes without allocating.
func TestUDPFastPathAllocs(t *testing.T) {
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, Cap: verbsio.QPCap{MaxInlineData: 64}})
	remote := verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}
	assertNoAllocs(t, p, []allocCase{
		{"write 64", verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}, Remote: remote}, false},
		{"write 16K", verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 16384)}, Remote: remote}, false},
		{"read 8K", verbsio.SendWR{Opcode: verbsio.OpRDMARead, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 8192)}, Remote: remote}, false},
		{"fetch_add", verbsio.SendWR{Opcode: verbsio.OpAtomicFetchAdd, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 8)}, Remote: remote}, false},
		{"send inline", verbsio.SendWR{Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled | verbsio.SendInline, SGL: []verbsio.SGE{p.A.MR.SGE(0, 32)}}, true},
	}, 200)
}
