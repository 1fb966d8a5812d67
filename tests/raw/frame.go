package raw

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Header lengths of the frames the raw tests build.
const (
	ethLen  = 14
	vlanLen = 4
	ip4Len  = 20
	ip6Len  = 40
	udpLen  = 8
	tcpLen  = 20
)

// Addresses are one direction of a raw test's frames: Ethernet, IP and
// L4 addresses, as perftest's -B/-E, -j/-J, -k/-K give them.
type Addresses struct {
	SrcMAC, DstMAC   [6]byte
	SrcIP, DstIP     netip.Addr // both IPv4 or both IPv6
	SrcPort, DstPort uint16
}

// FrameSpec is the shape of a test frame: its addresses, the L4
// protocol, the IPv4 ToS (IPv6 traffic class) and flow label, an
// optional 802.1Q tag, and an optional EtherType of its own.
type FrameSpec struct {
	Addresses
	TCP       bool
	TOS       uint8
	FlowLabel uint32
	// HopLimit is the IPv4 TTL or IPv6 hop limit (perftest -L); 0 means
	// 64, perftest's default.
	HopLimit uint8
	VLAN     bool
	VLANID   uint16
	// VLANPCP is the tag's priority, 0 to 7, or VLANPCPRotate.
	VLANPCP uint8
	// EtherType, when not 0, replaces the IP family's EtherType (perftest
	// -Y): the frame keeps its IP and L4 headers, but a receiver parses
	// it as that EtherType, and steering matches the MAC and EtherType
	// only.
	EtherType uint16
}

// VLANPCPRotate as FrameSpec.VLANPCP (perftest --vlan_pcp 8) gives each
// frame of a flow another priority: the client's and the server's
// frames carry 1, 2, ..., 7, 0, 1, ... in the order they are sent.
const VLANPCPRotate = 8

// pcpVariants is how many frames of different priority each flow has.
func (s *FrameSpec) pcpVariants() int {
	if s.VLAN && s.VLANPCP == VLANPCPRotate {
		return VLANPCPRotate
	}
	return 1
}

// hopLimit is the frame's IPv4 TTL or IPv6 hop limit.
func (s *FrameSpec) hopLimit() uint8 {
	if s.HopLimit == 0 {
		return 64
	}
	return s.HopLimit
}

// ipEtherType is the EtherType of the frame's IP family.
func (s *FrameSpec) ipEtherType() uint16 {
	if s.SrcIP.Is6() {
		return 0x86dd
	}
	return 0x0800
}

// HeaderLen is the length of the frame's headers: Ethernet (and tag), IP
// and UDP or TCP.
func (s *FrameSpec) HeaderLen() int {
	n := ethLen + udpLen
	if s.VLAN {
		n += vlanLen
	}
	if s.SrcIP.Is6() {
		n += ip6Len
	} else {
		n += ip4Len
	}
	if s.TCP {
		n += tcpLen - udpLen
	}
	return n
}

// Reply returns the spec of the frames that answer these: every address
// pair swapped.
func (s FrameSpec) Reply() FrameSpec {
	s.SrcMAC, s.DstMAC = s.DstMAC, s.SrcMAC
	s.SrcIP, s.DstIP = s.DstIP, s.SrcIP
	s.SrcPort, s.DstPort = s.DstPort, s.SrcPort
	return s
}

// Build writes a whole frame of len(b) bytes into b (FCS excluded):
// headers with every length and checksum filled in, then a payload of
// seed, seed+1, .... b must hold at least HeaderLen bytes.
func (s *FrameSpec) Build(b []byte, seed byte) error {
	h := s.HeaderLen()
	if len(b) < h {
		return fmt.Errorf("a %d-byte frame cannot hold its %d bytes of headers", len(b), h)
	}
	if s.SrcIP.Is4() != s.DstIP.Is4() || !s.SrcIP.IsValid() || !s.DstIP.IsValid() {
		return fmt.Errorf("source %v and destination %v are not two addresses of one IP version", s.SrcIP, s.DstIP)
	}
	for i := h; i < len(b); i++ {
		b[i] = seed + byte(i-h)
	}
	copy(b[0:6], s.DstMAC[:])
	copy(b[6:12], s.SrcMAC[:])
	o := 12
	if s.VLAN {
		binary.BigEndian.PutUint16(b[o:], 0x8100)
		binary.BigEndian.PutUint16(b[o+2:], uint16(s.VLANPCP&7)<<13|s.VLANID&0xfff)
		o += 4
	}
	proto := byte(17)
	if s.TCP {
		proto = 6
	}
	l4 := len(b) - h + udpLen
	if s.TCP {
		l4 = len(b) - h + tcpLen
	}
	var pseudo uint32
	et := s.ipEtherType()
	if s.EtherType != 0 {
		et = s.EtherType
	}
	binary.BigEndian.PutUint16(b[o:], et)
	if s.SrcIP.Is4() {
		ip := b[o+2 : o+2+ip4Len]
		clear(ip)
		ip[0] = 0x45
		ip[1] = s.TOS
		binary.BigEndian.PutUint16(ip[2:], uint16(ip4Len+l4))
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
		ip[8] = s.hopLimit()
		ip[9] = proto
		src, dst := s.SrcIP.As4(), s.DstIP.As4()
		copy(ip[12:16], src[:])
		copy(ip[16:20], dst[:])
		binary.BigEndian.PutUint16(ip[10:], ^fold(sum(ip, 0)))
		pseudo = sum(ip[12:20], uint32(proto)+uint32(l4))
		o += 2 + ip4Len
	} else {
		ip := b[o+2 : o+2+ip6Len]
		binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(s.TOS)<<20|s.FlowLabel&0xfffff)
		binary.BigEndian.PutUint16(ip[4:], uint16(l4))
		ip[6] = proto
		ip[7] = s.hopLimit()
		src, dst := s.SrcIP.As16(), s.DstIP.As16()
		copy(ip[8:24], src[:])
		copy(ip[24:40], dst[:])
		pseudo = sum(ip[8:40], uint32(proto)+uint32(l4))
		o += 2 + ip6Len
	}
	seg := b[o:]
	binary.BigEndian.PutUint16(seg[0:], s.SrcPort)
	binary.BigEndian.PutUint16(seg[2:], s.DstPort)
	var csum []byte
	if s.TCP {
		clear(seg[4:tcpLen])
		seg[12] = tcpLen / 4 << 4
		seg[13] = 0x18 // PSH, ACK
		binary.BigEndian.PutUint16(seg[14:], 0xffff)
		csum = seg[16:18]
	} else {
		binary.BigEndian.PutUint16(seg[4:], uint16(l4))
		csum = seg[6:8]
	}
	csum[0], csum[1] = 0, 0
	c := ^fold(sum(seg, pseudo))
	if c == 0 && !s.TCP {
		c = 0xffff // a computed UDP checksum of 0 is sent as all ones
	}
	binary.BigEndian.PutUint16(csum, c)
	return nil
}

// sum adds b as big-endian 16-bit words to acc (RFC 1071).
func sum(b []byte, acc uint32) uint32 {
	for len(b) >= 2 {
		acc += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

// fold folds a one's-complement sum into 16 bits.
func fold(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}
