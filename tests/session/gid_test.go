package session

import (
	"net/netip"
	"testing"

	"github.com/rperf/rperf/verbsio"
)

func TestBestGID(t *testing.T) {
	e := func(i int, addr string, typ verbsio.GIDType) verbsio.GIDEntry {
		var g verbsio.GID
		if addr != "" {
			g = verbsio.GIDFromAddr(netip.MustParseAddr(addr))
		}
		return verbsio.GIDEntry{Index: i, GID: g, Type: typ}
	}
	v2, v1 := verbsio.GIDTypeRoCEv2, verbsio.GIDTypeRoCEv1
	// The udp fabric's order on a veth: link-local, IPv4, global IPv6.
	veth := []verbsio.GIDEntry{e(0, "fe80::1", v2), e(1, "10.1.2.3", v2), e(2, "fd72::1", v2)}
	// rxe's: link-local v1 and v2, then IPv4 v1 and v2.
	rxe := []verbsio.GIDEntry{e(0, "fe80::1", v1), e(1, "fe80::1", v2), e(2, "10.1.2.3", v1), e(3, "10.1.2.3", v2), e(4, "", v2)}
	cases := []struct {
		tbl            []verbsio.GIDEntry
		ethernet, ipv6 bool
		want           int
	}{
		{veth, true, false, 1},
		{veth, true, true, 2},
		{rxe, true, false, 3},
		{rxe, true, true, 1},
		{[]verbsio.GIDEntry{e(0, "fe80::1", v2)}, true, false, 0},
		{[]verbsio.GIDEntry{e(0, "", v2), e(1, "::1", v2)}, true, false, 1}, // zero GIDs are skipped
		{veth, false, false, 0}, // InfiniBand: index 0
	}
	for i, c := range cases {
		if got := BestGID(c.tbl, c.ethernet, c.ipv6); got != c.want {
			t.Errorf("case %d: BestGID = %d, want %d", i, got, c.want)
		}
	}
}
