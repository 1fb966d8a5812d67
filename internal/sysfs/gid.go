package sysfs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// GIDType is the type of a GID table entry, from gid_attrs/types/N.
type GIDType uint8

// GID types. The kernel writes "IB/RoCE v1" for both an InfiniBand GID
// and a RoCE v1 GID; the port's link layer tells them apart.
const (
	GIDTypeUnknown GIDType = iota // the type could not be read
	GIDTypeIB                     // InfiniBand link layer
	GIDTypeRoCEv1                 // RoCE v1: Ethernet, GRH, EtherType 0x8915
	GIDTypeRoCEv2                 // RoCE v2: IPv4/IPv6 + UDP 4791
)

// String returns "IB", "RoCE v1", "RoCE v2" or "unknown".
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	default:
		return "unknown"
	}
}

// ParseGIDType parses gid_attrs/types/N. linkLayer is the port's
// link_layer; it decides whether "IB/RoCE v1" means IB or RoCE v1.
func ParseGIDType(s, linkLayer string) (GIDType, error) {
	switch strings.TrimSpace(s) {
	case "IB/RoCE v1":
		if linkLayer == LinkLayerEthernet {
			return GIDTypeRoCEv1, nil
		}
		return GIDTypeIB, nil
	case "RoCE v2":
		return GIDTypeRoCEv2, nil
	case "":
		return GIDTypeUnknown, fmt.Errorf("gid type: empty")
	default:
		return GIDTypeUnknown, fmt.Errorf("gid type: parse %q: unknown type", s)
	}
}

// Link layers as ports/N/link_layer spells them.
const (
	LinkLayerInfiniBand = "InfiniBand"
	LinkLayerEthernet   = "Ethernet"
)

// GID is one non-zero entry of a port's GID table.
type GID struct {
	// Index is N in gids/N; it is the sgid_index verbs use.
	Index int
	// Raw is the GID in network byte order.
	Raw [16]byte
	// Type is from gid_attrs/types/N; GIDTypeUnknown if unreadable.
	Type GIDType
	// NetDev is from gid_attrs/ndevs/N: the netdev the GID belongs to on
	// RoCE ports. Empty on InfiniBand ports and when unreadable.
	NetDev string
}

// ParseGID parses the kernel's gids/N format
// ("fe80:0000:0000:0000:5054:00ff:fe77:0001").
func ParseGID(s string) ([16]byte, error) {
	var raw [16]byte
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 8 {
		return raw, fmt.Errorf("gid: parse %q: want 8 groups", s)
	}
	for i, p := range parts {
		if len(p) == 0 || len(p) > 4 {
			return raw, fmt.Errorf("gid: parse %q: bad group %q", s, p)
		}
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return raw, fmt.Errorf("gid: parse %q: bad group %q", s, p)
		}
		binary.BigEndian.PutUint16(raw[2*i:], uint16(v))
	}
	return raw, nil
}

// IsZero reports whether every byte of the GID is zero (an unused entry).
func (g GID) IsZero() bool { return g.Raw == [16]byte{} }

// Addr returns the GID as an IPv6 address (IPv4-mapped for IPv4 GIDs).
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g.Raw) }

// String formats the GID as inet_ntop(AF_INET6) does, which is how
// ibv_devinfo prints RoCE v2 GIDs: "fe80::5054:ff:fe77:1",
// "::ffff:10.77.0.1".
func (g GID) String() string { return FormatIPv6(g.Raw) }

// SysfsString formats the GID as gids/N does: eight groups of four hex
// digits.
func (g GID) SysfsString() string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g.Raw[i], g.Raw[i+1])
	}
	return b.String()
}

// IsIPv4Mapped reports whether the GID is an IPv4 address mapped into
// IPv6 (::ffff:a.b.c.d) or an IPv4-encoded multicast GID
// (ff0e::ffff:a.b.c.d). This is perftest's ipv6_addr_v4mapped.
func (g GID) IsIPv4Mapped() bool {
	w := func(i int) uint32 { return binary.BigEndian.Uint32(g.Raw[4*i:]) }
	if w(0)|w(1) == 0 && w(2) == 0x0000ffff {
		return true
	}
	return w(0) == 0xff0e0000 && w(1) == 0 && w(2) == 0x0000ffff
}

// IsLinkLocal reports whether the GID is an IPv6 link-local address
// (fe80::/10) or an IPv4-mapped link-local address (169.254.0.0/16).
func (g GID) IsLinkLocal() bool {
	if g.Raw[0] == 0xfe && g.Raw[1]&0xc0 == 0x80 {
		return true
	}
	return g.IsIPv4Mapped() && g.Raw[0] == 0 && g.Raw[12] == 169 && g.Raw[13] == 254
}

// FormatIPv6 formats 16 bytes as glibc's inet_ntop(AF_INET6) does: the
// longest run of two or more zero groups (the first one on a tie) becomes
// "::", groups are lower-case hex without leading zeros, and an address
// whose first 96 bits are zero (IPv4-compatible) or whose first 80 bits
// are zero followed by ffff (IPv4-mapped) ends in dotted decimal.
//
// It differs from netip.Addr.String only for IPv4-compatible addresses
// (::a.b.c.d), which inet_ntop still writes with a dotted tail.
func FormatIPv6(raw [16]byte) string {
	var words [8]uint16
	for i := range words {
		words[i] = binary.BigEndian.Uint16(raw[2*i:])
	}
	bestBase, bestLen := -1, 0
	for i := 0; i < 8; {
		if words[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && words[j] == 0 {
			j++
		}
		if j-i > bestLen {
			bestBase, bestLen = i, j-i
		}
		i = j
	}
	if bestLen < 2 {
		bestBase, bestLen = -1, 0
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if bestBase >= 0 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && words[5] == 0xffff)) {
			fmt.Fprintf(&b, "%d.%d.%d.%d", raw[12], raw[13], raw[14], raw[15])
			return b.String()
		}
		b.WriteString(strconv.FormatUint(uint64(words[i]), 16))
	}
	if bestBase >= 0 && bestBase+bestLen == 8 {
		b.WriteByte(':')
	}
	return b.String()
}

// GIDScore is perftest's score for a GID when it picks one by itself
// (no -x): +100 if the address family is the wanted one (IPv4-mapped
// unless ipv6 is set, as with --ipv6), +10 if the GID is not link-local,
// plus the RoCE version's rank (v2 = 2, v1 = 1, anything else 0).
func GIDScore(g GID, ipv6 bool) int {
	score := 0
	if g.IsIPv4Mapped() != ipv6 {
		score += 100
	}
	if !g.IsLinkLocal() {
		score += 10
	}
	switch g.Type {
	case GIDTypeRoCEv2:
		score += 2
	case GIDTypeRoCEv1:
		score++
	}
	return score
}

// BestGID returns the GID perftest's auto-selection picks from a port's
// table: the highest GIDScore, the lowest index on a tie. Zero GIDs are
// never picked. ok is false when gids has no non-zero entry.
func BestGID(gids []GID, ipv6 bool) (best GID, ok bool) {
	bestScore := -1
	for _, g := range gids {
		if g.IsZero() {
			continue
		}
		s := GIDScore(g, ipv6)
		if s > bestScore || (s == bestScore && g.Index < best.Index) {
			best, bestScore, ok = g, s, true
		}
	}
	return best, ok
}
