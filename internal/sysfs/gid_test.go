package sysfs

import (
	"net/netip"
	"testing"
)

func mustGID(t testing.TB, s string) [16]byte {
	t.Helper()
	if a, err := netip.ParseAddr(s); err == nil {
		return a.As16()
	}
	raw, err := ParseGID(s)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestParseGID(t *testing.T) {
	tests := []struct {
		in      string
		want    string // inet_ntop form
		wantErr bool
	}{
		{in: "fe80:0000:0000:0000:5054:00ff:fe77:0001", want: "fe80::5054:ff:fe77:1"},
		{in: "0000:0000:0000:0000:0000:ffff:0a4d:0001\n", want: "::ffff:10.77.0.1"},
		{in: "0000:0000:0000:0000:0000:0000:0000:0000", want: "::"},
		{in: "fe80:0000:0000:0000:5054:00ff:fe77", wantErr: true},
		{in: "fe80::5054:ff:fe77:1", wantErr: true},
		{in: "fe80:0000:0000:0000:5054:00ff:fe77:00001", wantErr: true},
		{in: "ge80:0000:0000:0000:5054:00ff:fe77:0001", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			raw, err := ParseGID(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseGID(%q) error = %v, want error: %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			g := GID{Raw: raw}
			if got := g.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if back, _ := ParseGID(g.SysfsString()); back != raw {
				t.Errorf("SysfsString() %q does not parse back", g.SysfsString())
			}
		})
	}
}

func TestFormatIPv6(t *testing.T) {
	tests := []struct{ in, want string }{
		{"::", "::"},
		{"::1", "::1"},
		{"::ffff:10.77.0.1", "::ffff:10.77.0.1"},
		{"fe80::5054:ff:fe77:1", "fe80::5054:ff:fe77:1"},
		{"2001:db8:10::5", "2001:db8:10::5"},
		{"2001:db8::1:0:0:1", "2001:db8::1:0:0:1"},       // first of two equal runs
		{"2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"}, // a single zero group is not compressed
		{"1::", "1::"},
		{"1:0:0:2:0:0:0:3", "1:0:0:2::3"}, // the longer run wins
		// IPv4-compatible: inet_ntop keeps the dotted tail, netip does not.
		{"0000:0000:0000:0000:0000:0000:0a4d:0001", "::10.77.0.1"},
		{"ff0e::ffff:e000:1", "ff0e::ffff:e000:1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			raw := mustGID(t, tt.in)
			if got := FormatIPv6(raw); got != tt.want {
				t.Errorf("FormatIPv6(%s) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestGIDClassification(t *testing.T) {
	tests := []struct {
		in            string
		wantV4, wantL bool
	}{
		{"::ffff:10.77.0.1", true, false},
		{"::ffff:169.254.10.5", true, true},
		{"fe80::1", false, true},
		{"febf::1", false, true},
		{"fec0::1", false, false},
		{"2001:db8::5", false, false},
		{"ff0e::ffff:224.0.0.1", true, false}, // IPv4-encoded multicast counts as IPv4 for perftest
		{"::10.77.0.1", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g := GID{Raw: mustGID(t, tt.in)}
			if got := g.IsIPv4Mapped(); got != tt.wantV4 {
				t.Errorf("IsIPv4Mapped() = %v, want %v", got, tt.wantV4)
			}
			if got := g.IsLinkLocal(); got != tt.wantL {
				t.Errorf("IsLinkLocal() = %v, want %v", got, tt.wantL)
			}
		})
	}
}

func TestParseGIDType(t *testing.T) {
	tests := []struct {
		in, linkLayer string
		want          GIDType
		wantString    string
		wantErr       bool
	}{
		{"RoCE v2", LinkLayerEthernet, GIDTypeRoCEv2, "RoCE v2", false},
		{"IB/RoCE v1", LinkLayerEthernet, GIDTypeRoCEv1, "RoCE v1", false},
		{"IB/RoCE v1\n", LinkLayerInfiniBand, GIDTypeIB, "IB", false},
		{"IB/RoCE v1", "", GIDTypeIB, "IB", false},
		{"", LinkLayerEthernet, GIDTypeUnknown, "unknown", true},
		{"RoCE v3", LinkLayerEthernet, GIDTypeUnknown, "unknown", true},
	}
	for _, tt := range tests {
		t.Run(tt.in+"/"+tt.linkLayer, func(t *testing.T) {
			got, err := ParseGIDType(tt.in, tt.linkLayer)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error: %v", err, tt.wantErr)
			}
			if got != tt.want || got.String() != tt.wantString {
				t.Errorf("ParseGIDType(%q, %q) = %v (%s), want %v (%s)", tt.in, tt.linkLayer, got, got, tt.want, tt.wantString)
			}
		})
	}
}

func TestBestGID(t *testing.T) {
	g := func(idx int, addr string, typ GIDType) GID {
		return GID{Index: idx, Raw: mustGID(t, addr), Type: typ}
	}
	v1, v2 := GIDTypeRoCEv1, GIDTypeRoCEv2
	tests := []struct {
		name      string
		gids      []GID
		ipv6      bool
		wantIndex int
		wantScore int
		wantOK    bool
	}{
		{
			name:      "rxe capture: IPv4 v2 beats link-local v2",
			gids:      []GID{g(0, "fe80::5054:ff:fe77:1", v2), g(1, "::ffff:10.77.0.1", v2)},
			wantIndex: 1, wantScore: 112, wantOK: true,
		},
		{
			name:      "rxe capture with --ipv6: link-local IPv6 is the only IPv6",
			gids:      []GID{g(0, "fe80::5054:ff:fe77:1", v2), g(1, "::ffff:10.77.0.1", v2)},
			ipv6:      true,
			wantIndex: 0, wantScore: 102, wantOK: true,
		},
		{
			name:      "v2 beats v1 for the same address",
			gids:      []GID{g(0, "::ffff:10.0.0.1", v1), g(1, "::ffff:10.0.0.1", v2)},
			wantIndex: 1, wantScore: 112, wantOK: true,
		},
		{
			name:      "tie keeps the lowest index",
			gids:      []GID{g(3, "::ffff:10.0.0.1", v2), g(5, "::ffff:10.0.0.2", v2)},
			wantIndex: 3, wantScore: 112, wantOK: true,
		},
		{
			name:      "family outweighs everything else",
			gids:      []GID{g(0, "2001:db8::1", v2), g(1, "::ffff:169.254.1.1", v1)},
			wantIndex: 1, wantScore: 101, wantOK: true,
		},
		{
			name:      "IPv4 link-local loses to routable IPv4",
			gids:      []GID{g(0, "::ffff:169.254.1.1", v2), g(1, "::ffff:192.168.1.1", v1)},
			wantIndex: 1, wantScore: 111, wantOK: true,
		},
		{
			name:      "zero GIDs are skipped",
			gids:      []GID{{Index: 0}, g(1, "fe80::1", v1)},
			wantIndex: 1, wantScore: 1, wantOK: true,
		},
		{name: "empty table", gids: nil, wantIndex: 0, wantOK: false},
		{name: "only zero GIDs", gids: []GID{{Index: 0}, {Index: 1}}, wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := BestGID(tt.gids, tt.ipv6)
			if ok != tt.wantOK {
				t.Fatalf("BestGID() ok = %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			if got.Index != tt.wantIndex {
				t.Errorf("BestGID() index = %d, want %d", got.Index, tt.wantIndex)
			}
			if s := GIDScore(got, tt.ipv6); s != tt.wantScore {
				t.Errorf("GIDScore() = %d, want %d", s, tt.wantScore)
			}
		})
	}
}

// TestBestGIDFixture: in the roce fixture perftest's pick is not index 0.
func TestBestGIDFixture(t *testing.T) {
	p := mustFS(t, "roce").Report().Devices[0].Ports[0]
	for _, tt := range []struct {
		ipv6 bool
		want int
	}{{false, 3}, {true, 5}} {
		got, ok := BestGID(p.GIDs, tt.ipv6)
		if !ok || got.Index != tt.want {
			t.Errorf("BestGID(roce, ipv6=%v) = %d, %v; want %d", tt.ipv6, got.Index, ok, tt.want)
		}
	}
}

func FuzzParseGID(f *testing.F) {
	f.Add("fe80:0000:0000:0000:5054:00ff:fe77:0001")
	f.Add("0000:0000:0000:0000:0000:ffff:0a4d:0001")
	f.Add("::")
	f.Fuzz(func(t *testing.T, s string) {
		raw, err := ParseGID(s)
		if err != nil {
			return
		}
		g := GID{Raw: raw}
		back, err := ParseGID(g.SysfsString())
		if err != nil || back != raw {
			t.Errorf("round trip of %q failed: %v", s, err)
		}
		// inet_ntop text always parses as the same IPv6 address.
		a, err := netip.ParseAddr(g.String())
		if err != nil || a.As16() != raw {
			t.Errorf("FormatIPv6(%x) = %q does not parse back: %v", raw, g.String(), err)
		}
	})
}
