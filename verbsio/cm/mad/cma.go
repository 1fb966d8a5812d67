package mad

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// PortSpace is an rdma_cm port space (enum rdma_ucm_port_space): the upper
// part of the service ID of an IP-addressed connection.
type PortSpace uint16

// rdma_cm port spaces.
const (
	PortSpaceIPoIB PortSpace = 0x0002
	PortSpaceTCP   PortSpace = 0x0106 // RC and UC connections (RDMA_PS_TCP)
	PortSpaceUDP   PortSpace = 0x0111 // UD, resolved through SIDR (RDMA_PS_UDP)
	PortSpaceIB    PortSpace = 0x013f
)

// String names the port space as rdma_cm does ("TCP", "UDP", ...).
func (p PortSpace) String() string {
	switch p {
	case PortSpaceIPoIB:
		return "IPoIB"
	case PortSpaceTCP:
		return "TCP"
	case PortSpaceUDP:
		return "UDP"
	case PortSpaceIB:
		return "IB"
	}
	return fmt.Sprintf("ps %#04x", uint16(p))
}

// ServiceID returns the service ID rdma_cm listens on and connects to for
// port port of port space ps (rdma_get_service_id: ps << 16 | port), e.g.
// 0x0000000001064a69 for TCP port 19049.
func ServiceID(ps PortSpace, port uint16) uint64 { return uint64(ps)<<16 | uint64(port) }

// ServicePort splits an rdma_cm service ID into port space and port; ok is
// false when the ID is not in the IP range (its upper 32 bits are not 0).
func ServicePort(sid uint64) (ps PortSpace, port uint16, ok bool) {
	if sid>>32 != 0 {
		return 0, 0, false
	}
	return PortSpace(sid >> 16), uint16(sid), true
}

// CMAHeaderLen is the size of rdma_cm's private-data header.
const CMAHeaderLen = 36

// CMAVersion is the only rdma_cm header version (CMA_VERSION).
const CMAVersion = 0

// CMAHeader is the header rdma_cm puts at the start of a REQ's and a
// SIDR_REQ's private data (struct cma_hdr): the consumer's private data
// follows it, so a REQ carries at most 92-36 = 56 bytes of it.
//
//	byte 0     version (0)
//	byte 1     IP version in the upper 4 bits (4 or 6), lower 4 bits reserved
//	bytes 2-3  port of the active side (big-endian)
//	bytes 4-19 source address: IPv6, or IPv4 in bytes 16-19 after 12 zero bytes
//	bytes 20-35 destination address, the same way
type CMAHeader struct {
	Version uint8
	// IPVersion is 4 or 6.
	IPVersion uint8
	// Port is the active side's port; the passive side's is in the
	// service ID.
	Port uint16
	// Src is the active side's address, Dst the passive side's.
	Src, Dst netip.Addr
}

// Marshal writes the header into b[:CMAHeaderLen].
func (h *CMAHeader) Marshal(b []byte) error {
	if len(b) < CMAHeaderLen {
		return newErr("encode cma header", fmt.Sprintf("buffer of %d bytes, need %d", len(b), CMAHeaderLen), ErrShortBuffer)
	}
	if h.IPVersion != 4 && h.IPVersion != 6 {
		return newErr("encode cma header", fmt.Sprintf("IP version %d is not 4 or 6", h.IPVersion), ErrRange)
	}
	b[0] = h.Version
	b[1] = h.IPVersion << 4
	binary.BigEndian.PutUint16(b[2:], h.Port)
	for i, a := range []netip.Addr{h.Src, h.Dst} {
		f := b[4+16*i : 20+16*i]
		clear(f)
		switch {
		case h.IPVersion == 4 && a.Unmap().Is4():
			v := a.Unmap().As4()
			copy(f[12:], v[:])
		case h.IPVersion == 6 && a.Is6():
			v := a.As16()
			copy(f, v[:])
		default:
			return newErr("encode cma header", fmt.Sprintf("address %v is not IPv%d", a, h.IPVersion), ErrRange)
		}
	}
	return nil
}

// Unmarshal reads the header from b. It fails on a version other than 0
// or an IP version other than 4 and 6, as rdma_cm's passive side does
// (cma_save_ip_info).
func (h *CMAHeader) Unmarshal(b []byte) error {
	if len(b) < CMAHeaderLen {
		return newErr("decode cma header", fmt.Sprintf("%d bytes, need %d", len(b), CMAHeaderLen), ErrTruncated)
	}
	h.Version = b[0]
	h.IPVersion = b[1] >> 4
	h.Port = binary.BigEndian.Uint16(b[2:])
	if h.Version != CMAVersion {
		return newErr("decode cma header", fmt.Sprintf("version %d, not %d", h.Version, CMAVersion), ErrRange)
	}
	switch h.IPVersion {
	case 4:
		h.Src = netip.AddrFrom4([4]byte(b[16:20]))
		h.Dst = netip.AddrFrom4([4]byte(b[32:36]))
	case 6:
		h.Src = netip.AddrFrom16([16]byte(b[4:20]))
		h.Dst = netip.AddrFrom16([16]byte(b[20:36]))
	default:
		return newErr("decode cma header", fmt.Sprintf("IP version %d is not 4 or 6", h.IPVersion), ErrRange)
	}
	return nil
}
