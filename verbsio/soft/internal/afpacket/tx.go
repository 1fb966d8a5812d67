package afpacket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
	"golang.org/x/sys/unix"
)

// TXMode chooses how a batch of frames reaches the kernel.
type TXMode int

// Transmit modes.
const (
	// TXSendmmsg sends a batch with one sendmmsg(2), one message per frame.
	TXSendmmsg TXMode = iota
	// TXRing copies a batch into a TPACKET_V2 TX ring's slots and sends
	// them with one send(2).
	TXRing
	// TXXDP copies a batch into an AF_XDP socket's UMEM and sends it with
	// a kick per 32 frames (copy mode, queue 0; no GSO).
	TXXDP
)

// String returns "sendmmsg", "ring" or "xdp".
func (m TXMode) String() string { return [...]string{"sendmmsg", "ring", "xdp"}[m] }

// TXOptions shape a transmit socket. Zero values take the defaults.
type TXOptions struct {
	Mode TXMode
	// QdiscBypass hands frames to the driver directly, past the qdisc
	// layer (PACKET_QDISC_BYPASS): faster, but no traffic shaping and
	// no queueing when the device is busy.
	QdiscBypass bool
	// VnetHdr puts a virtio-net header before every frame
	// (PACKET_VNET_HDR), which SendGSO needs.
	VnetHdr bool
	// Batch is the most frames one system call sends (default 64).
	Batch int
	// Ring and XDP: FrameSize bytes per slot (default 2048, header
	// included; XDP: a power of two up to the page size) and Frames slots
	// (default 256; XDP: a power of two, default 2048).
	FrameSize int
	Frames    int
}

// VnetHdrLen is the size of struct virtio_net_hdr.
const VnetHdrLen = 10

// tpacket2 TX slots hold the frame after the header and a sockaddr_ll's
// worth of room: TPACKET2_HDRLEN - sizeof(struct sockaddr_ll).
const txDataOff = 32

// TX sends frames on one device. Its methods are for one goroutine.
type TX struct {
	fd      int
	ifindex int
	mtu     int // the device's when the socket was opened
	mode    TXMode
	vnet    bool
	batch   int
	// sendmmsg
	hdrs []unix.Mmsghdr
	iovs []unix.Iovec
	zero [VnetHdrLen]byte
	// ring
	ring              []byte
	frameSize, frames int
	slot              int
	// XDP
	xdp *xdp
	// GSO
	gsoHdr [VnetHdrLen]byte
	gsoIov [2]unix.Iovec
	gsoMsg unix.Msghdr
}

// maxLen is the longest frame the device sends: its MTU and the Ethernet
// header, a 802.1Q tag more for a tagged frame (the kernel's rule), and
// no more than a slot holds.
func (t *TX) maxLen(f []byte) int {
	n := t.mtu + netpkt.EthLen
	if len(f) >= netpkt.EthLen {
		if et := binary.BigEndian.Uint16(f[12:]); et == netpkt.EtherTypeVLAN || et == netpkt.EtherTypeQinQ {
			n += netpkt.VLANLen
		}
	}
	if m := t.MaxFrame(); m > 0 && m < n {
		n = m
	}
	return n
}

// Errors of Send.
var (
	ErrFrameSize = errors.New("afpacket: frame too large or too small for the device")
	ErrNoVnetHdr = errors.New("afpacket: SendGSO needs a socket opened with VnetHdr")
)

// OpenTX opens a send-only packet socket on ifname (in the calling
// thread's network namespace).
func OpenTX(ifname string, o TXOptions) (*TX, error) {
	open := socketMTU
	if o.Mode == TXXDP {
		open = xdpSocket
	}
	fd, ifc, err := open(ifname)
	if err != nil {
		return nil, err
	}
	t := &TX{fd: fd, ifindex: ifc.Index, mtu: ifc.MTU, mode: o.Mode, vnet: o.VnetHdr, batch: o.Batch}
	if err := t.setup(o); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func (t *TX) setup(o TXOptions) error {
	if t.batch <= 0 {
		t.batch = 64
	}
	if t.mode == TXXDP {
		if o.VnetHdr || o.QdiscBypass {
			return fmt.Errorf("afpacket: AF_XDP sends take no virtio-net header and always bypass the qdisc")
		}
		frames, size := o.Frames, o.FrameSize
		if frames == 0 {
			frames = 2048
		}
		if size == 0 {
			size = 2048
		}
		return t.setupXDP(frames, size)
	}
	if o.VnetHdr {
		if err := setInt(t.fd, unix.PACKET_VNET_HDR, 1, "PACKET_VNET_HDR"); err != nil {
			return err
		}
	}
	if o.QdiscBypass {
		if err := setInt(t.fd, unix.PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS"); err != nil {
			return err
		}
	}
	switch t.mode {
	case TXSendmmsg:
		t.hdrs = make([]unix.Mmsghdr, t.batch)
		n := 1
		if t.vnet {
			n = 2
		}
		t.iovs = make([]unix.Iovec, n*t.batch)
		for i := range t.hdrs {
			t.hdrs[i].Hdr.Iov = &t.iovs[n*i]
			t.hdrs[i].Hdr.SetIovlen(n)
			if t.vnet {
				t.iovs[n*i].Base = &t.zero[0]
				t.iovs[n*i].SetLen(VnetHdrLen)
			}
		}
	case TXRing:
		if err := setInt(t.fd, unix.PACKET_VERSION, unix.TPACKET_V2, "TPACKET_V2"); err != nil {
			return err
		}
		t.frameSize, t.frames = o.FrameSize, o.Frames
		if t.frameSize == 0 {
			t.frameSize = 2048
		}
		if t.frames == 0 {
			t.frames = 256
		}
		page := unix.Getpagesize()
		if t.frameSize%16 != 0 || page%t.frameSize != 0 && t.frameSize%page != 0 {
			return fmt.Errorf("afpacket: TX frame size %d must be a multiple of 16 that divides or is a multiple of the page size", t.frameSize)
		}
		bs := max(page, t.frameSize)
		req := unix.TpacketReq{Block_size: uint32(bs), Block_nr: uint32(t.frames * t.frameSize / bs), Frame_size: uint32(t.frameSize), Frame_nr: uint32(t.frames)}
		if err := unix.SetsockoptTpacketReq(t.fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
			return fmt.Errorf("afpacket: PACKET_TX_RING (%d x %d bytes): %w", t.frames, t.frameSize, err)
		}
		ring, err := unix.Mmap(t.fd, 0, t.frameSize*t.frames, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return fmt.Errorf("afpacket: map the TX ring: %w", err)
		}
		t.ring = ring
	default:
		return fmt.Errorf("afpacket: TX mode %d", t.mode)
	}
	if t.vnet {
		t.gsoIov[0].Base = &t.gsoHdr[0]
		t.gsoIov[0].SetLen(VnetHdrLen)
		t.gsoMsg.Iov = &t.gsoIov[0]
		t.gsoMsg.SetIovlen(2)
	}
	return bind(t.fd, t.ifindex, 0)
}

// FD is the socket.
func (t *TX) FD() int { return t.fd }

// Mode is how batches are sent.
func (t *TX) Mode() TXMode { return t.mode }

// MaxFrame is the largest frame Send takes (0: the device's MTU decides).
func (t *TX) MaxFrame() int {
	if t.mode == TXXDP {
		return t.xdp.chunk
	}
	if t.mode != TXRing {
		return 0
	}
	n := t.frameSize - txDataOff
	if t.vnet {
		n -= VnetHdrLen
	}
	return n
}

// Send sends frames in order, a batch per system call, waiting (at most
// a second per stall) while the device or ring is full. It returns how
// many were handed to the kernel. It does not allocate.
func (t *TX) Send(frames [][]byte) (int, error) {
	for i, f := range frames {
		if n := t.maxLen(f); len(f) > n || len(f) < netpkt.EthLen {
			return 0, fmt.Errorf("%w: frame %d is %d bytes; the device takes %d to %d (MTU %d + the Ethernet header)", ErrFrameSize, i, len(f), netpkt.EthLen, n, t.mtu)
		}
	}
	switch t.mode {
	case TXRing:
		return t.sendRing(frames)
	case TXXDP:
		return t.sendXDP(frames)
	}
	return t.sendmmsg(frames)
}

func (t *TX) sendmmsg(frames [][]byte) (int, error) {
	if len(frames) == 1 && !t.vnet {
		return t.sendOne(frames[0])
	}
	done := 0
	n := 1
	if t.vnet {
		n = 2
	}
	var st stall
	for done < len(frames) {
		k := min(t.batch, len(frames)-done)
		for i := range k {
			f := frames[done+i]
			iov := &t.iovs[n*i+n-1]
			if len(f) == 0 {
				return done, fmt.Errorf("afpacket: frame %d is empty", done+i)
			}
			iov.Base = &f[0]
			iov.SetLen(len(f))
		}
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(t.fd), uintptr(unsafe.Pointer(&t.hdrs[0])), uintptr(k), 0, 0, 0)
		switch {
		case e == unix.EAGAIN || e == unix.ENOBUFS:
			if err := st.wait(t); err != nil {
				return done, err
			}
		case e == unix.EINTR:
		case e != 0:
			return done, fmt.Errorf("afpacket: sendmmsg: %w", e)
		default:
			done += int(r)
		}
	}
	return done, nil
}

// sendOne sends a lone frame with send(2), which costs less than a
// one-message sendmmsg.
func (t *TX) sendOne(f []byte) (int, error) {
	if len(f) == 0 {
		return 0, fmt.Errorf("afpacket: frame 0 is empty")
	}
	var st stall
	for {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(t.fd), uintptr(unsafe.Pointer(&f[0])), uintptr(len(f)), 0, 0, 0)
		switch e {
		case 0:
			return 1, nil
		case unix.EINTR:
		case unix.EAGAIN, unix.ENOBUFS:
			if err := st.wait(t); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("afpacket: send: %w", e)
		}
	}
}

// stall bounds a send's retries: the socket may report room (POLLOUT)
// while the kernel keeps refusing with EAGAIN or ENOBUFS (with
// PACKET_QDISC_BYPASS a refused frame is dropped, not queued, and a GSO
// frame on veth is refused every time), which would otherwise spin.
type stall struct{ since time.Time }

// wait waits for room and fails once the kernel has refused for a second.
func (s *stall) wait(t *TX) error {
	if s.since.IsZero() {
		s.since = time.Now()
	} else if time.Since(s.since) > time.Second {
		return fmt.Errorf("afpacket: the kernel refused the send for %v (ENOBUFS or EAGAIN though the socket had room)", time.Second)
	}
	return t.waitOut()
}

func (t *TX) waitOut() error {
	pfd := []unix.PollFd{{Fd: int32(t.fd), Events: unix.POLLOUT}}
	n, err := unix.Poll(pfd, 1000)
	if err != nil && err != unix.EINTR {
		return fmt.Errorf("afpacket: poll for send room: %w", err)
	}
	if n == 0 && err == nil {
		return fmt.Errorf("afpacket: the device took nothing for %v", time.Second)
	}
	return nil
}

func (t *TX) kick() error {
	for {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(t.fd), 0, 0, 0, 0, 0)
		switch e {
		case 0, unix.EAGAIN, unix.ENOBUFS:
			return nil
		case unix.EINTR:
			continue
		}
		return fmt.Errorf("afpacket: send the TX ring: %w", e)
	}
}

func (t *TX) sendRing(frames [][]byte) (int, error) {
	max := t.MaxFrame()
	queued := 0
	for i, f := range frames {
		if len(f) > max {
			return i, fmt.Errorf("%w: %d bytes, a slot takes %d", ErrFrameSize, len(f), max)
		}
		off := t.slot * t.frameSize
		h := (*unix.Tpacket2Hdr)(unsafe.Pointer(&t.ring[off]))
		for tries := 0; ; tries++ {
			st := status(unsafe.Pointer(&h.Status))
			if st == unix.TP_STATUS_AVAILABLE {
				break
			}
			if st == unix.TP_STATUS_WRONG_FORMAT {
				setStatus(unsafe.Pointer(&h.Status), unix.TP_STATUS_AVAILABLE)
				return i, fmt.Errorf("afpacket: the kernel refused a frame of the TX ring (malformed or too large for the device)")
			}
			if tries == 0 {
				if err := t.kick(); err != nil {
					return i, err
				}
				queued = 0
				continue
			}
			if err := t.waitOut(); err != nil {
				return i, err
			}
		}
		d := off + txDataOff
		n := len(f)
		if t.vnet {
			clear(t.ring[d : d+VnetHdrLen])
			d += VnetHdrLen
			n += VnetHdrLen
		}
		copy(t.ring[d:], f)
		h.Len = uint32(n)
		setStatus(unsafe.Pointer(&h.Status), unix.TP_STATUS_SEND_REQUEST)
		t.slot = (t.slot + 1) % t.frames
		queued++
		if queued == t.batch {
			if err := t.kick(); err != nil {
				return i + 1, err
			}
			queued = 0
		}
	}
	if queued > 0 {
		if err := t.kick(); err != nil {
			return len(frames), err
		}
	}
	return len(frames), nil
}

// GSO describes a large send for the kernel to segment.
type GSO struct {
	Type      uint8  // unix.VIRTIO_NET_HDR_GSO_TCPV4, _TCPV6 or _UDP_L4
	HdrLen    uint16 // bytes of headers before the payload
	Size      uint16 // payload bytes per segment (MSS)
	CsumStart uint16 // where the transport header starts
	CsumOff   uint16 // its checksum field, from CsumStart
}

// PrepareGSO readies a whole frame (headers and the large payload) for
// SendGSO with segments of mss payload bytes: it sets the IP length(s),
// the IPv4 header checksum and the transport checksum field to the
// pseudo-header sum the kernel completes per segment, and returns the
// virtio-net header fields. VXLAN frames are refused (the kernel's
// tunnel GSO through packet sockets is not used).
func PrepareGSO(frame []byte, mss int) (GSO, error) {
	var l netpkt.Layers
	netpkt.Parse(frame, netpkt.Tag{}, &l)
	if l.Has&netpkt.HasVXLAN != 0 {
		return GSO{}, errors.New("afpacket: kernel GSO of VXLAN frames is not supported; segment them with netpkt.TSO")
	}
	if l.Has&(netpkt.HasTCP|netpkt.HasUDP) == 0 {
		return GSO{}, errors.New("afpacket: GSO needs a TCP or UDP frame")
	}
	if mss < 1 || mss > 0xffff {
		return GSO{}, fmt.Errorf("afpacket: GSO segment size %d", mss)
	}
	g := GSO{HdrLen: l.L4End, Size: uint16(mss), CsumStart: l.L4}
	l3, l4 := int(l.L3), int(l.L4)
	var src, dst []byte
	if l.Has&netpkt.HasIPv4 != 0 {
		if len(frame)-l3 > 0xffff {
			return GSO{}, fmt.Errorf("afpacket: %d bytes after the Ethernet header exceed an IPv4 packet", len(frame)-l3)
		}
		binary.BigEndian.PutUint16(frame[l3+2:], uint16(len(frame)-l3))
		frame[l3+10], frame[l3+11] = 0, 0
		binary.BigEndian.PutUint16(frame[l3+10:], netpkt.Checksum(frame[l3:l4]))
		src, dst = frame[l3+12:l3+16], frame[l3+16:l3+20]
		g.Type = unix.VIRTIO_NET_HDR_GSO_TCPV4
	} else {
		if len(frame)-l3-netpkt.IPv6Len > 0xffff {
			return GSO{}, fmt.Errorf("afpacket: %d bytes exceed an IPv6 payload", len(frame)-l3-netpkt.IPv6Len)
		}
		binary.BigEndian.PutUint16(frame[l3+4:], uint16(len(frame)-l3-netpkt.IPv6Len))
		src, dst = frame[l3+8:l3+24], frame[l3+24:l3+40]
		g.Type = unix.VIRTIO_NET_HDR_GSO_TCPV6
	}
	proto := uint8(netpkt.ProtoTCP)
	g.CsumOff = 16
	if l.Has&netpkt.HasUDP != 0 {
		proto, g.CsumOff, g.Type = netpkt.ProtoUDP, 6, unix.VIRTIO_NET_HDR_GSO_UDP_L4
		binary.BigEndian.PutUint16(frame[l4+4:], uint16(len(frame)-l4))
	}
	sum := netpkt.Sum(0, src)
	sum = netpkt.Sum(sum, dst)
	sum += uint64(proto) + uint64(len(frame)-l4)
	binary.BigEndian.PutUint16(frame[l4+int(g.CsumOff):], netpkt.Fold(sum))
	return g, nil
}

// SendGSO sends one large frame that the kernel cuts into segments as
// g says (the socket needs VnetHdr). A frame with g.Size 0 goes as is.
func (t *TX) SendGSO(frame []byte, g GSO) error {
	if !t.vnet {
		return ErrNoVnetHdr
	}
	if seg := int(g.HdrLen) + int(g.Size); g.Size > 0 && seg > t.mtu+netpkt.EthLen {
		return fmt.Errorf("%w: GSO segments of %d bytes (headers %d + MSS %d) exceed the MTU %d + the Ethernet header", ErrFrameSize, seg, g.HdrLen, g.Size, t.mtu)
	}
	if g.Size == 0 && len(frame) > t.maxLen(frame) {
		return fmt.Errorf("%w: a %d-byte frame without GSO exceeds the MTU %d + the Ethernet header", ErrFrameSize, len(frame), t.mtu)
	}
	h := &t.gsoHdr
	*h = [VnetHdrLen]byte{}
	if g.Size > 0 {
		h[0] = unix.VIRTIO_NET_HDR_F_NEEDS_CSUM
		h[1] = g.Type
		binary.NativeEndian.PutUint16(h[2:], g.HdrLen)
		binary.NativeEndian.PutUint16(h[4:], g.Size)
		binary.NativeEndian.PutUint16(h[6:], g.CsumStart)
		binary.NativeEndian.PutUint16(h[8:], g.CsumOff)
	}
	t.gsoIov[1].Base = &frame[0]
	t.gsoIov[1].SetLen(len(frame))
	var st stall
	for {
		_, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(t.fd), uintptr(unsafe.Pointer(&t.gsoMsg)), 0)
		switch e {
		case 0:
			return nil
		case unix.EINTR:
		case unix.EAGAIN, unix.ENOBUFS:
			if err := st.wait(t); err != nil {
				return fmt.Errorf("%w: a %d-byte GSO frame", err, len(frame))
			}
		default:
			return fmt.Errorf("afpacket: send a %d-byte GSO frame: %w", len(frame), e)
		}
	}
}

// Close closes the socket (and unmaps the ring).
func (t *TX) Close() error {
	var err error
	if t.xdp != nil {
		err = t.xdp.close()
		t.xdp = nil
	}
	if t.ring != nil {
		err = unix.Munmap(t.ring)
		t.ring = nil
	}
	if t.fd >= 0 {
		err = errors.Join(err, unix.Close(t.fd))
		t.fd = -1
	}
	return err
}
