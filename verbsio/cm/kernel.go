package cm

import (
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// The kernel's connection manager. A device the kernel drives (the
// ibverbs provider's, such as rxe0 or mlx5_0) already has a CM: the
// kernel's, which owns the port's QP1. cm.Open on such a device uses it
// through librdmacm (kernel_cgo.go, in the ibverbs build) instead of the
// built-in CM, behind the same API: its identifiers are librdmacm's, its
// events are translated into this package's on the identifier's channel.
// The QPs stay verbsio's: CreateQP makes them on the caller's PD and moves
// them with rdma_init_qp_attr's attributes, as librdmacm does for the QPs
// it creates; librdmacm only learns their numbers.

// kernelProvider names the provider whose devices the kernel's CM manages.
const kernelProvider = "ibverbs"

// openKernelChannel opens a librdmacm event channel; nil in the pure-Go
// build (kernel_cgo.go sets it).
var openKernelChannel func() (kernelChannel, error)

// kernelChannel is an rdma_event_channel.
type kernelChannel interface {
	// createID is rdma_create_id on the channel.
	createID(ps PortSpace) (kernelHandle, error)
	// next waits at most timeout for one event (poll on the channel's
	// fd); ok is false when none came.
	next(timeout time.Duration) (ev kernelEvent, ok bool, err error)
	// close is rdma_destroy_event_channel; its identifiers are destroyed.
	close()
}

// kernelHandle is one librdmacm identifier (struct rdma_cm_id *). The
// channel hands out one value per identifier, so handles compare equal.
type kernelHandle interface {
	bind(a netip.AddrPort) error
	resolveAddr(src netip.Addr, dst netip.AddrPort, timeout time.Duration) error
	resolveRoute(timeout time.Duration) error
	// setPath is rdma_set_option(RDMA_OPTION_IB, RDMA_OPTION_IB_PATH)
	// with one primary, bidirectional path record: ROUTE_RESOLVED
	// follows as after rdma_resolve_route.
	setPath(p pathRecord) error
	listen(backlog int) error
	// connect is rdma_connect (accept: rdma_accept) with qpn as the QP.
	connect(p *ConnParam, qpn uint32, accept bool) error
	reject(pd []byte) error
	establish() error
	notify() error
	disconnect() error
	setOption(o Option, v int) error
	initQPAttr(s verbsio.QPState) (verbsio.QPAttr, verbsio.QPAttrMask, error)
	info() kernelInfo
	destroy() error
}

// kernelInfo is what a librdmacm identifier knows.
type kernelInfo struct {
	src, dst  netip.AddrPort
	device    string
	port      uint8
	qpType    verbsio.QPType
	route     Route
	routeKnow bool // route holds a path record
}

// kernelEvent is a librdmacm event, copied and acknowledged.
type kernelEvent struct {
	typ        EventType
	status     int
	id, listen kernelHandle
	conn       ConnParam
	ud         UDParam
	isUD       bool
}

// kernelDevice is the kernel CM of one Device: its event channel and the
// identifiers on it.
type kernelDevice struct {
	ch   kernelChannel
	ids  map[kernelHandle]*ID
	done chan struct{}
}

// isKernel reports whether ctx is a device the kernel's CM manages in this
// build.
func isKernel(ctx *verbsio.Context) bool {
	return ctx.Device.Provider == kernelProvider && openKernelChannel != nil
}

// openKernel starts d on the kernel's CM: an event channel and the
// goroutine that translates its events.
func (d *Device) openKernel() error {
	ch, err := openKernelChannel()
	if err != nil {
		return err
	}
	d.k = &kernelDevice{ch: ch, ids: map[kernelHandle]*ID{}, done: make(chan struct{})}
	go d.kernelLoop()
	return nil
}

// kernelLoop reads the channel until Close.
func (d *Device) kernelLoop() {
	defer close(d.exited)
	for {
		select {
		case <-d.k.done:
			return
		default:
		}
		ev, ok, err := d.k.ch.next(50 * time.Millisecond)
		if err != nil {
			select {
			case <-d.k.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if ok {
			d.kernelEvent(ev)
		}
	}
}

// kernelDevices are the open devices on the kernel's CM. mu is held.
func kernelDevices() []*Device {
	var out []*Device
	for _, d := range devices {
		if d.k != nil {
			out = append(out, d)
		}
	}
	return out
}

// kernelID gives id its librdmacm identifier on d, with the options set
// so far. mu is held.
func (id *ID) kernelID(d *Device) error {
	if id.kh != nil {
		return nil
	}
	if id.qpType == verbsio.QPTypeUC {
		return id.err("rdma_create_id", unix.EOPNOTSUPP, "the kernel's CM (librdmacm) connects RC QPs in the TCP port space, not UC; use rperf's engine for UC over rdma_cm")
	}
	h, err := d.k.ch.createID(id.ps)
	if err != nil {
		return err
	}
	if id.tosSet {
		err = h.setOption(OptionTOS, int(id.tos))
	}
	if err == nil && id.reuseAddr {
		err = h.setOption(OptionReuseAddr, 1)
	}
	if err == nil && id.ackSet {
		err = h.setOption(OptionACKTimeout, int(id.ackTimeout))
	}
	if err != nil {
		_ = h.destroy()
		return err
	}
	id.kh = h
	d.k.ids[h] = id
	return nil
}

// kernelDrop forgets id's handle on its device. mu is held.
func (id *ID) kernelDrop() kernelHandle {
	h := id.kh
	if h == nil {
		return nil
	}
	for _, d := range devices {
		if d.k != nil {
			delete(d.k.ids, h)
		}
	}
	id.kh = nil
	return h
}

// pathRecord is a path as an SA answers it (struct ibv_path_record),
// host order.
type pathRecord struct {
	serviceID      uint64
	dgid, sgid     verbsio.GID
	flowLabel      uint32
	hopLimit       uint8
	trafficClass   uint8
	pkey           uint16
	mtu            verbsio.MTU
	packetLifeTime uint8
}

// kernelResolveRoute is ResolveRoute on the kernel's CM: rdma_resolve_route,
// or with a path MTU limit below the port's active MTU a path record of
// rperf's own with that MTU (LimitPathMTU). mu is held.
func (id *ID) kernelResolveRoute(timeout time.Duration) error {
	d := id.dev
	if !id.mtuLimit.Valid() || d == nil || id.mtuLimit >= d.pattr.ActiveMTU {
		return id.kh.resolveRoute(timeout)
	}
	id.kernelRefresh()
	if !id.src.IsValid() || !id.dst.IsValid() {
		return id.err("rdma_set_option", unix.EINVAL, "the addresses are not resolved (ResolveAddr first)")
	}
	// What the kernel's RoCE route holds (cma_resolve_iboe_route): the
	// addresses' GIDs, hop limit 64 (the IP route's default), the ToS,
	// the flow label of the ports, rdma_cm's RoCE packet life time.
	return id.kh.setPath(pathRecord{
		serviceID: mad.ServiceID(id.ps, id.dst.Port()),
		sgid:      verbsio.GIDFromAddr(id.src.Addr()), dgid: verbsio.GIDFromAddr(id.dst.Addr()),
		flowLabel: (uint32(id.src.Port())*31 + uint32(id.dst.Port())) & 0xfffff,
		hopLimit:  64, trafficClass: id.tos, pkey: 0xffff, mtu: id.mtuLimit,
		packetLifeTime: d.opts.PacketLifeTime,
	})
}

// kernelRefresh copies the handle's addresses and route into id. mu is
// held.
func (id *ID) kernelRefresh() {
	if id.kh == nil {
		return
	}
	in := id.kh.info()
	if in.src.IsValid() {
		id.src = in.src
	}
	if in.dst.IsValid() {
		id.dst = in.dst
	}
	if in.routeKnow {
		r := in.route
		if id.dev != nil {
			if i, ok := id.dev.gidIndex(r.SGID); ok {
				r.SGIDIndex = i
			}
		}
		id.route = r
	}
}

// kernelDeviceOf finds the open kernel device librdmacm put a handle on.
// mu is held.
func kernelDeviceOf(in kernelInfo) *Device {
	for _, d := range kernelDevices() {
		if d.ctx.Device.Name == in.device && (in.port == 0 || in.port == d.opts.Port) {
			return d
		}
	}
	return nil
}

// kernelEvent translates one librdmacm event and posts it (ucma's event
// processing, with librdmacm's handling of identifiers that have a QP).
func (d *Device) kernelEvent(ke kernelEvent) {
	mu.Lock()
	if d.closed {
		mu.Unlock()
		return
	}
	var ev *Event
	var ch *EventChannel
	if ke.typ == EventConnectRequest {
		ev, ch = d.kernelRequest(ke)
	} else if id := d.k.ids[ke.id]; id != nil && !id.destroyed {
		ev, ch = d.kernelIDEvent(id, ke), id.ch
	}
	mu.Unlock()
	if ev != nil {
		ch.post(ev)
	}
}

// kernelRequest makes the identifier of a CONNECT_REQUEST. mu is held.
func (d *Device) kernelRequest(ke kernelEvent) (*Event, *EventChannel) {
	var l *ID
	for _, kd := range kernelDevices() {
		if x := kd.k.ids[ke.listen]; x != nil && !x.destroyed {
			l = x
		}
	}
	in := ke.id.info()
	dev := kernelDeviceOf(in)
	if l == nil || dev == nil || l.state != stateListen {
		// Nobody here listens, or the request came to a device not
		// opened: refuse it as the built-in CM does.
		_ = ke.id.reject(nil)
		_ = ke.id.destroy()
		return nil, nil
	}
	id := &ID{ch: l.ch, ps: l.ps, qpType: l.qpType, state: stateConnect, seqNum: randPSN(), listen: l, kh: ke.id}
	id.attach(dev)
	dev.k.ids[ke.id] = id
	d.k.ids[ke.id] = id
	id.kernelRefresh()
	ev := &Event{Type: EventConnectRequest, ID: id, ListenID: l, Status: ke.status}
	if ke.isUD {
		ev.UD = UDParam{PrivateData: ke.ud.PrivateData}
	} else {
		ev.Conn = ke.conn
	}
	return ev, l.ch
}

// kernelIDEvent translates an event of id. mu is held.
func (d *Device) kernelIDEvent(id *ID, ke kernelEvent) *Event {
	ev := &Event{Type: ke.typ, ID: id, Status: ke.status, Conn: ke.conn}
	switch ke.typ {
	case EventAddrResolved:
		in := id.kh.info()
		if dev := kernelDeviceOf(in); dev != d {
			// The kernel routes the destination through another device
			// than the one chosen: say so rather than connect through it.
			ev.Type, ev.Status = EventAddrError, -int(unix.ENODEV)
			break
		}
		id.state = stateAddrResolved
		id.kernelRefresh()
	case EventRouteResolved:
		id.state = stateRouteResolved
		id.kernelRefresh()
	case EventConnectResponse:
		id.route.DGID = id.kh.info().route.DGID
		if id.qp == nil {
			break
		}
		// librdmacm's ucma_process_conn_resp for an identifier with a QP.
		err := id.modifyQPConnected()
		if err == nil {
			err = id.kh.establish()
		}
		if err != nil {
			id.modifyQPErr()
			_ = id.kh.reject(nil)
			ev.Type, ev.Status = EventConnectError, -int(errnoOf(err))
		} else {
			ev.Type = EventEstablished
		}
	case EventEstablished:
		if ke.isUD {
			ev.Conn = ConnParam{}
			ev.UD = ke.ud
			id.qkey = ke.ud.QKey
		}
		id.kernelRefresh()
	case EventRejected, EventUnreachable, EventConnectError:
		id.modifyQPErr()
		if ke.isUD {
			ev.Conn = ConnParam{PrivateData: ke.ud.PrivateData}
		}
	case EventDisconnected:
		id.state = stateDisconnect
		id.modifyQPErr()
	}
	return ev
}

// kernelListen makes id listen on the kernel's CM of d (nil: every
// kernel device, through one wildcard identifier). mu is held.
func (id *ID) kernelListen(d *Device, backlog int) error {
	if d == nil {
		devs := kernelDevices()
		if len(devs) == 0 {
			return nil
		}
		d = devs[0]
	}
	// An identifier BindAddr bound is bound in the kernel already (a
	// second rdma_bind_addr is EINVAL); a wildcard one gets its handle here.
	fresh := id.kh == nil
	if err := id.kernelID(d); err != nil {
		return err
	}
	var err error
	if fresh {
		err = id.kh.bind(id.src)
	}
	if err == nil {
		err = id.kh.listen(backlog)
	}
	if err != nil {
		_ = id.kernelDrop().destroy()
	}
	return err
}

// kernelQPAttr is InitQPAttr on the kernel's CM: rdma_init_qp_attr, but
// for UD's RTR and RTS, which librdmacm sets itself (ucma_init_ud_qp).
// mu is held.
func (id *ID) kernelQPAttr(s verbsio.QPState) (verbsio.QPAttr, verbsio.QPAttrMask, error) {
	if id.qpType == verbsio.QPTypeUD && s != verbsio.QPStateInit {
		a := verbsio.QPAttr{State: s}
		if s == verbsio.QPStateRTS {
			return a, verbsio.QPAttrState | verbsio.QPAttrSQPSN, nil
		}
		return a, verbsio.QPAttrState, nil
	}
	a, m, err := id.kh.initQPAttr(s)
	if err != nil {
		return a, m, err
	}
	// librdmacm's ucma_modify_qp_rtr and _rts: the negotiated READ depths.
	if s == verbsio.QPStateRTR && id.respRes != MaxResources && id.respRes != 0 && m&verbsio.QPAttrMaxDestRdAtomic != 0 {
		a.MaxDestRdAtomic = id.respRes
	}
	if s == verbsio.QPStateRTS && id.initDepth != MaxResources && id.initDepth != 0 && m&verbsio.QPAttrMaxQPRdAtomic != 0 {
		a.MaxRdAtomic = id.initDepth
	}
	if s == verbsio.QPStateInit && id.qpType == verbsio.QPTypeUD && m&verbsio.QPAttrQKey != 0 {
		id.qkey = a.QKey
	}
	return a, m, nil
}

// closeKernel destroys the device's identifiers and its channel. mu is
// not held.
func (d *Device) closeKernel(hs []kernelHandle) {
	for _, h := range hs {
		_ = h.destroy()
	}
	close(d.k.done)
	<-d.exited
	d.k.ch.close()
}

// kernelConnect is Connect on the kernel's CM. mu is held.
func (id *ID) kernelConnect(p *ConnParam, qpn uint32) error {
	d := id.dev
	if id.qpType == verbsio.QPTypeUD {
		if most := mad.SIDRREQPrivateDataSize - mad.CMAHeaderLen; len(p.PrivateData) > most {
			return id.err("rdma_connect", unix.EINVAL, "%d bytes of private data; a UD request carries at most %d", len(p.PrivateData), most)
		}
	} else {
		if most := mad.REQPrivateDataSize - mad.CMAHeaderLen; len(p.PrivateData) > most {
			return id.err("rdma_connect", unix.EINVAL, "%d bytes of private data; a connection request carries at most %d", len(p.PrivateData), most)
		}
		id.respRes = d.maxResources(p.ResponderResources, d.attr.MaxQPRdAtom)
		id.initDepth = d.maxResources(p.InitiatorDepth, d.attr.MaxQPInitRdAtom)
	}
	q := *p
	q.ResponderResources, q.InitiatorDepth = id.respRes, id.initDepth
	q.RetryCount, q.RNRRetryCount = min(p.RetryCount, 7), min(p.RNRRetryCount, 7)
	if err := id.kh.connect(&q, qpn, false); err != nil {
		return err
	}
	id.qpNum = qpn
	id.state = stateConnect
	return nil
}

// kernelAccept is Accept on the kernel's CM (rdma_accept, after moving an
// attached QP to RTS as librdmacm does). mu is held.
func (id *ID) kernelAccept(p *ConnParam) error {
	d := id.dev
	qpn := p.QPNum
	if id.qp != nil {
		qpn = id.qp.QPN()
	}
	q := *p
	if id.qpType == verbsio.QPTypeUD {
		if p.QKey != 0 && p.QKey != UDPQKey {
			return id.err("rdma_accept", unix.EINVAL, "Q_Key %#x: the kernel's CM hands out rdma_cm's %#x for the UDP port space", p.QKey, UDPQKey)
		}
		id.qkey = UDPQKey
	} else {
		id.respRes = d.maxResources(p.ResponderResources, d.attr.MaxQPRdAtom)
		id.initDepth = d.maxResources(p.InitiatorDepth, d.attr.MaxQPInitRdAtom)
		q.ResponderResources, q.InitiatorDepth = id.respRes, id.initDepth
		q.RetryCount, q.RNRRetryCount = min(p.RetryCount, 7), min(p.RNRRetryCount, 7)
		q.SRQ = p.SRQ || id.srq
		if id.qp != nil {
			if err := id.modifyQPConnected(); err != nil {
				id.modifyQPErr()
				_ = id.kh.reject(nil)
				return err
			}
		}
	}
	if err := id.kh.connect(&q, qpn, true); err != nil {
		id.modifyQPErr()
		_ = id.kh.reject(nil)
		return err
	}
	id.qpNum = qpn
	return nil
}
