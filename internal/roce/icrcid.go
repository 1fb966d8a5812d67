package roce

import (
	"hash/crc32"
	"math/bits"
	"sync/atomic"
)

// A receiver on a UDP socket sees the addresses and ports of a datagram but
// not its IPv4 identification, which the ICRC covers. Linux senders choose
// it: 0 for an unfragmentable datagram on an unconnected socket, an
// incrementing per-socket counter otherwise, and consecutive values when UDP
// GSO cuts one send into several datagrams. Because a CRC is affine in its
// input bits, the ICRC as a function of the 16 identification bits is
//
//	ICRC(id) = ICRC(0) XOR D(id)
//
// with D linear and depending only on the packet length. SolveID inverts
// D: it finds the identification, if any, under which the stored ICRC is
// right. A corrupted packet passes only when the corruption's CRC
// difference happens to lie in D's 16-dimensional image (probability
// 2^-16): the check keeps 16 of the ICRC's 32 bits of protection for
// senders whose identification the receiver cannot know.

// idBasis is D for one packet length: the ICRC difference of each
// identification bit, and for each bit the CRC bits whose parity gives it.
type idBasis struct {
	d    [16]uint32
	comb [16]uint32
}

const idCacheLen = 9216

var idCache [idCacheLen]atomic.Pointer[idBasis]

var zeroBytes [4096]byte

// zeroShift advances a raw CRC register (no pre or post inversion) through
// n zero bytes.
func zeroShift(x uint32, n int) uint32 {
	for n > 0 {
		k := min(n, len(zeroBytes))
		x = ^crc32.Update(^x, crc32.IEEETable, zeroBytes[:k])
		n -= k
	}
	return x
}

// basisFor returns D for a transport part of pktLen bytes, computed once
// per length.
func basisFor(pktLen int) (*idBasis, bool) {
	if pktLen < idCacheLen {
		if b := idCache[pktLen].Load(); b != nil {
			return b, true
		}
	}
	b := new(idBasis)
	// CRC input: 8 bytes of 0xff, the IPv4 header with the ID at bytes 4
	// (high) and 5 (low), the UDP header, the packet without its ICRC.
	// After the low byte: 14 more IPv4 header bytes, the UDP header and
	// the packet up to its ICRC.
	after := IPv4Len - 6 + UDPLen + pktLen - ICRCLen
	for k := 0; k < 8; k++ {
		v := crc32.IEEETable[byte(1)<<k] // a byte with bit k set, from state 0
		b.d[k] = zeroShift(v, after)
		b.d[8+k] = zeroShift(v, after+1)
	}
	if !b.invert() {
		return nil, false
	}
	if pktLen < idCacheLen {
		idCache[pktLen].Store(b)
	}
	return b, true
}

// invert finds, for each identification bit i, a set of CRC bits whose
// parity equals it (Gaussian elimination over GF(2)).
func (b *idBasis) invert() bool {
	type row struct {
		m    uint16 // identification bits this combination of CRC bits sees
		comb uint32 // the CRC bits combined
	}
	var piv [16]row
	var have [16]bool
	for c := 0; c < 32; c++ {
		var r row
		for i := 0; i < 16; i++ {
			if b.d[i]>>c&1 != 0 {
				r.m |= 1 << i
			}
		}
		r.comb = 1 << c
		for r.m != 0 {
			i := bits.Len16(r.m) - 1
			if !have[i] {
				piv[i], have[i] = r, true
				break
			}
			r.m ^= piv[i].m
			r.comb ^= piv[i].comb
		}
	}
	for i := range have {
		if !have[i] {
			return false
		}
	}
	// Reduce to unit rows, lowest leading bit first.
	for i := 0; i < 16; i++ {
		for j := i + 1; j < 16; j++ {
			if piv[j].m>>i&1 != 0 {
				piv[j].m ^= piv[i].m
				piv[j].comb ^= piv[i].comb
			}
		}
	}
	for i := 0; i < 16; i++ {
		if piv[i].m != 1<<i {
			return false
		}
		b.comb[i] = piv[i].comb
	}
	return true
}

// SolveID finds the IPv4 identification under which pkt's stored ICRC is
// right for this path, and reports whether one exists. It costs one ICRC
// plus a few dozen operations (the per-length basis is computed once).
func (p *IPv4Path) SolveID(pkt []byte) (uint16, bool) { return p.Prefix().SolveID(pkt) }

// SolveID is IPv4Path.SolveID on the prefix's path.
func (x IPv4Prefix) SolveID(pkt []byte) (uint16, bool) {
	if len(pkt) < MinPacketLen || len(pkt) > 0xffff-IPv4Len-UDPLen {
		return 0, false
	}
	c0 := ICRCUpdate(x.Begin(0, len(pkt), pkt[:BTHLen]), pkt[BTHLen:len(pkt)-ICRCLen])
	delta := c0 ^ StoredICRC(pkt)
	if delta == 0 {
		return 0, true
	}
	b, ok := basisFor(len(pkt))
	if !ok {
		return 0, false
	}
	var id uint16
	var check uint32
	for i := 0; i < 16; i++ {
		if bits.OnesCount32(delta&b.comb[i])&1 != 0 {
			id |= 1 << i
			check ^= b.d[i]
		}
	}
	return id, check == delta
}
