package soft_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
)

// rawEnd is one end of a raw test wire: a raw_<link> context opened in its
// namespace, with a PD, a CQ and a registered buffer.
type rawEnd struct {
	host  netns.Host
	mac   [6]byte
	ip4   netip.Addr
	ip6   netip.Addr
	ctx   *verbsio.Context
	pd    *verbsio.PD
	cq    *verbsio.CQ
	buf   []byte
	mr    *verbsio.MR
	bufSz int
}

// rawWire is two namespaces over a veth pair (or a bridge: Options), a
// raw context at each end.
type rawWire struct {
	pair *netns.Pair
	a, b *rawEnd
}

// newRawWire builds the namespaces and opens raw_<link> at both ends with
// open's options; the CQs are created with flags (0: a plain CQ).
func newRawWire(t testing.TB, opts netns.Options, open verbsio.OpenOptions, flags verbsio.CQWCFlags) *rawWire {
	t.Helper()
	p := netns.Setup(t, opts)
	w := &rawWire{pair: p}
	w.a = openRawEnd(t, p.A, open, flags)
	w.b = openRawEnd(t, p.B, open, flags)
	return w
}

// rawIOUnderTest is the raw I/O mode (OpenOptions.RawIO) that raw ends
// open with when the test names none: TestRawIOModes sets it while it
// runs the raw tests again under each mode.
var rawIOUnderTest string

func openRawEnd(t testing.TB, h netns.Host, open verbsio.OpenOptions, flags verbsio.CQWCFlags) *rawEnd {
	t.Helper()
	if open.RawIO == "" {
		open.RawIO = rawIOUnderTest
	}
	e := &rawEnd{host: h, ip4: h.Addr4.Addr(), ip6: h.Addr6.Addr(), bufSz: 1 << 22}
	err := h.Run(func() error {
		ifc, err := net.InterfaceByName(h.Link)
		if err != nil {
			return err
		}
		copy(e.mac[:], ifc.HardwareAddr)
		e.ctx, err = verbsio.OpenWith("raw_"+h.Link, open)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.ctx.Close() })
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = e.ctx.CreateCQEx(verbsio.CQInitAttr{CQE: 8192, WCFlags: flags}); err != nil {
		t.Fatal(err)
	}
	if e.buf, err = e.ctx.Alloc(e.bufSz); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(e.buf, verbsio.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	return e
}

// rawQP creates a RAW_PACKET QP on the end's CQ and moves it to RTS.
func (e *rawEnd) rawQP(t testing.TB, sendWR, recvWR int) *verbsio.QP {
	t.Helper()
	qp, err := e.pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRawPacket, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: verbsio.QPCap{MaxSendWR: sendWR, MaxRecvWR: recvWR, MaxSendSGE: 4, MaxRecvSGE: 2, MaxInlineData: 512}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Destroy() })
	if err := qp.Connect(verbsio.Endpoint{}, verbsio.Endpoint{}, verbsio.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	return qp
}

// postRecvs posts n receives of size bytes each at buf offsets from off.
func (e *rawEnd) postRecvs(t testing.TB, qp *verbsio.QP, off, n, size int) {
	t.Helper()
	wrs := make([]verbsio.RecvWR, n)
	for i := range wrs {
		wrs[i] = verbsio.RecvWR{ID: uint64(off + i*size), SGL: []verbsio.SGE{e.mr.SGE(off+i*size, size)}}
	}
	if k, err := qp.PostRecv(wrs); err != nil || k != n {
		t.Fatalf("post %d receives: %d, %v", n, k, err)
	}
}

// udpTo is a flow rule that steers UDP frames to the end's MAC and port.
func (e *rawEnd) udpTo(port uint16, prio uint16) verbsio.FlowAttr {
	all := verbsio.MAC{255, 255, 255, 255, 255, 255}
	return verbsio.FlowAttr{Port: 1, Priority: prio, Specs: []verbsio.FlowSpec{
		verbsio.FlowETH{Val: verbsio.ETHFilter{Dst: e.mac}, Mask: verbsio.ETHFilter{Dst: all}},
		verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: port}, Mask: verbsio.PortFilter{Dst: 0xffff}},
	}}
}

// udpFrame builds a UDP/IPv4 frame from a to b with payload n bytes.
func udpFrame(t testing.TB, a, b *rawEnd, sport, dport uint16, tos uint8, n int) []byte {
	t.Helper()
	h := netpkt.Headers{Dst: b.mac, Src: a.mac, SrcIP: a.ip4, DstIP: b.ip4, TOS: tos, Proto: netpkt.ProtoUDP, SrcPort: sport, DstPort: dport, DF: true}
	f, err := h.Append(nil, pattern(n, byte(sport)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*13+i>>8)
	}
	return p
}

// pollN polls cq until n completions came or timeout passed.
func pollN(cq *verbsio.CQ, n int, timeout time.Duration) ([]verbsio.WC, error) {
	out := make([]verbsio.WC, 0, n)
	wcs := make([]verbsio.WC, 64)
	deadline := time.Now().Add(timeout)
	for len(out) < n {
		k, err := cq.Poll(wcs[:min(len(wcs), n-len(out))])
		out = append(out, wcs[:k]...)
		if err != nil {
			return out, err
		}
		if len(out) == n {
			break
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("%d of %d completions in %v", len(out), n, timeout)
		}
		if k == 0 {
			if err := cq.Wait(10 * time.Millisecond); err != nil && !errors.Is(err, verbsio.ErrTimeout) {
				return out, err
			}
		}
	}
	return out, nil
}

// expectNone polls cq for a while and fails on any completion.
func expectNone(t testing.TB, cq *verbsio.CQ, d time.Duration) {
	t.Helper()
	wcs, _ := pollN(cq, 1, d)
	if len(wcs) > 0 {
		t.Fatalf("unexpected completion %+v", wcs[0])
	}
}
