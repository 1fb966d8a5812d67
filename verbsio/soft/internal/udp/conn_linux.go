package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Batch is the largest number of datagrams one Flush or Recv moves.
const Batch = 64

// MaxDatagram is the largest datagram a receive slot holds.
const MaxDatagram = 9216

// MaxIov is the most buffers one Out may gather.
const MaxIov = 256

// Out is one datagram (or GSO super-datagram) to send: Buf, or the
// concatenation of the buffers in Iov (gathered by the kernel, no copy).
type Out struct {
	Buf []byte
	Iov [][]byte
	To  netip.AddrPort
	// GSO, when not 0, asks the kernel to cut Buf into datagrams of GSO
	// bytes (the last may be shorter).
	GSO uint16
}

// In is one received datagram, or with GRO (EnableGRO) a run of datagrams
// of one sender the kernel coalesced: Seg bytes each, the last may be
// shorter.
type In struct {
	Buf  []byte // the slot; Buf[:N] holds the datagram(s)
	N    int
	From netip.AddrPort
	Seg  int // with GRO, the size of each coalesced datagram; 0: Buf[:N] is one
}

// MaxGRO is the largest run of coalesced datagrams a GRO receive slot
// holds (a UDP payload's limit).
const MaxGRO = 65535

// Conn is a UDP socket with batch I/O. It is used by one goroutine at a
// time.
type Conn struct {
	fd     int
	v6     bool
	zone   uint32 // interface link-local destinations are sent through (see SetLinkScope)
	local  netip.AddrPort
	gso    bool
	gsoErr error

	out   [Batch]Out
	nout  int
	shdr  [Batch]unix.Mmsghdr
	siov  [Batch * MaxIov]unix.Iovec
	sname [Batch]unix.RawSockaddrInet6
	scmsg [Batch][cmsgSpace]byte

	in    [Batch]In
	rhdr  [Batch]unix.Mmsghdr
	riov  [Batch]unix.Iovec
	rname [Batch]unix.RawSockaddrInet6
	rcmsg [Batch][cmsgSpace]byte
	rbuf  []byte
	gro   bool
	nin   int // slots the last Recv filled
	vlen  int // slots the last Recv offered

	// Counters.
	Sent, Received, SendErrors, Dropped atomic.Uint64
}

const (
	udpSegment = 103 // UDP_SEGMENT
	udpGRO     = 104 // UDP_GRO
)

// cmsgSpace is unix.CmsgSpace(2) on 64-bit Linux: a 16-byte header and
// the 2-byte segment size padded to 8.
const cmsgSpace = 24

func init() {
	if unix.CmsgSpace(2) != cmsgSpace {
		panic("udp: unexpected cmsg layout")
	}
}

// Listen binds a UDP socket to addr (port 0 picks a free port). IPv4
// sockets set IP_MTU_DISCOVER to IP_PMTUDISC_DO: datagrams carry DF and,
// on an unconnected socket, IP identification 0, which the ICRC covers.
// IPv6 sockets set UDP_NO_CHECK6_RX: they accept datagrams with UDP
// checksum 0, which RoCEv2 devices send (Linux rxe does).
func Listen(addr netip.AddrPort) (*Conn, error) { return listen(addr, false) }

// ListenSender binds a socket that only sends, from addr, created in
// network namespace ns (nil: the calling thread's). Its port may be shared
// with the engine's other senders of the same user (SO_REUSEPORT), as
// RoCEv2's per-flow source ports are; not with a socket that did not ask
// for sharing (no SO_REUSEADDR, which would let the more specific bind
// take another program's datagrams). It has no receive slots (Recv must
// not be called); what arrives on it is never read, and its receive
// buffer is the smallest the kernel allows.
func ListenSender(addr netip.AddrPort, ns *Netns) (*Conn, error) {
	if ns == nil {
		return listen(addr, true)
	}
	var c *Conn
	err := ns.Do(func() (err error) {
		c, err = listen(addr, true)
		return err
	})
	return c, err
}

// Netns is a handle on a network namespace, for creating sockets in it
// from any thread.
type Netns struct {
	fd       int
	dev, ino uint64
}

// CurrentNetns returns the calling thread's network namespace. Close it
// when done.
func CurrentNetns() (*Netns, error) {
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	return &Netns{fd: fd, dev: st.Dev, ino: st.Ino}, nil
}

// Close releases the handle.
func (n *Netns) Close() error { return unix.Close(n.fd) }

// current reports whether the calling thread is in the namespace.
func (n *Netns) current() bool {
	var st unix.Stat_t
	return unix.Stat("/proc/thread-self/ns/net", &st) == nil && st.Dev == n.dev && st.Ino == n.ino
}

// Do runs fn with the calling thread in the namespace: at once if it is
// there already (an unlocked goroutine's threads all share the process's
// namespace), else on a thread of its own that enters the namespace and
// is discarded afterwards (entering one needs CAP_SYS_ADMIN).
func (n *Netns) Do(fn func() error) error {
	if n.current() {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		// The thread stays locked: when this goroutine ends, the runtime
		// discards it instead of reusing a thread in another namespace.
		runtime.LockOSThread()
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("enter the device's network namespace: %w", err)
			return
		}
		done <- fn()
	}()
	return <-done
}

func listen(addr netip.AddrPort, sendOnly bool) (*Conn, error) {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	c := &Conn{v6: addr.Addr().Is6()}
	if !sendOnly {
		c.rbuf = make([]byte, Batch*MaxDatagram)
	}
	family := unix.AF_INET
	if c.v6 {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("udp socket: %w", err)
	}
	c.fd = fd
	if c.v6 {
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
		// RoCEv2 senders leave the UDP checksum 0 over IPv6 as over IPv4
		// (Linux rxe does; the ICRC protects the packet), which RFC 6936
		// allows only for sockets that opt in: without UDP_NO_CHECK6_RX
		// the kernel drops every such datagram (counted as Udp6
		// InCsumErrors) and the engine never sees the peer's packets.
		if !sendOnly {
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_RX, 1); err != nil {
				unix.Close(fd)
				return nil, fmt.Errorf("UDP_NO_CHECK6_RX on %s (needed to receive RoCEv2 over IPv6 from senders with UDP checksum 0, as Linux rxe): %w", addr.Addr(), err)
			}
		}
	} else {
		unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
	}
	if sendOnly {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 0)
	} else {
		for _, opt := range []int{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF} {
			if unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, 8<<20) == nil {
				break
			}
		}
	}
	for _, opt := range []int{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, 8<<20) == nil {
			break
		}
	}
	if err := unix.Bind(fd, sockaddr(addr)); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, fmt.Errorf("UDP port %d on %s is in use (another engine, or a kernel rxe device on port 4791); pick another port: %w", addr.Port(), addr.Addr(), err)
		}
		if errors.Is(err, unix.EADDRNOTAVAIL) {
			return nil, fmt.Errorf("address %s is not on this host: %w", addr.Addr(), err)
		}
		return nil, fmt.Errorf("bind %s: %w", addr, err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("getsockname: %w", err)
	}
	c.local = fromSockaddr(sa)
	if s6, ok := sa.(*unix.SockaddrInet6); ok {
		c.zone = s6.ZoneId
	}
	c.gsoErr = probeGSO(fd)
	c.gso = c.gsoErr == nil
	if !sendOnly {
		c.setSlots(MaxDatagram)
	}
	for i := range c.shdr {
		c.shdr[i].Hdr.Name = (*byte)(unsafe.Pointer(&c.sname[i]))
	}
	return c, nil
}

// setSlots points the receive headers at slots of size bytes in rbuf.
func (c *Conn) setSlots(size int) {
	for i := range c.rhdr {
		c.in[i].Buf = c.rbuf[i*size : (i+1)*size]
		c.riov[i].Base = &c.in[i].Buf[0]
		c.riov[i].SetLen(size)
		c.rhdr[i].Hdr.Iov = &c.riov[i]
		c.rhdr[i].Hdr.SetIovlen(1)
		c.rhdr[i].Hdr.Name = (*byte)(unsafe.Pointer(&c.rname[i]))
		c.rhdr[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		c.rhdr[i].Hdr.Control = &c.rcmsg[i][0]
		if c.gro {
			c.rhdr[i].Hdr.SetControllen(cmsgSpace)
		}
	}
}

var errSendOnly = errors.New("udp: Recv on a send-only socket (ListenSender)")

// probeGSO reports why UDP socket fd cannot send with UDP_SEGMENT, or nil.
func probeGSO(fd int) error {
	if _, err := unix.GetsockoptInt(fd, unix.IPPROTO_UDP, udpSegment); err != nil {
		return fmt.Errorf("kernel has no UDP_SEGMENT: %w", err)
	}
	return nil
}

// GSOSupported reports whether this kernel's UDP sockets send with GSO
// (UDP_SEGMENT), and why not, without binding a socket: for device
// queries that must not take a port.
func GSOSupported() (bool, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("UDP socket: %w", err)
	}
	defer unix.Close(fd)
	err = probeGSO(fd)
	return err == nil, err
}

// EnableGRO asks the kernel to coalesce runs of equal-size datagrams from
// one sender into one receive (UDP_GRO): a GSO send over loopback then
// reaches the socket whole instead of cut into datagrams, which saves the
// kernel a socket enqueue per datagram and the receiver a slot each.
// Received runs carry their datagram size in In.Seg. The receive slots
// grow to MaxGRO bytes. It fails on kernels without UDP_GRO (before 5.0).
func (c *Conn) EnableGRO() error {
	if err := unix.SetsockoptInt(c.fd, unix.IPPROTO_UDP, udpGRO, 1); err != nil {
		return fmt.Errorf("UDP_GRO: %w", err)
	}
	c.gro = true
	c.rbuf = make([]byte, Batch*MaxGRO)
	c.setSlots(MaxGRO)
	return nil
}

func sockaddr(a netip.AddrPort) unix.Sockaddr {
	if a.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().As4()}
	}
	sa := &unix.SockaddrInet6{Port: int(a.Port()), Addr: a.Addr().As16()}
	if z := a.Addr().Zone(); z != "" {
		if ifc, err := net.InterfaceByName(z); err == nil {
			sa.ZoneId = uint32(ifc.Index)
		}
	}
	return sa
}

func fromSockaddr(sa unix.Sockaddr) netip.AddrPort {
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(s.Addr).Unmap(), uint16(s.Port))
	}
	return netip.AddrPort{}
}

// SetLinkScope sets the interface (index) through which an IPv6 socket
// sends to link-local destinations. A socket bound to a link-local
// address has its own; one bound to a global address needs it to reach a
// peer's link-local GID (perftest 4.5's --ipv6 picks the link-local GID,
// rperf the global one): without a scope the kernel has no interface for
// the destination. It does nothing on an IPv4 socket.
func (c *Conn) SetLinkScope(ifindex int) {
	if c.v6 && ifindex > 0 {
		c.zone = uint32(ifindex)
	}
}

// LocalAddr is the bound address and port.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// FD is the socket descriptor, for polling.
func (c *Conn) FD() int { return c.fd }

// GSO reports whether sends may use UDP_SEGMENT, and if not, why.
func (c *Conn) GSO() (bool, error) { return c.gso, c.gsoErr }

// Queue returns the next send slot, or nil when the batch is full (Flush
// first). The slot's Buf must stay untouched until Flush returns.
func (c *Conn) Queue() *Out {
	if c.nout == Batch {
		return nil
	}
	o := &c.out[c.nout]
	c.nout++
	o.GSO = 0
	o.Buf, o.Iov = nil, nil
	return o
}

// Pending is the number of queued datagrams.
func (c *Conn) Pending() int { return c.nout }

// Flush sends the queued datagrams with sendmmsg and empties the queue. A
// datagram the kernel refuses for lack of buffer space is dropped and
// counted (the transport above retransmits); a GSO send refused with EIO
// turns GSO off for the socket and is sent again without it.
func (c *Conn) Flush() error {
	n := c.nout
	if n == 0 {
		return nil
	}
	for i := 0; i < n; i++ {
		o := &c.out[i]
		putSockaddr(&c.sname[i], o.To, c.v6, c.zone)
		h := &c.shdr[i].Hdr
		iov := c.siov[i*MaxIov : (i+1)*MaxIov]
		total := 0
		if o.Iov != nil {
			for k, b := range o.Iov {
				iov[k].Base = unsafe.SliceData(b)
				iov[k].SetLen(len(b))
				total += len(b)
			}
			h.Iov = &iov[0]
			h.SetIovlen(len(o.Iov))
		} else {
			iov[0].Base = unsafe.SliceData(o.Buf)
			iov[0].SetLen(len(o.Buf))
			h.Iov = &iov[0]
			h.SetIovlen(1)
			total = len(o.Buf)
		}
		if c.v6 {
			h.Namelen = unix.SizeofSockaddrInet6
		} else {
			h.Namelen = unix.SizeofSockaddrInet4
		}
		if o.GSO != 0 && c.gso && total > int(o.GSO) {
			cm := c.scmsg[i][:]
			ch := (*unix.Cmsghdr)(unsafe.Pointer(&cm[0]))
			ch.Level = unix.SOL_UDP
			ch.Type = udpSegment
			ch.SetLen(unix.CmsgLen(2))
			*(*uint16)(unsafe.Pointer(&cm[unix.CmsgLen(0)])) = o.GSO
			h.Control = &cm[0]
			h.SetControllen(cmsgSpace)
		} else {
			h.Control = nil
			h.SetControllen(0)
		}
	}
	done := 0
	var err error
	for done < n {
		// An ordinary system call, though the socket never blocks: a raw
		// one keeps its P from the scheduler for the call, and the engine
		// shares its process with the application's goroutines and its own
		// background progress (with RawSyscall, TestUDPFastPathAllocs,
		// both sides in one process, took a QP timeout per operation).
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&c.shdr[done])), uintptr(n-done), 0, 0, 0)
		if e != 0 {
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN, unix.ENOBUFS:
				// The socket buffer is full: drop what is left; the
				// transport retransmits.
				c.Dropped.Add(uint64(n - done))
			case unix.EIO:
				if c.out[done].GSO != 0 && c.gso {
					c.gso = false
					c.gsoErr = errors.New("the kernel refused a UDP_SEGMENT send with EIO (device without checksum offload); GSO turned off")
					c.splitGSO(done)
					done++
					continue
				}
				fallthrough
			default:
				c.SendErrors.Add(1)
				err = e
				done++ // skip the datagram the kernel refused
				continue
			}
			break
		}
		c.Sent.Add(uint64(r))
		done += int(r)
	}
	for i := 0; i < n; i++ {
		k := 1
		if c.out[i].Iov != nil {
			k = len(c.out[i].Iov)
		}
		clear(c.siov[i*MaxIov : i*MaxIov+k])
		c.out[i].Buf, c.out[i].Iov = nil, nil
	}
	c.nout = 0
	return err
}

// splitGSO sends queued GSO slot i as one datagram per segment (once,
// when the kernel first refuses GSO; later sends are segmented by the
// caller).
func (c *Conn) splitGSO(i int) {
	o := c.out[i]
	buf := o.Buf
	if o.Iov != nil {
		for _, b := range o.Iov {
			buf = append(buf, b...)
		}
	}
	var raw unix.RawSockaddrInet6
	putSockaddr(&raw, o.To, c.v6, c.zone)
	sa := sockaddrOfRaw(&raw)
	for off := 0; off < len(buf); off += int(o.GSO) {
		end := min(off+int(o.GSO), len(buf))
		if err := unix.Sendto(c.fd, buf[off:end], 0, sa); err == nil {
			c.Sent.Add(1)
		}
	}
}

func putSockaddr(sa *unix.RawSockaddrInet6, a netip.AddrPort, v6 bool, zone uint32) {
	port := a.Port()
	if v6 {
		sa.Family = unix.AF_INET6
		sa.Port = port<<8 | port>>8
		sa.Addr = a.Addr().As16()
		sa.Flowinfo = 0
		sa.Scope_id = 0
		if a.Addr().IsLinkLocalUnicast() {
			sa.Scope_id = zone
		}
		return
	}
	s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
	s4.Family = unix.AF_INET
	s4.Port = port<<8 | port>>8
	s4.Addr = a.Addr().Unmap().As4()
}

// sockaddrOfRaw converts what putSockaddr wrote for unix.Sendto.
func sockaddrOfRaw(sa *unix.RawSockaddrInet6) unix.Sockaddr {
	a := getSockaddr(sa)
	if sa.Family == unix.AF_INET {
		return &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(a.Port()), Addr: a.Addr().As16(), ZoneId: sa.Scope_id}
}

func getSockaddr(sa *unix.RawSockaddrInet6) netip.AddrPort {
	if sa.Family == unix.AF_INET {
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), s4.Port<<8|s4.Port>>8)
	}
	return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), sa.Port<<8|sa.Port>>8)
}

// Recv reads up to Batch datagrams without blocking and returns them; the
// slice and its buffers are valid until the next Recv.
//
// After a Recv that found nothing it offers one slot: a busy poller's
// receive that finds a datagram then returns it at once, where with more
// slots the kernel would look for a second and find the queue empty (a
// tenth of the call on loopback). The next call offers them all. More
// tells whether to read again at once.
func (c *Conn) Recv() ([]In, error) {
	if c.rbuf == nil {
		return nil, errSendOnly
	}
	// The kernel wrote the name and control lengths of the slots the last
	// call filled; the others still hold their initial values.
	for i := range c.rhdr[:c.nin] {
		c.rhdr[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		if c.gro {
			c.rhdr[i].Hdr.SetControllen(cmsgSpace)
		}
	}
	vlen := Batch
	if c.nin == 0 {
		vlen = 1
	}
	c.nin, c.vlen = 0, vlen
	for {
		// An ordinary system call (see Flush).
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(c.fd), uintptr(unsafe.Pointer(&c.rhdr[0])), uintptr(vlen), unix.MSG_DONTWAIT, 0, 0)
		if e != 0 {
			if e == unix.EINTR {
				continue
			}
			if e == unix.EAGAIN {
				return nil, nil
			}
			return nil, e
		}
		n := int(r)
		c.nin = n
		for i := 0; i < n; i++ {
			c.in[i].N = int(c.rhdr[i].Len)
			c.in[i].From = getSockaddr(&c.rname[i])
			c.in[i].Seg = 0
			if c.gro {
				c.in[i].Seg = groSize(&c.rhdr[i].Hdr, &c.rcmsg[i])
			}
		}
		c.Received.Add(uint64(n))
		return c.in[:n], nil
	}
}

// More reports whether the last Recv filled every one of its slots, more
// than one: a burst is arriving, and the next Recv at once is likely to
// find more. After a one-slot Recv it is false: the caller handles what
// came and reads again at its next poll.
func (c *Conn) More() bool { return c.vlen > 1 && c.nin == c.vlen }

// groSize returns the UDP_GRO segment size a receive's control message
// carries, or 0 when it has none (a single datagram).
func groSize(h *unix.Msghdr, cm *[cmsgSpace]byte) int {
	if h.Controllen < unix.SizeofCmsghdr+4 {
		return 0
	}
	ch := (*unix.Cmsghdr)(unsafe.Pointer(&cm[0]))
	if ch.Level != unix.IPPROTO_UDP || ch.Type != udpGRO {
		return 0
	}
	return int(*(*int32)(unsafe.Pointer(&cm[unix.SizeofCmsghdr])))
}

// Wait blocks until the socket is readable or timeout passes.
func (c *Conn) Wait(timeout time.Duration) bool {
	fds := [1]unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
	ts := unix.NsecToTimespec(int64(timeout))
	n, _ := unix.Ppoll(fds[:], &ts, nil)
	return n > 0
}

// Close closes the socket.
func (c *Conn) Close() error { return unix.Close(c.fd) }
