package soft

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/soft/internal/udp"
	"golang.org/x/sys/unix"
)

// The udp fabric: RoCEv2 over UDP sockets. A context is bound to one
// network device (as `rdma link add ... type rxe netdev X` binds rxe) and
// to a UDP port on its addresses; its GID table holds the device's
// addresses as RoCE v2 GIDs. Packets are built and parsed by
// internal/roce, sent and received in batches by internal/udp, and driven
// by posting and polling: PostSend transmits, CQ.Poll and CQ.Wait receive,
// acknowledge, answer READs and retransmit.

// UDPPrefix starts the names of udp-fabric devices: "udp_" + netdev.
const UDPPrefix = "udp_"

// RoCEPort is the RoCEv2 UDP destination port.
const RoCEPort = 4791

// udpHeaderAllowance is what a RoCEv2 packet adds to its payload inside the
// netdev MTU (IPv4 20, UDP 8, BTH 12, RETH 16, ICRC 4, and slack for
// IPv6), as rxe reserves it when it derives the active MTU.
const udpHeaderAllowance = 80

// udpCounters are the transport's counters, readable while it runs; they
// live in the context's stats file (see udp_stats.go), in counterNames' order.
type udpCounters struct {
	sent, received, retransmitted, duplicates, icrcErrors, outOfSeq,
	unknownQP, badPKey, malformed, wrongPeer, rnrNakSent, rnrNakRecv,
	nakSent, nakRecv, timeouts, acksSent, rewinds atomic.Uint64
}

// udpFabric is udp_<netdev>'s fabric: RoCEv2 packets over UDP sockets,
// moved by posting (the requester, udp_req.go) and polling (progress: the
// responder, udp_resp.go, acknowledgements and timers).
type udpFabric struct {
	c     *Context
	dev   udp.Netdev
	port  uint16
	gids  []verbsio.GIDEntry
	conns []*udp.Conn // by GID index; nil if the address could not be bound
	def   int         // the GID index bound at open (perftest's pick)
	// inUse marks the sockets progress reads: those of the GIDs a QP has
	// been bound to (gidBit). Every address is bound at open, but reading
	// an idle socket would cost every poll a system call.
	inUse atomic.Uint64

	active []*udpQP // QPs with transport work: outstanding requests, READ responses, timers
	rounds uint32   // progress rounds that visited active QPs (tickActive)

	arena []byte
	off   int
	iovs  [][]byte
	grp   txGroup
	rx    roce.Packet
	rxCRC rxICRC
	tx    roce.Packet
	ackQ  []*udpQP

	gso    bool
	gsoWhy string

	// senders are the sockets RC and UC QPs send from: one per source
	// address and per-flow source port (newUDPPath). Setup adds them under
	// senderMu; the fast path flushes the published list.
	senderMu sync.Mutex
	senderBy map[netip.AddrPort]*udp.Conn
	senders  atomic.Pointer[[]*udp.Conn]
	netns    *udp.Netns // where the device was opened: senders are created there; nil if unknown

	// QP1 (udp_mad.go): the open MAD port, and the sockets it listens on
	// (gidBit), which background progress reads besides inUse.
	mad      atomic.Pointer[udpMADPort]
	madUse   atomic.Uint64
	madDrops atomic.Uint64 // MADs the port's queue had no room for

	cnt       *udpCounters
	stats     *statsFile
	queryOnly bool    // opened with OpenOptions.QueryOnly: no sockets
	connErr   []error // why a GID's socket could not be bound
}

// setGSO records whether the kernel segments for this context (TSO) and
// why not.
func (f *udpFabric) setGSO(ok bool, why error) {
	f.gso, f.gsoWhy = ok, ""
	if !ok && why != nil {
		f.gsoWhy = why.Error()
	}
}

// bindAddr is the address of GID i as a socket binds it (a link-local
// IPv6 address needs its device as zone).
func (f *udpFabric) bindAddr(i int) netip.Addr {
	a := f.gids[i].GID.Addr()
	if a.Is6() && a.IsLinkLocalUnicast() {
		a = a.WithZone(f.dev.Name)
	}
	return a
}

func udpDeviceName(netdev string) string { return UDPPrefix + netdev }

func udpDevices() []verbsio.DeviceInfo {
	devs, err := udp.Netdevs()
	if err != nil {
		return nil
	}
	out := make([]verbsio.DeviceInfo, 0, len(devs))
	for _, d := range devs {
		out = append(out, verbsio.DeviceInfo{
			Name: udpDeviceName(d.Name), Provider: ProviderName, Fabric: "udp", Transport: "InfiniBand",
			NodeGUID: guidOf(d), Netdev: d.Name, Ports: 1,
		})
	}
	return out
}

// guidOf derives a node GUID from the netdev's MAC as rxe does (EUI-64),
// or from its name for devices without one (loopback).
func guidOf(d udp.Netdev) uint64 {
	if len(d.HW) == 6 {
		m := d.HW
		return uint64(m[0]^2)<<56 | uint64(m[1])<<48 | uint64(m[2])<<40 | 0xff<<32 | 0xfe<<24 |
			uint64(m[3])<<16 | uint64(m[4])<<8 | uint64(m[5])
	}
	h := uint64(14695981039346656037)
	for _, b := range []byte("rperf-udp:" + d.Name) {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return h&^(0xff<<56) | 0x02<<56
}

func openUDP(name string, o verbsio.OpenOptions) (*Context, error) {
	dev, err := udp.NetdevByName(strings.TrimPrefix(name, UDPPrefix))
	if err != nil {
		return nil, verbsio.Errorf("open_device", unix.ENODEV, "%v (rdiag devices lists the devices)", err)
	}
	if len(dev.Addrs) == 0 {
		return nil, verbsio.Errorf("open_device", unix.ENODEV, "network device %s has no IP address; give it one (ip addr add ...)", dev.Name)
	}
	port := RoCEPort
	switch {
	case o.UDPPort < 0:
		port = 0
	case o.UDPPort > 0:
		port = o.UDPPort
	}
	info := verbsio.DeviceInfo{Name: name, Provider: ProviderName, Fabric: "udp", Transport: "InfiniBand",
		NodeGUID: guidOf(dev), Netdev: dev.Name, Ports: 1}
	c, err := newContext(info)
	if err != nil {
		return nil, err
	}
	f := &udpFabric{c: c, dev: dev, arena: make([]byte, 1<<20), iovs: make([][]byte, 0, 8*udp.MaxIov)}
	for i, a := range dev.Addrs {
		f.gids = append(f.gids, verbsio.GIDEntry{Index: i, GID: verbsio.GIDFromAddr(a), Type: verbsio.GIDTypeRoCEv2, Netdev: dev.Name})
	}
	f.conns = make([]*udp.Conn, len(f.gids))
	f.def = bestGID(f.gids)
	if o.QueryOnly {
		f.port, f.queryOnly = RoCEPort, true
		f.cnt = new(udpCounters)
		f.setGSO(udp.GSOSupported())
		c.fab = f
		return c, nil
	}
	conn, err := listenFree(netip.AddrPortFrom(f.bindAddr(f.def), uint16(port)), dev.Index)
	if err != nil {
		c.Close()
		return nil, verbsio.Errorf("open_device", unix.EADDRINUSE, "%s: %v", name, err)
	}
	f.conns[f.def] = conn
	// Per-flow senders are bound later, by whatever thread connects a QP:
	// they must be created in this namespace, like the sockets here.
	f.netns, _ = udp.CurrentNetns()
	f.port = conn.LocalAddr().Port()
	// Bind the other addresses now, in the network namespace the device
	// was opened in (a thread that connects a QP later may be in another);
	// one that fails is reported when a QP asks for it.
	f.connErr = make([]error, len(f.gids))
	for i := range f.gids {
		if f.conns[i] == nil {
			f.conns[i], f.connErr[i] = listenUDP(netip.AddrPortFrom(f.bindAddr(i), f.port), dev.Index)
		}
	}
	f.setGSO(conn.GSO())
	f.stats, f.cnt = openStats(c.pid, c.nonce, name, dev.Name, f.port)
	c.fab = f
	return c, nil
}

// listenUDP binds one of the device's sockets, with GRO where the kernel
// has it: a peer's GSO sends then arrive as one receive, cut into packets
// here (udpFabric.receive), not by the kernel. A peer's link-local GIDs
// are reached through the device, interface ifindex.
func listenUDP(a netip.AddrPort, ifindex int) (*udp.Conn, error) {
	conn, err := udp.Listen(a)
	if err == nil {
		conn.EnableGRO() // without it, one receive per packet
		conn.SetLinkScope(ifindex)
	}
	return conn, err
}

// listenFree is listenUDP, and for port 0 a free port below 0xc000: the
// port is the context's LID (unicast LIDs end at 0xbfff), and RoCE
// devices send from ports of 0xc000 and up, so a MAD from a port below is
// known to come from an rperf engine listening on it (see qp1Port).
func listenFree(a netip.AddrPort, ifindex int) (*udp.Conn, error) {
	if a.Port() != 0 {
		return listenUDP(a, ifindex)
	}
	for range 64 {
		conn, err := listenUDP(a, ifindex)
		if err != nil || conn.LocalAddr().Port() < 0xc000 {
			return conn, err
		}
		conn.Close()
	}
	return nil, fmt.Errorf("no free UDP port below 0xc000 on %s after 64 tries", a.Addr())
}

// bestGID is perftest's GID choice: an IPv4-mapped address first, then a
// global IPv6 one, then anything.
func bestGID(gids []verbsio.GIDEntry) int {
	best, score := 0, -1
	for i, g := range gids {
		s := 0
		if g.GID.IsIPv4Mapped() {
			s += 100
		}
		if a := g.GID.Addr(); !a.IsLinkLocalUnicast() {
			s += 10
		}
		if s > score {
			best, score = i, s
		}
	}
	return best
}

// conn returns the socket for GID index i, binding it on first use to
// that address and the context's port.
func (f *udpFabric) conn(i int) (*udp.Conn, error) {
	if f.queryOnly {
		return nil, verbsio.Errorf("modify_qp", unix.EPERM, "the device was opened for queries only (OpenOptions.QueryOnly)")
	}
	if i < 0 || i >= len(f.conns) {
		return nil, verbsio.Errorf("modify_qp", unix.EINVAL, "sgid_index %d: the GID table of %s has %d entries (rdiag gids)", i, f.dev.Name, len(f.conns))
	}
	if f.conns[i] == nil {
		return nil, verbsio.Errorf("modify_qp", unix.EADDRNOTAVAIL, "GID %d (%s) has no socket: %v", i, f.gids[i].GID, f.connErr[i])
	}
	f.inUse.Or(gidBit(i))
	return f.conns[i], nil
}

// sender returns the socket that sends from local, binding it on first
// use. It is shared by the context's QPs of that flow port and closed with
// the context.
func (f *udpFabric) sender(local netip.AddrPort) (*udp.Conn, error) {
	f.senderMu.Lock()
	defer f.senderMu.Unlock()
	if c := f.senderBy[local]; c != nil {
		return c, nil
	}
	if f.netns == nil {
		return nil, errors.New("the device's network namespace is unknown")
	}
	if len(f.senderBy) >= maxSenders {
		return nil, fmt.Errorf("%d source ports bound already", maxSenders)
	}
	bind := local
	if a := local.Addr(); a.Is6() && a.IsLinkLocalUnicast() {
		// A link-local address binds with its device as zone.
		bind = netip.AddrPortFrom(a.WithZone(f.dev.Name), local.Port())
	}
	c, err := udp.ListenSender(bind, f.netns)
	if err != nil {
		return nil, err
	}
	c.SetLinkScope(f.dev.Index)
	if f.senderBy == nil {
		f.senderBy = map[netip.AddrPort]*udp.Conn{}
	}
	f.senderBy[local] = c
	list := []*udp.Conn{c}
	if old := f.senders.Load(); old != nil {
		list = append(list, *old...)
	}
	f.senders.Store(&list)
	return c, nil
}

// maxSenders bounds a context's per-flow sockets; QPs beyond send from the
// context's bound port.
const maxSenders = 256

// sendSockets calls fn for every socket the context sends from.
func (f *udpFabric) sendSockets(fn func(*udp.Conn)) {
	for _, c := range f.conns {
		if c != nil {
			fn(c)
		}
	}
	if s := f.senders.Load(); s != nil {
		for _, c := range *s {
			fn(c)
		}
	}
}

// gidBit is GID index i's bit in udpFabric.inUse; the last bit stands for
// every index from 63 on.
func gidBit(i int) uint64 { return 1 << min(i, 63) }

var (
	_ fabric     = (*udpFabric)(nil)
	_ progressor = (*udpFabric)(nil)
)

func (f *udpFabric) gidTable() []verbsio.GIDEntry { return append([]verbsio.GIDEntry(nil), f.gids...) }

func (f *udpFabric) checkQP(attr *verbsio.QPInitAttr) error {
	switch {
	case attr.Type == verbsio.QPTypeRawPacket:
		return errNoRawPacket(f.c)
	case f.queryOnly:
		return verbsio.Errorf("create_qp", unix.EPERM, "%s was opened for queries only (OpenOptions.QueryOnly); open it without", f.c.info.Name)
	case attr.Segmenter == verbsio.SegmentKernel && !f.gso:
		return verbsio.Errorf("create_qp", unix.EOPNOTSUPP, "TSO is unavailable on %s: %s", f.c.info.Name, f.gsoWhy)
	}
	return nil
}

func (f *udpFabric) newQP(q *qp) qpTransport {
	return &udpQP{q: q, f: f, req: make([]reqWQE, q.sq.Depth())}
}

// newAH gives a UD address handle a path of its own.
func (f *udpFabric) newAH(a *ah, attr verbsio.AHAttr) error {
	path, err := newUDPPath(f, int(attr.SGIDIndex), attr.DGID, attr.DLID, 0)
	if err != nil {
		e := err.(*verbsio.Error)
		e.Op = "create_ah"
		return e
	}
	a.ud = &path
	return nil
}

// queueMemory: no peer maps anything of this process, so send queues,
// receive queues and CQs may all come from the application (SRQ rings
// stay in the engine's memory).
func (f *udpFabric) queueMemory() dv.Resource {
	return dv.ResSendQueue | dv.ResRecvQueue | dv.ResCQ
}

func (f *udpFabric) close() {
	f.sendSockets(func(c *udp.Conn) { c.Close() })
	if f.netns != nil {
		f.netns.Close()
	}
	f.stats.close()
}

func (f *udpFabric) portAttr() verbsio.PortAttr {
	mtu, ok := verbsio.MTUFromBytes(f.dev.MTU - udpHeaderAllowance)
	if !ok {
		mtu = verbsio.MTU256
	}
	state := verbsio.PortActive
	phys := uint8(5)
	if !f.dev.Up {
		state, phys = verbsio.PortDown, 3
	}
	var lid uint16
	if f.port != RoCEPort {
		lid = f.port
	}
	return verbsio.PortAttr{
		State: state, MaxMTU: verbsio.MTU4096, ActiveMTU: mtu, GIDTblLen: len(f.gids),
		MaxMsgSize: udpMaxMsgSize, LID: lid, PkeyTblLen: 1, MaxVLNum: 1, PhysState: phys,
		LinkLayer: verbsio.LinkLayerEthernet, Netdev: f.dev.Name, PortCapFlags: 1 << 16, // IP-based GIDs
	}
}

const udpMaxMsgSize = 1 << 31

func (f *udpFabric) deviceAttr() verbsio.DeviceAttr {
	a := engineDeviceAttr()
	a.NodeGUID = guidOf(f.dev)
	a.SysImageGUID = a.NodeGUID
	a.MaxMsgSize = udpMaxMsgSize
	if f.gso {
		// The largest payload one kernel segmentation call carries: as
		// many 4096-byte packets as fit a UDP datagram.
		a.TSO = verbsio.TSOCaps{MaxTSO: uint32(maxGSOBytes / (4096 + 32) * 4096),
			SupportedQP: []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD}}
		a.SendPaths = []string{"generic", "burst", "inline", "dm", "tso", "dv"}
	}
	return a
}
