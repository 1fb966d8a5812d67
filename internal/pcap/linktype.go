package pcap

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// LinkType is a LINKTYPE_ value from the tcpdump.org link-layer header
// registry, saying what header starts each captured frame.
type LinkType uint32

// Link types that Network understands.
const (
	LinkTypeEthernet  LinkType = 1   // IEEE 802.3 Ethernet
	LinkTypeRaw       LinkType = 101 // raw IPv4 or IPv6, told apart by the version nibble
	LinkTypeLinuxSLL  LinkType = 113 // Linux cooked capture v1 (16-byte header)
	LinkTypeIPv4      LinkType = 228 // raw IPv4
	LinkTypeIPv6      LinkType = 229 // raw IPv6
	LinkTypeLinuxSLL2 LinkType = 276 // Linux cooked capture v2 (20-byte header)
)

// String returns the registry name without the LINKTYPE_ prefix, or the
// number for other link types.
func (l LinkType) String() string {
	switch l {
	case LinkTypeEthernet:
		return "ETHERNET"
	case LinkTypeRaw:
		return "RAW"
	case LinkTypeLinuxSLL:
		return "LINUX_SLL"
	case LinkTypeIPv4:
		return "IPV4"
	case LinkTypeIPv6:
		return "IPV6"
	case LinkTypeLinuxSLL2:
		return "LINUX_SLL2"
	}
	return "LINKTYPE(" + strconv.FormatUint(uint64(l), 10) + ")"
}

// EtherTypes returned by Network.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88a8
	etherType9100 = 0x9100
)

// Errors from Network.
var (
	// ErrLinkType means Network does not know the link type.
	ErrLinkType = errors.New("pcap: unsupported link type")
	// ErrShortFrame means a frame ends inside its link-layer header.
	ErrShortFrame = errors.New("pcap: frame shorter than its link-layer header")
	// ErrNotIP means a raw-IP frame does not start with version 4 or 6.
	ErrNotIP = errors.New("pcap: raw frame is neither IPv4 nor IPv6")
)

// maxVLANTags bounds how many stacked VLAN tags Network skips.
const maxVLANTags = 4

// Network returns the EtherType and the bytes after the link-layer header of
// a frame of link type lt: the network-layer packet. It skips up to four
// stacked VLAN tags (TPID 0x8100, 0x88a8 or 0x9100). For raw-IP link types
// the EtherType is derived from the IP version. It does not allocate.
func Network(lt LinkType, frame []byte) (etherType uint16, payload []byte, err error) {
	switch lt {
	case LinkTypeEthernet:
		if len(frame) < 14 {
			return 0, nil, ErrShortFrame
		}
		return skipVLAN(binary.BigEndian.Uint16(frame[12:]), frame[14:])
	case LinkTypeRaw, LinkTypeIPv4, LinkTypeIPv6:
		if len(frame) == 0 {
			return 0, nil, ErrShortFrame
		}
		switch frame[0] >> 4 {
		case 4:
			return EtherTypeIPv4, frame, nil
		case 6:
			return EtherTypeIPv6, frame, nil
		}
		return 0, nil, ErrNotIP
	case LinkTypeLinuxSLL:
		if len(frame) < 16 {
			return 0, nil, ErrShortFrame
		}
		return skipVLAN(binary.BigEndian.Uint16(frame[14:]), frame[16:])
	case LinkTypeLinuxSLL2:
		if len(frame) < 20 {
			return 0, nil, ErrShortFrame
		}
		return skipVLAN(binary.BigEndian.Uint16(frame[0:]), frame[20:])
	}
	return 0, nil, ErrLinkType
}

func skipVLAN(t uint16, b []byte) (uint16, []byte, error) {
	for i := 0; i < maxVLANTags && (t == etherTypeVLAN || t == etherTypeQinQ || t == etherType9100); i++ {
		if len(b) < 4 {
			return 0, nil, ErrShortFrame
		}
		t = binary.BigEndian.Uint16(b[2:])
		b = b[4:]
	}
	return t, b, nil
}
