package netpkt

import "encoding/binary"

// Protocol numbers and EtherTypes the package knows.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86dd
	EtherTypeVLAN = 0x8100 // 802.1Q customer tag
	EtherTypeQinQ = 0x88a8 // 802.1ad service tag
	ProtoTCP      = 6
	ProtoUDP      = 17
	VXLANPort     = 4789

	EthLen   = 14 // Ethernet header without tags
	VLANLen  = 4  // one 802.1Q tag
	IPv4Len  = 20 // IPv4 header without options
	IPv6Len  = 40 // IPv6 fixed header
	TCPLen   = 20 // TCP header without options
	UDPLen   = 8
	VXLANLen = 8
)

// TCP flag bits (byte 13 of the header).
const (
	TCPFin = 0x01
	TCPSyn = 0x02
	TCPRst = 0x04
	TCPPsh = 0x08
	TCPAck = 0x10
	TCPUrg = 0x20
	TCPEce = 0x40
	TCPCwr = 0x80
)

// Layer presence bits of Layers.Has.
const (
	HasVLAN      uint16 = 1 << iota // an outer 802.1Q/802.1ad tag (in the frame or stripped)
	HasIPv4                         // an IPv4 header
	HasIPv6                         // an IPv6 header
	HasTCP                          // a TCP header (not in a later IPv4 fragment)
	HasUDP                          // a UDP header (not in a later IPv4 fragment)
	HasVXLAN                        // UDP port 4789 with the VNI-valid flag
	HasInnerETH                     // the VXLAN's inner Ethernet header
	HasInnerVLAN                    // an inner tag
	HasInnerIPv4                    // the inner IPv4 header
	HasInnerIPv6                    // the inner IPv6 header
	HasInnerTCP                     // the inner TCP header
	HasInnerUDP                     // the inner UDP header
	HasFragment                     // the (outer) IPv4 header is a fragment
)

// innerShift moves HasIPv4..HasUDP to HasInnerIPv4..HasInnerUDP.
const innerShift = 7

// Tag is an 802.1Q tag that the kernel took out of a received frame
// (TPACKET's tp_vlan_tci): Present says whether there was one.
type Tag struct {
	TCI     uint16
	TPID    uint16 // 0 means 0x8100
	Present bool
}

// Layers are where a frame's headers are, found by Parse. Offsets count
// from the frame's first byte; an offset is valid when its Has bit is set.
type Layers struct {
	Has uint16
	// Outer and inner EtherType after the last tag, and the outer and
	// inner VLAN TCI (the first tag).
	EtherType, InnerEtherType uint16
	VLAN, InnerVLAN           uint16
	L3, L4                    uint16 // outer IP and TCP/UDP headers
	Tunnel                    uint16 // the VXLAN header
	InnerL2, InnerL3, InnerL4 uint16
	// L4End is where the outermost TCP/UDP header ends (the payload of a
	// plain frame); InnerL4End likewise for the inner one.
	L4End, InnerL4End uint16
}

// Parse finds the headers of frame: Ethernet with up to two tags in the
// frame (the first of them, or tag, is the VLAN), IPv4 (with options) or
// IPv6 (no extension headers: L4 is found only right after the fixed
// header), TCP or UDP, and VXLAN on UDP port 4789 with its inner frame.
// A header that does not fit in frame, or has a bad version or length
// field, ends the parse there. Parse never allocates and never panics.
func Parse(frame []byte, tag Tag, l *Layers) {
	*l = Layers{}
	if len(frame) < EthLen {
		return
	}
	off, et, tci, tagged := parseEth(frame, 0)
	if tag.Present {
		l.Has |= HasVLAN
		l.VLAN = tag.TCI
	} else if tagged {
		l.Has |= HasVLAN
		l.VLAN = tci
	}
	l.EtherType = et
	var l3 layer3
	if !parseL3(frame, off, et, &l3) {
		return
	}
	l.Has |= l3.has
	l.L3, l.L4, l.L4End = uint16(off), uint16(l3.l4), uint16(l3.end)
	if l3.has&HasUDP == 0 || binary.BigEndian.Uint16(frame[l3.l4+2:]) != VXLANPort {
		return
	}
	vx := l3.l4 + UDPLen
	if vx+VXLANLen+EthLen > len(frame) || frame[vx]&0x08 == 0 {
		return
	}
	l.Has |= HasVXLAN | HasInnerETH
	l.Tunnel = uint16(vx)
	in := vx + VXLANLen
	l.InnerL2 = uint16(in)
	off, et, tci, tagged = parseEth(frame, in)
	if tagged {
		l.Has |= HasInnerVLAN
		l.InnerVLAN = tci
	}
	l.InnerEtherType = et
	if !parseL3(frame, off, et, &l3) {
		return
	}
	l.Has |= (l3.has &^ HasFragment) << innerShift
	l.InnerL3, l.InnerL4, l.InnerL4End = uint16(off), uint16(l3.l4), uint16(l3.end)
}

// parseEth returns the offset after the Ethernet header starting at off
// and its tags (at most two), the EtherType after them and the first tag.
func parseEth(f []byte, off int) (next int, et, tci uint16, tagged bool) {
	et = binary.BigEndian.Uint16(f[off+12:])
	next = off + EthLen
	for i := 0; i < 2 && (et == EtherTypeVLAN || et == EtherTypeQinQ) && next+VLANLen <= len(f); i++ {
		if !tagged {
			tci, tagged = binary.BigEndian.Uint16(f[next:]), true
		}
		et = binary.BigEndian.Uint16(f[next+2:])
		next += VLANLen
	}
	return next, et, tci, tagged
}

type layer3 struct {
	has     uint16
	l4, end int
}

func parseL3(f []byte, off int, et uint16, out *layer3) bool {
	*out = layer3{}
	var proto uint8
	switch et {
	case EtherTypeIPv4:
		if off+IPv4Len > len(f) || f[off]>>4 != 4 {
			return false
		}
		ihl := int(f[off]&0x0f) * 4
		if ihl < IPv4Len || off+ihl > len(f) {
			return false
		}
		out.has = HasIPv4
		out.l4 = off + ihl
		if binary.BigEndian.Uint16(f[off+6:])&0x1fff != 0 {
			out.has |= HasFragment
			return true // a later fragment: no L4 header here
		}
		proto = f[off+9]
	case EtherTypeIPv6:
		if off+IPv6Len > len(f) || f[off]>>4 != 6 {
			return false
		}
		out.has = HasIPv6
		out.l4 = off + IPv6Len
		proto = f[off+6]
	default:
		return false
	}
	switch proto {
	case ProtoTCP:
		if out.l4+TCPLen <= len(f) {
			if doff := int(f[out.l4+12]>>4) * 4; doff >= TCPLen && out.l4+doff <= len(f) {
				out.has |= HasTCP
				out.end = out.l4 + doff
			}
		}
	case ProtoUDP:
		if out.l4+UDPLen <= len(f) {
			out.has |= HasUDP
			out.end = out.l4 + UDPLen
		}
	}
	return true
}
