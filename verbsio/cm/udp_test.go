package cm

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// The CM on the real fabrics: the udp fabric's QP1 (RoCEv2 packets to QP 1
// over loopback) and the shm fabric's default, a UnixMADPort.

var lo4 = netip.MustParseAddr("127.0.0.1")

// udpContext opens udp_lo on a free UDP port (below 0xc000: its LID).
func udpContext(t *testing.T) (*verbsio.Context, uint16) {
	t.Helper()
	ctx, err := verbsio.OpenWith("udp_lo", verbsio.OpenOptions{UDPPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	pa, err := ctx.QueryPort(1)
	if err != nil || pa.LID == 0 || pa.LID >= 0xc000 {
		t.Fatalf("udp_lo on a free port: LID %#x %v", pa.LID, err)
	}
	return ctx, pa.LID
}

// udpSides opens one udp_lo engine with its CM on its own QP1 and returns
// two sides on it: the listener's and the client's, each with its own
// event channel and CQ. Their MADs go over the loopback wire from the
// engine's socket to itself. mp, if not nil, wraps the engine's QP1.
func udpSides(t *testing.T, wrap func(verbsio.MADPort) verbsio.MADPort) (srv, cli *side) {
	t.Helper()
	ctx, port := udpContext(t)
	o := Options{PeerMADPort: func(netip.Addr) uint16 { return port }}
	var qp1 verbsio.MADPort
	if wrap != nil {
		var err error
		if qp1, err = ctx.OpenMADPort(1); err != nil {
			t.Fatal(err)
		}
		o.MADPort = wrap(qp1)
	}
	dev, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mk := func() *side {
		cq, err := ctx.CreateCQ(64)
		if err != nil {
			t.Fatal(err)
		}
		return &side{ctx: ctx, dev: dev, addr: lo4, pd: pd, cq: cq, ch: NewEventChannel()}
	}
	srv, cli = mk(), mk()
	t.Cleanup(func() {
		srv.ch.Close()
		cli.ch.Close()
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
		if qp1 != nil {
			_ = qp1.Close()
		}
		_ = ctx.Close()
	})
	return srv, cli
}

// fabricCounters returns the engine's transport counters.
func fabricCounters(ctx *verbsio.Context) map[string]uint64 {
	return ctx.Impl().(interface{ Counters() map[string]uint64 }).Counters()
}

// tapPort wraps a MAD port: it counts the MADs sent by attribute and can
// drop some.
type tapPort struct {
	verbsio.MADPort
	mu   sync.Mutex
	sent map[mad.AttrID]int
	drop func(*mad.MAD) bool
}

func newTap(p verbsio.MADPort) *tapPort { return &tapPort{MADPort: p, sent: map[mad.AttrID]int{}} }

func (p *tapPort) SendMAD(from verbsio.GID, to verbsio.MADAddr, b []byte) error {
	m, err := mad.Decode(b)
	p.mu.Lock()
	drop := false
	if err == nil {
		p.sent[m.AttrID]++
		drop = p.drop != nil && p.drop(&m)
	}
	p.mu.Unlock()
	if drop {
		return nil
	}
	return p.MADPort.SendMAD(from, to, b)
}

// ListenService and UnlistenService pass a UnixMADPort's service
// binding through.
func (p *tapPort) ListenService(sid uint64) error {
	if sl, ok := p.MADPort.(serviceListener); ok {
		return sl.ListenService(sid)
	}
	return nil
}

func (p *tapPort) UnlistenService(sid uint64) {
	if sl, ok := p.MADPort.(serviceListener); ok {
		sl.UnlistenService(sid)
	}
}

func (p *tapPort) count(a mad.AttrID) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[a]
}

// TestUDPConnectRC: the whole RC sequence over the udp fabric's QP1:
// resolve, connect with private data, accept, data both ways (the QPs on
// the CM's paths), disconnect, TIMEWAIT; every MAD a RoCEv2 packet that
// the engine counted, none dropped.
func TestUDPConnectRC(t *testing.T) {
	srv, cli := udpSides(t, nil)
	srv.listen(t, PortSpaceTCP, verbsio.QPTypeRC, 7471)
	id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(lo4, 7471))
	cqp, err := id.CreateQP(cli.pd, cli.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	before := fabricCounters(cli.ctx)
	if err := id.Connect(&ConnParam{PrivateData: []byte("hello"), RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	req := srv.event(t, EventConnectRequest)
	if !bytes.HasPrefix(req.Conn.PrivateData, []byte("hello")) || req.Conn.QPNum != cqp.QPN() {
		t.Errorf("CONNECT_REQUEST %+v", req.Conn)
	}
	sqp, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(&ConnParam{PrivateData: []byte("welcome"), RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	est := cli.event(t, EventEstablished)
	if !bytes.HasPrefix(est.Conn.PrivateData, []byte("welcome")) || est.Conn.QPNum != sqp.QPN() {
		t.Errorf("client ESTABLISHED %+v", est.Conn)
	}
	srv.event(t, EventEstablished)
	after := fabricCounters(cli.ctx)
	// REQ, REP, RTU: three packets out and in (the engine talks to itself).
	if s, r := after["sent_pkts"]-before["sent_pkts"], after["rcvd_pkts"]-before["rcvd_pkts"]; s != 3 || r != 3 {
		t.Errorf("the handshake sent %d and received %d packets, want 3 and 3", s, r)
	}
	ca, _ := cqp.Query()
	if ca.AH.FlowLabel != id.Route().FlowLabel || ca.AH.DLID != srv.dev.opts.PeerMADPort(lo4) {
		t.Errorf("client QP's address vector %+v, route %+v", ca.AH, id.Route())
	}
	exchange(t, cli, cqp, srv, sqp)
	exchange(t, srv, sqp, cli, cqp)
	rdmaWrite(t, cli, cqp, srv)
	disconnect(t, cli, id, srv, req.ID)
	cli.event(t, EventTimewaitExit)
	srv.event(t, EventTimewaitExit)
	c := cli.dev.Counters()
	if c.RxTruncated+c.RxBadHeader+c.RxUnknownAttr+c.RxUnmatched+c.TxErrors != 0 {
		t.Errorf("CM counters %+v", c)
	}
	if f := fabricCounters(cli.ctx); f["malformed"]+f["icrc_errors"]+f["unknown_qp"]+f["qp1_drops"] != 0 {
		t.Errorf("fabric counters %v", f)
	}
}

// TestUDPSIDR: UD through SIDR over the udp fabric, then a datagram with
// the address vector SIDR gave.
func TestUDPSIDR(t *testing.T) {
	srv, cli := udpSides(t, nil)
	srv.listen(t, PortSpaceUDP, verbsio.QPTypeUD, 7174)
	id := cli.resolve(t, PortSpaceUDP, verbsio.QPTypeUD, netip.AddrPortFrom(lo4, 7174))
	cqp, err := id.CreateQP(cli.pd, cli.qp(t, verbsio.QPTypeUD))
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(&ConnParam{PrivateData: []byte("ud hello")}); err != nil {
		t.Fatal(err)
	}
	req := srv.event(t, EventConnectRequest)
	sqp, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeUD))
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(nil); err != nil {
		t.Fatal(err)
	}
	e := cli.event(t, EventEstablished)
	if e.UD.QPNum != sqp.QPN() || e.UD.QKey != UDPQKey || e.UD.AH.DGID != verbsio.GIDFromAddr(lo4) || e.UD.AH.DLID == 0 {
		t.Fatalf("UD ESTABLISHED %+v", e.UD)
	}
	ah, err := cli.pd.CreateAH(e.UD.AH)
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := cli.ctx.Alloc(4096)
	copy(buf, "datagram")
	ms, _ := cli.pd.RegMR(buf, verbsio.AccessLocalWrite)
	rbuf, _ := srv.ctx.Alloc(4096)
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
	// Nobody on 7175: SIDR_REP "unsupported", as Linux answers.
	id2 := cli.resolve(t, PortSpaceUDP, verbsio.QPTypeUD, netip.AddrPortFrom(lo4, 7175))
	if err := id2.Connect(&ConnParam{QPNum: 1}); err != nil {
		t.Fatal(err)
	}
	if e := cli.event(t, EventUnreachable); e.Status != int(mad.SIDRUnsupported) {
		t.Errorf("UD to nobody: status %d", e.Status)
	}
}

// shmSides opens two shm0 engines with the CM's defaults: a UnixMADPort on
// each, answering for the loopback addresses. The server's device is
// opened first, so 127.0.0.1 binds to it.
func shmSides(t *testing.T, wrap func(verbsio.MADPort) verbsio.MADPort) (srv, cli *side) {
	t.Helper()
	mk := func() *side {
		ctx, err := verbsio.Open("shm0")
		if err != nil {
			t.Fatal(err)
		}
		gids, _ := ctx.QueryGIDTable(1)
		var o Options
		var own verbsio.MADPort
		if wrap != nil {
			if own, err = NewUnixMADPort(gids[0].GID); err != nil {
				t.Fatal(err)
			}
			o.MADPort, o.Addrs = wrap(own), loopbackAddrs
		}
		dev, err := Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if !dev.hasAddr(lo4) || !dev.hasAddr(netip.IPv6Loopback()) {
			t.Fatal("a shm device opened with the defaults does not answer for the loopback addresses")
		}
		pd, _ := ctx.AllocPD()
		cq, _ := ctx.CreateCQ(64)
		s := &side{ctx: ctx, dev: dev, addr: gids[0].GID.Addr(), pd: pd, cq: cq, ch: NewEventChannel()}
		t.Cleanup(func() {
			s.ch.Close()
			if err := dev.Close(); err != nil {
				t.Error(err)
			}
			if own != nil {
				_ = own.Close()
			}
			_ = ctx.Close()
		})
		return s
	}
	srv = mk()
	srv.addr = netip.IPv6Loopback() // the shm GIDs are IPv6 addresses
	return srv, mk()
}

// TestDeferredEstablishFabrics: the deferred establish on the real
// transports, in both orders of events: the active side, without a QP
// attached, gets CONNECT_RESPONSE (not ESTABLISHED), and while it moves
// its QP the passive side sees nothing and no RTU is on the wire; one RTU
// after Establish, then the passive side's ESTABLISHED, nothing more on
// the active side, and data flows.
func TestDeferredEstablishFabrics(t *testing.T) {
	for _, fab := range []struct {
		name  string
		sides func(*testing.T, func(verbsio.MADPort) verbsio.MADPort) (*side, *side)
	}{{"udp_lo", udpSides}, {"shm", shmSides}} {
		t.Run(fab.name, func(t *testing.T) {
			var tap *tapPort
			srv, cli := fab.sides(t, func(p verbsio.MADPort) verbsio.MADPort {
				x := newTap(p)
				if tap == nil || fab.name == "shm" {
					tap = x // shm: the client's port, opened last
				}
				return x
			})
			srv.listen(t, PortSpaceTCP, verbsio.QPTypeRC, 7473)
			id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(srv.addr, 7473))
			cqp, err := cli.pd.CreateQP(cli.qp(t, verbsio.QPTypeRC))
			if err != nil {
				t.Fatal(err)
			}
			defer cqp.Destroy()
			if err := id.Connect(&ConnParam{QPNum: cqp.QPN(), RetryCount: 7, RNRRetryCount: 7}); err != nil {
				t.Fatal(err)
			}
			moveQP(t, id, cqp, verbsio.QPStateInit)
			req := srv.event(t, EventConnectRequest)
			sqp, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeRC))
			if err != nil {
				t.Fatal(err)
			}
			if err := req.ID.Accept(&ConnParam{RNRRetryCount: 7}); err != nil {
				t.Fatal(err)
			}
			if resp := cli.event(t, EventConnectResponse); resp.Conn.QPNum != sqp.QPN() {
				t.Errorf("CONNECT_RESPONSE names QP %#x, want %#x", resp.Conn.QPNum, sqp.QPN())
			}
			srv.quiet(t, 300*time.Millisecond)
			if n := tap.count(mad.AttrRTU); n != 0 {
				t.Fatalf("%d RTUs before Establish", n)
			}
			moveQP(t, id, cqp, verbsio.QPStateRTR, verbsio.QPStateRTS)
			if err := id.Establish(); err != nil {
				t.Fatal(err)
			}
			srv.event(t, EventEstablished)
			if n := tap.count(mad.AttrRTU); n != 1 {
				t.Errorf("%d RTUs, want 1", n)
			}
			cli.quiet(t, 100*time.Millisecond)
			exchange(t, cli, cqp, srv, sqp)
			exchange(t, srv, sqp, cli, cqp)
		})
	}
}

// TestUDPCommEst: the RTU is lost. The passive side learns that the
// connection is established from its QP's first packet (the engine's
// COMM_EST), not from a REP retry 4 s later; the RTU never came.
func TestUDPCommEst(t *testing.T) {
	var tap *tapPort
	srv, cli := udpSides(t, func(p verbsio.MADPort) verbsio.MADPort {
		tap = newTap(p)
		tap.drop = func(m *mad.MAD) bool { return m.AttrID == mad.AttrRTU }
		return tap
	})
	srv.listen(t, PortSpaceTCP, verbsio.QPTypeRC, 7476)
	id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(lo4, 7476))
	cqp, err := id.CreateQP(cli.pd, cli.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(&ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	req := srv.event(t, EventConnectRequest)
	sqp, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(&ConnParam{RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	cli.event(t, EventEstablished)
	srv.quiet(t, 200*time.Millisecond) // the RTU was lost: nothing yet
	start := time.Now()
	exchange(t, cli, cqp, srv, sqp)
	srv.event(t, EventEstablished)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("ESTABLISHED %v after the first packet: the REP retry did it, not COMM_EST", d)
	}
	if c := srv.dev.Counters(); c.CommEst != 1 {
		t.Errorf("connections established by COMM_EST: %d, want 1", c.CommEst)
	}
	if n := tap.count(mad.AttrRTU); n != 1 {
		t.Errorf("%d RTUs sent (and dropped), want 1", n)
	}
	disconnect(t, cli, id, srv, req.ID)
}

// rawPeer is a hand-made CM on a plain UDP socket: it sends whatever
// RoCEv2 packets to QP 1 of an engine the test builds, and reads the
// engine's answers. Its port is below 0xc000, so the engine answers it
// there.
type rawPeer struct {
	conn *net.UDPConn
	eng  netip.AddrPort
}

func newRawPeer(t *testing.T, engPort uint16) *rawPeer {
	t.Helper()
	for range 64 {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo4, 0)))
		if err != nil {
			t.Fatal(err)
		}
		if c.LocalAddr().(*net.UDPAddr).Port < 0xc000 {
			t.Cleanup(func() { c.Close() })
			return &rawPeer{conn: c, eng: netip.AddrPortFrom(lo4, engPort)}
		}
		c.Close()
	}
	t.Fatal("no UDP port below 0xc000")
	return nil
}

// packet is a UD SEND_ONLY to QP 1 carrying payload, with a valid ICRC.
func (r *rawPeer) packet(t *testing.T, payload []byte, qkey uint32) []byte {
	t.Helper()
	p := roce.Packet{BTH: roce.BTH{Opcode: roce.UDSendOnly, PKey: roce.DefaultPKey, DestQP: 1},
		DETH: roce.DETH{QKey: qkey, SrcQP: 1}, Payload: payload}
	b := make([]byte, p.Len())
	if _, err := p.Encode(b); err != nil {
		t.Fatal(err)
	}
	path := roce.IPv4Path{Src: lo4.As4(), Dst: lo4.As4(), SrcPort: uint16(r.conn.LocalAddr().(*net.UDPAddr).Port),
		DstPort: r.eng.Port(), DontFragment: true}
	if err := path.Seal(0, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func (r *rawPeer) send(t *testing.T, pkt []byte) {
	t.Helper()
	if _, err := r.conn.WriteToUDPAddrPort(pkt, r.eng); err != nil {
		t.Fatal(err)
	}
}

func (r *rawPeer) sendMAD(t *testing.T, tid uint64, msg mad.Message) {
	t.Helper()
	b, err := mad.Append(nil, &mad.MAD{Header: mad.CMHeader(msg.Attr(), tid), Msg: msg})
	if err != nil {
		t.Fatal(err)
	}
	r.send(t, r.packet(t, b, mad.QP1QKey))
}

// recv returns the next MAD the engine sent, or false after d.
func (r *rawPeer) recv(t *testing.T, d time.Duration) (mad.MAD, bool) {
	t.Helper()
	buf := make([]byte, 2048)
	_ = r.conn.SetReadDeadline(time.Now().Add(d))
	for {
		n, err := r.conn.Read(buf)
		if err != nil {
			return mad.MAD{}, false
		}
		var p roce.Packet
		if p.Decode(buf[:n]) != nil || p.BTH.DestQP != 1 || p.BTH.Opcode != roce.UDSendOnly || p.DETH.QKey != mad.QP1QKey {
			t.Fatalf("the engine sent a packet that is no MAD to QP 1: % x", buf[:n])
		}
		m, err := mad.Decode(p.Payload)
		if err != nil {
			t.Fatalf("the engine sent a MAD that does not decode: %v", err)
		}
		return m, true
	}
}

// req is a REQ of the raw peer's for port with rdma_cm's header.
func (r *rawPeer) req(t *testing.T, commID uint32, port uint16, cmTimeout, retries uint8) *mad.REQ {
	t.Helper()
	g := verbsio.GIDFromAddr(lo4)
	m := &mad.REQ{LocalCommID: commID, ServiceID: mad.ServiceID(PortSpaceTCP, port), LocalCAGUID: 0x0200_0000_0000_0001,
		LocalQPN: 0x1234, StartingPSN: 0x4321, RemoteCMResponseTimeout: cmTimeout, LocalCMResponseTimeout: cmTimeout,
		RetryCount: 7, RNRRetryCount: 7, MaxCMRetries: retries, PKey: 0xffff, PathMTU: 3,
		Primary: mad.Path{LocalLID: 0xffff, RemoteLID: 0xffff, LocalGID: g, RemoteGID: g, HopLimit: 64, LocalACKTimeout: 19}}
	h := mad.CMAHeader{IPVersion: 4, Port: uint16(r.conn.LocalAddr().(*net.UDPAddr).Port), Src: lo4, Dst: lo4}
	if err := h.Marshal(m.PrivateData[:]); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestUDPBadInput: what a network can send to QP1. Requests for nobody and
// answers for no connection are refused or ignored as Linux does; MADs
// that are too short, carry a bad ICRC or Q_Key, or a header that is not
// the CM's are dropped and counted by the fabric or the CM, never
// answered, and the CM goes on working.
func TestUDPBadInput(t *testing.T) {
	srv, _ := udpSides(t, nil)
	eng := srv.dev.opts.PeerMADPort(lo4)
	peer := newRawPeer(t, eng)
	srv.listen(t, PortSpaceTCP, verbsio.QPTypeRC, 7480)
	valid := func() []byte {
		b, _ := mad.Append(nil, &mad.MAD{Header: mad.CMHeader(mad.AttrREQ, 77), Msg: peer.req(t, 0x77, 7480, 20, 15)})
		return b
	}
	cases := []struct {
		name    string
		pkt     func() []byte
		counter string // the fabric's or the CM's (cm:) counter that counts it
	}{
		{"truncated MAD", func() []byte { return peer.packet(t, valid()[:200], mad.QP1QKey) }, "malformed"},
		{"MAD longer than 256 bytes", func() []byte { return peer.packet(t, append(valid(), make([]byte, 8)...), mad.QP1QKey) }, "malformed"},
		{"wrong Q_Key", func() []byte { return peer.packet(t, valid(), 0x1234) }, "malformed"},
		{"corrupted (ICRC)", func() []byte {
			b := peer.packet(t, valid(), mad.QP1QKey)
			b[40] ^= 0x10
			return b
		}, "icrc_errors"},
		{"not a CM MAD (class 0x04)", func() []byte {
			b := valid()
			b[1] = 0x04
			return peer.packet(t, b, mad.QP1QKey)
		}, "cm:bad_header"},
		{"unknown attribute", func() []byte {
			b := valid()
			b[16], b[17] = 0x00, 0x19 // LAP
			return peer.packet(t, b, mad.QP1QKey)
		}, "cm:unknown_attr"},
		{"REP for no connection", func() []byte {
			b, _ := mad.Append(nil, &mad.MAD{Header: mad.CMHeader(mad.AttrREP, 78),
				Msg: &mad.REP{LocalCommID: 0x99, RemoteCommID: 0xdeadbeef, LocalQPN: 0x55, StartingPSN: 1}})
			return peer.packet(t, b, mad.QP1QKey)
		}, "cm:unmatched"},
	}
	get := func(name string) uint64 {
		c := srv.dev.Counters()
		switch name {
		case "cm:bad_header":
			return c.RxBadHeader
		case "cm:unknown_attr":
			return c.RxUnknownAttr
		case "cm:unmatched":
			return c.RxUnmatched
		}
		return fabricCounters(srv.ctx)[name]
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := get(tc.counter)
			peer.send(t, tc.pkt())
			deadline := time.Now().Add(wait)
			for get(tc.counter) == before {
				if time.Now().After(deadline) {
					t.Fatalf("%s stayed %d", tc.counter, before)
				}
				time.Sleep(time.Millisecond)
			}
			if got := get(tc.counter); got != before+1 {
				t.Errorf("%s %d -> %d, want one more", tc.counter, before, got)
			}
			if m, ok := peer.recv(t, 200*time.Millisecond); ok {
				t.Errorf("the engine answered: %s", m.String())
			}
			srv.quiet(t, 10*time.Millisecond)
		})
	}
	t.Run("REQ for an unknown service", func(t *testing.T) {
		peer.sendMAD(t, 0x1_0000_0042, peer.req(t, 0x42, 7999, 20, 15))
		m, ok := peer.recv(t, wait)
		if !ok {
			t.Fatal("no answer")
		}
		rej, isRej := m.Msg.(*mad.REJ)
		if !isRej || rej.Reason != mad.RejInvalidServiceID || rej.RemoteCommID != 0x42 || rej.MessageRejected != mad.MsgREQ || m.TID != 0x1_0000_0042 {
			t.Fatalf("answer %s, want REJ reason 8 to comm 0x42 tid 0x100000042", m.String())
		}
		srv.quiet(t, 50*time.Millisecond)
	})
	t.Run("REQ without rdma_cm's header", func(t *testing.T) {
		r := peer.req(t, 0x43, 7480, 20, 15)
		r.PrivateData[0] = 9 // CMA version 9
		peer.sendMAD(t, 43, r)
		m, ok := peer.recv(t, wait)
		if rej, isRej := m.Msg.(*mad.REJ); !ok || !isRej || rej.Reason != mad.RejConsumerDefined || rej.RemoteCommID != 0x43 {
			t.Fatalf("answer %v %s, want REJ reason 28", ok, m.String())
		}
		srv.quiet(t, 50*time.Millisecond)
	})
	// After all that, the listener still connects.
	t.Run("the CM still works", func(t *testing.T) {
		peer.sendMAD(t, 44, peer.req(t, 0x44, 7480, 20, 15))
		req := srv.event(t, EventConnectRequest)
		if err := req.ID.Reject([]byte("no")); err != nil {
			t.Fatal(err)
		}
		m, ok := peer.recv(t, wait)
		if rej, isRej := m.Msg.(*mad.REJ); !ok || !isRej || rej.Reason != mad.RejConsumerDefined || rej.RemoteCommID != 0x44 {
			t.Fatalf("answer %v %s, want the listener's REJ", ok, m.String())
		}
	})
}

// TestUDPNoRTU: a peer that never sends the RTU. The passive side sends
// its REP again as often as the REQ allowed (its CM response timeout, 2^(9-8)
// = 2 ms here, 3 retries), reports UNREACHABLE (-ETIMEDOUT), and once the
// identifier is destroyed the CM holds nothing of the connection.
func TestUDPNoRTU(t *testing.T) {
	srv, _ := udpSides(t, nil)
	peer := newRawPeer(t, srv.dev.opts.PeerMADPort(lo4))
	srv.listen(t, PortSpaceTCP, verbsio.QPTypeRC, 7481)
	peer.sendMAD(t, 0x51, peer.req(t, 0x51, 7481, 9, 3))
	req := srv.event(t, EventConnectRequest)
	if req.Conn.QPNum != 0x1234 {
		t.Errorf("CONNECT_REQUEST for QP %#x", req.Conn.QPNum)
	}
	sqp, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(&ConnParam{}); err != nil {
		t.Fatal(err)
	}
	e := srv.event(t, EventUnreachable)
	if e.Status != -int(unix.ETIMEDOUT) || e.ID != req.ID {
		t.Errorf("UNREACHABLE status %d", e.Status)
	}
	reps := 0
	for {
		m, ok := peer.recv(t, 100*time.Millisecond)
		if !ok {
			break
		}
		rep, isRep := m.Msg.(*mad.REP)
		if !isRep || rep.RemoteCommID != 0x51 || rep.LocalQPN != sqp.QPN() || m.TID != 0x51 {
			t.Fatalf("the engine sent %s, want its REP", m.String())
		}
		reps++
	}
	if reps != 4 {
		t.Errorf("%d REPs, want 1 + 3 retries", reps)
	}
	if err := req.ID.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := req.ID.DestroyQP(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	left, ids := srv.dev.cm.IDs(), len(srv.dev.ids)
	_, timer := srv.dev.cm.NextDeadline()
	mu.Unlock()
	if left != 1 || timer || ids != 1 { // the listener's
		t.Errorf("the CM holds %d IDs (rdma_cm %d), timer %v; want the listener only", left, ids, timer)
	}
	if m, ok := peer.recv(t, 100*time.Millisecond); ok {
		t.Errorf("after destroy the engine sent %s", m.String())
	}
}

// TestUDPMADPortErrors: QP1 is one per context; bad sends are refused.
func TestUDPMADPortErrors(t *testing.T) {
	ctx, _ := udpContext(t)
	defer ctx.Close()
	p, err := ctx.OpenMADPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctx.OpenMADPort(1); !errors.Is(err, unix.EBUSY) {
		t.Errorf("second open: %v", err)
	}
	if _, err := Open(ctx, Options{}); !errors.Is(err, unix.EBUSY) {
		t.Errorf("a CM on a context whose QP1 is taken: %v", err)
	}
	if err := p.SendMAD(verbsio.GIDFromAddr(lo4), verbsio.MADAddr{GID: verbsio.GIDFromAddr(lo4)}, make([]byte, 100)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a 100-byte MAD: %v", err)
	}
	if err := p.SendMAD(verbsio.GIDFromAddr(netip.MustParseAddr("192.0.2.1")), verbsio.MADAddr{GID: verbsio.GIDFromAddr(lo4)}, make([]byte, 256)); !errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Errorf("from an address the device does not have: %v", err)
	}
	if err := p.SendMAD(verbsio.GIDFromAddr(lo4), verbsio.MADAddr{GID: verbsio.GIDFromAddr(netip.IPv6Loopback())}, make([]byte, 256)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("IPv4 to IPv6: %v", err)
	}
	if _, err := ctx.OpenMADPort(2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("port 2: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.SendMAD(verbsio.GIDFromAddr(lo4), verbsio.MADAddr{GID: verbsio.GIDFromAddr(lo4)}, make([]byte, 256)); !errors.Is(err, unix.EBADF) {
		t.Errorf("send after close: %v", err)
	}
	p2, err := ctx.OpenMADPort(1)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	_ = p2.Close()
}

// freeUDPPort returns a UDP port below 0xc000 that was free a moment ago
// on 127.0.0.1.
func freeUDPPort(t *testing.T) uint16 {
	t.Helper()
	p := newRawPeer(t, 0)
	port := uint16(p.conn.LocalAddr().(*net.UDPAddr).Port)
	p.conn.Close()
	return port
}
