package netpkt

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// TSO cuts one large send (a header template and a payload) into frames
// exactly as a NIC's segmentation offload does. The segmented transport is
// the innermost TCP header (TSO) or UDP header (UDP segmentation offload:
// every frame is a whole datagram with its own UDP header, as USO does,
// not IP fragments). Per frame i of n:
//
//   - IPv4: total length for the frame, identification the template's
//     plus i (modulo 2^16), header checksum recomputed; IPv6: payload length;
//   - TCP: sequence number = the template's + i*MSS; CWR kept on the first
//     frame only, FIN and PSH on the last only; checksum recomputed;
//   - UDP: length and checksum for the frame's datagram;
//   - VXLAN: the outer IPv4 header, UDP length fixed as above for the
//     outer headers too; the outer UDP checksum is recomputed unless the
//     template's is zero over IPv4 (then it stays zero).
//
// A TSO is set up once per send (Init) and then writes frames into
// caller buffers (Frame) without allocating.
type TSO struct {
	hdr     []byte
	l       Layers
	mss     int
	payload int
	n       int
	tcp     bool // TCP segmentation; else UDP
	tunnel  bool
	l3, l4  int // the segmented transport and its IP header
	v4      bool
	outerCk bool // recompute the outer UDP checksum (tunnel)
	seq     uint32
	id, iid uint16 // outer and inner IPv4 identification
	flags   uint8
}

// Errors of TSO.Init.
var (
	ErrTSOHeader = errors.New("netpkt: TSO header must be Ethernet, IP and TCP or UDP (optionally in VXLAN), and end where the transport header ends")
	ErrTSOMSS    = errors.New("netpkt: TSO MSS must be at least 1")
)

// Init prepares a send of payloadLen bytes after hdr in frames of at most
// mss payload bytes (at least one frame, even for an empty payload). hdr
// is read by every Frame call: keep it unchanged until the last.
func (t *TSO) Init(hdr []byte, payloadLen, mss int) error {
	*t = TSO{}
	if mss < 1 {
		return ErrTSOMSS
	}
	Parse(hdr, Tag{}, &t.l)
	l := &t.l
	switch {
	case l.Has&(HasInnerTCP|HasInnerUDP) != 0:
		t.tunnel, t.tcp = true, l.Has&HasInnerTCP != 0
		t.l3, t.l4, t.v4 = int(l.InnerL3), int(l.InnerL4), l.Has&HasInnerIPv4 != 0
		if int(l.InnerL4End) != len(hdr) {
			return ErrTSOHeader
		}
		t.outerCk = binary.BigEndian.Uint16(hdr[l.L4+6:]) != 0 || l.Has&HasIPv6 != 0
	case l.Has&(HasTCP|HasUDP) != 0 && l.Has&HasVXLAN == 0:
		t.tcp = l.Has&HasTCP != 0
		t.l3, t.l4, t.v4 = int(l.L3), int(l.L4), l.Has&HasIPv4 != 0
		if int(l.L4End) != len(hdr) {
			return ErrTSOHeader
		}
	default:
		return ErrTSOHeader
	}
	if l.Has&HasIPv4 != 0 && binary.BigEndian.Uint16(hdr[l.L3+6:])&0x2000 != 0 {
		return fmt.Errorf("netpkt: TSO header is an IPv4 fragment (MF set)")
	}
	t.hdr, t.mss, t.payload = hdr, mss, payloadLen
	t.n = (payloadLen + mss - 1) / mss
	if t.n == 0 {
		t.n = 1
	}
	if frame := len(hdr) - int(l.L3) + min(mss, payloadLen); frame > 0xffff {
		return fmt.Errorf("netpkt: TSO frames of %d bytes after the L2 header do not fit in an IP length", frame)
	}
	if l.Has&HasIPv4 != 0 {
		t.id = binary.BigEndian.Uint16(hdr[l.L3+4:])
	}
	if t.tunnel && t.v4 {
		t.iid = binary.BigEndian.Uint16(hdr[t.l3+4:])
	}
	if t.tcp {
		t.seq = binary.BigEndian.Uint32(hdr[t.l4+4:])
		t.flags = hdr[t.l4+13]
	}
	return nil
}

// Frames is how many frames the send makes.
func (t *TSO) Frames() int { return t.n }

// Chunk is the payload range [off, off+n) of frame i.
func (t *TSO) Chunk(i int) (off, n int) {
	off = i * t.mss
	return off, min(t.mss, t.payload-off)
}

// HeaderLen is the template's length.
func (t *TSO) HeaderLen() int { return len(t.hdr) }

// Frame writes frame i (0 <= i < Frames) into dst: the fixed-up headers
// followed by chunk, the payload bytes Chunk(i) names. dst must hold
// HeaderLen()+len(chunk) bytes; Frame returns that length.
func (t *TSO) Frame(dst []byte, i int, chunk []byte) int {
	h := len(t.hdr)
	n := h + len(chunk)
	f := dst[:n]
	copy(f, t.hdr)
	copy(f[h:], chunk)
	l := &t.l
	c := len(chunk)
	// The outer headers.
	if l.Has&HasIPv4 != 0 {
		ip := f[l.L3:]
		binary.BigEndian.PutUint16(ip[2:], uint16(h-int(l.L3)+c))
		binary.BigEndian.PutUint16(ip[4:], t.id+uint16(i))
		ipv4HeaderChecksum(ip[:l.L4-l.L3])
	} else {
		binary.BigEndian.PutUint16(f[l.L3+4:], uint16(h-int(l.L3)-IPv6Len+c))
	}
	if t.tunnel {
		binary.BigEndian.PutUint16(f[l.L4+4:], uint16(h-int(l.L4)+c))
		if t.v4 {
			ip := f[t.l3:]
			binary.BigEndian.PutUint16(ip[2:], uint16(h-t.l3+c))
			binary.BigEndian.PutUint16(ip[4:], t.iid+uint16(i))
			ipv4HeaderChecksum(ip[:t.l4-t.l3])
		} else {
			binary.BigEndian.PutUint16(f[t.l3+4:], uint16(h-t.l3-IPv6Len+c))
		}
	}
	// The segmented transport.
	var src, dst2 []byte
	if t.v4 {
		src, dst2 = f[t.l3+12:t.l3+16], f[t.l3+16:t.l3+20]
	} else {
		src, dst2 = f[t.l3+8:t.l3+24], f[t.l3+24:t.l3+40]
	}
	seg := f[t.l4:]
	if t.tcp {
		binary.BigEndian.PutUint32(seg[4:], t.seq+uint32(i*t.mss))
		fl := t.flags
		if i > 0 {
			fl &^= TCPCwr
		}
		if i < t.n-1 {
			fl &^= TCPFin | TCPPsh
		}
		seg[13] = fl
		l4Checksum(seg, src, dst2, ProtoTCP)
	} else {
		binary.BigEndian.PutUint16(seg[4:], uint16(len(seg)))
		l4Checksum(seg, src, dst2, ProtoUDP)
	}
	if t.tunnel && t.outerCk {
		l4ChecksumAt(f, int(l.L3), int(l.L4), l.Has&HasIPv4 != 0, false)
	}
	return n
}
