package netpkt

import (
	"encoding/binary"
	"math/bits"
)

// Sum adds b to the running one's-complement sum acc, as 16-bit
// big-endian words (a trailing odd byte is the high half of a word). b
// must start at an even offset of the checksummed data; Fold turns the
// result into a checksum.
func Sum(acc uint64, b []byte) uint64 {
	var c uint64
	for len(b) >= 32 {
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b), c)
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b[8:]), c)
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b[16:]), c)
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b[24:]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b), c)
		b = b[8:]
	}
	acc, c = bits.Add64(acc, 0, c)
	acc += c // at most one more carry, which cannot carry again
	for len(b) >= 2 {
		acc, c = bits.Add64(acc, uint64(binary.BigEndian.Uint16(b)), 0)
		acc += c
		b = b[2:]
	}
	if len(b) == 1 {
		acc, c = bits.Add64(acc, uint64(b[0])<<8, 0)
		acc += c
	}
	return acc
}

// Fold reduces a one's-complement sum to 16 bits (not complemented).
func Fold(acc uint64) uint16 {
	acc = acc>>32 + acc&0xffffffff
	acc = acc>>32 + acc&0xffffffff
	acc = acc>>16 + acc&0xffff
	acc = acc>>16 + acc&0xffff
	return uint16(acc)
}

// Checksum is the Internet checksum of b (RFC 1071): the complement of
// its folded one's-complement sum.
func Checksum(b []byte) uint16 { return ^Fold(Sum(0, b)) }

// pseudoSum is the one's-complement sum of the TCP/UDP pseudo-header:
// addresses (4 or 16 bytes each), protocol and L4 length.
func pseudoSum(src, dst []byte, proto uint8, l4len int) uint64 {
	acc := Sum(0, src)
	acc = Sum(acc, dst)
	return acc + uint64(proto) + uint64(l4len)
}

// ipv4HeaderChecksum writes the checksum of the IPv4 header h.
func ipv4HeaderChecksum(h []byte) {
	h[10], h[11] = 0, 0
	binary.BigEndian.PutUint16(h[10:], Checksum(h))
}

// l4Checksum writes the TCP or UDP checksum of seg (header and payload)
// whose pseudo-header addresses are src and dst. A UDP checksum that
// computes to 0 is sent as 0xffff (RFC 768).
func l4Checksum(seg []byte, src, dst []byte, proto uint8) {
	off := 16
	if proto == ProtoUDP {
		off = 6
	}
	seg[off], seg[off+1] = 0, 0
	c := ^Fold(Sum(pseudoSum(src, dst, proto, len(seg)), seg))
	if c == 0 && proto == ProtoUDP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(seg[off:], c)
}

// VerifyChecksums reports whether a received frame's checksums are good,
// as a NIC's receive checksum offload reports IP_CSUM_OK: the frame has an
// IP header and a TCP or UDP header (not in a later fragment), every IPv4
// header checksum is right, the innermost TCP or UDP checksum is right,
// and so is a VXLAN frame's outer UDP checksum unless it is zero over
// IPv4 (RFC 7348). A UDP checksum of zero over IPv4 means "none" and
// passes; an IP length beyond the frame fails. tag is a tag the kernel
// took out of the frame, if any. It does not allocate.
func VerifyChecksums(frame []byte, tag Tag) bool {
	var l Layers
	Parse(frame, tag, &l)
	if l.Has&(HasTCP|HasUDP) == 0 || l.Has&HasFragment != 0 {
		return false
	}
	if l.Has&HasIPv4 != 0 && Checksum(frame[l.L3:l.L4]) != 0 {
		return false
	}
	if l.Has&HasInnerIPv4 != 0 && Checksum(frame[l.InnerL3:l.InnerL4]) != 0 {
		return false
	}
	if l.Has&(HasInnerTCP|HasInnerUDP) != 0 {
		if !l4Good(frame, int(l.InnerL3), int(l.InnerL4), l.Has&HasInnerIPv4 != 0, l.Has&HasInnerTCP != 0) {
			return false
		}
	}
	return l4Good(frame, int(l.L3), int(l.L4), l.Has&HasIPv4 != 0, l.Has&HasTCP != 0)
}

// l4Segment locates the transport segment at l4 whose IP header is at
// l3: the pseudo-header's addresses and protocol, and where the segment
// ends by the IP length; ok is false when that length runs past the
// frame or leaves no room for the transport header.
func l4Segment(f []byte, l3, l4 int, v4, tcp bool) (src, dst []byte, proto uint8, end int, ok bool) {
	if v4 {
		src, dst = f[l3+12:l3+16], f[l3+16:l3+20]
		end = l3 + int(binary.BigEndian.Uint16(f[l3+2:]))
	} else {
		src, dst = f[l3+8:l3+24], f[l3+24:l3+40]
		end = l3 + IPv6Len + int(binary.BigEndian.Uint16(f[l3+4:]))
	}
	proto, hdr := uint8(ProtoUDP), UDPLen
	if tcp {
		proto, hdr = ProtoTCP, TCPLen
	}
	return src, dst, proto, end, end <= len(f) && end >= l4+hdr
}

// l4Good verifies the checksum of the transport header at l4 whose IP
// header is at l3, over the segment the IP length gives.
func l4Good(f []byte, l3, l4 int, v4, tcp bool) bool {
	src, dst, proto, end, ok := l4Segment(f, l3, l4, v4, tcp)
	if !ok {
		return false
	}
	seg := f[l4:end]
	if !tcp && v4 && binary.BigEndian.Uint16(seg[6:]) == 0 {
		return true // no UDP checksum
	}
	return Fold(Sum(pseudoSum(src, dst, proto, len(seg)), seg)) == 0xffff
}
