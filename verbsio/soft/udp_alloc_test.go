package soft_test

import (
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// TestUDPFastPathAllocs asserts that the udp fabric posts, transmits,
// receives, acknowledges and completes without allocating.
func TestUDPFastPathAllocs(t *testing.T) {
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, Cap: verbsio.QPCap{MaxInlineData: 64}})
	remote := verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}
	cases := []struct {
		name string
		wr   verbsio.SendWR
		recv bool
	}{
		{"write 64", verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}, Remote: remote}, false},
		{"write 16K", verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 16384)}, Remote: remote}, false},
		{"read 8K", verbsio.SendWR{Opcode: verbsio.OpRDMARead, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 8192)}, Remote: remote}, false},
		{"fetch_add", verbsio.SendWR{Opcode: verbsio.OpAtomicFetchAdd, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 8)}, Remote: remote}, false},
		{"send inline", verbsio.SendWR{Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled | verbsio.SendInline, SGL: []verbsio.SGE{p.A.MR.SGE(0, 32)}}, true},
	}
	wrs := make([]verbsio.SendWR, 1)
	recvs := []verbsio.RecvWR{{SGL: []verbsio.SGE{p.B.MR.SGE(0, 128)}}}
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
				}
			}
		}
		run()
		if a := testing.AllocsPerRun(200, run); a != 0 {
			t.Errorf("%s: %.2f allocations per request", c.name, a)
		}
	}
}
