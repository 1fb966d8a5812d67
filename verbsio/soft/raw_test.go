package soft_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/internal/testsupport/tshark"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
	"golang.org/x/sys/unix"
)

// sendKind is how a test posts a frame.
type sendKind int

const (
	sendOneSGE sendKind = iota // the frame in one registered buffer
	sendSGEs                   // the frame in three pieces
	sendInline                 // copied into the WQE
	sendCsum                   // checksums zeroed, SendIPCsum computes them
	sendKinds
)

func (k sendKind) String() string {
	return [...]string{"one SGE", "three SGEs", "inline", "IP_CSUM"}[k]
}

// postFrame writes frame into e's buffer at off and posts it on qp the
// way kind says.
func (e *rawEnd) postFrame(t testing.TB, qp *verbsio.QP, id uint64, off int, frame []byte, kind sendKind) {
	t.Helper()
	b := e.buf[off : off+len(frame)]
	copy(b, frame)
	wr := verbsio.SendWR{ID: id, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled}
	switch kind {
	case sendOneSGE:
		wr.SGL = []verbsio.SGE{e.mr.SGE(off, len(frame))}
	case sendSGEs:
		a, c := len(frame)/3, 2*len(frame)/3
		wr.SGL = []verbsio.SGE{e.mr.SGE(off, a), e.mr.SGE(off+a, c-a), e.mr.SGE(off+c, len(frame)-c)}
	case sendInline:
		wr.SGL = []verbsio.SGE{e.mr.SGE(off, len(frame))}
		wr.Flags |= verbsio.SendInline
	case sendCsum:
		var l netpkt.Layers
		netpkt.Parse(b, netpkt.Tag{}, &l)
		b[l.L3+10], b[l.L3+11] = 0, 0
		b[l.L4+6], b[l.L4+7] = 0xde, 0xad // garbage the device must overwrite
		wr.SGL = []verbsio.SGE{e.mr.SGE(off, len(frame))}
		wr.Flags |= verbsio.SendIPCsum
	}
	if _, err := qp.PostSend([]verbsio.SendWR{wr}); err != nil {
		t.Fatalf("post frame %d (%s): %v", id, kind, err)
	}
}

// TestRawSendReceive sends frames of many sizes, every way a frame can be
// posted, from one namespace to the other over veth and over a bridge:
// every frame arrives whole, as sent (with the checksums the device
// computed for IP_CSUM sends), with IP_CSUM_OK, and tshark finds every
// header as built and every checksum good.
func TestRawSendReceive(t *testing.T) {
	tshark.Skip(t)
	for _, topo := range []struct {
		name string
		opts netns.Options
	}{{"veth", netns.Options{}}, {"bridge", netns.Options{Middle: true, Bridge: true}}} {
		t.Run(topo.name, func(t *testing.T) {
			w := newRawWire(t, topo.opts, verbsio.OpenOptions{}, 0)
			qa := w.a.rawQP(t, 64, 16)
			qb := w.b.rawQP(t, 16, 512)
			fl, err := qb.CreateFlow(w.b.udpTo(7000, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer fl.Destroy()
			sizes := []int{0, 1, 18, 100, 477, 1000, 1472} // 1472: 1514 bytes, a full MTU frame
			w.b.postRecvs(t, qb, 0, len(sizes)*int(sendKinds), 2048)
			var want [][]byte
			id := uint64(0)
			for _, n := range sizes {
				for k := sendKind(0); k < sendKinds; k++ {
					f := udpFrame(t, w.a, w.b, uint16(100+id), 7000, uint8(id)<<2, n)
					if k == sendInline && len(f) > 512 {
						continue
					}
					w.a.postFrame(t, qa, id, int(id)*2048, f, k)
					want = append(want, f)
					id++
				}
			}
			sends, err := pollN(w.a.cq, len(want), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for i, wc := range sends {
				if wc.Status != verbsio.StatusSuccess || wc.Opcode != verbsio.WCSend || wc.ID != uint64(i) || wc.ByteLen != uint32(len(want[i])) {
					t.Fatalf("send completion %d: %+v (frame of %d bytes)", i, wc, len(want[i]))
				}
			}
			recvs, err := pollN(w.b.cq, len(want), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			got := make([][]byte, len(recvs))
			for i, wc := range recvs {
				got[i] = w.b.buf[wc.ID : wc.ID+uint64(wc.ByteLen)]
				if wc.Status != verbsio.StatusSuccess || wc.Opcode != verbsio.WCRecv || wc.QPN != qb.QPN() {
					t.Fatalf("receive %d: %+v", i, wc)
				}
				if wc.Flags&verbsio.WCIPCsumOK == 0 {
					t.Errorf("receive %d: no IP_CSUM_OK on a frame with good checksums", i)
				}
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("receive %d (%s): frame differs\n got % x\nwant % x", i, sendKind(i%int(sendKinds)), got[i], want[i])
				}
			}
			rows := tshark.Fields(t, got, "eth.dst", "eth.src", "ip.src", "ip.dst", "ip.dsfield", "ip.checksum.status", "udp.srcport", "udp.dstport", "udp.checksum.status", "udp.length")
			for i, r := range rows {
				var l netpkt.Layers
				netpkt.Parse(want[i], netpkt.Tag{}, &l)
				wantRow := []string{net6(w.b.mac), net6(w.a.mac), w.a.ip4.String(), w.b.ip4.String(),
					"0x" + strconv.FormatUint(uint64(want[i][l.L3+1]), 16), tshark.Good,
					strconv.Itoa(int(binary.BigEndian.Uint16(want[i][l.L4:]))), "7000", tshark.Good,
					strconv.Itoa(int(binary.BigEndian.Uint16(want[i][l.L4+4:])))}
				for j := range wantRow {
					if r[j] != wantRow[j] && !(j == 4 && r[j] == "0x"+pad2(want[i][l.L3+1])) {
						t.Errorf("frame %d: tshark field %d = %q, want %q (row %q)", i, j, r[j], wantRow[j], r)
					}
				}
			}
		})
	}
}

func net6(m [6]byte) string { return verbsio.MAC(m).String() }
func pad2(b byte) string {
	s := strconv.FormatUint(uint64(b), 16)
	if len(s) < 2 {
		s = "0" + s
	}
	return s
}

// TestRawOversized: a frame above the MTU and the Ethernet header (a tag
// more when tagged), or shorter than the header, completes with
// LOC_LEN_ERR and moves the QP to ERR; nothing reaches the wire; the
// largest frames pass.
func TestRawOversized(t *testing.T) {
	w := newRawWire(t, netns.Options{}, verbsio.OpenOptions{}, 0)
	qb := w.b.rawQP(t, 16, 64)
	fl, err := qb.CreateFlow(w.b.udpTo(7000, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Destroy()
	w.b.postRecvs(t, qb, 0, 64, 4096)
	for _, c := range []struct {
		name string
		n    int  // UDP payload
		vlan bool // tagged
		ok   bool
	}{
		{"MTU frame", 1472, false, true},
		{"one byte over", 1473, false, false},
		{"tagged MTU frame", 1472, true, true},
		{"tagged one over", 1473, true, false},
		{"jumbo", 8000, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			qa := w.a.rawQP(t, 16, 1)
			h := netpkt.Headers{Dst: w.b.mac, Src: w.a.mac, SrcIP: w.a.ip4, DstIP: w.b.ip4, Proto: netpkt.ProtoUDP, SrcPort: 1, DstPort: 7000}
			if c.vlan {
				h.VLAN = netpkt.Tag{Present: true, TCI: 0} // priority tag: VLAN 0 reaches the peer untagged-equivalent
			}
			f, _ := h.Append(nil, make([]byte, c.n))
			w.a.postFrame(t, qa, 1, 0, f, sendOneSGE)
			wc, err := pollN(w.a.cq, 1, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			want := verbsio.StatusSuccess
			if !c.ok {
				want = verbsio.StatusLocLenErr
			}
			if wc[0].Status != want {
				t.Fatalf("%d-byte frame: %s, want %s", len(f), wc[0].Status, want)
			}
			if c.ok {
				if r, err := pollN(w.b.cq, 1, 5*time.Second); err != nil || int(r[0].ByteLen) != len(f) {
					t.Fatalf("receive: %+v %v", r, err)
				}
				return
			}
			if a, _ := qa.Query(); a.State != verbsio.QPStateErr {
				t.Errorf("QP in %s after LOC_LEN_ERR, want ERR", a.State)
			}
			expectNone(t, w.b.cq, 100*time.Millisecond)
		})
	}
	t.Run("runt", func(t *testing.T) {
		qa := w.a.rawQP(t, 16, 1)
		w.a.postFrame(t, qa, 1, 0, make([]byte, 13), sendOneSGE)
		if wc, err := pollN(w.a.cq, 1, 5*time.Second); err != nil || wc[0].Status != verbsio.StatusLocLenErr {
			t.Fatalf("13-byte frame: %+v %v, want LOC_LEN_ERR", wc, err)
		}
	})
}

// TestRawQPTypes: a raw device carries RAW_PACKET QPs only, and RAW_PACKET
// QPs need a raw device.
func TestRawQPTypes(t *testing.T) {
	w := newRawWire(t, netns.Options{}, verbsio.OpenOptions{}, 0)
	for _, typ := range []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD} {
		_, err := w.a.pd.CreateQP(verbsio.QPInitAttr{Type: typ, SendCQ: w.a.cq, RecvCQ: w.a.cq, Cap: verbsio.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
		if !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("%s QP on a raw device: %v, want EOPNOTSUPP", typ, err)
		}
	}
	shm, err := verbsio.Open("shm0")
	if err != nil {
		t.Fatal(err)
	}
	defer shm.Close()
	pd, _ := shm.AllocPD()
	cq, _ := shm.CreateCQ(4)
	if _, err := pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRawPacket, SendCQ: cq, Cap: verbsio.QPCap{MaxSendWR: 1, MaxRecvWR: 1}}); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("RAW_PACKET QP on shm0: %v, want EOPNOTSUPP", err)
	}
}
