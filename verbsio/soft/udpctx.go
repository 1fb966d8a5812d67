package soft

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"unsafe"

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
// live in the context's stats file (see stats.go), in counterNames' order.
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

	arena []byte
	off   int
	iovs  [][]byte
	grp   txGroup
	rx    roce.Packet
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
	conn, err := listenUDP(netip.AddrPortFrom(f.bindAddr(f.def), uint16(port)))
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
			f.conns[i], f.connErr[i] = listenUDP(netip.AddrPortFrom(f.bindAddr(i), f.port))
		}
	}
	f.setGSO(conn.GSO())
	f.stats, f.cnt = openStats(c.pid, c.nonce, name, dev.Name, f.port)
	c.fab = f
	return c, nil
}

// listenUDP binds one of the device's sockets, with GRO where the kernel
// has it: a peer's GSO sends then arrive as one receive, cut into packets
// here (udpProgress), not by the kernel.
func listenUDP(a netip.AddrPort) (*udp.Conn, error) {
	conn, err := udp.Listen(a)
	if err == nil {
		conn.EnableGRO() // without it, one receive per packet
	}
	return conn, err
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
	c, err := udp.ListenSender(local, f.netns)
	if err != nil {
		return nil, err
	}
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

// txGroup is packets of one size to one destination sent as one UDP GSO
// datagram (or one plain datagram when there is only one). Packets are
// gathered, not copied: each is its header and trailer (pad and ICRC) in
// the arena and its payload where it lives, the sender's registered
// memory. The kernel numbers the IPv4 identification of GSO segments 0, 1,
// 2, ... (seen on the wire), so packet i of a group carries the ICRC
// computed with identification i; a lone packet has 0 either way.
type txGroup struct {
	path   *udpPath
	iov0   int // first of the group's pieces in f.iovs
	bytes  int
	seg, n int
	short  bool // the last packet is shorter: the group is complete
	gso    bool // the QP lets the kernel segment (not SegmentEngine)
}

// maxGSOSegs and maxGSOBytes bound one GSO send (UDP_MAX_SEGMENTS; the UDP
// length field).
const (
	maxGSOSegs  = 64
	maxGSOBytes = 65000
	// pktOverhead is the most arena bytes one packet needs: headers up to
	// 64 bytes, pad 3 and ICRC 4.
	pktOverhead = 72
)

// begin starts a packet of size bytes made of at most pieces buffers to
// path, closing the current group when the packet cannot join it, and
// returns the packet's index in its group (its IPv4 identification).
func (f *udpFabric) begin(path *udpPath, size, pieces, arena int, gso bool) int {
	g := &f.grp
	if g.n > 0 && (path.conn != g.path.conn || path.to != g.path.to || size > g.seg || g.short ||
		g.n == maxGSOSegs || g.bytes+size > maxGSOBytes || !f.gso || !gso || !g.gso || len(f.iovs)-g.iov0+pieces > udp.MaxIov) {
		f.closeGroup()
	}
	if f.off+pktOverhead+arena > len(f.arena) || len(f.iovs)+pieces > cap(f.iovs) {
		f.flush()
	}
	if g.n == 0 {
		g.path, g.iov0, g.seg, g.gso = path, len(f.iovs), size, gso
	}
	if size < g.seg {
		g.short = true
	}
	g.bytes += size
	id := g.n
	g.n++
	return id
}

// alloc returns n bytes of the arena (headers and trailers; begin has
// made room).
func (f *udpFabric) alloc(n int) []byte {
	b := f.arena[f.off : f.off+n : f.off+n]
	f.off += n
	return b
}

// piece adds a buffer to the packet being built.
func (f *udpFabric) piece(b []byte) {
	if len(b) > 0 {
		f.iovs = append(f.iovs, b)
	}
}

// closeGroup queues the current group.
func (f *udpFabric) closeGroup() {
	g := &f.grp
	if g.n == 0 {
		return
	}
	gso := uint16(0)
	if g.n > 1 {
		gso = uint16(g.seg)
	}
	o := g.path.conn.Queue()
	if o == nil {
		g.path.conn.Flush()
		o = g.path.conn.Queue()
	}
	o.Iov, o.To, o.GSO = f.iovs[g.iov0:len(f.iovs):len(f.iovs)], g.path.to, gso
	f.cnt.sent.Add(uint64(g.n))
	*g = txGroup{}
}

// flush sends every queued datagram (one sendmmsg per socket) and frees
// the arena.
func (f *udpFabric) flush() {
	f.closeGroup()
	for _, c := range f.conns {
		if c != nil && c.Pending() > 0 {
			c.Flush()
		}
	}
	if s := f.senders.Load(); s != nil {
		for _, c := range *s {
			if c.Pending() > 0 {
				c.Flush()
			}
		}
	}
	f.off = 0
	clear(f.iovs)
	f.iovs = f.iovs[:0]
}

// progress is the engine's receive side and timer wheel: it sends what the
// previous call left queued, reads what has arrived, acts on it, queues the
// acknowledgements and responses it owes and retransmits what timed out.
//
// What it queues goes out with the next doorbell (a PostSend flushes it in
// the same sendmmsg as its own packets) or at the next progress call;
// callers that are about to sleep call flushOut first. A busy-polling
// ping-pong thus sends its acknowledgement and its next SEND in one system
// call.
func (f *udpFabric) receive() {
	f.flush()
	used := f.inUse.Load()
	for i, conn := range f.conns {
		if conn == nil || used&gidBit(i) == 0 {
			continue
		}
		for round := 0; round < 4; round++ {
			in, err := conn.Recv()
			if err != nil || len(in) == 0 {
				break
			}
			for i := range in {
				d := &in[i]
				if d.Seg == 0 || d.Seg >= d.N {
					f.input(conn, d.Buf[:d.N], d.From)
					continue
				}
				for off := 0; off < d.N; off += d.Seg {
					f.input(conn, d.Buf[off:min(off+d.Seg, d.N)], d.From)
				}
			}
			f.sendAcks()
			if len(in) < udp.Batch {
				break // the socket was drained: another read would find nothing
			}
		}
	}
	if len(f.active) > 0 {
		t := now()
		for i := 0; i < len(f.active); i++ {
			f.active[i].tick(t)
		}
		f.prune()
	}
}

// input handles one datagram, b, from from.
func (f *udpFabric) input(conn *udp.Conn, b []byte, from netip.AddrPort) {
	p := &f.rx
	if err := p.Decode(b); err != nil {
		f.cnt.malformed.Add(1)
		return
	}
	if !verifyICRC(conn.LocalAddr(), from, b) {
		f.cnt.icrcErrors.Add(1)
		return
	}
	if p.BTH.PKey != roce.DefaultPKey && p.BTH.PKey != 0x7fff {
		f.cnt.badPKey.Add(1)
		return
	}
	q := f.c.qps[qpIndex(p.BTH.DestQP)].Load()
	if q == nil || q.qpn != p.BTH.DestQP || q.state == verbsio.QPStateReset {
		f.cnt.unknownQP.Add(1)
		return
	}
	f.cnt.received.Add(1)
	u := q.t.(*udpQP)
	if p.BTH.Opcode.IsResponse() {
		u.onResponse(p, from)
	} else {
		u.onRequest(p, from)
	}
}

// verifyICRC checks a received packet's ICRC. For IPv4 the identification
// field is not visible to a UDP socket; SolveID finds it (see
// internal/roce).
func verifyICRC(local, from netip.AddrPort, b []byte) bool {
	if from.Addr().Unmap().Is4() {
		path := roce.IPv4Path{Src: from.Addr().Unmap().As4(), Dst: local.Addr().Unmap().As4(),
			SrcPort: from.Port(), DstPort: local.Port(), DontFragment: true}
		if _, ok := path.SolveID(b); ok {
			return true
		}
		path.DontFragment = false
		_, ok := path.SolveID(b)
		return ok
	}
	path := roce.IPv6Path{Src: from.Addr().As16(), Dst: local.Addr().As16(), SrcPort: from.Port(), DstPort: local.Port()}
	crc, err := path.ICRC(b)
	return err == nil && crc == roce.StoredICRC(b)
}

// activate puts u on the list of QPs the timer wheel visits.
func (f *udpFabric) activate(u *udpQP) {
	if !u.active {
		u.active = true
		f.active = append(f.active, u)
	}
}

// forget takes a destroyed QP off the timer wheel and the acknowledgement
// queue: its rings and buffers are gone, and nothing may drive it again.
func (f *udpFabric) forget(u *udpQP) {
	f.active = remove(f.active, u)
	f.ackQ = remove(f.ackQ, u)
	*u = udpQP{f: f, q: u.q}
}

// prune drops QPs without transport work from the active list.
func (f *udpFabric) prune() {
	n := 0
	for _, u := range f.active {
		if u.busy() {
			f.active[n] = u
			n++
		} else {
			u.active = false
		}
	}
	clear(f.active[n:])
	f.active = f.active[:n]
}

// nextDeadline is how long until the earliest transport timer fires, or -1.
func (f *udpFabric) nextDeadline() time.Duration {
	best := time.Duration(-1)
	t := now()
	for _, u := range f.active {
		for _, d := range [...]int64{u.deadline, u.paceAt, u.rnrUntil} {
			if d == 0 {
				continue
			}
			w := time.Duration(d - t)
			if w < 0 {
				w = 0
			}
			if best < 0 || w < best {
				best = w
			}
		}
	}
	return best
}

// waitInput blocks until a socket is readable or timeout passes.
func (f *udpFabric) waitInput(timeout time.Duration) {
	var fds [8]unix.PollFd
	n := f.pollFDs(fds[:])
	ts := unix.NsecToTimespec(int64(timeout))
	unix.Ppoll(fds[:n], &ts, nil)
}

// pollFDs fills fds with the sockets in use, waiting for input, and
// returns how many it filled.
func (f *udpFabric) pollFDs(fds []unix.PollFd) int {
	n := 0
	used := f.inUse.Load()
	for i, c := range f.conns {
		if c != nil && used&gidBit(i) != 0 && n < len(fds) {
			fds[n] = unix.PollFd{Fd: int32(c.FD()), Events: unix.POLLIN}
			n++
		}
	}
	return n
}

// sendAcks sends the coalesced acknowledgements owed after a batch.
func (f *udpFabric) sendAcks() {
	for _, u := range f.ackQ {
		if u.ackDue {
			u.ackDue = false
			u.sendAck(roce.ACKSyndrome(0x1f), u.ePSN.Add(-1))
		}
	}
	clear(f.ackQ)
	f.ackQ = f.ackQ[:0]
}

// wait is CQ.Wait on the udp fabric: progress until the CQ holds a
// completion, sleeping in ppoll on the sockets between packets and timers.
func (f *udpFabric) wait(q *cq, deadline int64) error {
	c := f.c
	step := func() (bool, time.Duration) {
		c.lock()
		defer c.unlock()
		f.receive()
		return q.ready(), f.nextDeadline()
	}
	for i := 0; i < 200; i++ {
		if ok, _ := step(); ok {
			return nil
		}
	}
	for {
		ok, next := step()
		if ok {
			return nil
		}
		left := time.Duration(deadline - now())
		if left <= 0 {
			return verbsio.ErrTimeout
		}
		sleep := min(left, 20*time.Millisecond)
		if next >= 0 && next < sleep {
			sleep = max(next, time.Microsecond)
		}
		c.lock()
		f.flush()
		c.unlock()
		f.waitInput(sleep)
	}
}

// counters are the transport's counters and its sockets' drops and send
// errors.
func (f *udpFabric) counters() map[string]uint64 {
	vals := unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(f.cnt)), len(counterNames))
	m := make(map[string]uint64, len(counterNames)+2)
	for i, name := range counterNames {
		m[name] = vals[i].Load()
	}
	f.sendSockets(func(conn *udp.Conn) {
		m["socket_drops"] += conn.Dropped.Load()
		m["socket_send_errors"] += conn.SendErrors.Load()
	})
	return m
}

// progress is the receive side and the timers, which every poll runs.
func (f *udpFabric) progress(*cq) { f.receive() }

// round is one round of background progress (Context.StartProgress).
func (f *udpFabric) round(fds []unix.PollFd) (int, time.Duration) {
	f.receive()
	f.flush()
	wait := 20 * time.Millisecond
	if d := f.nextDeadline(); d >= 0 && d < wait {
		wait = max(d, 10*time.Microsecond)
	}
	return f.pollFDs(fds), wait
}
