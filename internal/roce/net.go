package roce

import "encoding/binary"

// UDPPort is the IANA UDP destination port of RoCEv2.
const UDPPort = 4791

// Link and network header constants.
const (
	EthernetLen = 14 // destination, source, EtherType
	VLANLen     = 4  // one 802.1Q tag
	IPv4Len     = 20 // IPv4 header without options
	IPv6Len     = 40
	UDPLen      = 8

	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86dd
	EtherTypeVLAN = 0x8100 // 802.1Q customer tag
	EtherTypeQinQ = 0x88a8 // 802.1ad service tag

	ProtoUDP = 17 // IP protocol number of UDP

	// IPv4 flag bits as they appear in IPv4.Flags.
	IPv4DontFragment  = 0x2
	IPv4MoreFragments = 0x1

	// MaxVLANTags is how many stacked VLAN tags Ethernet holds.
	MaxVLANTags = 2
)

// VLANTag is one 802.1Q or 802.1ad tag.
type VLANTag struct {
	TPID uint16 // EtherTypeVLAN or EtherTypeQinQ
	PCP  uint8  // priority code point, 3 bits
	DEI  bool   // drop eligible indicator
	ID   uint16 // VLAN identifier, 12 bits
}

// Ethernet is an Ethernet II header with up to two VLAN tags.
type Ethernet struct {
	Dst, Src [6]byte
	Tags     [MaxVLANTags]VLANTag // the first NumTags are on the wire, outermost first
	NumTags  int
	Type     uint16 // EtherType of what follows the tags
}

var (
	errEthShort  = newErr("decode ethernet", "frame shorter than its header", ErrTooShort)
	errEthTags   = newErr("decode ethernet", "more than two VLAN tags", ErrUnsupported)
	errEthBuf    = newErr("encode ethernet", "buffer shorter than the header", ErrShortBuffer)
	errEthRange  = newErr("encode ethernet", "NumTags outside 0-2, PCP>7 or VLAN ID>4095", ErrRange)
	errIPv4Short = newErr("decode ipv4", "shorter than 20 bytes", ErrTooShort)
	errIPv4Ver   = newErr("decode ipv4", "version is not 4", ErrNotRoCE)
	errIPv4Opts  = newErr("decode ipv4", "header has options", ErrUnsupported)
	errIPv4IHL   = newErr("decode ipv4", "IHL below 5", ErrLength)
	errIPv4Buf   = newErr("encode ipv4", "buffer shorter than 20 bytes", ErrShortBuffer)
	errIPv4Range = newErr("encode ipv4", "Flags>7 or FragOff>8191", ErrRange)
	errIPv6Short = newErr("decode ipv6", "shorter than 40 bytes", ErrTooShort)
	errIPv6Ver   = newErr("decode ipv6", "version is not 6", ErrNotRoCE)
	errIPv6Buf   = newErr("encode ipv6", "buffer shorter than 40 bytes", ErrShortBuffer)
	errIPv6Range = newErr("encode ipv6", "FlowLabel wider than 20 bits", ErrRange)
	errUDPShort  = newErr("decode udp", "shorter than 8 bytes", ErrTooShort)
	errUDPBuf    = newErr("encode udp", "buffer shorter than 8 bytes", ErrShortBuffer)
)

// Len returns the header length: 14 bytes plus 4 per VLAN tag.
func (e *Ethernet) Len() int { return EthernetLen + VLANLen*e.NumTags }

// Unmarshal reads the header from b and returns its length. It follows up to
// two VLAN tags (TPID 0x8100 or 0x88a8).
func (e *Ethernet) Unmarshal(b []byte) (int, error) {
	if len(b) < EthernetLen {
		return 0, errEthShort
	}
	copy(e.Dst[:], b[0:6])
	copy(e.Src[:], b[6:12])
	off := 12
	e.NumTags = 0
	for {
		t := binary.BigEndian.Uint16(b[off:])
		if t != EtherTypeVLAN && t != EtherTypeQinQ {
			e.Type = t
			return off + 2, nil
		}
		if e.NumTags == MaxVLANTags {
			return 0, errEthTags
		}
		if len(b) < off+2+VLANLen {
			return 0, errEthShort
		}
		tci := binary.BigEndian.Uint16(b[off+2:])
		e.Tags[e.NumTags] = VLANTag{TPID: t, PCP: uint8(tci >> 13), DEI: tci&0x1000 != 0, ID: tci & 0xfff}
		e.NumTags++
		off += VLANLen
	}
}

// Marshal writes the header into b and returns its length.
func (e *Ethernet) Marshal(b []byte) (int, error) {
	if e.NumTags < 0 || e.NumTags > MaxVLANTags {
		return 0, errEthRange
	}
	n := e.Len()
	if len(b) < n {
		return 0, errEthBuf
	}
	copy(b[0:6], e.Dst[:])
	copy(b[6:12], e.Src[:])
	off := 12
	for i := 0; i < e.NumTags; i++ {
		t := &e.Tags[i]
		if t.PCP > 7 || t.ID > 0xfff {
			return 0, errEthRange
		}
		binary.BigEndian.PutUint16(b[off:], t.TPID)
		binary.BigEndian.PutUint16(b[off+2:], uint16(t.PCP)<<13|uint16(b2u(t.DEI))<<12|t.ID)
		off += VLANLen
	}
	binary.BigEndian.PutUint16(b[off:], e.Type)
	return n, nil
}

// IPv4 is an IPv4 header without options.
type IPv4 struct {
	TOS      uint8  // DSCP and ECN; masked out of the ICRC
	Length   uint16 // total length, header included
	ID       uint16 // identification; covered by the ICRC
	Flags    uint8  // 3 bits: IPv4DontFragment, IPv4MoreFragments
	FragOff  uint16 // fragment offset in 8-byte units, 13 bits
	TTL      uint8  // masked out of the ICRC
	Protocol uint8
	Checksum uint16 // header checksum; masked out of the ICRC
	Src, Dst [4]byte
}

// Unmarshal reads a 20-byte header from b. A header with options (IHL > 5)
// gives an ErrUnsupported error: RoCEv2 never uses them and the ICRC rule
// does not cover them.
func (h *IPv4) Unmarshal(b []byte) error {
	if len(b) < IPv4Len {
		return errIPv4Short
	}
	if b[0]>>4 != 4 {
		return errIPv4Ver
	}
	switch ihl := b[0] & 0xf; {
	case ihl < 5:
		return errIPv4IHL
	case ihl > 5:
		return errIPv4Opts
	}
	h.TOS = b[1]
	h.Length = binary.BigEndian.Uint16(b[2:])
	h.ID = binary.BigEndian.Uint16(b[4:])
	ff := binary.BigEndian.Uint16(b[6:])
	h.Flags = uint8(ff >> 13)
	h.FragOff = ff & 0x1fff
	h.TTL = b[8]
	h.Protocol = b[9]
	h.Checksum = binary.BigEndian.Uint16(b[10:])
	copy(h.Src[:], b[12:16])
	copy(h.Dst[:], b[16:20])
	return nil
}

// Marshal writes the header into b[:IPv4Len] with every field as given,
// Length and Checksum included (see IPv4Checksum and PutIPv4UDP).
func (h *IPv4) Marshal(b []byte) error {
	if len(b) < IPv4Len {
		return errIPv4Buf
	}
	if h.Flags > 7 || h.FragOff > 0x1fff {
		return errIPv4Range
	}
	b[0] = 0x45
	b[1] = h.TOS
	binary.BigEndian.PutUint16(b[2:], h.Length)
	binary.BigEndian.PutUint16(b[4:], h.ID)
	binary.BigEndian.PutUint16(b[6:], uint16(h.Flags)<<13|h.FragOff)
	b[8] = h.TTL
	b[9] = h.Protocol
	binary.BigEndian.PutUint16(b[10:], h.Checksum)
	copy(b[12:16], h.Src[:])
	copy(b[16:20], h.Dst[:])
	return nil
}

// DF reports whether the don't-fragment flag is set.
func (h *IPv4) DF() bool { return h.Flags&IPv4DontFragment != 0 }

// IsFragment reports whether the header belongs to a fragment (more
// fragments follow, or a non-zero offset).
func (h *IPv4) IsFragment() bool { return h.Flags&IPv4MoreFragments != 0 || h.FragOff != 0 }

// IPv4Checksum returns the Internet checksum of an IPv4 header, computed
// with its checksum field taken as zero. hdr is the header bytes (20 or more,
// a multiple of 2).
func IPv4Checksum(hdr []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(hdr); i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(hdr[i])<<8 | uint32(hdr[i+1])
	}
	return ^fold(sum)
}

func fold(sum uint32) uint16 {
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}

// IPv6 is an IPv6 fixed header.
type IPv6 struct {
	TrafficClass  uint8  // masked out of the ICRC
	FlowLabel     uint32 // 20 bits; masked out of the ICRC
	PayloadLength uint16
	NextHeader    uint8
	HopLimit      uint8 // masked out of the ICRC
	Src, Dst      [16]byte
}

// Unmarshal reads the 40-byte fixed header from b.
func (h *IPv6) Unmarshal(b []byte) error {
	if len(b) < IPv6Len {
		return errIPv6Short
	}
	w := binary.BigEndian.Uint32(b)
	if w>>28 != 6 {
		return errIPv6Ver
	}
	h.TrafficClass = uint8(w >> 20)
	h.FlowLabel = w & 0xfffff
	h.PayloadLength = binary.BigEndian.Uint16(b[4:])
	h.NextHeader = b[6]
	h.HopLimit = b[7]
	copy(h.Src[:], b[8:24])
	copy(h.Dst[:], b[24:40])
	return nil
}

// Marshal writes the header into b[:IPv6Len] with every field as given.
func (h *IPv6) Marshal(b []byte) error {
	if len(b) < IPv6Len {
		return errIPv6Buf
	}
	if h.FlowLabel > 0xfffff {
		return errIPv6Range
	}
	binary.BigEndian.PutUint32(b, 6<<28|uint32(h.TrafficClass)<<20|h.FlowLabel)
	binary.BigEndian.PutUint16(b[4:], h.PayloadLength)
	b[6] = h.NextHeader
	b[7] = h.HopLimit
	copy(b[8:24], h.Src[:])
	copy(b[24:40], h.Dst[:])
	return nil
}

// UDP is a UDP header.
type UDP struct {
	SrcPort  uint16
	DstPort  uint16
	Length   uint16 // header and payload
	Checksum uint16 // 0 means none over IPv4; masked out of the ICRC
}

// Unmarshal reads the header from b[:UDPLen].
func (h *UDP) Unmarshal(b []byte) error {
	if len(b) < UDPLen {
		return errUDPShort
	}
	h.SrcPort = binary.BigEndian.Uint16(b)
	h.DstPort = binary.BigEndian.Uint16(b[2:])
	h.Length = binary.BigEndian.Uint16(b[4:])
	h.Checksum = binary.BigEndian.Uint16(b[6:])
	return nil
}

// Marshal writes the header into b[:UDPLen] with every field as given.
func (h *UDP) Marshal(b []byte) error {
	if len(b) < UDPLen {
		return errUDPBuf
	}
	binary.BigEndian.PutUint16(b, h.SrcPort)
	binary.BigEndian.PutUint16(b[2:], h.DstPort)
	binary.BigEndian.PutUint16(b[4:], h.Length)
	binary.BigEndian.PutUint16(b[6:], h.Checksum)
	return nil
}

var (
	errHdrBuf  = newErr("encode ip/udp", "buffer shorter than the IP and UDP headers", ErrShortBuffer)
	errHdrLong = newErr("encode ip/udp", "payload too long for the IP length field", ErrLength)
)

// PutIPv4UDP writes an IPv4 header and a UDP header into b[:28] for a UDP
// payload of payloadLen bytes. It sets ip.Length, ip.Protocol (UDP),
// ip.Checksum and udp.Length from payloadLen and writes the other fields as
// given; udp.Checksum is written as given (0: none).
func PutIPv4UDP(b []byte, ip *IPv4, udp *UDP, payloadLen int) error {
	if len(b) < IPv4Len+UDPLen {
		return errHdrBuf
	}
	if payloadLen < 0 || payloadLen > 0xffff-IPv4Len-UDPLen {
		return errHdrLong
	}
	ip.Length = uint16(IPv4Len + UDPLen + payloadLen)
	ip.Protocol = ProtoUDP
	udp.Length = uint16(UDPLen + payloadLen)
	if err := ip.Marshal(b); err != nil {
		return err
	}
	ip.Checksum = IPv4Checksum(b[:IPv4Len])
	binary.BigEndian.PutUint16(b[10:], ip.Checksum)
	return udp.Marshal(b[IPv4Len:])
}

// PutIPv6UDP writes an IPv6 header and a UDP header into b[:48] for a UDP
// payload of payloadLen bytes. It sets ip.PayloadLength, ip.NextHeader (UDP)
// and udp.Length from payloadLen and writes the other fields as given.
// RFC 8200 requires a UDP checksum over IPv6: compute it with UDPChecksum
// once the payload is in place.
func PutIPv6UDP(b []byte, ip *IPv6, udp *UDP, payloadLen int) error {
	if len(b) < IPv6Len+UDPLen {
		return errHdrBuf
	}
	if payloadLen < 0 || payloadLen > 0xffff-UDPLen {
		return errHdrLong
	}
	ip.PayloadLength = uint16(UDPLen + payloadLen)
	ip.NextHeader = ProtoUDP
	udp.Length = uint16(UDPLen + payloadLen)
	if err := ip.Marshal(b); err != nil {
		return err
	}
	return udp.Marshal(b[IPv6Len:])
}

// UDPChecksum returns the UDP checksum of datagram (UDP header and payload,
// with the checksum field taken as zero) sent from src to dst, which are
// both 4-byte or both 16-byte addresses. A computed 0 is returned as 0xffff,
// as RFC 768 asks.
func UDPChecksum(src, dst []byte, datagram []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src)
	add(dst)
	sum += ProtoUDP + uint32(len(datagram))
	if len(datagram) >= UDPLen {
		add(datagram[:6])
		add(datagram[8:])
	} else {
		add(datagram)
	}
	c := ^fold(sum)
	if c == 0 {
		c = 0xffff
	}
	return c
}
