package soft

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rperf/rperf/internal/psn"
	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/udp"
	"golang.org/x/sys/unix"
)

// QP1 on the udp fabric (verbsio.MADProvider): the connection manager's
// MADs travel as RoCEv2 UD SEND_ONLY packets to and from QP 1, as Linux
// rxe sends them (DETH Q_Key 0x80010000, source QP 1, P_Key 0xffff, the
// PSN counting the MADs sent, AckReq set, a 256-byte payload and the
// ICRC), on the context's sockets (UDP 4791, or the context's port).
//
// Receiving is one branch in the engine's input: no QP of the engine has
// number 1 (QPNs are a tag of at least 1 above the table index), so a
// packet to QP 1 is one the QP lookup fails for, and only there is its
// destination compared with 1. A valid MAD is copied into a queue and
// handed to the CM's handler by a goroutine of the port, with no engine
// lock held: the handler may send MADs and move QPs. Sending does not
// go through the engine either: a MAD is built on the caller's stack and
// sent with one sendto on the context's socket (the kernel serializes it
// with the engine's sendmmsg on the same socket), so SendMAD may be called
// from any goroutine, the handler's included.
//
// Someone must read the sockets while the application waits for CM
// events instead of polling: an open port holds the context's background
// progress in its lazy mode (progress.go), which reads every socket QP1
// listens on while the application does not drive the engine, and while
// it does, only the sockets the application's polls do not read (those of
// GIDs no QP uses).
//
// A MAD's sender is its IP address and, in MADAddr.Port, the UDP port its
// QP1 listens on: RoCE devices send from a per-flow port in 0xc000-0xffff
// (rxe's QP1 from 55410) and listen on 4791, so a source port of 4791 or
// in that range is reported as 0 (4791); another source port is an rperf
// engine on a port of its own, which sends its MADs from that port (and
// whose free ports are taken below 0xc000; see listenFree).

// gsiQKey is QP1's Q_Key (IBTA 13.5.1: the well-known GSI Q_Key).
const gsiQKey = 0x80010000

// madQueue is how many received MADs wait for the handler; beyond, they
// are dropped (counted as qp1_drops) as a QP1 without receive buffers
// drops them, and the CM's retries recover.
const madQueue = 256

// madPacketLen is a MAD's RoCEv2 transport part: BTH, DETH, the MAD and
// the ICRC.
const madPacketLen = roce.BTHLen + roce.DETHLen + verbsio.MADSize + roce.ICRCLen

type madIn struct {
	to   verbsio.GID
	from verbsio.MADAddr
	mad  [verbsio.MADSize]byte
}

// udpMADPort is QP1 of a udp context.
type udpMADPort struct {
	f       *udpFabric
	release func() // the lazy background progress hold
	psn     atomic.Uint32
	q       chan madIn
	done    chan struct{}
	exited  chan struct{}
	closed  atomic.Bool

	hmu     sync.Mutex // held while the handler runs
	handler func(to verbsio.GID, from verbsio.MADAddr, mad []byte)
}

var _ verbsio.MADProvider = (*Context)(nil)

// OpenMADPort implements verbsio.MADProvider: QP1 of port 1 on the udp
// fabric. The shm fabric has no wire of its own (EOPNOTSUPP); its
// connection manager passes MADs between processes itself
// (cm.UnixMADPort). Call it from the goroutine that owns the context, as
// StartProgress.
func (c *Context) OpenMADPort(port uint8) (verbsio.MADPort, error) {
	f, ok := c.fab.(*udpFabric)
	switch {
	case !ok:
		return nil, verbsio.Errorf("open_mad_port", unix.EOPNOTSUPP,
			"%s has no wire for management datagrams; connection management on it runs between processes (cm.UnixMADPort)", c.info.Name)
	case port != 1:
		return nil, verbsio.Errorf("open_mad_port", unix.EINVAL, "port %d: %s has port 1 only", port, c.info.Name)
	case f.queryOnly:
		return nil, verbsio.Errorf("open_mad_port", unix.EPERM, "%s was opened for queries only (OpenOptions.QueryOnly)", c.info.Name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, verbsio.Errorf("open_mad_port", unix.EBADF, "the context is closed")
	}
	if f.mad.Load() != nil {
		return nil, verbsio.Errorf("open_mad_port", unix.EBUSY, "QP1 of %s is open already (one connection manager per port)", c.info.Name)
	}
	m := &udpMADPort{f: f, q: make(chan madIn, madQueue), done: make(chan struct{}), exited: make(chan struct{})}
	var use uint64
	for i, conn := range f.conns {
		if conn != nil {
			use |= gidBit(i)
		}
	}
	go m.deliver()
	m.release = c.holdProgress(false)
	c.lock()
	f.mad.Store(m)
	f.madUse.Store(use)
	c.unlock()
	return m, nil
}

// inputMAD takes a packet to QP 1 (input, under the progress lock).
func (f *udpFabric) inputMAD(conn *udp.Conn, p *roce.Packet, from netip.AddrPort) {
	m := f.mad.Load()
	if m == nil {
		f.cnt.unknownQP.Add(1) // QP1 is not open: as a QP that does not exist
		return
	}
	if p.BTH.Opcode != roce.UDSendOnly || p.DETH.QKey != gsiQKey || len(p.Payload) != verbsio.MADSize {
		f.cnt.malformed.Add(1)
		return
	}
	f.cnt.received.Add(1)
	in := madIn{to: verbsio.GIDFromAddr(conn.LocalAddr().Addr().WithZone("")),
		from: verbsio.MADAddr{GID: verbsio.GIDFromAddr(from.Addr().WithZone("")), Port: qp1Port(from.Port())}}
	copy(in.mad[:], p.Payload)
	select {
	case m.q <- in:
	default:
		f.madDrops.Add(1)
	}
}

// qp1Port is the UDP port the QP1 of a MAD's sender listens on, from the
// MAD's source port: 0 (4791) for a RoCE device, which sends from a
// per-flow port in 0xc000-0xffff, or for 4791 itself; the source port
// otherwise (an rperf engine on a port of its own).
func qp1Port(src uint16) uint16 {
	if src == RoCEPort || src >= 0xc000 {
		return 0
	}
	return src
}

func (m *udpMADPort) deliver() {
	defer close(m.exited)
	for {
		select {
		case <-m.done:
			return
		case in := <-m.q:
			m.hmu.Lock()
			if h := m.handler; h != nil {
				h(in.to, in.from, in.mad[:])
			}
			m.hmu.Unlock()
		}
	}
}

// SetMADHandler implements verbsio.MADPort.
func (m *udpMADPort) SetMADHandler(h func(to verbsio.GID, from verbsio.MADAddr, mad []byte)) {
	m.hmu.Lock()
	m.handler = h
	m.hmu.Unlock()
}

// SendMAD implements verbsio.MADPort: one UD SEND_ONLY to QP 1 at to,
// from the context's socket of GID from.
func (m *udpMADPort) SendMAD(from verbsio.GID, to verbsio.MADAddr, mad []byte) error {
	f := m.f
	if len(mad) != verbsio.MADSize {
		return verbsio.Errorf("send_mad", unix.EINVAL, "a MAD is %d bytes, not %d", verbsio.MADSize, len(mad))
	}
	if m.closed.Load() {
		return verbsio.Errorf("send_mad", unix.EBADF, "QP1 is closed")
	}
	conn := f.madConn(from)
	if conn == nil {
		return verbsio.Errorf("send_mad", unix.EADDRNOTAVAIL, "GID %s is not one of %s's bound addresses (rdiag gids)", from, f.c.info.Name)
	}
	src := conn.LocalAddr()
	dst := to.GID.Addr()
	if dst.Is4() != src.Addr().Unmap().Is4() {
		return verbsio.Errorf("send_mad", unix.EINVAL, "destination %s and source %s are of different IP families", to.GID, from)
	}
	port := to.Port
	if port == 0 {
		port = RoCEPort
	}
	p := roce.Packet{
		BTH:     roce.BTH{Opcode: roce.UDSendOnly, PKey: roce.DefaultPKey, DestQP: 1, AckReq: true},
		DETH:    roce.DETH{QKey: gsiQKey, SrcQP: 1},
		Payload: mad,
	}
	p.BTH.PSN = psn.PSN((m.psn.Add(1) - 1) & psn.Mask)
	var buf [madPacketLen]byte
	n, err := p.Encode(buf[:])
	if err != nil {
		return verbsio.Errorf("send_mad", unix.EINVAL, "%v", err)
	}
	pkt := buf[:n]
	var sa unix.Sockaddr
	if dst.Is4() {
		// An unconnected socket with DF sends IPv4 identification 0.
		path := roce.IPv4Path{Src: src.Addr().Unmap().As4(), Dst: dst.As4(), SrcPort: src.Port(), DstPort: port, DontFragment: true}
		path.Seal(0, pkt)
		sa = &unix.SockaddrInet4{Port: int(port), Addr: dst.As4()}
	} else {
		path := roce.IPv6Path{Src: src.Addr().As16(), Dst: dst.As16(), SrcPort: src.Port(), DstPort: port}
		path.Seal(pkt)
		s6 := &unix.SockaddrInet6{Port: int(port), Addr: dst.As16()}
		if dst.IsLinkLocalUnicast() {
			if ifc, err := net.InterfaceByName(f.dev.Name); err == nil {
				s6.ZoneId = uint32(ifc.Index)
			}
		}
		sa = s6
	}
	if err := unix.Sendto(conn.FD(), pkt, 0, sa); err != nil {
		conn.SendErrors.Add(1)
		return verbsio.Errorf("send_mad", err.(unix.Errno), "sendto %s port %d: %v", dst, port, err)
	}
	f.cnt.sent.Add(1)
	return nil
}

// madConn is the socket of GID g (the default GID's for the zero GID).
func (f *udpFabric) madConn(g verbsio.GID) *udp.Conn {
	if g.IsZero() {
		return f.conns[f.def]
	}
	for i, e := range f.gids {
		if e.GID == g {
			return f.conns[i]
		}
	}
	return nil
}

// Close implements verbsio.MADPort: QP1 stops receiving, the handler is
// not called after Close returns, and the context's lazy background
// progress ends unless something else holds it. Call it from the
// goroutine that owns the context.
func (m *udpMADPort) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	c := m.f.c
	c.lock()
	if m.f.mad.Load() == m {
		m.f.mad.Store(nil)
		m.f.madUse.Store(0)
	}
	c.unlock()
	m.release()
	close(m.done)
	<-m.exited
	return nil
}

// sideRound is background progress while the application drives the
// engine (progress.go): it reads the sockets QP1 listens on that the
// application's polls do not read.
func (f *udpFabric) sideRound(fds []unix.PollFd) (int, time.Duration) {
	side := f.madUse.Load() &^ f.inUse.Load()
	if side == 0 {
		return 0, lazyCheck
	}
	f.receiveOn(side)
	f.flush()
	return f.pollFDsOn(fds, side), lazyCheck
}
