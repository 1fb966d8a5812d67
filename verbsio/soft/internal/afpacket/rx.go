package afpacket

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
	"golang.org/x/sys/unix"
)

// RingVersion chooses the receive ring's layout.
type RingVersion int

// Receive ring layouts.
const (
	// RingV3 is TPACKET_V3: variable-size frames packed in blocks; a block
	// reaches user space when it is full or its timer (BlockTimeout)
	// expires, so a lone frame waits up to that long.
	RingV3 RingVersion = 3
	// RingV2 is TPACKET_V2: one fixed-size slot per frame, handed over as
	// soon as the frame is in it.
	RingV2 RingVersion = 2
)

// RXOptions shape a receive ring. Zero values take the defaults.
type RXOptions struct {
	Version RingVersion // RingV3 (default) or RingV2
	// V3: BlockSize bytes per block (a multiple of the page size, default
	// 256 KiB), Blocks of them (default 4), BlockTimeout before a partly
	// filled block is handed over (default 1 ms, the kernel's finest).
	BlockSize    int
	Blocks       int
	BlockTimeout time.Duration
	// V2: FrameSize bytes per slot (default 2048, header included) and
	// Frames slots (default 512).
	FrameSize int
	Frames    int
	// Promiscuous receives frames for other MAC addresses too.
	Promiscuous bool
}

// TSKind says what a frame's timestamp measures.
type TSKind uint8

// Timestamp kinds, best first.
const (
	TSHardware TSKind = iota // the NIC's clock, converted by the driver (SOF_TIMESTAMPING_RAW_HARDWARE)
	TSSoftware               // the kernel's clock when the frame entered the stack (SOF_TIMESTAMPING_RX_SOFTWARE)
	TSRing                   // the kernel's clock when the frame was put in the ring
)

// String returns "hardware", "software" or "ring".
func (k TSKind) String() string { return [...]string{"hardware", "software", "ring"}[k] }

// Frame is one received frame. Data points into the ring and is valid
// until the next call to Next.
type Frame struct {
	Data   []byte     // the frame (without the outer VLAN tag when Tag.Present)
	Len    int        // its length on the wire; more than len(Data) when the slot cut it
	Tag    netpkt.Tag // the outer VLAN tag the kernel took out
	TS     int64      // receive time, ns since the epoch (CLOCK_REALTIME)
	TSKind TSKind
	// CsumValid says the kernel or the device verified the frame's
	// checksums (TP_STATUS_CSUM_VALID).
	CsumValid bool
}

// RX is a receive ring on one device. Next and Wait are for one goroutine.
type RX struct {
	fd      int
	ring    []byte
	version RingVersion
	// V3
	blockSize, blocks int
	block             int    // current block
	pkt               uint32 // packets of the current block consumed
	pktOff            int    // offset of the next packet in the block
	inBlock           bool   // the current block is ours (user status seen)
	// V2
	frameSize, frames int
	slot              int
	held              int // slot handed out by the last Next, -1 none
}

// OpenRX opens a receive ring on the device ifname (in the calling
// thread's network namespace). It receives nothing until a filter lets
// frames in: call SetFilter (nil for everything).
func OpenRX(ifname string, o RXOptions) (*RX, error) {
	fd, ifindex, err := socket(ifname)
	if err != nil {
		return nil, err
	}
	r := &RX{fd: fd, version: o.Version, held: -1}
	if err := r.setup(ifname, ifindex, o); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// dropAll is a filter that passes nothing, set before bind so that no
// frame lands in the ring before the caller's filter.
var dropAll = []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}

func (r *RX) setup(ifname string, ifindex int, o RXOptions) error {
	if r.version == 0 {
		r.version = RingV3
	}
	if err := r.SetFilter(dropAll); err != nil {
		return err
	}
	page := unix.Getpagesize()
	switch r.version {
	case RingV3:
		if err := setInt(r.fd, unix.PACKET_VERSION, unix.TPACKET_V3, "TPACKET_V3"); err != nil {
			return err
		}
		r.blockSize, r.blocks = o.BlockSize, o.Blocks
		if r.blockSize == 0 {
			r.blockSize = 256 << 10
		}
		if r.blocks == 0 {
			r.blocks = 4
		}
		if r.blockSize%page != 0 {
			return fmt.Errorf("afpacket: block size %d is not a multiple of the page size %d", r.blockSize, page)
		}
		tov := o.BlockTimeout
		if tov == 0 {
			tov = time.Millisecond
		}
		req := unix.TpacketReq3{Block_size: uint32(r.blockSize), Block_nr: uint32(r.blocks),
			Frame_size: 2048, Frame_nr: uint32(r.blockSize / 2048 * r.blocks), Retire_blk_tov: uint32(max(1, tov.Milliseconds()))}
		if err := unix.SetsockoptTpacketReq3(r.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return fmt.Errorf("afpacket: PACKET_RX_RING (v3, %d x %d bytes): %w", r.blocks, r.blockSize, err)
		}
	case RingV2:
		if err := setInt(r.fd, unix.PACKET_VERSION, unix.TPACKET_V2, "TPACKET_V2"); err != nil {
			return err
		}
		r.frameSize, r.frames = o.FrameSize, o.Frames
		if r.frameSize == 0 {
			r.frameSize = 2048
		}
		if r.frames == 0 {
			r.frames = 512
		}
		if r.frameSize%16 != 0 || page%r.frameSize != 0 && r.frameSize%page != 0 {
			return fmt.Errorf("afpacket: frame size %d must be a multiple of 16 that divides or is a multiple of the page size", r.frameSize)
		}
		bs := max(page, r.frameSize)
		req := unix.TpacketReq{Block_size: uint32(bs), Block_nr: uint32(r.frames * r.frameSize / bs), Frame_size: uint32(r.frameSize), Frame_nr: uint32(r.frames)}
		if err := unix.SetsockoptTpacketReq(r.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return fmt.Errorf("afpacket: PACKET_RX_RING (v2, %d x %d bytes): %w", r.frames, r.frameSize, err)
		}
	default:
		return fmt.Errorf("afpacket: ring version %d; want 2 or 3", r.version)
	}
	size := r.blockSize * r.blocks
	if r.version == RingV2 {
		size = r.frameSize * r.frames
	}
	ring, err := unix.Mmap(r.fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("afpacket: map the receive ring: %w", err)
	}
	r.ring = ring
	// Timestamps: the device's where it has them, else the kernel's
	// software stamp at reception (which SO_TIMESTAMPING switches on).
	ts := unix.SOF_TIMESTAMPING_RX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE | unix.SOF_TIMESTAMPING_RX_HARDWARE | unix.SOF_TIMESTAMPING_RAW_HARDWARE
	if err := unix.SetsockoptInt(r.fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, ts); err != nil {
		return fmt.Errorf("afpacket: SO_TIMESTAMPING: %w", err)
	}
	if err := setInt(r.fd, unix.PACKET_TIMESTAMP, unix.SOF_TIMESTAMPING_RAW_HARDWARE, "PACKET_TIMESTAMP"); err != nil {
		return err
	}
	if err := setInt(r.fd, unix.PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING"); err != nil {
		return err
	}
	if o.Promiscuous {
		mr := unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(r.fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mr); err != nil {
			return fmt.Errorf("afpacket: promiscuous mode on %s: %w", ifname, err)
		}
	}
	return bind(r.fd, ifindex, unix.ETH_P_ALL)
}

// SetFilter replaces the socket filter (nil passes every frame). Frames
// already in the ring stay.
func (r *RX) SetFilter(prog []unix.SockFilter) error {
	if prog == nil {
		if err := unix.SetsockoptInt(r.fd, unix.SOL_SOCKET, unix.SO_DETACH_FILTER, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("afpacket: detach filter: %w", err)
		}
		return nil
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.SetsockoptSockFprog(r.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp); err != nil {
		return fmt.Errorf("afpacket: attach a %d-instruction filter: %w", len(prog), err)
	}
	return nil
}

// FD is the socket, for poll.
func (r *RX) FD() int { return r.fd }

// Version is the ring's layout.
func (r *RX) Version() RingVersion { return r.version }

func status(p unsafe.Pointer) uint32       { return atomic.LoadUint32((*uint32)(p)) }
func setStatus(p unsafe.Pointer, v uint32) { atomic.StoreUint32((*uint32)(p), v) }
func (r *RX) at(off int) unsafe.Pointer    { return unsafe.Pointer(&r.ring[off]) }
func tsKind(st uint32) TSKind {
	switch {
	case st&unix.TP_STATUS_TS_RAW_HARDWARE != 0:
		return TSHardware
	case st&unix.TP_STATUS_TS_SOFTWARE != 0:
		return TSSoftware
	}
	return TSRing
}

// Next returns the next received frame, or false when the ring holds
// none now. It never blocks and never allocates; the frame it returned
// before is given back to the kernel.
func (r *RX) Next() (Frame, bool) {
	if r.version == RingV2 {
		return r.nextV2()
	}
	return r.nextV3()
}

// frame describes the frame at off from its ring header's fields (the
// same in both layouts).
func (r *RX) frame(off int, snaplen, wire, sec, nsec, st uint32, tci, tpid uint16) Frame {
	f := Frame{
		Data:      r.ring[off : off+int(snaplen)],
		Len:       int(wire),
		TS:        int64(sec)*1e9 + int64(nsec),
		TSKind:    tsKind(st),
		CsumValid: st&unix.TP_STATUS_CSUM_VALID != 0,
	}
	if st&unix.TP_STATUS_VLAN_VALID != 0 {
		f.Tag = netpkt.Tag{TCI: tci, Present: true}
		if st&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
			f.Tag.TPID = tpid
		}
	}
	return f
}

func (r *RX) nextV2() (Frame, bool) {
	if r.held >= 0 {
		setStatus(r.at(r.held*r.frameSize), unix.TP_STATUS_KERNEL)
		r.held = -1
	}
	off := r.slot * r.frameSize
	h := (*unix.Tpacket2Hdr)(r.at(off))
	st := status(unsafe.Pointer(&h.Status))
	if st&unix.TP_STATUS_USER == 0 {
		return Frame{}, false
	}
	f := r.frame(off+int(h.Mac), h.Snaplen, h.Len, h.Sec, h.Nsec, st, h.Vlan_tci, h.Vlan_tpid)
	r.held = r.slot
	r.slot = (r.slot + 1) % r.frames
	return f, true
}

func (r *RX) nextV3() (Frame, bool) {
	for {
		boff := r.block * r.blockSize
		bd := (*unix.TpacketHdrV1)(r.at(boff + 8))
		if !r.inBlock {
			if status(unsafe.Pointer(&bd.Block_status))&unix.TP_STATUS_USER == 0 {
				return Frame{}, false
			}
			r.inBlock, r.pkt, r.pktOff = true, 0, int(bd.Offset_to_first_pkt)
		}
		if r.pkt == bd.Num_pkts {
			setStatus(unsafe.Pointer(&bd.Block_status), unix.TP_STATUS_KERNEL)
			r.inBlock = false
			r.block = (r.block + 1) % r.blocks
			continue
		}
		off := boff + r.pktOff
		h := (*unix.Tpacket3Hdr)(r.at(off))
		st := h.Status
		f := r.frame(off+int(h.Mac), h.Snaplen, h.Len, h.Sec, h.Nsec, st, uint16(h.Hv1.Vlan_tci), h.Hv1.Vlan_tpid)
		r.pkt++
		r.pktOff += int(h.Next_offset)
		return f, true
	}
}

// Wait blocks until a frame may be ready, for at most timeout (negative:
// forever). It returns false on timeout.
func (r *RX) Wait(timeout time.Duration) (bool, error) {
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	pfd := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN | unix.POLLERR}}
	for {
		n, err := unix.Poll(pfd, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("afpacket: poll: %w", err)
		}
		return n > 0, nil
	}
}

// Stats returns and resets the kernel's counts: frames received into the
// ring and frames dropped because it was full.
func (r *RX) Stats() (packets, drops uint32, err error) {
	if r.version == RingV3 {
		s, err := unix.GetsockoptTpacketStatsV3(r.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
		if err != nil {
			return 0, 0, err
		}
		return s.Packets, s.Drops, nil
	}
	s, err := unix.GetsockoptTpacketStats(r.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0, 0, err
	}
	return s.Packets, s.Drops, nil
}

// Close unmaps the ring and closes the socket.
func (r *RX) Close() error {
	var err error
	if r.ring != nil {
		err = unix.Munmap(r.ring)
		r.ring = nil
	}
	if r.fd >= 0 {
		err = errors.Join(err, unix.Close(r.fd))
		r.fd = -1
	}
	return err
}
