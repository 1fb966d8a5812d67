package soft_test

import (
	"bytes"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/internal/testsupport/tshark"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft"
	"github.com/rperf/rperf/verbsio/soft/internal/afpacket"
	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// tsoQP creates a RAW_PACKET QP with a segmenter and moves it to RTS.
func (e *rawEnd) tsoQP(t testing.TB, seg verbsio.Segmenter) *verbsio.QP {
	t.Helper()
	qp, err := e.pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRawPacket, SendCQ: e.cq, RecvCQ: e.cq, Segmenter: seg,
		Cap: verbsio.QPCap{MaxSendWR: 16, MaxRecvWR: 1024, MaxSendSGE: 4, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Destroy() })
	if err := qp.Connect(verbsio.Endpoint{}, verbsio.Endpoint{}, verbsio.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	return qp
}

// tsoCase is a TSO send: its headers and payload length.
type tsoCase struct {
	name    string
	h       netpkt.Headers
	payload int
	mss     int
}

func tsoCases(a, b *rawEnd) []tsoCase {
	v4 := netpkt.Headers{Dst: b.mac, Src: a.mac, SrcIP: a.ip4, DstIP: b.ip4, ID: 0xfff0, DF: true, Proto: netpkt.ProtoTCP,
		SrcPort: 40000, DstPort: 9400, Seq: 0xffffff00, Ack: 1, TCPFlags: netpkt.TCPAck | netpkt.TCPPsh | netpkt.TCPFin | netpkt.TCPCwr}
	v6 := v4
	v6.SrcIP, v6.DstIP = a.ip6, b.ip6
	udp := netpkt.Headers{Dst: b.mac, Src: a.mac, SrcIP: a.ip4, DstIP: b.ip4, ID: 100, Proto: netpkt.ProtoUDP, SrcPort: 40001, DstPort: 9400}
	vlan := v4
	vlan.VLAN = netpkt.Tag{Present: true, TCI: 3<<13 | 0}
	inner := netpkt.Headers{Dst: [6]byte{2, 0, 0, 0, 0, 0xc}, Src: [6]byte{2, 0, 0, 0, 0, 0xd}, SrcIP: netip.MustParseAddr("192.168.7.1"),
		DstIP: netip.MustParseAddr("192.168.7.2"), ID: 5, DF: true, Proto: netpkt.ProtoTCP, SrcPort: 1, DstPort: 2, Seq: 9, TCPFlags: netpkt.TCPAck | netpkt.TCPPsh}
	vx := netpkt.Headers{Dst: b.mac, Src: a.mac, SrcIP: a.ip4, DstIP: b.ip4, ID: 1, DF: true, Proto: netpkt.ProtoUDP, SrcPort: 49999, VNI: 42, Inner: &inner}
	return []tsoCase{
		{"tcp4 64KiB", v4, 65535, 1448},
		{"tcp6 64KiB", v6, 65535, 1428},
		{"udp4 USO", udp, 20000, 1472},
		{"vlan tcp4", vlan, 30000, 1448},
		{"vxlan tcp4 (engine only)", vx, 20000, 1398},
		{"tcp4 one frame", v4, 1000, 1448},
	}
}

// reference cuts a TSO send with netpkt, as the engine does.
func (c tsoCase) reference(t testing.TB, hdr, payload []byte) [][]byte {
	t.Helper()
	var s netpkt.TSO
	if err := s.Init(hdr, len(payload), c.mss); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for i := 0; i < s.Frames(); i++ {
		off, n := s.Chunk(i)
		f := make([]byte, s.HeaderLen()+n)
		s.Frame(f, i, payload[off:off+n])
		out = append(out, f)
	}
	return out
}

// TestRawTSO sends TSO work requests of every shape and checks the frames
// that arrive: byte for byte the frames a NIC cuts (netpkt.TSO, itself
// checked against the kernel's GSO in afpacket.TestGSO), in order, every
// checksum good and every sequence number, IP ID and length right by
// tshark; cut by the engine (the default on veth, whose offloads would
// hand a GSO frame on whole) and by the kernel (with A's checksum offload
// off, so the kernel segments before the wire).
func TestRawTSO(t *testing.T) {
	tshark.Skip(t)
	w := newRawWire(t, netns.Options{}, verbsio.OpenOptions{}, 0)
	if who, why := w.a.ctx.Impl().(*soft.Context).Segmentation(); who != "engine" {
		t.Fatalf("veth with offloads on: segmentation %q (%s), want engine", who, why)
	}
	qb := w.b.tsoQP(t, verbsio.SegmentDefault)
	fl := mustFlow(t, qb, w.b.dstMAC(0))
	defer fl.Destroy()
	for _, seg := range []verbsio.Segmenter{verbsio.SegmentDefault, verbsio.SegmentKernel} {
		t.Run(seg.String(), func(t *testing.T) {
			if seg == verbsio.SegmentKernel {
				if err := w.pair.A.Run(func() error { return afpacket.SetFeature(w.pair.A.Link, afpacket.OffloadTxCsum, false) }); err != nil {
					t.Fatal(err)
				}
				defer w.pair.A.Run(func() error { return afpacket.SetFeature(w.pair.A.Link, afpacket.OffloadTxCsum, true) })
			}
			qa := w.a.tsoQP(t, seg)
			for _, c := range tsoCases(w.a, w.b) {
				t.Run(c.name, func(t *testing.T) {
					kernelBefore := w.a.ctx.Impl().(counterer).Counters()["tx_tso_kernel"]
					hdr, err := c.h.AppendHeader(nil, 0)
					if err != nil {
						t.Fatal(err)
					}
					payload := pattern(c.payload, 0x5c)
					copy(w.a.buf, payload)
					want := c.reference(t, hdr, payload)
					w.b.postRecvs(t, qb, 0, len(want), 2048)
					// The payload in two SGEs: the engine gathers it.
					half := c.payload / 2
					wr := verbsio.SendWR{ID: 7, Opcode: verbsio.OpTSO, Flags: verbsio.SendSignaled,
						SGL: []verbsio.SGE{w.a.mr.SGE(0, half), w.a.mr.SGE(half, c.payload-half)},
						TSO: verbsio.TSO{Hdr: hdr, MSS: uint16(c.mss)}}
					if _, err := qa.PostSend([]verbsio.SendWR{wr}); err != nil {
						t.Fatal(err)
					}
					if wc, err := pollN(w.a.cq, 1, 5*time.Second); err != nil || wc[0].Status != verbsio.StatusSuccess || wc[0].ByteLen != uint32(c.payload) {
						t.Fatalf("TSO send completion: %+v %v", wc, err)
					}
					wcs, err := pollN(w.b.cq, len(want), 5*time.Second)
					if err != nil {
						t.Fatalf("%v (of %d frames)", err, len(want))
					}
					var got [][]byte
					for i, wc := range wcs {
						f := w.b.buf[wc.ID : wc.ID+uint64(wc.ByteLen)]
						got = append(got, f)
						if !bytes.Equal(f, want[i]) {
							t.Fatalf("frame %d of %d differs from a NIC's cut:\n got % x\nwant % x", i, len(want), head(f), head(want[i]))
						}
						if wc.Flags&verbsio.WCIPCsumOK == 0 {
							t.Errorf("frame %d: no IP_CSUM_OK", i)
						}
					}
					kernelCut := w.a.ctx.Impl().(counterer).Counters()["tx_tso_kernel"] - kernelBefore
					wantKernel := seg == verbsio.SegmentKernel && c.h.Inner == nil && len(want) > 1
					if (kernelCut == 1) != wantKernel {
						t.Errorf("cut by the kernel: %d sends, want %v", kernelCut, wantKernel)
					}
					checkTSOWire(t, c, got)
				})
			}
		})
	}
}

func head(b []byte) []byte { return b[:min(len(b), 96)] }

// checkTSOWire has tshark read the frames of one TSO send: checksums good,
// TCP sequence numbers and IPv4 IDs consecutive, flags where a NIC puts
// them, lengths adding up.
func checkTSOWire(t *testing.T, c tsoCase, frames [][]byte) {
	t.Helper()
	rows := tshark.Fields(t, frames, "ip.checksum.status", "tcp.checksum.status", "udp.checksum.status", "tcp.seq_raw", "ip.id", "tcp.flags.fin", "tcp.flags.push", "tcp.flags.cwr", "tcp.len", "udp.length")
	last := func(s string) string { // the innermost occurrence (VXLAN)
		if i := strings.LastIndex(s, ";"); i >= 0 {
			return s[i+1:]
		}
		return s
	}
	total := 0
	for i, r := range rows {
		for j, name := range []string{"ip", "tcp", "udp"} {
			for _, v := range strings.Split(r[j], ";") {
				if v != "" && v != tshark.Good && !(name == "udp" && v == tshark.NotPresent) {
					t.Errorf("frame %d: %s checksum status %q", i, name, v)
				}
			}
		}
		tcp := c.h.Proto == netpkt.ProtoTCP || (c.h.Inner != nil && c.h.Inner.Proto == netpkt.ProtoTCP)
		if !tcp {
			n, _ := strconv.Atoi(last(r[9]))
			total += n - 8
			continue
		}
		h := c.h
		if h.Inner != nil {
			h = *h.Inner
		}
		seq, _ := strconv.ParseUint(last(r[3]), 10, 32)
		if want := uint64(h.Seq + uint32(total)); seq != want {
			t.Errorf("frame %d: sequence %d, want %d", i, seq, want)
		}
		if h.SrcIP.Is4() && c.h.Inner == nil {
			id, _ := strconv.ParseUint(strings.TrimPrefix(last(r[4]), "0x"), 16, 16)
			if want := uint64(uint16(h.ID + uint16(i))); id != want {
				t.Errorf("frame %d: IP ID %#x, want %#x", i, id, want)
			}
		}
		isLast := i == len(rows)-1
		flag := func(v string) bool { return last(v) == "1" || last(v) == "True" }
		if flag(r[5]) != (isLast && h.TCPFlags&netpkt.TCPFin != 0) || flag(r[6]) != (isLast && h.TCPFlags&netpkt.TCPPsh != 0) ||
			flag(r[7]) != (i == 0 && h.TCPFlags&netpkt.TCPCwr != 0) {
			t.Errorf("frame %d of %d: FIN %s PSH %s CWR %s", i, len(rows), r[5], r[6], r[7])
		}
		n, _ := strconv.Atoi(last(r[8]))
		total += n
	}
	if total != c.payload {
		t.Errorf("the frames carry %d payload bytes, the send %d", total, c.payload)
	}
}

// TestRawTSOErrors: what a TSO request may not be. A header longer than
// 256 bytes or an MSS of 0 is refused at post (EINVAL); a header that is
// not Ethernet/IP/TCP-or-UDP completes with LOC_QP_OP_ERR; a header and
// MSS that make frames above the MTU, or a payload above max_tso, with
// LOC_LEN_ERR; TSO on a QP of another fabric is not an opcode it takes.
func TestRawTSOErrors(t *testing.T) {
	w := newRawWire(t, netns.Options{}, verbsio.OpenOptions{}, 0)
	good, _ := (&netpkt.Headers{Dst: w.b.mac, Src: w.a.mac, SrcIP: w.a.ip4, DstIP: w.b.ip4, Proto: netpkt.ProtoTCP, SrcPort: 1, DstPort: 2}).AppendHeader(nil, 0)
	arp := make([]byte, 42)
	arp[12], arp[13] = 0x08, 0x06
	for _, c := range []struct {
		name    string
		hdr     []byte
		mss     uint16
		n       int
		postErr bool
		want    verbsio.Status
	}{
		{"header over 256 bytes", make([]byte, 257), 100, 1000, true, 0},
		{"empty header", nil, 100, 1000, true, 0},
		{"MSS 0", good, 0, 1000, true, 0},
		{"not IP", arp, 100, 1000, false, verbsio.StatusLocQPOpErr},
		{"frames above the MTU", good, 1500, 5000, false, verbsio.StatusLocLenErr},
		{"payload above max_tso", good, 1000, 256<<10 + 1, false, verbsio.StatusLocLenErr},
	} {
		t.Run(c.name, func(t *testing.T) {
			qa := w.a.tsoQP(t, verbsio.SegmentDefault)
			wr := verbsio.SendWR{ID: 1, Opcode: verbsio.OpTSO, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{w.a.mr.SGE(0, c.n)}, TSO: verbsio.TSO{Hdr: c.hdr, MSS: c.mss}}
			_, err := qa.PostSend([]verbsio.SendWR{wr})
			if c.postErr {
				if err == nil {
					t.Fatal("posted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wc, err := pollN(w.a.cq, 1, 5*time.Second)
			if err != nil || wc[0].Status != c.want {
				t.Fatalf("completion %+v %v, want %s", wc, err, c.want)
			}
		})
	}
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "shm0"})
	wr := verbsio.SendWR{Opcode: verbsio.OpTSO, SGL: []verbsio.SGE{p.A.MR.SGE(0, 100)}, TSO: verbsio.TSO{Hdr: good, MSS: 10}}
	if _, err := p.A.QP.PostSend([]verbsio.SendWR{wr}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("TSO on an RC QP of shm0: %v, want EINVAL (not an opcode it takes)", err)
	}
}
