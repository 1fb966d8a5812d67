package cm

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/internal/ibcm"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// rdma_cm's constants on RoCE (drivers/infiniband/core/cma.c, Linux 6.1).
const (
	// DefaultCMResponseTimeout is CMA_CM_RESPONSE_TIMEOUT: the REQ says the
	// peer answers within 4.096 us * 2^20 (Linux waits 2^12 ms).
	DefaultCMResponseTimeout = 20
	// DefaultMaxCMRetries is CMA_MAX_CM_RETRIES.
	DefaultMaxCMRetries = 15
	// DefaultPacketLifeTime is CMA_IBOE_PACKET_LIFETIME of Linux 6.1
	// (18, seen in the captures; newer kernels use 16).
	DefaultPacketLifeTime = 18
	// mraServiceTimeout is CMA_CM_MRA_SETTING without its delay flag: the
	// MRA rdma_cm answers repeated REQs and REPs with.
	mraServiceTimeout = 24
	// UDPQKey is RDMA_UDP_QKEY, the Q_Key of rdma_cm's UD port space.
	UDPQKey = 0x01234567
)

// mu guards every device, identifier and port binding of the package: the
// CM is control plane, and one lock keeps the cross-device paths (address
// resolution, loopback connections) simple. MADs are sent and events
// posted after it is released.
var mu sync.Mutex

// devices are the open devices, searched by address resolution.
var devices []*Device

// Options configure a Device.
type Options struct {
	// Port is the device port (default 1).
	Port uint8
	// MADPort carries the MADs; default: the context's own QP1
	// (verbsio.Context.OpenMADPort). Tests and the shared-memory fabric
	// pass a Loopback's or a Unix port.
	MADPort verbsio.MADPort
	// CMResponseTimeout and MaxCMRetries are what this side's REQs and
	// SIDR_REQs promise and allow (rdma_set_cm_timeout,
	// rdma_set_cm_retries); 0 takes rdma_cm's 20 and 15.
	CMResponseTimeout uint8
	MaxCMRetries      uint8
	// PacketLifeTime is the route's packet life time (0: 18).
	PacketLifeTime uint8
	// PeerMADPort returns the UDP port of QP1 at dst (0: 4791). rperf's
	// engines on other ports are addressed by it.
	PeerMADPort func(dst netip.Addr) uint16
	// Addrs are IP addresses the device answers for besides its GIDs: the
	// loopback addresses for shm0, whose GIDs are not IP addresses of the
	// host (with UnixMADPort).
	Addrs []netip.Addr
}

// Device is the connection manager of one device port: the CM agent on its
// QP1, shared by every identifier that resolves to one of its addresses.
type Device struct {
	ctx   *verbsio.Context
	opts  Options
	mp    verbsio.MADPort
	owned bool // mp was opened by Open, closed by Close
	cm    *ibcm.CM
	gids  []verbsio.GIDEntry
	attr  verbsio.DeviceAttr
	pattr verbsio.PortAttr

	wake     chan struct{}
	done     chan struct{}
	exited   chan struct{}
	closed   bool
	ids      map[*ID]struct{}
	txErrors uint64
	commEst  uint64 // connections COMM_EST established before their RTU

	asyncStop func() // ends the COMM_EST subscription
	// listens are the CM's listening IDs per service ID, shared by the
	// rdma_cm listeners on it (ib_cm_insert_listen), with their count.
	listens map[uint64]*ibcmListen
	// k is the kernel's CM, for a device the kernel drives (kernel.go);
	// then mp and cm are nil.
	k *kernelDevice
}

type ibcmListen struct {
	id    *ibcm.ID
	users int
}

// listenOn makes the CM listen on sid for one more rdma_cm listener. mu
// is held.
func (d *Device) listenOn(sid uint64) error {
	if l := d.listens[sid]; l != nil {
		l.users++
		return nil
	}
	if sl, ok := d.mp.(serviceListener); ok {
		if err := sl.ListenService(sid); err != nil {
			return err
		}
	}
	id := d.cm.CreateID(nil)
	if err := d.cm.Listen(id, sid); err != nil {
		return err
	}
	d.listens[sid] = &ibcmListen{id: id, users: 1}
	return nil
}

// unlisten drops one rdma_cm listener of sid. mu is held.
func (d *Device) unlisten(sid uint64) {
	l := d.listens[sid]
	if l == nil {
		return
	}
	if l.users--; l.users == 0 {
		d.cm.Destroy(time.Now(), l.id)
		delete(d.listens, sid)
		if sl, ok := d.mp.(serviceListener); ok {
			sl.UnlistenService(sid)
		}
	}
}

// Open starts the connection manager of ctx's port: it takes the port's
// QP1 (or o.MADPort) and answers CM MADs from now on. Identifiers find the
// device by its addresses (the GID table) until Close.
func Open(ctx *verbsio.Context, o Options) (*Device, error) {
	if o.Port == 0 {
		o.Port = 1
	}
	if o.CMResponseTimeout == 0 {
		o.CMResponseTimeout = DefaultCMResponseTimeout
	}
	if o.MaxCMRetries == 0 {
		o.MaxCMRetries = DefaultMaxCMRetries
	}
	if o.PacketLifeTime == 0 {
		o.PacketLifeTime = DefaultPacketLifeTime
	}
	if o.CMResponseTimeout > 31 || o.MaxCMRetries > 15 || o.PacketLifeTime > 30 {
		return nil, fmt.Errorf("cm: open %s: CM response timeout %d (at most 31), CM retries %d (at most 15), packet life time %d (at most 30): %w",
			ctx.Device.Name, o.CMResponseTimeout, o.MaxCMRetries, o.PacketLifeTime, unix.EINVAL)
	}
	attr, err := ctx.QueryDevice()
	if err != nil {
		return nil, err
	}
	pattr, err := ctx.QueryPort(o.Port)
	if err != nil {
		return nil, err
	}
	gids, err := ctx.QueryGIDTable(o.Port)
	if err != nil {
		return nil, err
	}
	d := &Device{ctx: ctx, opts: o, mp: o.MADPort, gids: gids, attr: attr, pattr: pattr,
		wake: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{}), ids: map[*ID]struct{}{},
		listens: map[uint64]*ibcmListen{}}
	if o.MADPort == nil && isKernel(ctx) {
		// The kernel owns the device's QP1 and runs its CM: use it.
		if err := d.openKernel(); err != nil {
			return nil, fmt.Errorf("cm: open %s: the kernel's connection manager (librdmacm): %w", ctx.Device.Name, err)
		}
		mu.Lock()
		devices = append(devices, d)
		for _, tab := range ports {
			for _, ids := range tab {
				for _, id := range ids {
					if id.state == stateListen && id.dev == nil && id.kh == nil {
						_ = id.kernelListen(nil, 1)
					}
				}
			}
		}
		mu.Unlock()
		return d, nil
	}
	if d.mp == nil {
		if d.mp, err = defaultMADPort(ctx, o.Port, gids); err != nil {
			return nil, err
		}
		d.owned = true
		if ctx.Device.Fabric == "shm" && len(d.opts.Addrs) == 0 {
			d.opts.Addrs = loopbackAddrs
		}
	}
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	d.cm = ibcm.New(ibcm.Config{
		CAGUID: attr.NodeGUID, ACKDelay: attr.LocalCAAckDelay, Port: o.Port, GIDIndex: d.gidIndex,
		HiTID: binary.LittleEndian.Uint32(seed[:4])&0xffff | 1, IDOperand: binary.LittleEndian.Uint32(seed[4:]),
	})
	mu.Lock()
	devices = append(devices, d)
	// Listeners on every device listen on this one too.
	for ps, tab := range ports {
		for port, ids := range tab {
			for _, id := range ids {
				if id.state == stateListen && id.dev == nil {
					_ = d.listenOn(mad.ServiceID(ps, port))
				}
			}
		}
	}
	mu.Unlock()
	d.mp.SetMADHandler(d.receive)
	// COMM_EST: the passive side's QP heard from its peer (the engine's
	// asynchronous events; providers without them rely on the RTU).
	d.asyncStop, _ = ctx.SubscribeAsyncEvents(d.asyncEvent)
	go d.loop()
	return d, nil
}

// loopbackAddrs are the addresses a shm device answers for by default.
var loopbackAddrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}

// defaultMADPort is the port's QP1 (the udp fabric's, a kernel device's
// through its provider) or, for the shared-memory fabric, which has no
// wire, a UnixMADPort on its GIDs: connections between processes of the
// host, addressed by the loopback addresses.
func defaultMADPort(ctx *verbsio.Context, port uint8, gids []verbsio.GIDEntry) (verbsio.MADPort, error) {
	mp, err := ctx.OpenMADPort(port)
	if err == nil || !errors.Is(err, unix.EOPNOTSUPP) || ctx.Device.Fabric != "shm" {
		return mp, err
	}
	gs := make([]verbsio.GID, 0, len(gids))
	for _, e := range gids {
		gs = append(gs, e.GID)
	}
	return NewUnixMADPort(gs...)
}

// asyncEvent takes the context's asynchronous events: COMM_EST on the QP
// of a passive connection whose RTU has not come establishes it
// (rdma_notify with IB_EVENT_COMM_EST, done by the CM itself).
func (d *Device) asyncEvent(e verbsio.AsyncEvent) {
	if e.Type != verbsio.EventCommEst {
		return
	}
	now := time.Now()
	mu.Lock()
	if d.closed {
		mu.Unlock()
		return
	}
	for id := range d.ids {
		if id.listen != nil && id.cmID != nil && id.qpNum == e.QPN && id.state == stateConnect && !id.destroyed {
			if d.cm.Establish(now, id.cmID) == nil {
				d.commEst++
			}
			break
		}
	}
	out := d.collect(now)
	mu.Unlock()
	d.after(out)
}

// Context returns the verbs context the device manages.
func (d *Device) Context() *verbsio.Context { return d.ctx }

func (d *Device) gidIndex(g verbsio.GID) (uint8, bool) {
	for _, e := range d.gids {
		if e.GID == g {
			return uint8(e.Index), true
		}
	}
	return 0, false
}

// hasAddr reports whether one of the device's GIDs, or Options.Addrs, is a.
func (d *Device) hasAddr(a netip.Addr) bool {
	if _, ok := d.gidIndex(verbsio.GIDFromAddr(a)); ok {
		return true
	}
	for _, x := range d.opts.Addrs {
		if x.Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

// sgid returns the GID and index a connection from local address a uses:
// a's own, or for Options.Addrs the device's first GID.
func (d *Device) sgid(a netip.Addr) (verbsio.GID, uint8) {
	g := verbsio.GIDFromAddr(a)
	if i, ok := d.gidIndex(g); ok {
		return g, i
	}
	if len(d.gids) > 0 {
		return d.gids[0].GID, uint8(d.gids[0].Index)
	}
	return g, 0
}

// Counters are a device's CM message counters (Linux's cm_tx_msgs,
// cm_tx_retries, cm_rx_msgs, cm_rx_duplicates per message, and what was
// dropped).
type Counters struct {
	ibcm.Counters
	// TxErrors counts MADs the transport refused to send.
	TxErrors uint64
	// CommEst counts passive connections established by the QP's
	// COMM_EST (its first packet) before the RTU came.
	CommEst uint64
}

// Counters returns the device's message counters.
func (d *Device) Counters() Counters {
	mu.Lock()
	defer mu.Unlock()
	if d.k != nil {
		return Counters{} // the kernel's counters are in sysfs (cm_rx_msgs and the like)
	}
	return Counters{Counters: d.cm.Counters(), TxErrors: d.txErrors, CommEst: d.commEst}
}

// Close stops the device: its identifiers are destroyed (connections are
// disconnected or rejected as rdma_destroy_id does), its QP1 released.
func (d *Device) Close() error {
	mu.Lock()
	if d.closed {
		mu.Unlock()
		return nil
	}
	now := time.Now()
	if d.k != nil {
		var hs []kernelHandle
		for id := range d.ids {
			if h := id.kernelDrop(); h != nil {
				hs = append(hs, h)
			}
			id.destroyLocked(now)
		}
		for h, id := range d.k.ids { // wildcard listeners on this channel
			if id.kh == h {
				id.kernelDrop()
			}
			hs = append(hs, h)
		}
		d.closed = true
		devices = slices.DeleteFunc(devices, func(x *Device) bool { return x == d })
		mu.Unlock()
		d.closeKernel(hs)
		return nil
	}
	for id := range d.ids {
		id.destroyLocked(now)
	}
	out := d.collect(now)
	d.closed = true
	devices = slices.DeleteFunc(devices, func(x *Device) bool { return x == d })
	mu.Unlock()
	d.send(out)
	if d.asyncStop != nil {
		d.asyncStop()
	}
	d.mp.SetMADHandler(nil)
	close(d.done)
	<-d.exited
	if d.owned {
		return d.mp.Close()
	}
	return nil
}

// receive is the MAD port's handler.
func (d *Device) receive(to verbsio.GID, from verbsio.MADAddr, b []byte) {
	now := time.Now()
	mu.Lock()
	if d.closed {
		mu.Unlock()
		return
	}
	d.cm.Receive(now, to, from, b)
	out := d.collect(now)
	mu.Unlock()
	d.send(out)
	d.poke()
}

func (d *Device) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// loop runs the CM's timers.
func (d *Device) loop() {
	defer close(d.exited)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		mu.Lock()
		next, ok := d.cm.NextDeadline()
		mu.Unlock()
		wait := time.Hour
		if ok {
			wait = time.Until(next)
		}
		if wait < 0 {
			wait = 0
		}
		t.Reset(wait)
		select {
		case <-d.done:
			return
		case <-d.wake:
			if !t.Stop() {
				<-t.C
			}
			continue
		case <-t.C:
		}
		now := time.Now()
		mu.Lock()
		d.cm.Advance(now)
		out := d.collect(now)
		mu.Unlock()
		d.send(out)
	}
}

// collect takes the CM's output and turns its events into rdma_cm's,
// acting on them as rdma_cm does; it returns the MADs to send. mu is held.
func (d *Device) collect(now time.Time) []ibcm.Packet {
	var out []ibcm.Packet
	if d.cm == nil { // the kernel's CM
		return nil
	}
	for {
		pkts, evs := d.cm.Take()
		out = append(out, pkts...)
		if len(evs) == 0 {
			return out
		}
		for _, e := range evs {
			d.handle(now, e)
		}
	}
}

func (d *Device) send(out []ibcm.Packet) {
	for i := range out {
		if err := d.mp.SendMAD(out[i].From, out[i].To, out[i].MAD[:]); err != nil {
			mu.Lock()
			d.txErrors++
			mu.Unlock()
		}
	}
}

// after runs an operation's output: MADs sent, timers rescheduled.
func (d *Device) after(out []ibcm.Packet) {
	d.send(out)
	d.poke()
}

func (d *Device) peerPort(a netip.Addr) uint16 {
	if d.opts.PeerMADPort != nil {
		return d.opts.PeerMADPort(a)
	}
	return 0
}

// maxResources resolves MaxResources against the device.
func (d *Device) maxResources(v uint8, devMax int) uint8 {
	if v != MaxResources {
		return v
	}
	return uint8(min(devMax, 255))
}

// handle translates one ibcm event (cma_ib_handler, cma_ib_req_handler,
// cma_sidr_rep_handler). mu is held.
func (d *Device) handle(now time.Time, e ibcm.Event) {
	switch e.Type {
	case ibcm.REQReceived:
		d.onREQ(now, e)
		return
	case ibcm.SIDRREQReceived:
		d.onSIDRREQ(now, e)
		return
	}
	id, _ := e.ID.Context.(*ID)
	if id == nil || id.destroyed {
		return
	}
	ev := &Event{ID: id}
	switch e.Type {
	case ibcm.REPReceived:
		if id.state != stateConnect {
			return
		}
		rep := e.Msg.(*mad.REP)
		_, peer := e.ID.Peer()
		id.route.DGID = peer.GID
		// rdma_cm answers repeats of the REP with an MRA until the RTU.
		_ = d.cm.SendMRA(now, e.ID, mraServiceTimeout, true, nil)
		ev.Conn = ConnParam{PrivateData: append([]byte(nil), rep.PrivateData[:]...),
			ResponderResources: rep.InitiatorDepth, InitiatorDepth: rep.ResponderResources,
			FlowControl: rep.EndToEndFlowControl, RNRRetryCount: rep.RNRRetryCount, SRQ: rep.SRQ, QPNum: rep.LocalQPN}
		if id.qp == nil {
			ev.Type = EventConnectResponse
		} else if err := id.repRecv(now); err != nil {
			ev.Type, ev.Status = EventConnectError, -int(errnoOf(err))
		} else {
			ev.Type = EventEstablished
		}
	case ibcm.RTUReceived, ibcm.UserEstablished:
		if id.state != stateConnect {
			return
		}
		ev.Type = EventEstablished
		if e.Msg != nil {
			ev.Conn.PrivateData = append([]byte(nil), e.Msg.(*mad.RTU).PrivateData[:]...)
		}
	case ibcm.REQError, ibcm.REPError:
		if id.state != stateConnect {
			return
		}
		ev.Type, ev.Status = EventUnreachable, -int(unix.ETIMEDOUT)
	case ibcm.REJReceived:
		if id.state != stateConnect {
			return
		}
		rej := e.Msg.(*mad.REJ)
		id.modifyQPErr()
		ev.Type, ev.Status = EventRejected, int(rej.Reason)
		ev.Conn.PrivateData = append([]byte(nil), rej.PrivateData[:]...)
	case ibcm.DREQReceived, ibcm.DREPReceived, ibcm.DREQError:
		if id.state != stateConnect {
			return
		}
		id.state = stateDisconnect
		ev.Type = EventDisconnected
		if e.Type == ibcm.DREQError {
			ev.Status = -int(unix.ETIMEDOUT)
		}
		if m, ok := e.Msg.(*mad.DREQ); ok {
			ev.Conn.PrivateData = append([]byte(nil), m.PrivateData[:]...)
		}
	case ibcm.TimewaitExit:
		if id.state != stateDisconnect {
			return
		}
		ev.Type = EventTimewaitExit
	case ibcm.SIDRREPReceived:
		if id.state != stateConnect {
			return
		}
		rep := e.Msg.(*mad.SIDRREP)
		if rep.Status != mad.SIDRSuccess {
			ev.Type, ev.Status = EventUnreachable, int(rep.Status)
			break
		}
		if id.qkey != 0 && rep.QKey != id.qkey {
			ev.Type, ev.Status = EventAddrError, -int(unix.EINVAL)
			break
		}
		id.qkey = rep.QKey
		_, peer := e.ID.Peer()
		id.route.DGID = peer.GID
		ev.Type = EventEstablished
		ev.UD = UDParam{PrivateData: append([]byte(nil), rep.PrivateData[:]...), AH: id.ah(),
			QPNum: rep.QPN, QKey: rep.QKey}
	case ibcm.SIDRREQError:
		if id.state != stateConnect {
			return
		}
		ev.Type, ev.Status = EventUnreachable, -int(unix.ETIMEDOUT)
	default: // MRA: nothing to report
		return
	}
	id.ch.post(ev)
}
