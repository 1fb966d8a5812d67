package soft_test

import (
	"bytes"
	"testing"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// TestUDPPSNWrap starts both directions of an RC pair on udp_lo 20 PSNs
// short of 2^24, with a 1024-byte path MTU, and runs multi-packet WRITEs,
// SENDs and READs across the wrap: every message arrives whole, no packet
// is taken for a duplicate or out of sequence, nothing is resent.
func TestUDPPSNWrap(t *testing.T) {
	const size = 3000 // 3 packets at MTU 1024
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1},
		BufSize: 1 << 16, NoConnect: true, Connect: verbsio.ConnectOptions{PathMTU: verbsio.MTU1024}})
	o := p.Cfg.Connect
	o.Access = p.Cfg.QPAcc
	ea, eb := p.A.Endpoint(), p.B.Endpoint()
	ea.PSN, eb.PSN = 0xffffec, 0xffffee
	if err := p.A.QP.Connect(ea, eb, o); err != nil {
		t.Fatal(err)
	}
	if err := p.B.QP.Connect(eb, ea, o); err != nil {
		t.Fatal(err)
	}
	for i := range p.A.Buf {
		p.A.Buf[i], p.B.Buf[i] = byte(i*7), byte(i*13+1)
	}
	remote := verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}
	// 8 rounds x 3 messages x 3 packets: well past the wrap both ways.
	for round := 0; round < 8; round++ {
		off := round * 4 * size % (1<<16 - 4*size)
		if _, err := p.B.QP.PostRecv([]verbsio.RecvWR{{SGL: []verbsio.SGE{p.B.MR.SGE(off+2*size, size)}}}); err != nil {
			t.Fatal(err)
		}
		wrs := []verbsio.SendWR{
			{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{p.A.MR.SGE(off, size)},
				Remote: verbsio.RemoteAddr{Addr: remote.Addr + uint64(off), RKey: remote.RKey}},
			{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{p.A.MR.SGE(off+size, size)}},
			{Opcode: verbsio.OpRDMARead, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(off+3*size, size)},
				Remote: verbsio.RemoteAddr{Addr: remote.Addr + uint64(off+3*size), RKey: remote.RKey}},
		}
		if _, err := p.A.QP.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		if wc := verbstest.PollOne(t, p.A.CQ); wc.Status != verbsio.StatusSuccess || wc.Opcode != verbsio.WCRDMARead {
			t.Fatalf("round %d: %+v", round, wc)
		}
		if wc := verbstest.PollOne(t, p.B.CQ); wc.Status != verbsio.StatusSuccess || wc.ByteLen != size {
			t.Fatalf("round %d: receive %+v", round, wc)
		}
		if !bytes.Equal(p.B.Buf[off:off+size], p.A.Buf[off:off+size]) {
			t.Fatalf("round %d: the WRITE's data differs", round)
		}
		if !bytes.Equal(p.B.Buf[off+2*size:off+3*size], p.A.Buf[off+size:off+2*size]) {
			t.Fatalf("round %d: the SEND's data differs", round)
		}
		if !bytes.Equal(p.A.Buf[off+3*size:off+4*size], p.B.Buf[off+3*size:off+4*size]) {
			t.Fatalf("round %d: the READ's data differs", round)
		}
	}
	for _, s := range []*verbstest.Side{p.A, p.B} {
		c := s.Ctx.Impl().(*soft.Context).Counters()
		if c["duplicate_request"] != 0 || c["out_of_seq_request"] != 0 || c["retransmitted"] != 0 || c["nak_sent"] != 0 {
			t.Errorf("counters across the wrap: %v", c)
		}
	}
}
