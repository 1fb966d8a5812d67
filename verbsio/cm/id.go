package cm

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/internal/ibcm"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// PortSpace is an rdma_cm port space: TCP for RC and UC connections, UDP
// for UD (resolved with SIDR).
type PortSpace = mad.PortSpace

// Port spaces.
const (
	PortSpaceTCP = mad.PortSpaceTCP
	PortSpaceUDP = mad.PortSpaceUDP
)

type state uint8

// rdma_cm identifier states (enum rdma_cm_state).
const (
	stateIdle state = iota
	stateAddrQuery
	stateAddrResolved
	stateRouteQuery
	stateRouteResolved
	stateConnect
	stateDisconnect
	stateAddrBound
	stateListen
	stateDestroying
)

var stateNames = [...]string{"IDLE", "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_QUERY", "ROUTE_RESOLVED",
	"CONNECT", "DISCONNECT", "ADDR_BOUND", "LISTEN", "DESTROYING"}

func (s state) String() string { return stateNames[s] }

// Route is the path an identifier's connection takes: rdma_cm builds it
// locally on RoCE, as cma_resolve_iboe_route does.
type Route struct {
	SGID, DGID     verbsio.GID
	SGIDIndex      uint8
	PathMTU        verbsio.MTU
	HopLimit       uint8
	TrafficClass   uint8
	FlowLabel      uint32 // (source port * 31 + destination port) & 0xfffff
	PacketLifeTime uint8
	// MADPort is the UDP port of the peer's QP1 (0: 4791).
	MADPort uint16
}

// Option is an identifier option (rdma_set_option).
type Option uint8

// Options.
const (
	// OptionTOS sets the type of service: the route's traffic class
	// (RDMA_OPTION_ID_TOS). Set it before ResolveRoute.
	OptionTOS Option = 0
	// OptionReuseAddr lets other identifiers bind the same address and
	// port unless one of them listens (RDMA_OPTION_ID_REUSEADDR).
	OptionReuseAddr Option = 1
	// OptionACKTimeout overrides the QP ACK timeout the CM computes from
	// the path: the timeout is 4.096 us * 2^value, 0 infinite
	// (RDMA_OPTION_ID_ACK_TIMEOUT). RC only; InitQPAttr for RTS returns it.
	OptionACKTimeout Option = 3
)

// ID is an rdma_cm identifier (struct rdma_cm_id): an endpoint that
// resolves addresses, listens, connects or accepts. Its methods are safe
// for concurrent use; events about it arrive on its channel.
type ID struct {
	// Context belongs to the caller.
	Context any

	ch        *EventChannel
	ps        PortSpace
	qpType    verbsio.QPType
	state     state
	dev       *Device
	src, dst  netip.AddrPort
	bound     bool
	route     Route
	cmID      *ibcm.ID
	qp        *verbsio.QP
	qpNum     uint32
	srq       bool
	seqNum    uint32
	qkey      uint32
	listen    *ID
	respRes   uint8
	initDepth uint8

	tos        uint8
	tosSet     bool
	reuseAddr  bool
	ackTimeout uint8
	ackSet     bool
	mtuLimit   verbsio.MTU
	destroyed  bool

	// kh is the identifier's librdmacm identifier on a device the
	// kernel's CM manages (kernel.go); nil on the built-in CM.
	kh kernelHandle
}

// CreateID returns a new identifier on ch for port space ps and QP type
// qpType (rdma_create_id): TCP connects RC or UC QPs, UDP resolves UD QPs.
func (ch *EventChannel) CreateID(ctx any, ps PortSpace, qpType verbsio.QPType) (*ID, error) {
	switch {
	case ps == PortSpaceTCP && (qpType == verbsio.QPTypeRC || qpType == verbsio.QPTypeUC):
	case ps == PortSpaceUDP && qpType == verbsio.QPTypeUD:
	default:
		return nil, verbsio.Errorf("rdma_create_id", unix.EINVAL,
			"port space %s does not carry %s QPs (TCP: RC or UC, UDP: UD)", ps, qpType)
	}
	return &ID{Context: ctx, ch: ch, ps: ps, qpType: qpType, seqNum: randPSN()}, nil
}

func randPSN() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:]) & 0xffffff
}

// Device returns the device the identifier resolved or was bound to.
func (id *ID) Device() *Device {
	mu.Lock()
	defer mu.Unlock()
	return id.dev
}

// LocalAddr and RemoteAddr return the identifier's addresses.
func (id *ID) LocalAddr() netip.AddrPort {
	mu.Lock()
	defer mu.Unlock()
	return id.src
}

// RemoteAddr returns the peer's address (connected and connecting IDs).
func (id *ID) RemoteAddr() netip.AddrPort {
	mu.Lock()
	defer mu.Unlock()
	return id.dst
}

// Route returns the resolved route.
func (id *ID) Route() Route {
	mu.Lock()
	defer mu.Unlock()
	return id.route
}

// QP returns the QP CreateQP attached, or nil.
func (id *ID) QP() *verbsio.QP {
	mu.Lock()
	defer mu.Unlock()
	return id.qp
}

// PortSpace returns the identifier's port space.
func (id *ID) PortSpace() PortSpace { return id.ps }

// QPType returns the QP type the identifier connects.
func (id *ID) QPType() verbsio.QPType { return id.qpType }

func (id *ID) err(op string, errno unix.Errno, format string, args ...any) error {
	return verbsio.Errorf(op, errno, format, args...)
}

func (id *ID) wrongState(op string) error {
	return id.err(op, unix.EINVAL, "the identifier is %s", id.state)
}

// SetOption sets an option (rdma_set_option).
func (id *ID) SetOption(o Option, v int) error {
	mu.Lock()
	defer mu.Unlock()
	switch o {
	case OptionTOS:
		if v < 0 || v > 255 {
			return id.err("rdma_set_option", unix.EINVAL, "TOS %d is not a byte", v)
		}
		id.tos, id.tosSet = uint8(v), true
	case OptionReuseAddr:
		if v == 0 && id.state != stateIdle {
			return id.err("rdma_set_option", unix.EINVAL, "reuse can be turned off only before the identifier is bound")
		}
		id.reuseAddr = v != 0
	case OptionACKTimeout:
		if id.qpType != verbsio.QPTypeRC {
			return id.err("rdma_set_option", unix.EINVAL, "the ACK timeout is an RC option; this identifier is %s", id.qpType)
		}
		if v < 0 || v > 31 {
			return id.err("rdma_set_option", unix.EINVAL, "ACK timeout %d: the timeout is 4.096 us * 2^t with t in 0..31 (0 infinite)", v)
		}
		id.ackTimeout, id.ackSet = uint8(v), true
	default:
		return id.err("rdma_set_option", unix.ENOPROTOOPT, "option %d is not supported (TOS 0, REUSEADDR 1, ACK_TIMEOUT 3)", o)
	}
	if id.kh != nil {
		return id.kh.setOption(o, v)
	}
	return nil
}

// LimitPathMTU caps the path MTU of the route ResolveRoute builds (call it
// before): the REQ carries the route's MTU, so both sides' QPs of an RC
// or UC connection get it. It is rperf's, not librdmacm's, which has no
// such call: the engine's CM builds its routes itself and takes the
// smaller MTU; on a kernel device a limit below the port's active MTU
// makes ResolveRoute give the kernel a path record of its own
// (rdma_set_option with RDMA_OPTION_IB_PATH, as an SA would answer: the
// addresses' GIDs, this MTU, and the hop limit, traffic class, flow label
// and packet life time the kernel's RoCE route would have) instead of
// calling rdma_resolve_route. Route().PathMTU says what the route got.
func (id *ID) LimitPathMTU(m verbsio.MTU) error {
	if !m.Valid() {
		return id.err("rdma_set_option", unix.EINVAL, "path MTU %d is not an MTU (1: 256 ... 5: 4096)", m)
	}
	mu.Lock()
	defer mu.Unlock()
	switch id.state {
	case stateIdle, stateAddrQuery, stateAddrResolved, stateAddrBound:
	default:
		return id.wrongState("limit the path MTU (before rdma_resolve_route)")
	}
	id.mtuLimit = m
	return nil
}

// ports holds the bound identifiers per port space and port.
var ports = map[PortSpace]map[uint16][]*ID{}

func (id *ID) bindPort(a netip.AddrPort) (netip.AddrPort, error) {
	tab := ports[id.ps]
	if tab == nil {
		tab = map[uint16][]*ID{}
		ports[id.ps] = tab
	}
	if a.Port() == 0 {
		// An ephemeral port, from Linux's default range.
		var b [2]byte
		_, _ = rand.Read(b[:])
		first := 32768 + int(binary.LittleEndian.Uint16(b[:]))%28232
		for i := 0; i < 28232; i++ {
			p := uint16(32768 + (first-32768+i)%28232)
			if len(tab[p]) == 0 {
				a = netip.AddrPortFrom(a.Addr(), p)
				tab[p] = append(tab[p], id)
				return a, nil
			}
		}
		return a, id.err("rdma_bind_addr", unix.EADDRNOTAVAIL, "no free %s port", id.ps)
	}
	for _, o := range tab[a.Port()] {
		overlap := !o.src.Addr().IsValid() || o.src.Addr().IsUnspecified() || a.Addr().IsUnspecified() || o.src.Addr() == a.Addr()
		if overlap && !(id.reuseAddr && o.reuseAddr && o.state != stateListen) {
			return a, id.err("rdma_bind_addr", unix.EADDRINUSE, "%s port %d is in use on %v", id.ps, a.Port(), o.src.Addr())
		}
	}
	tab[a.Port()] = append(tab[a.Port()], id)
	return a, nil
}

func (id *ID) releasePort() {
	if !id.bound {
		return
	}
	tab := ports[id.ps]
	p := id.src.Port()
	for i, o := range tab[p] {
		if o == id {
			tab[p] = append(tab[p][:i], tab[p][i+1:]...)
			break
		}
	}
	if len(tab[p]) == 0 {
		delete(tab, p)
	}
	id.bound = false
}

// BindAddr binds the identifier to a local address and port
// (rdma_bind_addr). An unspecified address binds every device (for a
// listener); port 0 takes a free one.
func (id *ID) BindAddr(a netip.AddrPort) error {
	mu.Lock()
	defer mu.Unlock()
	if id.state != stateIdle {
		return id.wrongState("rdma_bind_addr")
	}
	if !a.Addr().IsUnspecified() {
		d := deviceWith(a.Addr())
		if d == nil {
			return id.err("rdma_bind_addr", unix.EADDRNOTAVAIL, "no open CM device has address %v (cm.Open the device first)", a.Addr())
		}
		if d.k != nil {
			id.attach(d)
			if err := id.kernelID(d); err != nil {
				return err
			}
			if err := id.kh.bind(a); err != nil {
				return err
			}
			id.src, id.state = a, stateAddrBound
			id.kernelRefresh()
			return nil
		}
		id.attach(d)
	}
	b, err := id.bindPort(a)
	if err != nil {
		return err
	}
	id.src, id.bound, id.state = b, true, stateAddrBound
	return nil
}

func (id *ID) attach(d *Device) {
	id.dev = d
	d.ids[id] = struct{}{}
}

func deviceWith(a netip.Addr) *Device {
	a = a.Unmap()
	for _, d := range devices {
		if d.hasAddr(a) {
			return d
		}
	}
	return nil
}

// sourceFor asks the kernel's routing table which local address reaches
// dst (a UDP socket that is connected sends nothing).
func sourceFor(dst netip.Addr) (netip.Addr, bool) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
	if err != nil {
		return netip.Addr{}, false
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), true
}

// ResolveAddr finds the local device and address that reach dst
// (rdma_resolve_addr): src if given (it must be a device's address),
// otherwise dst itself when it is local, otherwise the address the kernel
// routes dst from. ADDR_RESOLVED or ADDR_ERROR follows on the channel.
func (id *ID) ResolveAddr(src netip.Addr, dst netip.AddrPort, timeout time.Duration) error {
	mu.Lock()
	if id.state != stateIdle && id.state != stateAddrBound {
		defer mu.Unlock()
		return id.wrongState("rdma_resolve_addr")
	}
	if !dst.Addr().IsValid() || dst.Addr().IsUnspecified() {
		defer mu.Unlock()
		return id.err("rdma_resolve_addr", unix.EINVAL, "destination %v is not an address", dst)
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	if id.state == stateAddrBound && id.src.Addr().IsValid() && !id.src.Addr().IsUnspecified() {
		src = id.src.Addr()
	}
	var d *Device
	switch {
	case src.IsValid() && !src.IsUnspecified():
		src = src.Unmap()
		d = deviceWith(src)
	case deviceWith(dst.Addr()) != nil:
		src, d = dst.Addr(), deviceWith(dst.Addr())
	default:
		if s, ok := sourceFor(dst.Addr()); ok {
			src, d = s, deviceWith(s)
		}
	}
	if d != nil && d.k != nil && src.Is4() == dst.Addr().Is4() {
		// The kernel resolves; ADDR_RESOLVED comes from its channel.
		defer mu.Unlock()
		if id.dev != nil && id.dev != d {
			delete(id.dev.ids, id)
		}
		id.attach(d)
		if err := id.kernelID(d); err != nil {
			return err
		}
		if err := id.kh.resolveAddr(src, dst, timeout); err != nil {
			return err
		}
		id.dst, id.state = dst, stateAddrQuery
		return nil
	}
	ev := &Event{ID: id, Type: EventAddrResolved}
	if d == nil {
		ev.Type, ev.Status = EventAddrError, -int(unix.EADDRNOTAVAIL)
	} else if src.Is4() != dst.Addr().Is4() {
		ev.Type, ev.Status = EventAddrError, -int(unix.EAFNOSUPPORT)
	} else {
		if !id.bound {
			b, err := id.bindPort(netip.AddrPortFrom(src, 0))
			if err != nil {
				mu.Unlock()
				return err
			}
			id.src, id.bound = b, true
		} else {
			id.src = netip.AddrPortFrom(src, id.src.Port())
		}
		if id.dev != nil && id.dev != d {
			delete(id.dev.ids, id)
		}
		id.attach(d)
		id.dst = dst
		id.state = stateAddrResolved
	}
	ch := id.ch
	mu.Unlock()
	ch.post(ev)
	return nil
}

// ResolveRoute builds the route to the resolved destination
// (rdma_resolve_route); ROUTE_RESOLVED follows.
func (id *ID) ResolveRoute(timeout time.Duration) error {
	mu.Lock()
	if id.state != stateAddrResolved {
		defer mu.Unlock()
		return id.wrongState("rdma_resolve_route")
	}
	if id.kh != nil {
		defer mu.Unlock()
		if err := id.kernelResolveRoute(timeout); err != nil {
			return err
		}
		id.state = stateRouteQuery
		return nil
	}
	d := id.dev
	sgid, idx := d.sgid(id.src.Addr())
	id.route = Route{
		SGID: sgid, DGID: verbsio.GIDFromAddr(id.dst.Addr()), SGIDIndex: idx,
		PathMTU: d.pattr.ActiveMTU, HopLimit: 64, TrafficClass: id.tos,
		FlowLabel:      (uint32(id.src.Port())*31 + uint32(id.dst.Port())) & 0xfffff,
		PacketLifeTime: d.opts.PacketLifeTime, MADPort: d.peerPort(id.dst.Addr()),
	}
	if id.route.PathMTU == 0 {
		id.route.PathMTU = verbsio.MTU1024
	}
	if id.mtuLimit.Valid() && id.mtuLimit < id.route.PathMTU {
		id.route.PathMTU = id.mtuLimit
	}
	id.state = stateRouteResolved
	ch := id.ch
	mu.Unlock()
	ch.post(&Event{ID: id, Type: EventRouteResolved})
	return nil
}

// ah is the address vector towards the peer. mu is held.
func (id *ID) ah() verbsio.AHAttr {
	ah := verbsio.AHAttr{PortNum: id.dev.opts.Port, IsGlobal: true, DGID: id.route.DGID, SGIDIndex: id.route.SGIDIndex,
		HopLimit: id.route.HopLimit, TrafficClass: id.route.TrafficClass, FlowLabel: id.route.FlowLabel}
	if id.route.MADPort != 0 && id.route.MADPort != verbsio.RoCEv2Port {
		ah.DLID = id.route.MADPort
	}
	return ah
}

func (id *ID) peer() verbsio.MADAddr {
	return verbsio.MADAddr{GID: id.route.DGID, Port: id.route.MADPort}
}

// cmaHeader is rdma_cm's private-data header for this identifier's
// requests.
func (id *ID) cmaHeader() []byte {
	h := mad.CMAHeader{IPVersion: 4, Port: id.src.Port(), Src: id.src.Addr(), Dst: id.dst.Addr()}
	if id.src.Addr().Is6() {
		h.IPVersion = 6
	}
	b := make([]byte, mad.CMAHeaderLen)
	_ = h.Marshal(b)
	return b
}

// Connect starts the connection (rdma_connect): a REQ for RC and UC, a
// SIDR_REQ for UD. With a QP attached (CreateQP) the CM moves it through
// RTR and RTS when the REP comes and reports ESTABLISHED; without one,
// p.QPNum names the QP, CONNECT_RESPONSE reports the REP, and the caller
// moves its QP (InitQPAttr) and calls Establish.
func (id *ID) Connect(p *ConnParam) error {
	mu.Lock()
	if id.state != stateRouteResolved {
		defer mu.Unlock()
		return id.wrongState("rdma_connect")
	}
	if p == nil {
		p = &ConnParam{}
	}
	d := id.dev
	now := time.Now()
	hdr := id.cmaHeader()
	qpn := p.QPNum
	if id.qp != nil {
		qpn = id.qp.QPN()
	}
	id.srq = p.SRQ
	if id.kh != nil {
		defer mu.Unlock()
		return id.kernelConnect(p, qpn)
	}
	id.cmID = d.cm.CreateID(id)
	var err error
	if id.qpType == verbsio.QPTypeUD {
		if len(p.PrivateData) > mad.SIDRREQPrivateDataSize-mad.CMAHeaderLen {
			err = id.err("rdma_connect", unix.EINVAL, "%d bytes of private data; a UD request carries at most %d", len(p.PrivateData), mad.SIDRREQPrivateDataSize-mad.CMAHeaderLen)
		} else {
			err = d.cm.SendSIDRREQ(now, id.cmID, ibcm.SIDRREQParam{Local: id.route.SGID, Peer: id.peer(), AH: id.ah(),
				ServiceID: mad.ServiceID(id.ps, id.dst.Port()), PKey: 0xffff,
				Timeout:      mad.LinuxTimeout(d.opts.CMResponseTimeout),
				MaxCMRetries: d.opts.MaxCMRetries, PrivateData: append(hdr, p.PrivateData...)})
		}
	} else {
		if len(p.PrivateData) > mad.REQPrivateDataSize-mad.CMAHeaderLen {
			err = id.err("rdma_connect", unix.EINVAL, "%d bytes of private data; a connection request carries at most %d", len(p.PrivateData), mad.REQPrivateDataSize-mad.CMAHeaderLen)
		} else {
			id.respRes = d.maxResources(p.ResponderResources, d.attr.MaxQPRdAtom)
			id.initDepth = d.maxResources(p.InitiatorDepth, d.attr.MaxQPInitRdAtom)
			err = d.cm.SendREQ(now, id.cmID, ibcm.REQParam{
				Local: id.route.SGID, Peer: id.peer(), AH: id.ah(), PacketLifeTime: id.route.PacketLifeTime,
				ServiceID: mad.ServiceID(id.ps, id.dst.Port()), QPN: qpn, QPType: id.qpType, StartingPSN: id.seqNum,
				ResponderResources: id.respRes, InitiatorDepth: id.initDepth,
				RemoteCMResponseTimeout: d.opts.CMResponseTimeout, LocalCMResponseTimeout: d.opts.CMResponseTimeout,
				RetryCount: min(p.RetryCount, 7), RNRRetryCount: min(p.RNRRetryCount, 7), MaxCMRetries: d.opts.MaxCMRetries,
				PathMTU: id.route.PathMTU, PKey: 0xffff, SRQ: p.SRQ, FlowControl: p.FlowControl,
				PrivateData: append(hdr, p.PrivateData...)})
		}
	}
	if err != nil {
		d.cm.Destroy(now, id.cmID)
		id.cmID = nil
		mu.Unlock()
		return err
	}
	id.qpNum = qpn
	id.state = stateConnect
	out := d.collect(now)
	mu.Unlock()
	d.after(out)
	return nil
}

// Listen makes a bound identifier listen for connection requests
// (rdma_listen). An identifier bound to the unspecified address listens
// on every open device.
func (id *ID) Listen(backlog int) error {
	mu.Lock()
	defer mu.Unlock()
	if id.state != stateAddrBound {
		return id.wrongState("rdma_listen")
	}
	for _, o := range ports[id.ps][id.src.Port()] {
		if o != id && o.state == stateListen {
			return id.err("rdma_listen", unix.EADDRINUSE, "%s port %d already has a listener", id.ps, id.src.Port())
		}
	}
	if id.dev != nil && id.dev.k != nil {
		if err := id.kernelListen(id.dev, backlog); err != nil {
			return err
		}
		id.state = stateListen
		return nil
	}
	sid := mad.ServiceID(id.ps, id.src.Port())
	var devs []*Device
	for _, d := range devices {
		if d.k == nil && (id.dev == nil || d == id.dev) {
			devs = append(devs, d)
		}
	}
	if id.dev == nil {
		if err := id.kernelListen(nil, backlog); err != nil {
			return err
		}
	}
	for i, d := range devs {
		if err := d.listenOn(sid); err != nil {
			for _, u := range devs[:i] {
				u.unlisten(sid)
			}
			if h := id.kernelDrop(); h != nil {
				_ = h.destroy()
			}
			return err
		}
	}
	id.state = stateListen
	return nil
}

// listenerFor finds the listener of a request that came to d on service
// sid for address dst (cma_id_from_event). mu is held.
func listenerFor(d *Device, ps PortSpace, port uint16, dst netip.Addr) *ID {
	var any *ID
	for _, o := range ports[ps][port] {
		if o.state != stateListen || o.destroyed {
			continue
		}
		if o.src.Addr().IsUnspecified() {
			if any == nil {
				any = o
			}
			continue
		}
		if o.dev == d && o.src.Addr() == dst {
			return o
		}
	}
	return any
}

// onREQ is cma_ib_req_handler: find the rdma_cm listener, make the new
// identifier, report CONNECT_REQUEST and arm the delayed MRA.
func (d *Device) onREQ(now time.Time, e ibcm.Event) {
	req := e.Msg.(*mad.REQ)
	var h mad.CMAHeader
	reject := func() {
		_ = d.cm.SendREJ(now, e.ID, mad.RejConsumerDefined, nil, nil)
		d.cm.Destroy(now, e.ID)
	}
	ps, port, ok := mad.ServicePort(req.ServiceID)
	if !ok || h.Unmarshal(req.PrivateData[:]) != nil {
		reject()
		return
	}
	l := listenerFor(d, ps, port, h.Dst)
	qpType := verbsio.QPTypeRC
	if req.TransportServiceType == mad.TransportUC {
		qpType = verbsio.QPTypeUC
	} else if req.TransportServiceType != mad.TransportRC {
		qpType = 0
	}
	if l == nil || l.qpType != qpType {
		reject()
		return
	}
	local, peer := e.ID.Peer()
	id := &ID{ch: l.ch, ps: ps, qpType: qpType, state: stateConnect, seqNum: randPSN(), listen: l, cmID: e.ID,
		src: netip.AddrPortFrom(h.Dst, port), dst: netip.AddrPortFrom(h.Src, h.Port)}
	idx, _ := d.gidIndex(local)
	id.route = Route{SGID: local, DGID: req.Primary.LocalGID, SGIDIndex: idx, PathMTU: verbsio.MTU(req.PathMTU),
		HopLimit: req.Primary.HopLimit, TrafficClass: req.Primary.TrafficClass, FlowLabel: req.Primary.FlowLabel,
		PacketLifeTime: max(req.Primary.LocalACKTimeout, 1) - 1, MADPort: peer.Port}
	id.attach(d)
	e.ID.Context = id
	l.ch.post(&Event{Type: EventConnectRequest, ID: id, ListenID: l, Conn: ConnParam{
		PrivateData:        append([]byte(nil), req.PrivateData[mad.CMAHeaderLen:]...),
		ResponderResources: req.InitiatorDepth, InitiatorDepth: req.ResponderResources,
		FlowControl: req.EndToEndFlowControl, RetryCount: req.RetryCount, RNRRetryCount: req.RNRRetryCount,
		SRQ: req.SRQ, QPNum: req.LocalQPN}})
	_ = d.cm.SendMRA(now, e.ID, mraServiceTimeout, true, nil)
}

// onSIDRREQ: a UD request (cma_ib_req_handler for SIDR).
func (d *Device) onSIDRREQ(now time.Time, e ibcm.Event) {
	req := e.Msg.(*mad.SIDRREQ)
	var h mad.CMAHeader
	ps, port, ok := mad.ServicePort(req.ServiceID)
	var l *ID
	if ok && h.Unmarshal(req.PrivateData[:]) == nil {
		l = listenerFor(d, ps, port, h.Dst)
	}
	if l == nil || l.qpType != verbsio.QPTypeUD {
		_ = d.cm.SendSIDRREP(now, e.ID, ibcm.SIDRREPParam{Status: mad.SIDRReject})
		d.cm.Destroy(now, e.ID)
		return
	}
	local, peer := e.ID.Peer()
	id := &ID{ch: l.ch, ps: ps, qpType: verbsio.QPTypeUD, state: stateConnect, listen: l, cmID: e.ID,
		src: netip.AddrPortFrom(h.Dst, port), dst: netip.AddrPortFrom(h.Src, h.Port)}
	idx, _ := d.gidIndex(local)
	id.route = Route{SGID: local, DGID: peer.GID, SGIDIndex: idx, PathMTU: d.pattr.ActiveMTU, HopLimit: 64,
		PacketLifeTime: d.opts.PacketLifeTime, MADPort: peer.Port}
	id.attach(d)
	e.ID.Context = id
	l.ch.post(&Event{Type: EventConnectRequest, ID: id, ListenID: l, UD: UDParam{
		PrivateData: append([]byte(nil), req.PrivateData[mad.CMAHeaderLen:]...)}})
}

// Accept accepts a connection request (rdma_accept). RC and UC: with a QP
// attached it is moved to RTR and RTS first; the REP follows, then
// ESTABLISHED when the RTU comes. UD: the SIDR_REP names p.QPNum (or the
// attached QP) and p.QKey.
func (id *ID) Accept(p *ConnParam) error {
	mu.Lock()
	if id.state != stateConnect || id.listen == nil || (id.cmID == nil && id.kh == nil) {
		defer mu.Unlock()
		return id.wrongState("rdma_accept")
	}
	if p == nil {
		p = &ConnParam{}
	}
	if id.kh != nil {
		defer mu.Unlock()
		return id.kernelAccept(p)
	}
	d := id.dev
	now := time.Now()
	qpn := p.QPNum
	if id.qp != nil {
		qpn = id.qp.QPN()
	}
	var err error
	if id.qpType == verbsio.QPTypeUD {
		qkey := p.QKey
		if qkey == 0 {
			qkey = UDPQKey
		}
		id.qkey = qkey
		err = d.cm.SendSIDRREP(now, id.cmID, ibcm.SIDRREPParam{QPN: qpn, QKey: qkey, PrivateData: p.PrivateData})
	} else {
		id.respRes = d.maxResources(p.ResponderResources, d.attr.MaxQPRdAtom)
		id.initDepth = d.maxResources(p.InitiatorDepth, d.attr.MaxQPInitRdAtom)
		if id.qp != nil {
			err = id.modifyQPConnected()
		}
		if err == nil {
			err = d.cm.SendREP(now, id.cmID, ibcm.REPParam{QPN: qpn, StartingPSN: id.seqNum,
				ResponderResources: id.respRes, InitiatorDepth: id.initDepth, FlowControl: p.FlowControl,
				RNRRetryCount: min(p.RNRRetryCount, 7), SRQ: p.SRQ || id.srq, PrivateData: p.PrivateData})
		}
		if err != nil {
			id.modifyQPErr()
			_ = d.cm.SendREJ(now, id.cmID, mad.RejConsumerDefined, nil, nil)
		}
	}
	id.qpNum = qpn
	out := d.collect(now)
	mu.Unlock()
	d.after(out)
	return err
}

// Reject refuses a connection request (rdma_reject): REJ reason 28
// (consumer defined) with pd, or for UD a SIDR_REP "rejected".
func (id *ID) Reject(pd []byte) error {
	mu.Lock()
	if id.state != stateConnect || id.listen == nil || (id.cmID == nil && id.kh == nil) {
		defer mu.Unlock()
		return id.wrongState("rdma_reject")
	}
	if id.kh != nil {
		defer mu.Unlock()
		return id.kh.reject(pd)
	}
	d := id.dev
	now := time.Now()
	var err error
	if id.qpType == verbsio.QPTypeUD {
		err = d.cm.SendSIDRREP(now, id.cmID, ibcm.SIDRREPParam{Status: mad.SIDRReject, PrivateData: pd})
	} else {
		err = d.cm.SendREJ(now, id.cmID, mad.RejConsumerDefined, nil, pd)
	}
	out := d.collect(now)
	mu.Unlock()
	d.after(out)
	return err
}

// Establish completes an active connection whose CONNECT_RESPONSE the
// caller handled itself (rdma_establish): its QP is in RTS (moved with
// InitQPAttr); the RTU goes to the passive side, which then reports
// ESTABLISHED. Identifiers with a QP attached are completed by the CM.
func (id *ID) Establish() error {
	mu.Lock()
	if id.qp != nil {
		defer mu.Unlock()
		return id.err("rdma_establish", unix.EINVAL, "the identifier has a QP attached; the CM completes its connections itself")
	}
	if id.state != stateConnect || (id.cmID == nil && id.kh == nil) || id.listen != nil {
		defer mu.Unlock()
		return id.wrongState("rdma_establish")
	}
	if id.kh != nil {
		defer mu.Unlock()
		return id.kh.establish()
	}
	d := id.dev
	now := time.Now()
	err := d.cm.SendRTU(now, id.cmID, nil)
	out := d.collect(now)
	mu.Unlock()
	d.after(out)
	return err
}

// NotifyEstablished tells the CM that the passive side's QP received the
// peer's first packet before the RTU (rdma_notify with
// IB_EVENT_COMM_EST): the connection is established, ESTABLISHED follows.
func (id *ID) NotifyEstablished() error {
	mu.Lock()
	if id.kh != nil && id.state == stateConnect {
		defer mu.Unlock()
		return id.kh.notify()
	}
	if id.cmID == nil {
		defer mu.Unlock()
		return id.wrongState("rdma_notify")
	}
	d := id.dev
	now := time.Now()
	err := d.cm.Establish(now, id.cmID)
	out := d.collect(now)
	mu.Unlock()
	d.after(out)
	return err
}

// repRecv completes the active side with its attached QP (cma_rep_recv).
// mu is held.
func (id *ID) repRecv(now time.Time) error {
	err := id.modifyQPConnected()
	if err == nil {
		err = id.dev.cm.SendRTU(now, id.cmID, nil)
	}
	if err != nil {
		id.modifyQPErr()
		_ = id.dev.cm.SendREJ(now, id.cmID, mad.RejConsumerDefined, nil, nil)
	}
	return err
}

// Disconnect ends the connection (rdma_disconnect): the QP goes to ERR, a
// DREQ goes to the peer, or the DREP if the peer disconnected first.
// DISCONNECTED follows, then TIMEWAIT_EXIT.
func (id *ID) Disconnect() error {
	mu.Lock()
	if id.kh != nil && id.qpType != verbsio.QPTypeUD && (id.state == stateConnect || id.state == stateDisconnect) {
		defer mu.Unlock()
		id.modifyQPErr()
		return id.kh.disconnect()
	}
	if id.cmID == nil || id.qpType == verbsio.QPTypeUD {
		defer mu.Unlock()
		return id.wrongState("rdma_disconnect")
	}
	d := id.dev
	now := time.Now()
	id.modifyQPErr()
	if d.cm.SendDREQ(now, id.cmID, nil) != nil {
		_ = d.cm.SendDREP(now, id.cmID, nil)
	}
	out := d.collect(now)
	mu.Unlock()
	d.after(out)
	return nil
}

// Destroy releases the identifier (rdma_destroy_id): a connection in its
// handshake is rejected, an established one disconnected, a listener's
// pending requests rejected; the port is freed. Its QP is not destroyed
// (DestroyQP does that).
func (id *ID) Destroy() error {
	mu.Lock()
	if id.destroyed {
		mu.Unlock()
		return nil
	}
	now := time.Now()
	d := id.dev
	id.destroyLocked(now)
	var out []ibcm.Packet
	if d != nil {
		out = d.collect(now)
	}
	mu.Unlock()
	if d != nil {
		d.after(out)
	}
	return nil
}

func (id *ID) destroyLocked(now time.Time) {
	if id.destroyed {
		return
	}
	id.destroyed = true
	if h := id.kernelDrop(); h != nil {
		_ = h.destroy()
	}
	if id.state == stateListen {
		sid := mad.ServiceID(id.ps, id.src.Port())
		if id.dev != nil && id.dev.k == nil {
			id.dev.unlisten(sid)
		} else if id.dev == nil {
			for _, d := range devices {
				if d.k == nil {
					d.unlisten(sid)
				}
			}
		}
	}
	if id.cmID != nil && id.dev != nil {
		id.dev.cm.Destroy(now, id.cmID)
	}
	id.releasePort()
	if id.dev != nil {
		delete(id.dev.ids, id)
	}
	id.state = stateDestroying
}

// CreateQP creates the identifier's QP on pd and moves it to INIT (RC,
// UC) or through INIT, RTR and RTS (UD) with the CM's attributes
// (rdma_create_qp). The CM then moves a connected QP on by itself.
func (id *ID) CreateQP(pd *verbsio.PD, attr verbsio.QPInitAttr) (*verbsio.QP, error) {
	mu.Lock()
	defer mu.Unlock()
	if id.dev == nil {
		return nil, id.err("rdma_create_qp", unix.EINVAL, "the identifier has no device yet (resolve or bind an address first)")
	}
	if pd.Context() != id.dev.ctx {
		return nil, id.err("rdma_create_qp", unix.EINVAL, "the PD belongs to another device than the identifier's")
	}
	if id.qp != nil {
		return nil, id.err("rdma_create_qp", unix.EEXIST, "the identifier already has QP %#x", id.qp.QPN())
	}
	if attr.Type == 0 {
		attr.Type = id.qpType
	}
	if attr.Type != id.qpType {
		return nil, id.err("rdma_create_qp", unix.EINVAL, "a %s QP for a %s identifier", attr.Type, id.qpType)
	}
	qp, err := pd.CreateQP(attr)
	if err != nil {
		return nil, err
	}
	id.qp = qp
	states := []verbsio.QPState{verbsio.QPStateInit}
	if id.qpType == verbsio.QPTypeUD {
		states = append(states, verbsio.QPStateRTR, verbsio.QPStateRTS)
	}
	for _, s := range states {
		if err := id.modifyQP(s); err != nil {
			id.qp = nil
			_ = qp.Destroy()
			return nil, err
		}
	}
	id.qpNum = qp.QPN()
	id.srq = attr.SRQ != nil
	return qp, nil
}

// DestroyQP destroys the QP CreateQP attached (rdma_destroy_qp).
func (id *ID) DestroyQP() error {
	mu.Lock()
	qp := id.qp
	id.qp = nil
	mu.Unlock()
	if qp == nil {
		return nil
	}
	return qp.Destroy()
}

// modifyQPConnected moves the attached QP from INIT to RTS with what the
// handshake negotiated (cma_modify_qp_rtr, cma_modify_qp_rts): INIT again
// first, for the access flags the responder resources allow.
func (id *ID) modifyQPConnected() error {
	for _, s := range []verbsio.QPState{verbsio.QPStateInit, verbsio.QPStateRTR, verbsio.QPStateRTS} {
		if err := id.modifyQP(s); err != nil {
			return err
		}
	}
	return nil
}

func (id *ID) modifyQP(s verbsio.QPState) error {
	a, m, err := id.initQPAttr(s)
	if err != nil {
		return err
	}
	return id.qp.Modify(&a, m)
}

func (id *ID) modifyQPErr() {
	if id.qp != nil {
		_ = id.qp.Modify(&verbsio.QPAttr{State: verbsio.QPStateErr}, verbsio.QPAttrState)
	}
}

// InitQPAttr returns the attributes that move the identifier's QP to
// state, from what the CM negotiated (rdma_init_qp_attr): for RC and UC,
// INIT once connecting, RTR and RTS once the peer's REQ or REP is known;
// for UD, INIT (with the Q_Key), RTR and RTS at any time. RTR's receive
// PSN is the identifier's own starting PSN; RTS's timeout is the
// OptionACKTimeout value when it was set.
func (id *ID) InitQPAttr(s verbsio.QPState) (verbsio.QPAttr, verbsio.QPAttrMask, error) {
	mu.Lock()
	defer mu.Unlock()
	return id.initQPAttr(s)
}

func (id *ID) initQPAttr(s verbsio.QPState) (verbsio.QPAttr, verbsio.QPAttrMask, error) {
	if id.dev == nil {
		return verbsio.QPAttr{}, 0, id.err("rdma_init_qp_attr", unix.EINVAL, "the identifier has no device yet")
	}
	if id.kh != nil {
		a, m, err := id.kernelQPAttr(s)
		if err == nil && s == verbsio.QPStateRTS && m&verbsio.QPAttrTimeout != 0 && id.ackSet {
			a.Timeout = id.ackTimeout
		}
		return a, m, err
	}
	if id.cmID == nil || id.qpType == verbsio.QPTypeUD {
		// cma_ib_init_qp_attr
		a := verbsio.QPAttr{State: s}
		switch s {
		case verbsio.QPStateInit:
			a.PortNum = id.dev.opts.Port
			m := verbsio.QPAttrState | verbsio.QPAttrPkeyIndex | verbsio.QPAttrPort
			if id.qpType == verbsio.QPTypeUD {
				if id.qkey == 0 {
					id.qkey = UDPQKey
				}
				a.QKey = id.qkey
				return a, m | verbsio.QPAttrQKey, nil
			}
			return a, m | verbsio.QPAttrAccessFlags, nil
		case verbsio.QPStateRTR:
			if id.qpType == verbsio.QPTypeUD {
				return a, verbsio.QPAttrState, nil
			}
		case verbsio.QPStateRTS:
			if id.qpType == verbsio.QPTypeUD {
				return a, verbsio.QPAttrState | verbsio.QPAttrSQPSN, nil
			}
		}
		return verbsio.QPAttr{}, 0, id.err("rdma_init_qp_attr", unix.EINVAL, "%s attributes are known once the connection is being made", s)
	}
	a, m, err := id.dev.cm.InitQPAttr(id.cmID, s)
	if err != nil {
		return a, m, verbsio.Errorf("rdma_init_qp_attr", unix.EINVAL, "%v", err)
	}
	switch s {
	case verbsio.QPStateRTR:
		a.RQPSN = id.seqNum
		if m&verbsio.QPAttrMaxDestRdAtomic != 0 && id.listen != nil {
			a.MaxDestRdAtomic = id.respRes
		}
	case verbsio.QPStateRTS:
		if m&verbsio.QPAttrTimeout != 0 && id.ackSet {
			a.Timeout = id.ackTimeout
		}
		if m&verbsio.QPAttrMaxQPRdAtomic != 0 && id.listen != nil {
			a.MaxRdAtomic = id.initDepth
		}
	}
	return a, m, nil
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EINVAL
}

// String describes the identifier for logs.
func (id *ID) String() string {
	mu.Lock()
	defer mu.Unlock()
	return fmt.Sprintf("cm id %s %v->%v %s", id.ps, id.src, id.dst, id.state)
}
