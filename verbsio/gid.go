package verbsio

import (
	"encoding/hex"
	"fmt"
	"net/netip"
)

// GID is a 128-bit global identifier, the layer-3 address of a port (an
// IPv6 address, or an IPv4-mapped IPv6 address on RoCE v2).
type GID [16]byte

// String formats the GID as an IPv6 address, as ibv_devinfo does
// ("fe80::5054:ff:fe77:1", "::ffff:10.77.0.1").
func (g GID) String() string {
	return netip.AddrFrom16(g).String()
}

// Raw formats the GID as sysfs does: eight groups of four hex digits.
func (g GID) Raw() string {
	h := hex.EncodeToString(g[:])
	out := make([]byte, 0, 39)
	for i := 0; i < 32; i += 4 {
		if i > 0 {
			out = append(out, ':')
		}
		out = append(out, h[i:i+4]...)
	}
	return string(out)
}

// IsZero reports whether every byte is zero (an unused table entry).
func (g GID) IsZero() bool { return g == GID{} }

// Addr returns the GID as an IP address, unmapping IPv4-mapped GIDs.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// IsIPv4Mapped reports whether the GID is an IPv4-mapped address.
func (g GID) IsIPv4Mapped() bool { return netip.AddrFrom16(g).Is4In6() }

// GIDFromAddr returns the GID for an IP address (IPv4 addresses are mapped).
func GIDFromAddr(a netip.Addr) GID { return GID(a.As16()) }

// ParseGID parses a GID written as an IPv6 (or IPv4) address or in sysfs's
// eight-group form.
func ParseGID(s string) (GID, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return GID{}, fmt.Errorf("parse gid %q: not an IPv6/IPv4 address", s)
	}
	return GIDFromAddr(a), nil
}

// GIDEntry is one entry of a port's GID table.
type GIDEntry struct {
	Index  int     // table index (perftest's -x)
	GID    GID     // the address
	Type   GIDType // IB, RoCE v1 or RoCE v2
	Netdev string  // the network device the entry belongs to, if any
}
