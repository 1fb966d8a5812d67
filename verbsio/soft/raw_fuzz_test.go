package soft_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
)

// FuzzRawFrame posts arbitrary bytes on a RAW_PACKET QP, as a frame (as
// is, with IP_CSUM, inline) or as a TSO send (a header of the first bytes,
// the rest as payload, any MSS), to a peer whose port has a sniffer rule
// and steering rules of every kind. Nothing may panic or hang; a frame
// completes with SUCCESS exactly when its length is within the device's
// (LOC_LEN_ERR otherwise); a plain frame that arrives arrives as sent; no
// completion is of work never posted.
func FuzzRawFrame(f *testing.F) {
	w := newRawWire(f, netns.Options{}, verbsio.OpenOptions{}, verbsio.WCExTS)
	qb := w.b.rawQP(f, 16, 4096)
	for _, a := range []verbsio.FlowAttr{
		{Type: verbsio.FlowSniffer, Port: 1},
		w.b.dstMAC(0, verbsio.FlowIPv4{Val: verbsio.IPv4Filter{TOS: 0x28}, Mask: verbsio.IPv4Filter{TOS: 0xfc}}, verbsio.FlowTag{Tag: 1}),
		w.b.dstMAC(1, verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: 4789}, Mask: verbsio.PortFilter{Dst: 0xffff}},
			verbsio.FlowVXLAN{Val: verbsio.TunnelFilter{TunnelID: 42}, Mask: verbsio.TunnelFilter{TunnelID: 0xffffff}},
			verbsio.FlowTCP{Inner: true, Val: verbsio.PortFilter{Dst: 80}, Mask: verbsio.PortFilter{Dst: 0xffff}}),
		w.b.dstMAC(2, verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: 9}, Mask: verbsio.PortFilter{Dst: 0xffff}}, verbsio.FlowDrop{}),
	} {
		mustFlow(f, qb, a)
	}
	w.b.postRecvs(f, qb, 0, 2000, 2048)
	mac := [6]byte{2, 0, 0, 0, 0, 1}
	for _, h := range []netpkt.Headers{
		{Dst: mac, Src: mac, SrcIP: ipA, DstIP: ipB, TOS: 0x28, Proto: netpkt.ProtoUDP, SrcPort: 1, DstPort: 2},
		{Dst: mac, Src: mac, SrcIP: ipA, DstIP: ipB, Proto: netpkt.ProtoTCP, SrcPort: 1, DstPort: 80, TCPFlags: netpkt.TCPFin},
		{Dst: mac, Src: mac, VLAN: netpkt.Tag{Present: true, TCI: 100}, SrcIP: ipA, DstIP: ipB, Proto: netpkt.ProtoUDP, SrcPort: 1, DstPort: 9},
		{Dst: mac, Src: mac, SrcIP: ipA, DstIP: ipB, Proto: netpkt.ProtoUDP, VNI: 42, Inner: &netpkt.Headers{Dst: mac, Src: mac, SrcIP: ipA, DstIP: ipB, Proto: netpkt.ProtoTCP, DstPort: 80}},
	} {
		fr, _ := h.Append(nil, make([]byte, 60))
		for mode := uint8(0); mode < 4; mode++ {
			f.Add(fr, mode, uint16(20))
		}
	}
	f.Add([]byte{1, 2, 3}, uint8(0), uint16(0))
	f.Add(make([]byte, 1600), uint8(1), uint16(1))
	f.Fuzz(func(t *testing.T, frame []byte, mode uint8, mss uint16) {
		if len(frame) > 9000 {
			return
		}
		qa := w.a.rawQP(t, 4, 1)
		copy(w.a.buf, frame)
		wr := verbsio.SendWR{ID: 42, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{w.a.mr.SGE(0, len(frame))}}
		switch mode % 4 {
		case 1:
			wr.Flags |= verbsio.SendIPCsum
		case 2:
			if len(frame) <= 512 {
				wr.Flags |= verbsio.SendInline
			}
		case 3:
			n := min(len(frame), 128)
			wr.Opcode, wr.TSO = verbsio.OpTSO, verbsio.TSO{Hdr: frame[:n], MSS: mss}
			wr.SGL = []verbsio.SGE{w.a.mr.SGE(n, len(frame)-n)}
		}
		if _, err := qa.PostSend([]verbsio.SendWR{wr}); err != nil {
			return // refused at post (a bad TSO header or MSS): nothing to complete
		}
		wcs, err := pollN(w.a.cq, 1, 5*time.Second)
		if err != nil {
			t.Fatalf("no completion: %v", err)
		}
		if wcs[0].ID != 42 {
			t.Fatalf("completion of work never posted: %+v", wcs[0])
		}
		if wr.Opcode == verbsio.OpSend {
			fits := len(frame) >= netpkt.EthLen && len(frame) <= 1514+vlanExtra(frame)
			if (wcs[0].Status == verbsio.StatusSuccess) != fits {
				t.Fatalf("%d-byte frame completed %s", len(frame), wcs[0].Status)
			}
		}
		var r [64]verbsio.WC
		for deadline := time.Now().Add(3 * time.Millisecond); time.Now().Before(deadline); {
			n, err := w.b.cq.Poll(r[:])
			if err != nil {
				t.Fatal(err)
			}
			for _, wc := range r[:n] {
				got := w.b.buf[wc.ID : wc.ID+uint64(wc.ByteLen)]
				if wc.Status == verbsio.StatusSuccess && mode%4 == 0 && len(got) == len(frame) && len(frame) >= 12 &&
					bytes.Equal(got[:12], frame[:12]) && !bytes.Equal(got, frame) { // (the sniffer also sees the kernel's own frames)
					t.Fatalf("a frame arrived changed:\n got % x\nsent % x", got, frame)
				}
				qb.PostRecv([]verbsio.RecvWR{{ID: wc.ID, SGL: []verbsio.SGE{w.b.mr.SGE(int(wc.ID), 2048)}}})
			}
		}
	})
}

// vlanExtra is the tag a tagged frame may add to the longest frame.
func vlanExtra(f []byte) int {
	if len(f) >= 14 && (f[12] == 0x81 && f[13] == 0x00 || f[12] == 0x88 && f[13] == 0xa8) {
		return 4
	}
	return 0
}

var (
	ipA = netipMust("10.9.9.1")
	ipB = netipMust("10.9.9.2")
)

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }
