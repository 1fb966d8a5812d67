package faultrelay

import (
	"encoding/binary"
	"fmt"
)

// Frame layout constants.
const (
	ethHdrLen = 14
	udpHdrLen = 8
	// vnetHdrLen is the size of struct virtio_net_hdr, which an AF_PACKET
	// socket with PACKET_VNET_HDR puts before every frame it reads and
	// expects before every frame it writes.
	vnetHdrLen = 10

	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	protoUDP      = 17

	vnetNeedsCsum = 1    // VIRTIO_NET_HDR_F_NEEDS_CSUM
	vnetGSONone   = 0    // VIRTIO_NET_HDR_GSO_NONE
	vnetGSOUDPL4  = 5    // VIRTIO_NET_HDR_GSO_UDP_L4
	vnetGSOECN    = 0x80 // VIRTIO_NET_HDR_GSO_ECN
)

// vnetHdr is struct virtio_net_hdr. AF_PACKET uses the host's byte order
// for it on little-endian machines (legacy virtio), which is what this
// package is built for.
type vnetHdr struct {
	flags      uint8
	gsoType    uint8
	hdrLen     uint16
	gsoSize    uint16
	csumStart  uint16
	csumOffset uint16
}

func parseVnetHdr(b []byte) vnetHdr {
	return vnetHdr{
		flags:      b[0],
		gsoType:    b[1],
		hdrLen:     binary.LittleEndian.Uint16(b[2:]),
		gsoSize:    binary.LittleEndian.Uint16(b[4:]),
		csumStart:  binary.LittleEndian.Uint16(b[6:]),
		csumOffset: binary.LittleEndian.Uint16(b[8:]),
	}
}

// udpFrame locates a UDP datagram in an Ethernet frame: offsets of the IP
// header, the UDP header, the UDP payload and the end of the IP packet.
type udpFrame struct {
	l3, l4, payload, end int
	v6                   bool
	srcPort, dstPort     uint16
}

// parseUDPFrame reports where the UDP datagram in frame f is, or false if f
// does not carry exactly one whole, unfragmented UDP datagram over IPv4 or
// over IPv6 without extension headers.
func parseUDPFrame(f []byte) (udpFrame, bool) {
	var u udpFrame
	if len(f) < ethHdrLen {
		return u, false
	}
	u.l3 = ethHdrLen
	switch binary.BigEndian.Uint16(f[12:]) {
	case etherTypeIPv4:
		if len(f) < u.l3+20 || f[u.l3]>>4 != 4 {
			return u, false
		}
		ihl := int(f[u.l3]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(f[u.l3+2:]))
		if ihl < 20 || total < ihl+udpHdrLen || u.l3+total > len(f) {
			return u, false
		}
		if binary.BigEndian.Uint16(f[u.l3+6:])&0x3fff != 0 || f[u.l3+9] != protoUDP {
			return u, false // a fragment, or not UDP
		}
		u.l4, u.end = u.l3+ihl, u.l3+total
	case etherTypeIPv6:
		if len(f) < u.l3+40 || f[u.l3]>>4 != 6 || f[u.l3+6] != protoUDP {
			return u, false
		}
		plen := int(binary.BigEndian.Uint16(f[u.l3+4:]))
		if plen < udpHdrLen || u.l3+40+plen > len(f) {
			return u, false
		}
		u.v6, u.l4, u.end = true, u.l3+40, u.l3+40+plen
	default:
		return u, false
	}
	u.payload = u.l4 + udpHdrLen
	u.srcPort = binary.BigEndian.Uint16(f[u.l4:])
	u.dstPort = binary.BigEndian.Uint16(f[u.l4+2:])
	return u, true
}

// sum16 adds b to a ones'-complement running sum.
func sum16(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

func fold(sum uint32) uint16 {
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return uint16(sum)
}

// udpChecksum computes the UDP checksum of the datagram u locates in f, as
// it would be with the checksum field zero. A computed 0 is sent as 0xffff.
func udpChecksum(f []byte, u udpFrame) uint16 {
	var sum uint32
	length := u.end - u.l4
	if u.v6 {
		sum = sum16(sum, f[u.l3+8:u.l3+40]) // source and destination
		sum += uint32(length>>16) + uint32(length&0xffff) + protoUDP
	} else {
		sum = sum16(sum, f[u.l3+12:u.l3+20])
		sum += uint32(length) + protoUDP
	}
	sum = sum16(sum, f[u.l4:u.l4+6]) // ports and length; checksum taken as 0
	sum = sum16(sum, f[u.payload:u.end])
	c := ^fold(sum)
	if c == 0 {
		c = 0xffff
	}
	return c
}

// setUDPChecksum writes the correct UDP checksum into f.
func setUDPChecksum(f []byte, u udpFrame) {
	binary.BigEndian.PutUint16(f[u.l4+6:], udpChecksum(f, u))
}

// udpChecksumOK reports whether the datagram's checksum verifies (an IPv4
// checksum of 0 means "none" and passes).
func udpChecksumOK(f []byte, u udpFrame) bool {
	got := binary.BigEndian.Uint16(f[u.l4+6:])
	if got == 0 && !u.v6 {
		return true
	}
	return got == udpChecksum(f, u)
}

// ipv4HeaderChecksum computes the checksum of IPv4 header h with its
// checksum field taken as zero.
func ipv4HeaderChecksum(h []byte) uint16 {
	sum := sum16(0, h[:10])
	sum = sum16(sum, h[12:])
	return ^fold(sum)
}

// segmentUDP cuts a UDP GSO super-frame into the frames of gsoSize-byte
// datagrams (the last may be shorter) that the sender's stack stands for,
// each with complete lengths and checksums (and, for IPv4, consecutive
// identifications) and a zero virtio_net_hdr in front.
func segmentUDP(f []byte, u udpFrame, gsoSize int) ([][]byte, error) {
	if gsoSize <= 0 {
		return nil, fmt.Errorf("gso size %d", gsoSize)
	}
	payload := f[u.payload:u.end]
	hdr := f[:u.payload]
	id := binary.BigEndian.Uint16(f[u.l3+4:])
	var segs [][]byte
	for i, off := 0, 0; off < len(payload); i, off = i+1, off+gsoSize {
		chunk := payload[off:min(off+gsoSize, len(payload))]
		seg := make([]byte, vnetHdrLen+len(hdr)+len(chunk))
		s := seg[vnetHdrLen:]
		copy(s, hdr)
		copy(s[len(hdr):], chunk)
		su := u
		su.end = len(s)
		udpLen := udpHdrLen + len(chunk)
		if u.v6 {
			binary.BigEndian.PutUint16(s[u.l3+4:], uint16(udpLen))
		} else {
			ihl := u.l4 - u.l3
			binary.BigEndian.PutUint16(s[u.l3+2:], uint16(ihl+udpLen))
			binary.BigEndian.PutUint16(s[u.l3+4:], id+uint16(i))
			binary.BigEndian.PutUint16(s[u.l3+10:], 0)
			binary.BigEndian.PutUint16(s[u.l3+10:], ipv4HeaderChecksum(s[u.l3:u.l4]))
		}
		binary.BigEndian.PutUint16(s[u.l4+4:], uint16(udpLen))
		setUDPChecksum(s, su)
		segs = append(segs, seg)
	}
	return segs, nil
}
