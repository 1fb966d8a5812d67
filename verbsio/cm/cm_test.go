package cm

import (
	"bytes"
	"errors"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/mad"
	_ "github.com/rperf/rperf/verbsio/soft"
)

// wait bounds every event wait: generous, so that a loaded machine does
// not fail a test, and a hang ends.
const wait = 10 * time.Second

// side is one end of the tests' connections: a shm0 context (a real verbs
// engine) with its CM on a Loopback network.
type side struct {
	ctx  *verbsio.Context
	dev  *Device
	addr netip.Addr
	pd   *verbsio.PD
	cq   *verbsio.CQ
	ch   *EventChannel
}

func newSide(t *testing.T, lb *Loopback, o Options) *side {
	t.Helper()
	ctx, err := verbsio.Open("shm0")
	if err != nil {
		t.Fatal(err)
	}
	gids, err := ctx.QueryGIDTable(1)
	if err != nil || len(gids) == 0 {
		t.Fatalf("shm0 GID table: %v %v", gids, err)
	}
	mp, err := lb.Port(0, gids[0].GID)
	if err != nil {
		t.Fatal(err)
	}
	o.MADPort = mp
	dev, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	s := &side{ctx: ctx, dev: dev, addr: gids[0].GID.Addr(), pd: pd, cq: cq, ch: NewEventChannel()}
	t.Cleanup(func() {
		s.ch.Close()
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
		_ = mp.Close()
		_ = ctx.Close()
	})
	return s
}

// moveQP moves qp through states with id's attributes (InitQPAttr), as
// an application that moves its own QP does.
func moveQP(t *testing.T, id *ID, qp *verbsio.QP, states ...verbsio.QPState) {
	t.Helper()
	for _, s := range states {
		a, m, err := id.InitQPAttr(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := qp.Modify(&a, m); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func (s *side) event(t *testing.T, want EventType) *Event {
	t.Helper()
	e, err := s.ch.GetEvent(wait)
	if err != nil {
		t.Fatalf("waiting for %s: %v", want, err)
	}
	if e.Type != want {
		t.Fatalf("event %s (status %d), want %s", e.Type, e.Status, want)
	}
	return e
}

// quiet checks that no event comes within d.
func (s *side) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	if e, err := s.ch.GetEvent(d); err == nil {
		t.Fatalf("unexpected event %s (status %d)", e.Type, e.Status)
	}
}

func (s *side) qp(t *testing.T, typ verbsio.QPType) verbsio.QPInitAttr {
	return verbsio.QPInitAttr{Type: typ, SendCQ: s.cq, RecvCQ: s.cq, Cap: verbsio.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}
}

// listen makes a listener of s on port.
func (s *side) listen(t *testing.T, ps PortSpace, qpType verbsio.QPType, port uint16) *ID {
	t.Helper()
	l, err := s.ch.CreateID("listener", ps, qpType)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.BindAddr(netip.AddrPortFrom(s.addr, port)); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(8); err != nil {
		t.Fatal(err)
	}
	return l
}

// resolve makes an identifier of s with its route to dst.
func (s *side) resolve(t *testing.T, ps PortSpace, qpType verbsio.QPType, dst netip.AddrPort) *ID {
	t.Helper()
	id, err := s.ch.CreateID("client", ps, qpType)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(s.addr, dst, time.Second); err != nil {
		t.Fatal(err)
	}
	s.event(t, EventAddrResolved)
	if err := id.ResolveRoute(time.Second); err != nil {
		t.Fatal(err)
	}
	s.event(t, EventRouteResolved)
	return id
}

// exchange sends 64 bytes from a to b over their connected RC QPs.
func exchange(t *testing.T, a *side, qa *verbsio.QP, b *side, qb *verbsio.QP) {
	t.Helper()
	src, err := a.ctx.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := b.ctx.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	copy(src, "payload over a CM-connected QP")
	ms, err := a.pd.RegMR(src, verbsio.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	md, err := b.pd.RegMR(dst, verbsio.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qb.PostRecv([]verbsio.RecvWR{{ID: 2, SGL: []verbsio.SGE{md.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := qa.PostSend([]verbsio.SendWR{{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{ms.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*side{a, b} {
		if wc := pollOne(t, s.cq); wc.Status != verbsio.StatusSuccess {
			t.Fatalf("completion %+v", wc)
		}
	}
	if !bytes.HasPrefix(dst, []byte("payload over a CM-connected QP")) {
		t.Fatalf("received %q", dst[:40])
	}
}

// rdmaWrite writes 8 bytes from a's QP qa into memory of b.
func rdmaWrite(t *testing.T, a *side, qa *verbsio.QP, b *side) {
	t.Helper()
	src, _ := a.ctx.Alloc(4096)
	dst, _ := b.ctx.Alloc(4096)
	copy(src, "written!")
	ms, err := a.pd.RegMR(src, verbsio.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	md, err := b.pd.RegMR(dst, verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qa.PostSend([]verbsio.SendWR{{ID: 3, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled,
		SGL: []verbsio.SGE{ms.SGE(0, 8)}, Remote: verbsio.RemoteAddr{Addr: verbsio.AddrOf(dst), RKey: md.RKey()}}}); err != nil {
		t.Fatal(err)
	}
	if wc := pollOne(t, a.cq); wc.Status != verbsio.StatusSuccess {
		t.Fatalf("RDMA WRITE completion %+v", wc)
	}
	if !bytes.HasPrefix(dst, []byte("written!")) {
		t.Fatalf("the target holds %q", dst[:8])
	}
}

// disconnect: a disconnects ida, b sees it and disconnects idb, a sees
// that.
func disconnect(t *testing.T, a *side, ida *ID, b *side, idb *ID) {
	t.Helper()
	if err := ida.Disconnect(); err != nil {
		t.Fatal(err)
	}
	b.event(t, EventDisconnected)
	if err := idb.Disconnect(); err != nil {
		t.Fatal(err)
	}
	a.event(t, EventDisconnected)
}

// pollOne waits (bounded) for one completion on cq.
func pollOne(t *testing.T, cq *verbsio.CQ) verbsio.WC {
	t.Helper()
	wcs := make([]verbsio.WC, 1)
	for deadline := time.Now().Add(wait); ; time.Sleep(time.Millisecond) {
		n, err := cq.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wcs[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("no completion")
		}
	}
}

// TestConnectRC: rdma_cm's whole RC sequence between two shm0 engines:
// resolve, connect with private data, accept, data, disconnect, TIMEWAIT.
func TestConnectRC(t *testing.T) {
	lb := NewLoopback()
	srv, cli := newSide(t, lb, Options{}), newSide(t, lb, Options{})
	srv.listen(t, PortSpaceTCP, verbsio.QPTypeRC, 7471)
	id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(srv.addr, 7471))
	if r := id.Route(); r.DGID != verbsio.GIDFromAddr(srv.addr) || r.PacketLifeTime != 18 || r.HopLimit != 64 ||
		r.FlowLabel != (uint32(id.LocalAddr().Port())*31+7471)&0xfffff {
		t.Errorf("route %+v", r)
	}
	cqp, err := id.CreateQP(cli.pd, cli.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := cqp.Query(); a.State != verbsio.QPStateInit {
		t.Fatalf("CreateQP left the QP in %s", a.State)
	}
	if err := id.Connect(&ConnParam{PrivateData: []byte("hello"), ResponderResources: MaxResources, InitiatorDepth: MaxResources, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	req := srv.event(t, EventConnectRequest)
	if !bytes.HasPrefix(req.Conn.PrivateData, []byte("hello")) || len(req.Conn.PrivateData) != 56 ||
		req.Conn.QPNum != cqp.QPN() || req.Conn.RetryCount != 7 || req.Conn.ResponderResources != 128 {
		t.Errorf("CONNECT_REQUEST %+v", req.Conn)
	}
	if req.ID.RemoteAddr() != id.LocalAddr() || req.ID.LocalAddr() != netip.AddrPortFrom(srv.addr, 7471) {
		t.Errorf("request addresses %v <- %v, client %v", req.ID.LocalAddr(), req.ID.RemoteAddr(), id.LocalAddr())
	}
	sqp, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(&ConnParam{PrivateData: []byte("welcome"), ResponderResources: 4, InitiatorDepth: 4, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	est := cli.event(t, EventEstablished)
	if !bytes.HasPrefix(est.Conn.PrivateData, []byte("welcome")) || est.Conn.QPNum != sqp.QPN() {
		t.Errorf("client ESTABLISHED %+v", est.Conn)
	}
	srv.event(t, EventEstablished)
	ca, _ := cqp.Query()
	sa, _ := sqp.Query()
	if ca.State != verbsio.QPStateRTS || sa.State != verbsio.QPStateRTS || ca.DestQPN != sqp.QPN() || sa.DestQPN != cqp.QPN() ||
		ca.SQPSN != sa.RQPSN || sa.SQPSN != ca.RQPSN {
		t.Errorf("QPs: client %s dest %#x sq %#x rq %#x; server %s dest %#x sq %#x rq %#x",
			ca.State, ca.DestQPN, ca.SQPSN, ca.RQPSN, sa.State, sa.DestQPN, sa.SQPSN, sa.RQPSN)
	}
	exchange(t, cli, cqp, srv, sqp)
	exchange(t, srv, sqp, cli, cqp)
	// Both QPs grant remote writes (and reads) once connected: the CM moved
	// them through INIT again with the access its responder resources allow.
	rdmaWrite(t, srv, sqp, cli)
	rdmaWrite(t, cli, cqp, srv)
	disconnect(t, cli, id, srv, req.ID)
	// TIMEWAIT: the QP's ACK timeout, 2^(19-8) ms here.
	start := time.Now()
	cli.event(t, EventTimewaitExit)
	srv.event(t, EventTimewaitExit)
	if d := time.Since(start); d < 1900*time.Millisecond {
		t.Errorf("TIMEWAIT lasted %v, want about 2048 ms", d)
	}
	for _, s := range []*side{cli, srv} {
		if c := s.dev.Counters(); c.RxTruncated+c.RxBadHeader+c.RxUnknownAttr+c.RxUnmatched+c.TxErrors != 0 {
			t.Errorf("counters %+v", c)
		}
	}
	if err := id.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Destroy(); err != nil {
		t.Fatal(err)
	}
}

// TestACKTimeoutOption: SetOption(ACK_TIMEOUT) replaces the timeout the CM
// computed, in InitQPAttr's RTS attributes and in the QP itself.
func TestACKTimeoutOption(t *testing.T) {
	lb := NewLoopback()
	srv, cli := newSide(t, lb, Options{}), newSide(t, lb, Options{})
	srv.listen(t, PortSpaceTCP, verbsio.QPTypeRC, 7472)
	id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(srv.addr, 7472))
	if err := id.SetOption(OptionACKTimeout, 32); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ACK timeout 32: %v", err)
	}
	if err := id.SetOption(OptionACKTimeout, 17); err != nil {
		t.Fatal(err)
	}
	cqp, err := id.CreateQP(cli.pd, cli.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(&ConnParam{RetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	req := srv.event(t, EventConnectRequest)
	sqp, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(&ConnParam{}); err != nil {
		t.Fatal(err)
	}
	cli.event(t, EventEstablished)
	srv.event(t, EventEstablished)
	a, m, err := id.InitQPAttr(verbsio.QPStateRTS)
	if err != nil || m&verbsio.QPAttrTimeout == 0 || a.Timeout != 17 {
		t.Errorf("client RTS attributes: timeout %d mask %s %v", a.Timeout, m, err)
	}
	if q, _ := cqp.Query(); q.Timeout != 17 {
		t.Errorf("client QP timeout %d, want 17 (4.096 us * 2^17 = %v)", q.Timeout, time.Duration(verbsio.TimeoutDuration(17)))
	}
	// The server did not set it: the computed timeout, its ACK delay
	// (shm0: 0) with the packet life time 18: 19.
	a, _, _ = req.ID.InitQPAttr(verbsio.QPStateRTS)
	if q, _ := sqp.Query(); a.Timeout != 19 || q.Timeout != 19 {
		t.Errorf("server timeout %d, QP %d, want the computed 19", a.Timeout, q.Timeout)
	}
	ud, err := cli.ch.CreateID(nil, PortSpaceUDP, verbsio.QPTypeUD)
	if err != nil {
		t.Fatal(err)
	}
	if err := ud.SetOption(OptionACKTimeout, 10); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ACK timeout on UD: %v", err)
	}
	if err := id.SetOption(Option(9), 1); !errors.Is(err, unix.ENOPROTOOPT) {
		t.Errorf("unknown option: %v", err)
	}
}

// TestDeferredEstablish: the active side has no QP attached. It gets
// CONNECT_RESPONSE instead of ESTABLISHED, moves its own QP with the
// CM's attributes, calls Establish; only then does the passive side see
// ESTABLISHED.
func TestDeferredEstablish(t *testing.T) {
	lb := NewLoopback()
	srv, cli := newSide(t, lb, Options{}), newSide(t, lb, Options{})
	srv.listen(t, PortSpaceTCP, verbsio.QPTypeRC, 7473)
	var rtus atomic.Int32
	lb.SetFilter(func(from verbsio.GID, to verbsio.MADAddr, b []byte) bool {
		if m, err := mad.Decode(b); err == nil && m.AttrID == mad.AttrRTU {
			rtus.Add(1)
		}
		return true
	})
	id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(srv.addr, 7473))
	cqp, err := cli.pd.CreateQP(cli.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	defer cqp.Destroy()
	if _, _, err := id.InitQPAttr(verbsio.QPStateRTR); !errors.Is(err, unix.EINVAL) {
		t.Errorf("RTR attributes before connecting: %v", err)
	}
	if err := id.Connect(&ConnParam{QPNum: cqp.QPN(), RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	moveQP(t, id, cqp, verbsio.QPStateInit)
	req := srv.event(t, EventConnectRequest)
	if req.Conn.QPNum != cqp.QPN() {
		t.Errorf("the REQ names QP %#x, not %#x", req.Conn.QPNum, cqp.QPN())
	}
	sqp, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(&ConnParam{RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	resp := cli.event(t, EventConnectResponse)
	if resp.Conn.QPNum != sqp.QPN() {
		t.Errorf("CONNECT_RESPONSE QP %#x, want %#x", resp.Conn.QPNum, sqp.QPN())
	}
	// No RTU yet: the passive side waits.
	srv.quiet(t, 300*time.Millisecond)
	if n := rtus.Load(); n != 0 {
		t.Fatalf("%d RTUs before Establish", n)
	}
	moveQP(t, id, cqp, verbsio.QPStateRTR, verbsio.QPStateRTS)
	if err := id.Establish(); err != nil {
		t.Fatal(err)
	}
	srv.event(t, EventEstablished)
	if n := rtus.Load(); n != 1 {
		t.Errorf("%d RTUs", n)
	}
	// librdmacm reports nothing more to the active side.
	cli.quiet(t, 100*time.Millisecond)
	exchange(t, cli, cqp, srv, sqp)
	if err := id.Establish(); !errors.Is(err, unix.EINVAL) {
		t.Errorf("second Establish: %v", err)
	}
}

// TestRejects: a REQ for a port nobody listens on is rejected with reason
// 8 (invalid service ID), as the Linux capture shows; a listener's
// refusal is reason 28 with its private data.
func TestRejects(t *testing.T) {
	lb := NewLoopback()
	srv, cli := newSide(t, lb, Options{}), newSide(t, lb, Options{})
	id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(srv.addr, 7474))
	if err := id.Connect(&ConnParam{QPNum: 0x123}); err != nil {
		t.Fatal(err)
	}
	if e := cli.event(t, EventRejected); e.Status != int(mad.RejInvalidServiceID) {
		t.Errorf("no listener: status %d", e.Status)
	}
	if c := srv.dev.Counters(); c.Rejected != 1 {
		t.Errorf("server counted %d rejected requests", c.Rejected)
	}
	srv.listen(t, PortSpaceTCP, verbsio.QPTypeRC, 7475)
	id = cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(srv.addr, 7475))
	if err := id.Connect(&ConnParam{QPNum: 0x124}); err != nil {
		t.Fatal(err)
	}
	req := srv.event(t, EventConnectRequest)
	if err := req.ID.Reject([]byte("not today")); err != nil {
		t.Fatal(err)
	}
	e := cli.event(t, EventRejected)
	if e.Status != int(mad.RejConsumerDefined) || !bytes.HasPrefix(e.Conn.PrivateData, []byte("not today")) {
		t.Errorf("REJECTED status %d data %q", e.Status, e.Conn.PrivateData[:9])
	}
	// A UC request to an RC listener is refused by rdma_cm (consumer
	// defined), not by the CM.
	uc := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeUC, netip.AddrPortFrom(srv.addr, 7475))
	if err := uc.Connect(&ConnParam{QPNum: 0x125}); err != nil {
		t.Fatal(err)
	}
	if e := cli.event(t, EventRejected); e.Status != int(mad.RejConsumerDefined) {
		t.Errorf("UC to RC listener: status %d", e.Status)
	}
}

// TestUD: UD through SIDR: the active side learns the passive side's QPN
// and Q_Key and sends it a datagram with the address vector it got.
func TestUD(t *testing.T) {
	lb := NewLoopback()
	srv, cli := newSide(t, lb, Options{}), newSide(t, lb, Options{})
	srv.listen(t, PortSpaceUDP, verbsio.QPTypeUD, 7174)
	id := cli.resolve(t, PortSpaceUDP, verbsio.QPTypeUD, netip.AddrPortFrom(srv.addr, 7174))
	cqp, err := id.CreateQP(cli.pd, cli.qp(t, verbsio.QPTypeUD))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := cqp.Query(); a.State != verbsio.QPStateRTS || a.QKey != UDPQKey {
		t.Fatalf("UD QP after CreateQP: %s qkey %#x", a.State, a.QKey)
	}
	if err := id.Connect(&ConnParam{PrivateData: []byte("ud hello")}); err != nil {
		t.Fatal(err)
	}
	req := srv.event(t, EventConnectRequest)
	if !bytes.HasPrefix(req.UD.PrivateData, []byte("ud hello")) || len(req.UD.PrivateData) != 180 {
		t.Errorf("UD CONNECT_REQUEST private data %q (%d bytes)", req.UD.PrivateData[:8], len(req.UD.PrivateData))
	}
	sqp, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeUD))
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(nil); err != nil {
		t.Fatal(err)
	}
	e := cli.event(t, EventEstablished)
	if e.UD.QPNum != sqp.QPN() || e.UD.QKey != UDPQKey || e.UD.AH.DGID != verbsio.GIDFromAddr(srv.addr) {
		t.Fatalf("UD ESTABLISHED %+v", e.UD)
	}
	// Send a datagram with what SIDR gave.
	ah, err := cli.pd.CreateAH(e.UD.AH)
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := cli.ctx.Alloc(4096)
	rbuf, _ := srv.ctx.Alloc(4096)
	copy(buf, "datagram")
	ms, _ := cli.pd.RegMR(buf, verbsio.AccessLocalWrite)
	mr, _ := srv.pd.RegMR(rbuf, verbsio.AccessLocalWrite)
	if _, err := sqp.PostRecv([]verbsio.RecvWR{{ID: 1, SGL: []verbsio.SGE{mr.SGE(0, 256)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cqp.PostSend([]verbsio.SendWR{{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled,
		SGL: []verbsio.SGE{ms.SGE(0, 8)}, UD: verbsio.UDAddr{AH: ah, RemoteQPN: e.UD.QPNum, RemoteQKey: e.UD.QKey}}}); err != nil {
		t.Fatal(err)
	}
	if wc := pollOne(t, srv.cq); wc.Status != verbsio.StatusSuccess || !bytes.Contains(rbuf[:256], []byte("datagram")) {
		t.Fatalf("UD receive %+v", wc)
	}
	// A UD request to a port nobody listens on: the CM's SIDR_REP
	// "unsupported" (status 1), as udaddy saw from Linux.
	id2 := cli.resolve(t, PortSpaceUDP, verbsio.QPTypeUD, netip.AddrPortFrom(srv.addr, 7175))
	if err := id2.Connect(&ConnParam{QPNum: 1}); err != nil {
		t.Fatal(err)
	}
	if e := cli.event(t, EventUnreachable); e.Status != int(mad.SIDRUnsupported) {
		t.Errorf("UD to nobody: status %d", e.Status)
	}
}

// TestPassiveTimesOut: the active side's RTU never arrives. The passive
// side repeats its REP (every 2^(10-8) = 4 ms, the REQ's response timeout,
// 3 times, the REQ's CM retries), reports UNREACHABLE with -ETIMEDOUT and,
// once destroyed, holds nothing of the connection.
func TestPassiveTimesOut(t *testing.T) {
	lb := NewLoopback()
	srv := newSide(t, lb, Options{})
	cli := newSide(t, lb, Options{CMResponseTimeout: 10, MaxCMRetries: 3})
	srv.listen(t, PortSpaceTCP, verbsio.QPTypeRC, 7476)
	var reps atomic.Int32
	lb.SetFilter(func(from verbsio.GID, to verbsio.MADAddr, b []byte) bool {
		m, err := mad.Decode(b)
		if err != nil {
			return true
		}
		if m.AttrID == mad.AttrREP {
			reps.Add(1)
		}
		return m.AttrID != mad.AttrRTU
	})
	id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(srv.addr, 7476))
	if _, err := id.CreateQP(cli.pd, cli.qp(t, verbsio.QPTypeRC)); err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(&ConnParam{RetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	req := srv.event(t, EventConnectRequest)
	if _, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeRC)); err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(&ConnParam{}); err != nil {
		t.Fatal(err)
	}
	cli.event(t, EventEstablished) // the client sent its RTU; it was lost
	e := srv.event(t, EventUnreachable)
	if e.Status != -int(unix.ETIMEDOUT) || e.ID != req.ID {
		t.Errorf("UNREACHABLE status %d", e.Status)
	}
	if n := reps.Load(); n != 4 {
		t.Errorf("%d REPs, want 1 + 3 retries", n)
	}
	c := srv.dev.Counters()
	if c.TxRetries[3] != 3 {
		t.Errorf("REP retries counted %d", c.TxRetries[3])
	}
	if err := req.ID.Destroy(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	left := srv.dev.cm.IDs()
	_, timer := srv.dev.cm.NextDeadline()
	mu.Unlock()
	if left != 1 || timer { // the listener's
		t.Errorf("server CM holds %d IDs, timer %v, want the listener only", left, timer)
	}
}

// TestAddressErrors: addresses no device has, ports in use, bad requests.
func TestAddressErrors(t *testing.T) {
	lb := NewLoopback()
	s := newSide(t, lb, Options{})
	ch := s.ch
	if _, err := ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeUD); !errors.Is(err, unix.EINVAL) {
		t.Errorf("TCP port space for UD: %v", err)
	}
	id, _ := ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
	if err := id.BindAddr(netip.MustParseAddrPort("192.0.2.77:1")); !errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Errorf("bind to an address no device has: %v", err)
	}
	if err := id.ResolveAddr(netip.MustParseAddr("192.0.2.77"), netip.MustParseAddrPort("192.0.2.78:1"), time.Second); err != nil {
		t.Fatal(err)
	}
	if e := s.event(t, EventAddrError); e.Status != -int(unix.EADDRNOTAVAIL) {
		t.Errorf("ADDR_ERROR status %d", e.Status)
	}
	a, _ := ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
	b, _ := ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
	if err := a.BindAddr(netip.AddrPortFrom(s.addr, 7480)); err != nil {
		t.Fatal(err)
	}
	if err := b.BindAddr(netip.AddrPortFrom(s.addr, 7480)); !errors.Is(err, unix.EADDRINUSE) {
		t.Errorf("second bind: %v", err)
	}
	if err := a.Connect(nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("connect before resolving: %v", err)
	}
	if err := a.Listen(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Listen(1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("listen twice: %v", err)
	}
	if err := a.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := b.BindAddr(netip.AddrPortFrom(s.addr, 7480)); err != nil {
		t.Errorf("bind after the listener left: %v", err)
	}
	if _, err := ch.GetEvent(20 * time.Millisecond); !errors.Is(err, verbsio.ErrTimeout) {
		t.Errorf("empty channel: %v", err)
	}
}

// TestWildcardListen: a listener bound to the unspecified address takes
// requests on every device, and on devices opened after it.
func TestWildcardListen(t *testing.T) {
	lb := NewLoopback()
	srv := newSide(t, lb, Options{})
	ch := NewEventChannel()
	defer ch.Close()
	l, _ := ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
	if err := l.BindAddr(netip.AddrPortFrom(netip.IPv6Unspecified(), 7490)); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(1); err != nil {
		t.Fatal(err)
	}
	defer l.Destroy()
	late := newSide(t, lb, Options{})
	cli := newSide(t, lb, Options{})
	for _, s := range []*side{srv, late} {
		id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(s.addr, 7490))
		if err := id.Connect(&ConnParam{QPNum: 5}); err != nil {
			t.Fatal(err)
		}
		e, err := ch.GetEvent(wait)
		if err != nil || e.Type != EventConnectRequest || e.ListenID != l || e.ID.Device() != s.dev {
			t.Fatalf("request to %v: %v %v", s.addr, e, err)
		}
		if err := e.ID.Reject(nil); err != nil {
			t.Fatal(err)
		}
		cli.event(t, EventRejected)
	}
}

// TestCloseLeaks: closing devices and MAD ports ends their goroutines,
// with connections and listeners still open.
func TestCloseLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		lb := NewLoopback()
		srv, cli := newSideNoCleanup(t, lb), newSideNoCleanup(t, lb)
		srv.listenNoCleanup(t)
		id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(srv.addr, 7477))
		if err := id.Connect(&ConnParam{QPNum: 3}); err != nil {
			t.Fatal(err)
		}
		srv.event(t, EventConnectRequest)
		for _, s := range []*side{srv, cli} {
			s.close(t)
		}
	}()
	deadline := time.Now().Add(wait)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newSideNoCleanup(t *testing.T, lb *Loopback) *side {
	t.Helper()
	ctx, err := verbsio.Open("shm0")
	if err != nil {
		t.Fatal(err)
	}
	gids, _ := ctx.QueryGIDTable(1)
	mp, err := lb.Port(0, gids[0].GID)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := Open(ctx, Options{MADPort: mp})
	if err != nil {
		t.Fatal(err)
	}
	return &side{ctx: ctx, dev: dev, addr: gids[0].GID.Addr(), ch: NewEventChannel()}
}

func (s *side) listenNoCleanup(t *testing.T) {
	l, _ := s.ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
	if err := l.BindAddr(netip.AddrPortFrom(s.addr, 7477)); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(1); err != nil {
		t.Fatal(err)
	}
}

func (s *side) close(t *testing.T) {
	s.ch.Close()
	if err := s.dev.Close(); err != nil {
		t.Error(err)
	}
	if err := s.dev.mp.Close(); err != nil {
		t.Error(err)
	}
	if err := s.ctx.Close(); err != nil {
		t.Error(err)
	}
}
