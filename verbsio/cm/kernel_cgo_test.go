//go:build linux && cgo && ibverbs

package cm

import (
	"bytes"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/internal/fakecm"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// These tests run the ibverbs build's kernel CM (the cm API mapped onto
// librdmacm) against fakecm: the glue's calls cross cgo into C functions
// with librdmacm's signatures, and the events the test queues come back
// through the channel's fd, rdma_get_cm_event and rdma_ack_cm_event.

var (
	kLocal  = netip.MustParseAddr("127.0.0.1")
	kRemote = netip.MustParseAddrPort("127.0.0.2:18515")
)

type kernelSide struct {
	f   *fakecm.Fake
	dev *Device
	ctx *verbsio.Context
	pd  *verbsio.PD
	cq  *verbsio.CQ
	ch  *EventChannel
}

// newKernelSide opens a device on the kernel CM over the fake: the verbs
// are the engine's udp_lo under the ibverbs provider's name, so cm.Open
// takes the kernel's CM for it.
func newKernelSide(t *testing.T) *kernelSide {
	t.Helper()
	f := fakecm.New("fake0")
	old := openKernelChannel
	openKernelChannel = func() (kernelChannel, error) { return newCChannel(f.Table()) }
	eng, err := verbsio.OpenWith("udp_lo", verbsio.OpenOptions{UDPPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := verbsio.NewContext(verbsio.DeviceInfo{Name: "fake0", Provider: kernelProvider, Ports: 1}, eng.Impl())
	dev, err := Open(ctx, Options{Addrs: []netip.Addr{kLocal}})
	if err != nil {
		t.Fatal(err)
	}
	if dev.k == nil {
		t.Fatal("cm.Open of an ibverbs device did not take the kernel's CM")
	}
	s := &kernelSide{f: f, dev: dev, ctx: ctx, ch: NewEventChannel()}
	if s.pd, err = ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if s.cq, err = ctx.CreateCQ(8); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.ch.Close()
		if err := dev.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if n := f.LiveIDs(); n != 0 {
			t.Errorf("%d librdmacm identifiers left after Close", n)
		}
		_ = s.cq.Destroy()
		_ = s.pd.Dealloc()
		_ = eng.Close()
		openKernelChannel = old
		f.Free()
	})
	// What rdma_init_qp_attr answers, as the kernel does for RoCE.
	dgid := verbsio.GIDFromAddr(kRemote.Addr())
	f.SetQPAttr(1, fakecm.QPAttr{Mask: int(verbsio.QPAttrState | verbsio.QPAttrPkeyIndex | verbsio.QPAttrPort | verbsio.QPAttrAccessFlags), PortNum: 1})
	f.SetQPAttr(2, fakecm.QPAttr{Mask: int(verbsio.QPAttrState | verbsio.QPAttrAV | verbsio.QPAttrPathMTU | verbsio.QPAttrDestQPN |
		verbsio.QPAttrRQPSN | verbsio.QPAttrMaxDestRdAtomic | verbsio.QPAttrMinRNRTimer),
		PathMTU: int(verbsio.MTU1024), DestQPN: 0x77, RQPSN: 0x1000, MaxDestRdAtomic: 16, MinRNRTimer: 12, PortNum: 1, DGID: dgid})
	f.SetQPAttr(3, fakecm.QPAttr{Mask: int(verbsio.QPAttrState | verbsio.QPAttrTimeout | verbsio.QPAttrRetryCnt | verbsio.QPAttrRNRRetry |
		verbsio.QPAttrSQPSN | verbsio.QPAttrMaxQPRdAtomic), SQPSN: 0x2000, Timeout: 18, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16})
	return s
}

func (s *kernelSide) next(t *testing.T, want EventType) *Event {
	t.Helper()
	ev, err := s.ch.GetEvent(5 * time.Second)
	if err != nil {
		t.Fatalf("waiting for %s: %v", want, err)
	}
	if ev.Type != want {
		t.Fatalf("event %s, want %s", ev, want)
	}
	return ev
}

func (s *kernelSide) qp(t *testing.T, id *ID, typ verbsio.QPType) *verbsio.QP {
	t.Helper()
	qp, err := id.CreateQP(s.pd, verbsio.QPInitAttr{Type: typ, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: verbsio.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	t.Cleanup(func() { _ = qp.Destroy() })
	return qp
}

// listen makes a listener on kLocal:18515.
func (s *kernelSide) listen(t *testing.T, ps PortSpace, typ verbsio.QPType) *ID {
	t.Helper()
	l, err := s.ch.CreateID(nil, ps, typ)
	if err == nil {
		err = l.BindAddr(netip.AddrPortFrom(kLocal, 18515))
	}
	if err == nil {
		err = l.Listen(1)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func handleOf(id *ID) unsafe.Pointer { return unsafe.Pointer(id.kh.(*cHandle).id) }

// resolve takes id through ADDR_RESOLVED and ROUTE_RESOLVED.
func (s *kernelSide) resolve(t *testing.T, id *ID) {
	t.Helper()
	if err := id.ResolveAddr(kLocal, kRemote, time.Second); err != nil {
		t.Fatal(err)
	}
	s.next(t, EventAddrResolved)
	if err := id.ResolveRoute(time.Second); err != nil {
		t.Fatal(err)
	}
	s.next(t, EventRouteResolved)
}

// TestKernelConnect: the active side with a QP: the connection parameters
// and private data reach rdma_connect, the QP's number goes as qp_num,
// CONNECT_RESPONSE moves the QP to RTS with rdma_init_qp_attr's
// attributes (the ACK timeout option overriding) and rdma_establish
// follows; the caller sees ESTABLISHED with the peer's private data.
func TestKernelConnect(t *testing.T) {
	s := newKernelSide(t)
	id, err := s.ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.SetOption(OptionACKTimeout, 14); err != nil {
		t.Fatal(err)
	}
	s.resolve(t, id)
	if name, val, size := s.f.Option(); name != int(OptionACKTimeout) || val != 14 || size != 1 {
		t.Errorf("librdmacm got option %d = %d (%d bytes), want ACK_TIMEOUT (3) = 14 as a uint8_t", name, val, size)
	}
	if got := id.LocalAddr(); got != netip.AddrPortFrom(kLocal, 40001) {
		t.Errorf("LocalAddr = %v, want the kernel's 127.0.0.1:40001", got)
	}
	if got := id.RemoteAddr(); got != kRemote {
		t.Errorf("RemoteAddr = %v, want %v", got, kRemote)
	}
	r := id.Route()
	if r.PathMTU != verbsio.MTU1024 || r.FlowLabel != 0x5a5a5 || r.PacketLifeTime != 18 || r.HopLimit != 64 ||
		r.DGID != verbsio.GIDFromAddr(kRemote.Addr()) || r.SGID != verbsio.GIDFromAddr(kLocal) {
		t.Errorf("Route = %+v, want the kernel's path record", r)
	}
	qp := s.qp(t, id, verbsio.QPTypeRC)
	if a, _ := qp.Query(); a.State != verbsio.QPStateInit {
		t.Errorf("CreateQP left the QP in %s, want INIT", a.State)
	}
	pd := []byte("hello")
	if err := id.Connect(&ConnParam{PrivateData: pd, ResponderResources: 4, InitiatorDepth: 2, RetryCount: 9, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	got := s.f.LastConn()
	want := fakecm.Conn{PrivateData: pd, ResponderResources: 4, InitiatorDepth: 2, RetryCount: 7, RNRRetryCount: 7, QPNum: qp.QPN()}
	if !slices.Equal(got.PrivateData, want.PrivateData) || got.QPNum != want.QPNum || got.Accept ||
		got.ResponderResources != 4 || got.InitiatorDepth != 2 || got.RetryCount != 7 || got.RNRRetryCount != 7 {
		t.Errorf("rdma_connect got %+v, want %+v", got, want)
	}
	s.f.Push(fakecm.Event{Type: int(EventConnectResponse), ID: handleOf(id), PrivateData: []byte("world"), QPNum: 0x77})
	ev := s.next(t, EventEstablished)
	if ev.ID != id || !bytes.HasPrefix(ev.Conn.PrivateData, []byte("world")) || ev.Conn.QPNum != 0x77 {
		t.Errorf("ESTABLISHED %+v, want id's with the REP's private data and QPN", ev)
	}
	a, err := qp.Query()
	if err != nil {
		t.Fatal(err)
	}
	if a.State != verbsio.QPStateRTS || a.Timeout != 14 || a.DestQPN != 0x77 || a.MaxRdAtomic != 2 {
		t.Errorf("QP after the REP: %s timeout %d dest %#x max_rd_atomic %d, want RTS, 14 (the option), 0x77, 2 (the initiator depth)",
			a.State, a.Timeout, a.DestQPN, a.MaxRdAtomic)
	}
	if calls := s.f.Calls(); !slices.Contains(calls, "establish") {
		t.Errorf("no rdma_establish after CONNECT_RESPONSE: %v", calls)
	}
	if err := id.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if a, _ := qp.Query(); a.State != verbsio.QPStateErr {
		t.Errorf("QP after Disconnect: %s, want ERR", a.State)
	}
	s.f.Push(fakecm.Event{Type: int(EventDisconnected), ID: handleOf(id)})
	s.next(t, EventDisconnected)
	s.f.Push(fakecm.Event{Type: int(EventTimewaitExit), ID: handleOf(id)})
	s.next(t, EventTimewaitExit)
	if err := id.Destroy(); err != nil {
		t.Fatal(err)
	}
	if s.f.Acks() != 5 {
		t.Errorf("%d events acknowledged, want the 5 reported", s.f.Acks())
	}
}

// TestKernelDeferredEstablish: an identifier without a QP sees
// CONNECT_RESPONSE, InitQPAttr answers from rdma_init_qp_attr (with the
// ACK timeout option), and Establish is rdma_establish.
func TestKernelDeferredEstablish(t *testing.T) {
	s := newKernelSide(t)
	id, _ := s.ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
	s.resolve(t, id)
	if err := id.SetOption(OptionACKTimeout, 9); err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(&ConnParam{QPNum: 0x4242}); err != nil {
		t.Fatal(err)
	}
	if got := s.f.LastConn().QPNum; got != 0x4242 {
		t.Errorf("qp_num %#x, want ConnParam.QPNum 0x4242", got)
	}
	s.f.Push(fakecm.Event{Type: int(EventConnectResponse), ID: handleOf(id)})
	s.next(t, EventConnectResponse)
	a, m, err := id.InitQPAttr(verbsio.QPStateRTS)
	if err != nil || a.Timeout != 9 || m&verbsio.QPAttrTimeout == 0 || a.SQPSN != 0x2000 {
		t.Errorf("InitQPAttr(RTS) = %+v %v %v, want the kernel's with timeout 9", a, m, err)
	}
	if slices.Contains(s.f.Calls(), "establish") {
		t.Error("rdma_establish before Establish")
	}
	if err := id.Establish(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.f.Calls(), "establish") {
		t.Error("Establish did not call rdma_establish")
	}
}

// TestKernelAccept: a request on a listener becomes a new identifier with
// the peer's addresses and parameters; the ACK timeout set on it reaches
// librdmacm and the QP; Accept moves its QP to RTS and hands rdma_accept
// its number and the private data.
func TestKernelAccept(t *testing.T) {
	s := newKernelSide(t)
	l := s.listen(t, PortSpaceTCP, verbsio.QPTypeRC)
	peer := netip.MustParseAddrPort("127.0.0.2:5000")
	child := s.f.Child(handleOf(l), netip.AddrPortFrom(kLocal, 18515), peer)
	s.f.Push(fakecm.Event{Type: int(EventConnectRequest), ID: child, Listen: handleOf(l), PrivateData: []byte("req"),
		ResponderResources: 4, InitiatorDepth: 2, QPNum: 0x77})
	ev := s.next(t, EventConnectRequest)
	id := ev.ID
	if ev.ListenID != l || id == l || id.RemoteAddr() != peer || id.LocalAddr() != netip.AddrPortFrom(kLocal, 18515) ||
		!bytes.Equal(ev.Conn.PrivateData, []byte("req")) || ev.Conn.ResponderResources != 4 || ev.Conn.QPNum != 0x77 {
		t.Fatalf("CONNECT_REQUEST %+v (local %v remote %v), want a new identifier from %v with the REQ's data", ev, id.LocalAddr(), id.RemoteAddr(), peer)
	}
	qp := s.qp(t, id, verbsio.QPTypeRC)
	if err := id.SetOption(OptionACKTimeout, 11); err != nil {
		t.Fatal(err)
	}
	if name, val, size := s.f.Option(); name != int(OptionACKTimeout) || val != 11 || size != 1 {
		t.Errorf("librdmacm got option %d = %d (%d bytes) on the request's identifier, want ACK_TIMEOUT (3) = 11", name, val, size)
	}
	if err := id.Accept(&ConnParam{PrivateData: []byte("ok"), ResponderResources: 3, InitiatorDepth: 1}); err != nil {
		t.Fatal(err)
	}
	got := s.f.LastConn()
	if !got.Accept || got.QPNum != qp.QPN() || !bytes.Equal(got.PrivateData, []byte("ok")) || got.ResponderResources != 3 {
		t.Errorf("rdma_accept got %+v, want QP %#x, private data ok, 3 responder resources", got, qp.QPN())
	}
	if a, _ := qp.Query(); a.State != verbsio.QPStateRTS || a.MaxDestRdAtomic != 3 || a.Timeout != 11 {
		t.Errorf("QP after Accept: %s max_dest_rd_atomic %d timeout %d, want RTS, 3 and 11 (the option)", a.State, a.MaxDestRdAtomic, a.Timeout)
	}
	s.f.Push(fakecm.Event{Type: int(EventEstablished), ID: child})
	if ev := s.next(t, EventEstablished); ev.ID != id {
		t.Errorf("ESTABLISHED for %v, want the accepted identifier", ev.ID)
	}
	// A second request, refused.
	child2 := s.f.Child(handleOf(l), netip.AddrPortFrom(kLocal, 18515), netip.MustParseAddrPort("127.0.0.3:5001"))
	s.f.Push(fakecm.Event{Type: int(EventConnectRequest), ID: child2, Listen: handleOf(l)})
	ev = s.next(t, EventConnectRequest)
	if err := ev.ID.Reject([]byte("busy")); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.f.Rejected(), []byte("busy")) {
		t.Errorf("rdma_reject got %q, want busy", s.f.Rejected())
	}
	_ = ev.ID.Destroy()
}

// TestKernelRequestWithoutListener: a request whose listener is gone is
// rejected and its identifier destroyed, no event.
func TestKernelRequestWithoutListener(t *testing.T) {
	s := newKernelSide(t)
	l := s.listen(t, PortSpaceTCP, verbsio.QPTypeRC)
	lh := handleOf(l)
	child := s.f.Child(lh, netip.AddrPortFrom(kLocal, 18515), kRemote)
	before := s.f.LiveIDs()
	if err := l.Destroy(); err != nil {
		t.Fatal(err)
	}
	s.f.Push(fakecm.Event{Type: int(EventConnectRequest), ID: child, Listen: lh})
	deadline := time.Now().Add(5 * time.Second)
	for s.f.LiveIDs() != before-2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.f.LiveIDs(); n != before-2 {
		t.Errorf("%d identifiers live, want %d: the orphan request's identifier destroyed", n, before-2)
	}
	if !slices.Contains(s.f.Calls(), "reject") {
		t.Errorf("the orphan request was not rejected: %v", s.f.Calls())
	}
	if ev, err := s.ch.GetEvent(50 * time.Millisecond); err == nil {
		t.Errorf("event %s for a request nobody listens for", ev)
	}
}

// TestKernelEvents: how the kernel's events about a connecting identifier
// reach the caller.
func TestKernelEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ev     fakecm.Event
		want   EventType
		status int
		pd     string
		qpErr  bool
	}{
		{"rejected with private data", fakecm.Event{Type: int(EventRejected), Status: 28, PrivateData: []byte("no")}, EventRejected, 28, "no", true},
		{"nothing listens", fakecm.Event{Type: int(EventRejected), Status: 8}, EventRejected, 8, "", true},
		{"unreachable", fakecm.Event{Type: int(EventUnreachable), Status: -int(unix.ETIMEDOUT)}, EventUnreachable, -110, "", true},
		{"connect error", fakecm.Event{Type: int(EventConnectError), Status: -int(unix.ECONNRESET)}, EventConnectError, -int(unix.ECONNRESET), "", true},
		{"disconnected", fakecm.Event{Type: int(EventDisconnected)}, EventDisconnected, 0, "", true},
		{"device removal", fakecm.Event{Type: int(EventDeviceRemoval)}, EventDeviceRemoval, 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newKernelSide(t)
			id, _ := s.ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
			s.resolve(t, id)
			qp := s.qp(t, id, verbsio.QPTypeRC)
			if err := id.Connect(nil); err != nil {
				t.Fatal(err)
			}
			e := tc.ev
			e.ID = handleOf(id)
			s.f.Push(e)
			ev := s.next(t, tc.want)
			if ev.ID != id || ev.Status != tc.status || !bytes.HasPrefix(ev.Conn.PrivateData, []byte(tc.pd)) {
				t.Errorf("event %+v, want %s status %d private data %q", ev, tc.want, tc.status, tc.pd)
			}
			a, _ := qp.Query()
			if (a.State == verbsio.QPStateErr) != tc.qpErr {
				t.Errorf("QP in %s after %s; want ERR: %v", a.State, tc.want, tc.qpErr)
			}
		})
	}
}

// TestKernelErrors: librdmacm's failures come back as verbsio errors with
// its errno, naming the call.
func TestKernelErrors(t *testing.T) {
	for _, tc := range []struct {
		op    string
		errno unix.Errno
		do    func(t *testing.T, s *kernelSide, id *ID) error
	}{
		{"create_id", unix.ENODEV, func(t *testing.T, s *kernelSide, id *ID) error { return id.ResolveAddr(kLocal, kRemote, time.Second) }},
		{"resolve_addr", unix.EADDRNOTAVAIL, func(t *testing.T, s *kernelSide, id *ID) error { return id.ResolveAddr(kLocal, kRemote, time.Second) }},
		{"bind_addr", unix.EADDRINUSE, func(t *testing.T, s *kernelSide, id *ID) error { return id.BindAddr(netip.AddrPortFrom(kLocal, 18515)) }},
		{"listen", unix.EADDRINUSE, func(t *testing.T, s *kernelSide, id *ID) error {
			if err := id.BindAddr(netip.AddrPortFrom(kLocal, 18515)); err != nil {
				return err
			}
			return id.Listen(1)
		}},
		{"connect", unix.ECONNREFUSED, func(t *testing.T, s *kernelSide, id *ID) error {
			if err := id.ResolveAddr(kLocal, kRemote, time.Second); err != nil {
				return err
			}
			s.next(t, EventAddrResolved)
			if err := id.ResolveRoute(time.Second); err != nil {
				return err
			}
			s.next(t, EventRouteResolved)
			return id.Connect(&ConnParam{QPNum: 1})
		}},
		{"set_option", unix.ENOPROTOOPT, func(t *testing.T, s *kernelSide, id *ID) error {
			if err := id.ResolveAddr(kLocal, kRemote, time.Second); err != nil {
				return err
			}
			return id.SetOption(OptionTOS, 32)
		}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			s := newKernelSide(t)
			id, _ := s.ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
			s.f.Fail(tc.op, tc.errno)
			err := tc.do(t, s, id)
			var ve *verbsio.Error
			if !errors.Is(err, tc.errno) || !errors.As(err, &ve) {
				t.Errorf("error %v, want a *verbsio.Error with %v", err, tc.errno)
			}
			s.f.Fail("", 0)
			_ = id.Destroy()
		})
	}
}

// TestKernelUD: SIDR through the kernel: the UD QP gets rdma_init_qp_attr's
// Q_Key and goes to RTS at creation; ESTABLISHED carries the peer's QPN,
// Q_Key and address handle; Accept refuses a Q_Key the kernel cannot send.
func TestKernelUD(t *testing.T) {
	s := newKernelSide(t)
	s.f.SetQPAttr(1, fakecm.QPAttr{Mask: int(verbsio.QPAttrState | verbsio.QPAttrPkeyIndex | verbsio.QPAttrPort | verbsio.QPAttrQKey),
		PortNum: 1, QKey: UDPQKey})
	id, _ := s.ch.CreateID(nil, PortSpaceUDP, verbsio.QPTypeUD)
	s.resolve(t, id)
	qp := s.qp(t, id, verbsio.QPTypeUD)
	if a, _ := qp.Query(); a.State != verbsio.QPStateRTS || a.QKey != UDPQKey {
		t.Errorf("UD QP after CreateQP: %s Q_Key %#x, want RTS and %#x", a.State, a.QKey, uint32(UDPQKey))
	}
	if err := id.Connect(&ConnParam{PrivateData: []byte("sidr")}); err != nil {
		t.Fatal(err)
	}
	dgid := verbsio.GIDFromAddr(kRemote.Addr())
	s.f.Push(fakecm.Event{Type: int(EventEstablished), ID: handleOf(id), UD: true, QPNum: 0x99, QKey: UDPQKey, DGID: dgid, PrivateData: []byte("rep")})
	ev := s.next(t, EventEstablished)
	if ev.UD.QPNum != 0x99 || ev.UD.QKey != UDPQKey || ev.UD.AH.DGID != dgid || !ev.UD.AH.IsGlobal || !bytes.Equal(ev.UD.PrivateData, []byte("rep")) {
		t.Errorf("UD ESTABLISHED %+v, want QPN 0x99, Q_Key %#x, the peer's GID and the SIDR_REP's private data", ev.UD, uint32(UDPQKey))
	}

	l := s.listen(t, PortSpaceUDP, verbsio.QPTypeUD)
	child := s.f.Child(handleOf(l), netip.AddrPortFrom(kLocal, 18515), kRemote)
	s.f.Push(fakecm.Event{Type: int(EventConnectRequest), ID: child, Listen: handleOf(l), UD: true, PrivateData: []byte("hi")})
	req := s.next(t, EventConnectRequest)
	if !bytes.Equal(req.UD.PrivateData, []byte("hi")) {
		t.Errorf("UD CONNECT_REQUEST private data %q, want hi", req.UD.PrivateData)
	}
	if err := req.ID.Accept(&ConnParam{QPNum: 0x55, QKey: 0x1111}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Accept with Q_Key 0x1111: %v, want EINVAL", err)
	}
	if err := req.ID.Accept(&ConnParam{QPNum: 0x55}); err != nil {
		t.Fatal(err)
	}
	if c := s.f.LastConn(); !c.Accept || c.QPNum != 0x55 {
		t.Errorf("rdma_accept got %+v, want QP 0x55", c)
	}
}

// TestKernelUC: librdmacm cannot connect UC; the error says so.
func TestKernelUC(t *testing.T) {
	s := newKernelSide(t)
	id, _ := s.ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeUC)
	if err := id.ResolveAddr(kLocal, kRemote, time.Second); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("ResolveAddr of a UC identifier on the kernel's CM: %v, want EOPNOTSUPP", err)
	}
}

// TestKernelPathMTU: a path MTU limit below the port's active MTU makes
// ResolveRoute hand librdmacm a path record of its own (RDMA_OPTION_IB_PATH:
// the addresses' GIDs, the limit, the service ID of the port, the flow
// label of the ports, hop limit 64, P_Key 0xffff, the packet life time)
// instead of rdma_resolve_route, and the route has the limit; a limit at
// or above the active MTU leaves rdma_resolve_route alone.
func TestKernelPathMTU(t *testing.T) {
	for _, tt := range []struct {
		limit verbsio.MTU
		set   bool
	}{{verbsio.MTU256, true}, {verbsio.MTU4096, false}} {
		t.Run(tt.limit.String(), func(t *testing.T) {
			s := newKernelSide(t)
			id, err := s.ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
			if err != nil {
				t.Fatal(err)
			}
			if err := id.LimitPathMTU(tt.limit); err != nil {
				t.Fatal(err)
			}
			s.resolve(t, id)
			p, set := s.f.PathSet()
			calls := s.f.Calls()
			if set != tt.set || slices.Contains(calls, "resolve_route") == tt.set {
				t.Fatalf("path record set %v, calls %v; want a record: %v", set, calls, tt.set)
			}
			if !tt.set {
				if r := id.Route(); r.PathMTU != verbsio.MTU1024 {
					t.Errorf("route MTU %v, want the kernel's 1024", r.PathMTU)
				}
				return
			}
			src := id.LocalAddr()
			want := fakecm.Path{Flags: 1 | 2 | 8 | 32, ServiceID: mad.ServiceID(PortSpaceTCP, kRemote.Port()),
				DGID: verbsio.GIDFromAddr(kRemote.Addr()), SGID: verbsio.GIDFromAddr(kLocal),
				FlowLabel: (uint32(src.Port())*31 + uint32(kRemote.Port())) & 0xfffff, HopLimit: 64,
				Reversible: true, NumPath: 1, PKey: 0xffff, MTU: uint8(verbsio.MTU256), MTUSelector: 2,
				PacketLifeTime: DefaultPacketLifeTime}
			if p != want {
				t.Errorf("path record\n%+v, want\n%+v", p, want)
			}
			if r := id.Route(); r.PathMTU != verbsio.MTU256 || r.HopLimit != 64 {
				t.Errorf("route %+v, want MTU 256 and hop limit 64", r)
			}
		})
	}
	s := newKernelSide(t)
	id, _ := s.ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
	s.resolve(t, id)
	if err := id.LimitPathMTU(verbsio.MTU512); err == nil {
		t.Error("LimitPathMTU after the route was resolved: no error")
	}
	if err := id.LimitPathMTU(0); err == nil {
		t.Error("LimitPathMTU(0): no error")
	}
}
