package netpkt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Headers describe a frame to build: Ethernet, an optional 802.1Q tag,
// IPv4 or IPv6 (by the addresses' family; none when they are unset), TCP
// or UDP (Proto), and optionally VXLAN with an inner frame (Inner, which
// needs Proto UDP; DstPort 0 means 4789).
type Headers struct {
	Dst, Src  [6]byte
	VLAN      Tag    // Present adds a tag (TPID 0 means 0x8100)
	EtherType uint16 // for a frame without IP; otherwise set from the IP version

	SrcIP, DstIP netip.Addr
	TOS          uint8  // IPv4 ToS or IPv6 traffic class
	TTL          uint8  // IPv4 TTL or IPv6 hop limit; 0 means 64
	ID           uint16 // IPv4 identification
	DF           bool   // IPv4 don't-fragment
	FlowLabel    uint32 // IPv6, 20 bits
	Proto        uint8  // ProtoTCP, ProtoUDP or another IP protocol

	SrcPort, DstPort uint16
	Seq, Ack         uint32 // TCP
	TCPFlags         uint8  // TCP
	Window           uint16 // TCP; 0 means 65535

	VNI   uint32   // VXLAN network identifier, 24 bits
	Inner *Headers // the encapsulated frame; nil: no VXLAN
}

// Len is the length of the headers (the inner frame's included).
func (h *Headers) Len() int {
	n := EthLen
	if h.VLAN.Present {
		n += VLANLen
	}
	switch {
	case h.SrcIP.Is4():
		n += IPv4Len
	case h.SrcIP.Is6():
		n += IPv6Len
	default:
		return n
	}
	switch h.Proto {
	case ProtoTCP:
		n += TCPLen
	case ProtoUDP:
		n += UDPLen
	}
	if h.Inner != nil {
		n += VXLANLen + h.Inner.Len()
	}
	return n
}

func (h *Headers) check() error {
	if h.SrcIP.IsValid() != h.DstIP.IsValid() || (h.SrcIP.IsValid() && h.SrcIP.Is4() != h.DstIP.Is4()) {
		return fmt.Errorf("netpkt: source %v and destination %v are not of one IP version", h.SrcIP, h.DstIP)
	}
	if h.Inner != nil {
		if h.Proto != ProtoUDP || !h.SrcIP.IsValid() {
			return errors.New("netpkt: VXLAN needs IP and UDP (Proto ProtoUDP) outside")
		}
		if h.VNI >= 1<<24 {
			return fmt.Errorf("netpkt: VNI %d is wider than 24 bits", h.VNI)
		}
		if h.Inner.Inner != nil {
			return errors.New("netpkt: VXLAN in VXLAN is not supported")
		}
		return h.Inner.check()
	}
	if h.FlowLabel >= 1<<20 {
		return fmt.Errorf("netpkt: flow label %#x is wider than 20 bits", h.FlowLabel)
	}
	return nil
}

// AppendHeader appends the headers for a payload of payloadLen bytes:
// lengths set, the IPv4 header checksums computed, TCP and UDP checksums
// zero (FillChecksums computes them once the payload follows).
func (h *Headers) AppendHeader(b []byte, payloadLen int) ([]byte, error) {
	if err := h.check(); err != nil {
		return b, err
	}
	if payloadLen < 0 {
		return b, fmt.Errorf("netpkt: negative payload length %d", payloadLen)
	}
	start := len(b)
	b = h.appendHeader(b, h.Len()+payloadLen)
	if h.SrcIP.Is4() && len(b)-start+payloadLen > 0xffff+EthLen+VLANLen {
		return b[:start], fmt.Errorf("netpkt: %d bytes do not fit in one IPv4 packet", payloadLen)
	}
	return b, nil
}

// Append appends the whole frame: the headers, the payload and every
// checksum (as FillChecksums computes them).
func (h *Headers) Append(b []byte, payload []byte) ([]byte, error) {
	start := len(b)
	b, err := h.AppendHeader(b, len(payload))
	if err != nil {
		return b, err
	}
	b = append(b, payload...)
	if err := FillChecksums(b[start:], Tag{}); err != nil && err != ErrNotIP {
		return b, err
	}
	return b, nil
}

// appendHeader appends h's headers for a frame of total bytes.
func (h *Headers) appendHeader(b []byte, total int) []byte {
	b = append(b, h.Dst[:]...)
	b = append(b, h.Src[:]...)
	rest := total - EthLen
	if h.VLAN.Present {
		tpid := h.VLAN.TPID
		if tpid == 0 {
			tpid = EtherTypeVLAN
		}
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, h.VLAN.TCI)
		rest -= VLANLen
	}
	ttl := h.TTL
	if ttl == 0 {
		ttl = 64
	}
	switch {
	case h.SrcIP.Is4():
		b = binary.BigEndian.AppendUint16(b, EtherTypeIPv4)
		ip := len(b)
		var flags uint16
		if h.DF {
			flags = 0x4000
		}
		b = append(b, 0x45, h.TOS)
		b = binary.BigEndian.AppendUint16(b, uint16(rest))
		b = binary.BigEndian.AppendUint16(b, h.ID)
		b = binary.BigEndian.AppendUint16(b, flags)
		b = append(b, ttl, h.Proto, 0, 0)
		s, d := h.SrcIP.As4(), h.DstIP.As4()
		b = append(b, s[:]...)
		b = append(b, d[:]...)
		ipv4HeaderChecksum(b[ip:])
		rest -= IPv4Len
	case h.SrcIP.Is6():
		b = binary.BigEndian.AppendUint16(b, EtherTypeIPv6)
		b = binary.BigEndian.AppendUint32(b, 6<<28|uint32(h.TOS)<<20|h.FlowLabel)
		b = binary.BigEndian.AppendUint16(b, uint16(rest-IPv6Len))
		b = append(b, h.Proto, ttl)
		s, d := h.SrcIP.As16(), h.DstIP.As16()
		b = append(b, s[:]...)
		b = append(b, d[:]...)
		rest -= IPv6Len
	default:
		return binary.BigEndian.AppendUint16(b, h.EtherType)
	}
	switch h.Proto {
	case ProtoTCP:
		win := h.Window
		if win == 0 {
			win = 0xffff
		}
		b = binary.BigEndian.AppendUint16(b, h.SrcPort)
		b = binary.BigEndian.AppendUint16(b, h.DstPort)
		b = binary.BigEndian.AppendUint32(b, h.Seq)
		b = binary.BigEndian.AppendUint32(b, h.Ack)
		b = append(b, TCPLen/4<<4, h.TCPFlags)
		b = binary.BigEndian.AppendUint16(b, win)
		b = append(b, 0, 0, 0, 0) // checksum, urgent pointer
	case ProtoUDP:
		dport := h.DstPort
		if dport == 0 && h.Inner != nil {
			dport = VXLANPort
		}
		b = binary.BigEndian.AppendUint16(b, h.SrcPort)
		b = binary.BigEndian.AppendUint16(b, dport)
		b = binary.BigEndian.AppendUint16(b, uint16(rest))
		b = append(b, 0, 0)
		rest -= UDPLen
		if h.Inner != nil {
			b = append(b, 0x08, 0, 0, 0)
			b = binary.BigEndian.AppendUint32(b, h.VNI<<8)
			b = h.Inner.appendHeader(b, rest-VXLANLen)
		}
	}
	return b
}

// ErrNotIP is returned by FillChecksums for a frame without an IP header.
var ErrNotIP = errors.New("netpkt: the frame has no IPv4 or IPv6 header")

// FillChecksums computes a frame's checksums as a NIC's checksum offload
// does: every IPv4 header checksum, and the TCP or UDP checksum of the
// innermost transport header. For VXLAN over IPv4 the outer UDP checksum
// is computed only when it is not zero (zero means "none", RFC 7348), so
// a sender that leaves it zero gets it zero; over IPv6 it is computed. tag is a tag the
// kernel took out of the frame, if any (offsets do not change with it).
// It does not allocate.
func FillChecksums(frame []byte, tag Tag) error {
	var l Layers
	Parse(frame, tag, &l)
	if l.Has&(HasIPv4|HasIPv6) == 0 {
		return ErrNotIP
	}
	if l.Has&HasIPv4 != 0 {
		ipv4HeaderChecksum(frame[l.L3:l.L4])
	}
	if l.Has&HasInnerIPv4 != 0 {
		ipv4HeaderChecksum(frame[l.InnerL3:l.InnerL4])
	}
	switch {
	case l.Has&(HasInnerTCP|HasInnerUDP) != 0:
		l4ChecksumAt(frame, int(l.InnerL3), int(l.InnerL4), l.Has&HasInnerIPv4 != 0, l.Has&HasInnerTCP != 0)
		if udp := frame[l.L4:]; binary.BigEndian.Uint16(udp[6:]) != 0 || l.Has&HasIPv6 != 0 {
			l4ChecksumAt(frame, int(l.L3), int(l.L4), l.Has&HasIPv4 != 0, false)
		}
	case l.Has&(HasTCP|HasUDP) != 0:
		l4ChecksumAt(frame, int(l.L3), int(l.L4), l.Has&HasIPv4 != 0, l.Has&HasTCP != 0)
	}
	return nil
}

// l4ChecksumAt computes the checksum of the transport header at l4 whose
// IP header is at l3; the segment ends where the IP length says.
func l4ChecksumAt(f []byte, l3, l4 int, v4, tcp bool) {
	src, dst, proto, end, ok := l4Segment(f, l3, l4, v4, tcp)
	if !ok {
		end = len(f) // a length that lies: checksum what is there
	}
	l4Checksum(f[l4:end], src, dst, proto)
}

// InsertTag copies frame into dst with tag put back after the MAC
// addresses, as the frame was on the wire (the kernel hands a received
// frame's outer tag beside it), and returns the length written; without
// a tag it copies the frame. dst must hold len(frame)+VLANLen bytes; a
// frame shorter than the MAC addresses is copied as is.
func InsertTag(dst, frame []byte, tag Tag) int {
	if !tag.Present || len(frame) < 12 {
		return copy(dst, frame)
	}
	copy(dst, frame[:12])
	tpid := tag.TPID
	if tpid == 0 {
		tpid = EtherTypeVLAN
	}
	binary.BigEndian.PutUint16(dst[12:], tpid)
	binary.BigEndian.PutUint16(dst[14:], tag.TCI)
	return 16 + copy(dst[16:], frame[12:])
}
