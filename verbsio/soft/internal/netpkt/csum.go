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
