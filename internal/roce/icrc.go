package roce

import (
	"encoding/binary"
	"hash/crc32"
)

// The ICRC (IBA annex A17, Linux drivers/infiniband/sw/rxe/rxe_icrc.c) is the
// standard CRC-32 (IEEE 802.3 polynomial, reflected, initial value all ones,
// final inversion) of
//
//	8 bytes of 0xff                        (stands in for the masked LRH)
//	IP header   IPv4: TOS, TTL, header checksum set to all ones
//	            IPv6: traffic class, flow label, hop limit set to all ones
//	UDP header  checksum set to 0xffff
//	BTH         byte 4 (FECN, BECN, reserved) set to 0xff
//	the rest of the packet up to the ICRC: extension headers, payload, pad
//
// stored after the pad least-significant byte first. Ethernet and VLAN
// headers are not covered. Everything else in the IPv4 header is covered,
// the identification field included.

// icrcSeed is the CRC state after the 8 bytes of 0xff, in hash/crc32's
// (pre-inverted) convention.
var icrcSeed = crc32.Update(0, crc32.IEEETable, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

var (
	errICRCShort = newErr("icrc", "packet shorter than BTH and ICRC", ErrTooShort)
	errICRCIP    = newErr("icrc", "IP header is neither a 20-byte IPv4 nor a 40-byte IPv6 header", ErrUnsupported)
	errICRCLong  = newErr("icrc", "packet too long for the IP and UDP length fields", ErrLength)
)

// slicing8 holds the tables of the slicing-by-8 CRC-32 (IEEE, reflected)
// used for the masked header copies.
var slicing8 = func() *[8][256]uint32 {
	t := new([8][256]uint32)
	t[0] = *crc32.IEEETable
	for i := 0; i < 256; i++ {
		c := t[0][i]
		for k := 1; k < 8; k++ {
			c = t[0][c&0xff] ^ c>>8
			t[k][i] = c
		}
	}
	return t
}()

// updateSmall is crc32.Update(crc, crc32.IEEETable, p) in pure Go
// (slicing-by-8). The masked header copies live on the caller's stack;
// handing them to crc32.Update would make them escape to the heap (it
// dispatches through a function value), so the few dozen header bytes go
// through this loop instead.
func updateSmall(crc uint32, p []byte) uint32 {
	t := slicing8
	crc = ^crc
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint32(p)
		crc = t[0][p[7]] ^ t[1][p[6]] ^ t[2][p[5]] ^ t[3][p[4]] ^
			t[4][crc>>24] ^ t[5][crc>>16&0xff] ^ t[6][crc>>8&0xff] ^ t[7][crc&0xff]
		p = p[8:]
	}
	for _, v := range p {
		crc = t[0][byte(crc)^v] ^ crc>>8
	}
	return ^crc
}

// v4Pseudo and v6Pseudo size the stack copies of the headers the ICRC
// masks: IP, UDP and BTH.
const (
	v4Pseudo = IPv4Len + UDPLen + BTHLen
	v6Pseudo = IPv6Len + UDPLen + BTHLen
)

// icrcSum finishes an ICRC: h holds the masked IP and UDP headers in its
// first n bytes and room for the BTH after them; pkt is the transport part
// including its trailing 4-byte ICRC field, which is skipped.
func icrcSum(h []byte, n int, pkt []byte) uint32 {
	copy(h[n:n+BTHLen], pkt[:BTHLen])
	h[n+4] = 0xff // FECN, BECN, reserved
	crc := updateSmall(icrcSeed, h[:n+BTHLen])
	return crc32.Update(crc, crc32.IEEETable, pkt[BTHLen:len(pkt)-ICRCLen])
}

// maskIPv4UDP masks the variant fields of an IPv4+UDP header copy.
func maskIPv4UDP(h []byte) {
	h[1] = 0xff                             // TOS
	h[8] = 0xff                             // TTL
	h[10], h[11] = 0xff, 0xff               // header checksum
	h[IPv4Len+6], h[IPv4Len+7] = 0xff, 0xff // UDP checksum
}

// maskIPv6UDP masks the variant fields of an IPv6+UDP header copy.
func maskIPv6UDP(h []byte) {
	h[0] |= 0x0f                            // traffic class, high nibble
	h[1], h[2], h[3] = 0xff, 0xff, 0xff     // traffic class low nibble, flow label
	h[7] = 0xff                             // hop limit
	h[IPv6Len+6], h[IPv6Len+7] = 0xff, 0xff // UDP checksum
}

// ICRCIPv4 returns the ICRC of the RoCEv2 packet pkt (the UDP payload: BTH
// through the 4-byte ICRC field, whose content is ignored) carried with the
// IPv4 and UDP headers ip and udp, taken exactly as given (lengths
// included).
func ICRCIPv4(ip *IPv4, udp *UDP, pkt []byte) (uint32, error) {
	if len(pkt) < MinPacketLen {
		return 0, errICRCShort
	}
	var h [v4Pseudo]byte
	if err := ip.Marshal(h[:]); err != nil {
		return 0, err
	}
	_ = udp.Marshal(h[IPv4Len:])
	maskIPv4UDP(h[:])
	return icrcSum(h[:], IPv4Len+UDPLen, pkt), nil
}

// ICRCIPv6 is ICRCIPv4 for IPv6.
func ICRCIPv6(ip *IPv6, udp *UDP, pkt []byte) (uint32, error) {
	if len(pkt) < MinPacketLen {
		return 0, errICRCShort
	}
	var h [v6Pseudo]byte
	if err := ip.Marshal(h[:]); err != nil {
		return 0, err
	}
	_ = udp.Marshal(h[IPv6Len:])
	maskIPv6UDP(h[:])
	return icrcSum(h[:], IPv6Len+UDPLen, pkt), nil
}

// ICRCRaw returns the ICRC of pkt (BTH through the ICRC field) given the raw
// IP header (a 20-byte IPv4 header or a 40-byte IPv6 header, told apart by
// length and version) and the raw 8-byte UDP header as they appear on the
// wire. It is what a receiver uses to check a captured frame.
func ICRCRaw(ipHdr, udpHdr, pkt []byte) (uint32, error) {
	if len(pkt) < MinPacketLen || len(udpHdr) < UDPLen {
		return 0, errICRCShort
	}
	switch {
	case len(ipHdr) == IPv4Len && ipHdr[0]>>4 == 4:
		var h [v4Pseudo]byte
		copy(h[:], ipHdr)
		copy(h[IPv4Len:], udpHdr[:UDPLen])
		maskIPv4UDP(h[:])
		return icrcSum(h[:], IPv4Len+UDPLen, pkt), nil
	case len(ipHdr) == IPv6Len && ipHdr[0]>>4 == 6:
		var h [v6Pseudo]byte
		copy(h[:], ipHdr)
		copy(h[IPv6Len:], udpHdr[:UDPLen])
		maskIPv6UDP(h[:])
		return icrcSum(h[:], IPv6Len+UDPLen, pkt), nil
	}
	return 0, errICRCIP
}

// StoredICRC returns the ICRC stored in the last 4 bytes of pkt, or 0 if
// pkt is shorter than 4 bytes.
func StoredICRC(pkt []byte) uint32 {
	if len(pkt) < ICRCLen {
		return 0
	}
	return binary.LittleEndian.Uint32(pkt[len(pkt)-ICRCLen:])
}

// PutICRC stores crc in the last 4 bytes of pkt, least-significant byte
// first. It does nothing if pkt is shorter than 4 bytes.
func PutICRC(pkt []byte, crc uint32) {
	if len(pkt) >= ICRCLen {
		binary.LittleEndian.PutUint32(pkt[len(pkt)-ICRCLen:], crc)
	}
}

// IPv4Path is what a sender on a UDP socket knows of the IPv4 and UDP
// headers the kernel will put in front of its RoCEv2 packets, which is all
// the ICRC needs: the fields the ICRC masks (TOS, TTL, checksums) and the
// lengths (derived from the packet) need not be known.
//
// The one field the sender cannot choose is the IP identification. Linux
// sets it to 0 for a datagram with DF set sent on an unconnected UDP socket
// with IP_MTU_DISCOVER = IP_PMTUDISC_DO, and to an incrementing per-socket
// counter on a connected socket; the caller must pass the value the kernel
// will use.
type IPv4Path struct {
	Src, Dst     [4]byte
	SrcPort      uint16 // see UDPSourcePort
	DstPort      uint16 // UDPPort (4791) for RoCEv2
	DontFragment bool   // whether the kernel sets DF (it does under IP_PMTUDISC_DO)
}

// Headers returns the IPv4 and UDP headers the path implies for a packet
// (UDP payload) of pktLen bytes with identification id: TOS 0, TTL 64, UDP
// checksum 0 and a correct IPv4 header checksum. The ICRC does not depend on
// TOS, TTL or the checksums.
func (p *IPv4Path) Headers(id uint16, pktLen int) (IPv4, UDP) {
	ip := IPv4{ID: id, TTL: 64, Protocol: ProtoUDP, Src: p.Src, Dst: p.Dst, Length: uint16(IPv4Len + UDPLen + pktLen)}
	if p.DontFragment {
		ip.Flags = IPv4DontFragment
	}
	var h [IPv4Len]byte
	_ = ip.Marshal(h[:])
	ip.Checksum = IPv4Checksum(h[:])
	return ip, UDP{SrcPort: p.SrcPort, DstPort: p.DstPort, Length: uint16(UDPLen + pktLen)}
}

// ICRC returns the ICRC of pkt (BTH through the 4-byte ICRC field, whose
// content is ignored) sent on the path with IP identification id.
func (p *IPv4Path) ICRC(id uint16, pkt []byte) (uint32, error) {
	if len(pkt) < MinPacketLen {
		return 0, errICRCShort
	}
	if len(pkt) > 0xffff-IPv4Len-UDPLen {
		return 0, errICRCLong
	}
	return ICRCUpdate(p.ICRCBegin(id, len(pkt), pkt[:BTHLen]), pkt[BTHLen:len(pkt)-ICRCLen]), nil
}

// Seal computes the ICRC of pkt as ICRC does and stores it in pkt's last 4
// bytes.
func (p *IPv4Path) Seal(id uint16, pkt []byte) error {
	crc, err := p.ICRC(id, pkt)
	if err != nil {
		return err
	}
	PutICRC(pkt, crc)
	return nil
}

// IPv6Path is IPv4Path for IPv6. Every IPv6 header field the ICRC covers is
// known to the sender (traffic class, flow label and hop limit are masked),
// so there is no identification to predict.
type IPv6Path struct {
	Src, Dst [16]byte
	SrcPort  uint16
	DstPort  uint16
}

// ICRC returns the ICRC of pkt (BTH through the 4-byte ICRC field, whose
// content is ignored) sent on the path.
func (p *IPv6Path) ICRC(pkt []byte) (uint32, error) {
	if len(pkt) < MinPacketLen {
		return 0, errICRCShort
	}
	if len(pkt) > 0xffff-UDPLen {
		return 0, errICRCLong
	}
	return ICRCUpdate(p.ICRCBegin(len(pkt), pkt[:BTHLen]), pkt[BTHLen:len(pkt)-ICRCLen]), nil
}

// Seal computes the ICRC of pkt and stores it in pkt's last 4 bytes.
func (p *IPv6Path) Seal(pkt []byte) error {
	crc, err := p.ICRC(pkt)
	if err != nil {
		return err
	}
	PutICRC(pkt, crc)
	return nil
}

// FlowLabel returns the flow label Linux derives from a QP pair when none is
// configured (rdma_calc_flow_label): the 20-bit fold of lqpn*rqpn.
func FlowLabel(lqpn, rqpn uint32) uint32 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v & 0xfffff)
}

// UDPSourcePort returns the RoCEv2 UDP source port for a flow label, as
// Linux and RoCE NICs compute it (rdma_get_udp_sport): when flowLabel is 0
// it is first derived from the QP numbers with FlowLabel; the low 14 bits of
// the label are XORed with its top 6 bits and placed in 0xc000-0xffff.
func UDPSourcePort(flowLabel, lqpn, rqpn uint32) uint16 {
	fl := flowLabel & 0xfffff
	if fl == 0 {
		fl = FlowLabel(lqpn, rqpn)
	}
	low := fl&0x3fff ^ (fl&0xfc000)>>14
	return uint16(low | 0xc000)
}

// ICRCBegin starts the ICRC of a packet of pktLen bytes (BTH through the
// ICRC field) sent on the path with IPv4 identification id, whose BTH and
// extension headers are hdr. Continue with ICRCUpdate over the payload
// pieces and the pad, in order; the result is the ICRC. It serves senders
// that gather the payload from several buffers. A sender of many packets
// on one path computes the path's part once (Prefix) instead.
func (p *IPv4Path) ICRCBegin(id uint16, pktLen int, hdr []byte) uint32 {
	return p.Prefix().Begin(id, pktLen, hdr)
}

// ICRCBegin is IPv4Path.ICRCBegin for IPv6.
func (p *IPv6Path) ICRCBegin(pktLen int, hdr []byte) uint32 {
	return p.Prefix().Begin(pktLen, hdr)
}

// The ICRC's CRC is affine in its input: over the masked IP and UDP
// headers it is the CRC of the path's headers with the packet's length
// and identification fields zero, XOR the contribution of each byte of
// those fields, which depends only on its value and on how many header
// bytes follow it. A path's part is computed once (Prefix) and a packet's
// fields are six table lookups, not a CRC over 28 (IPv4) or 48 (IPv6)
// bytes. Registers here are raw (no pre or post inversion).

// fieldTab[k][v] is the raw CRC register's change when a header byte
// followed by fieldAfter[k] more header bytes changes from 0 to v.
var fieldTab [len(fieldAfter)][256]uint32

// fieldAfter: the header bytes after each varying byte. IPv4 (28 bytes of
// IP and UDP header): total length at 2-3, identification at 4-5, UDP
// length at 24-25. IPv6 (48 bytes): payload length at 4-5; the UDP length
// is again 3 and 2 bytes from the end.
var fieldAfter = [...]int{25, 24, 23, 22, 3, 2, 43, 42}

const (
	fTotHi = iota
	fTotLo
	fIDHi
	fIDLo
	fUDPHi
	fUDPLo
	f6LenHi
	f6LenLo
)

func init() {
	for k, after := range fieldAfter {
		for v := range 256 {
			fieldTab[k][v] = zeroShift(crc32.IEEETable[v], after)
		}
	}
}

// field2 is the change of a 16-bit field whose bytes' tables are hi, lo.
func field2(hi, lo int, v uint16) uint32 { return fieldTab[hi][v>>8] ^ fieldTab[lo][v&0xff] }

// IPv4Prefix is the ICRC's part over a path's IPv4 and UDP headers, for
// packets of any length and identification (IPv4Path.Prefix).
type IPv4Prefix struct{ base uint32 }

// IPv6Prefix is IPv4Prefix for IPv6 (IPv6Path.Prefix).
type IPv6Prefix struct{ base uint32 }

// Prefix computes the path's part of every ICRC sent on it.
func (p *IPv4Path) Prefix() IPv4Prefix {
	var h [IPv4Len + UDPLen]byte
	h[0] = 0x45
	if p.DontFragment {
		h[6] = IPv4DontFragment << 5
	}
	h[9] = ProtoUDP
	copy(h[12:16], p.Src[:])
	copy(h[16:20], p.Dst[:])
	binary.BigEndian.PutUint16(h[20:], p.SrcPort)
	binary.BigEndian.PutUint16(h[22:], p.DstPort)
	maskIPv4UDP(h[:])
	return IPv4Prefix{base: ^updateSmall(icrcSeed, h[:])}
}

// Prefix computes the path's part of every ICRC sent on it.
func (p *IPv6Path) Prefix() IPv6Prefix {
	var h [IPv6Len + UDPLen]byte
	h[0] = 0x60
	h[6] = ProtoUDP
	copy(h[8:24], p.Src[:])
	copy(h[24:40], p.Dst[:])
	binary.BigEndian.PutUint16(h[40:], p.SrcPort)
	binary.BigEndian.PutUint16(h[42:], p.DstPort)
	maskIPv6UDP(h[:])
	return IPv6Prefix{base: ^updateSmall(icrcSeed, h[:])}
}

// Begin is IPv4Path.ICRCBegin on the prefix's path.
func (x IPv4Prefix) Begin(id uint16, pktLen int, hdr []byte) uint32 {
	r := x.base ^ field2(fTotHi, fTotLo, uint16(IPv4Len+UDPLen+pktLen)) ^ field2(fIDHi, fIDLo, id) ^
		field2(fUDPHi, fUDPLo, uint16(UDPLen+pktLen))
	return bthICRC(^r, hdr)
}

// Begin is IPv6Path.ICRCBegin on the prefix's path.
func (x IPv6Prefix) Begin(pktLen int, hdr []byte) uint32 {
	n := uint16(UDPLen + pktLen)
	r := x.base ^ field2(f6LenHi, f6LenLo, n) ^ field2(fUDPHi, fUDPLo, n)
	return bthICRC(^r, hdr)
}

// bthICRC continues an ICRC over a packet's BTH, masked, and the
// extension headers after it in hdr.
func bthICRC(crc uint32, hdr []byte) uint32 {
	var b [BTHLen]byte
	copy(b[:], hdr[:BTHLen])
	b[4] = 0xff // FECN, BECN, reserved
	return updateSmall(updateSmall(crc, b[:]), hdr[BTHLen:])
}

// ICRCUpdate continues an ICRC started by ICRCBegin over b.
func ICRCUpdate(crc uint32, b []byte) uint32 {
	if len(b) < smallCRC {
		return updateSmall(crc, b)
	}
	return crc32.Update(crc, crc32.IEEETable, b)
}

// smallCRC: below it hash/crc32 would use a table loop like updateSmall
// (its carry-less multiplication starts at 64 bytes), behind a dispatch
// that costs about as much as the CRC of a short piece.
const smallCRC = 64
