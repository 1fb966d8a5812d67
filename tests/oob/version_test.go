package oob

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAtof(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"6.06", 6.06},
		{"6.29", 6.29},
		{Version, 6.27},
		{"6.27 rperf/9", 6.27},
		{"  5.70", 5.70},
		{"\t5.1x", 5.1},
		{"5.", 5},
		{".5", 0.5},
		{"+6.1", 6.1},
		{"-1", -1},
		{"6e0", 6},
		{"6.2e", 6.2},
		{"6.2e+", 6.2},
		{"", 0},
		{".", 0},
		{"rperf", 0},
		{"GET / HTTP/1.1", 0},
		{"v6.29", 0},
	}
	for _, tt := range tests {
		if got := atof(tt.in); got != tt.want {
			t.Errorf("atof(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestVersionConstant(t *testing.T) {
	v := atof(Version)
	if v < minPeerVersion || v >= negotiateVersion {
		t.Errorf("atof(Version) = %v, want within [%v, %v)", v, minPeerVersion, negotiateVersion)
	}
	// float32, as some perftest code paths hold the peer version.
	if f := float32(v); float64(f) < reportIters64 || float64(f) < sysDataVersion || float64(f) < mtuShortVersion || float64(f) >= negotiateVersion {
		t.Errorf("float32(atof(Version)) = %v is on the wrong side of a threshold", f)
	}
	if len(Version) >= VersionSize {
		t.Errorf("Version is %d bytes, must leave room for a NUL in %d", len(Version), VersionSize)
	}
	if rperfLevel(Version) != rperfExtensionLevel {
		t.Errorf("rperfLevel(Version) = %d", rperfLevel(Version))
	}
}

func TestRperfLevel(t *testing.T) {
	tests := map[string]int{
		Version:          1,
		"6.27 rperf/2":   2,
		"6.06":           0,
		"6.29":           0,
		"6.27 rperf/":    0,
		"6.27 rperf/0":   0,
		"6.27 rperf/x":   0,
		"6.27 rperf/1 x": 0,
		"rperf/1":        0,
	}
	for in, want := range tests {
		if got := rperfLevel(in); got != want {
			t.Errorf("rperfLevel(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestVersionMessage(t *testing.T) {
	got := versionMessage("6.06")
	want := []byte("6.06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if s := versionString(versionMessage(Version)); s != Version {
		t.Errorf("versionString round trip = %q", s)
	}
	if s := versionString([]byte("0123456789abcdef")); s != "0123456789abcdef" {
		t.Errorf("versionString without NUL = %q", s)
	}
}

func TestMTU(t *testing.T) {
	tests := []struct {
		m     MTU
		bytes int
		str   string
		valid bool
	}{
		{0, 0, "MTU(0)", false},
		{MTU256, 256, "256", true},
		{MTU512, 512, "512", true},
		{MTU1024, 1024, "1024", true},
		{MTU2048, 2048, "2048", true},
		{MTU4096, 4096, "4096", true},
		{6, 0, "MTU(6)", false},
	}
	for _, tt := range tests {
		if tt.m.Bytes() != tt.bytes || tt.m.String() != tt.str || tt.m.Valid() != tt.valid {
			t.Errorf("MTU(%d): Bytes %d String %q Valid %v, want %d %q %v", uint8(tt.m), tt.m.Bytes(), tt.m.String(), tt.m.Valid(), tt.bytes, tt.str, tt.valid)
		}
	}
}

func TestMTUMessage(t *testing.T) {
	tests := []struct {
		name        string
		peerVersion float64
		m           MTU
		want        string
	}{
		{"current peer", 6.06, MTU1024, "3\x00"},
		{"5.31 peer", 5.31, MTU4096, "5\x00"},
		{"old peer gets sizeof(int)", 5.30, MTU256, "1\x00\x00\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mtuMessage(tt.m, mtuMessageSize(tt.peerVersion))
			if diff := cmp.Diff([]byte(tt.want), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMTU(t *testing.T) {
	tests := []struct {
		in      string
		want    MTU
		wantErr string
	}{
		{"3\x00", MTU1024, ""},
		{"5\x00", MTU4096, ""},
		{"0\x00", 0, ""}, // out of range: accepted, then ignored like perftest
		{"9\x00", 9, ""},
		{"4\x00\xaa\xbb", MTU2048, ""}, // 4-byte form: perftest leaves the tail unset
		{"12\x00\x00", 12, ""},
		{"\x00\x00", 0, "want decimal digits"},
		{"5x", 0, "want decimal digits"},
		{"55", 0, "without a terminating NUL"},
		{"999\x00", 0, "not an ibv_mtu value"},
		{"-1\x00", 0, "want decimal digits"},
	}
	for _, tt := range tests {
		got, err := parseMTU([]byte(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrProtocol) {
				t.Errorf("parseMTU(%q) error = %v, want %q (ErrProtocol)", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseMTU(%q) = %v, %v, want %v", tt.in, got, err, tt.want)
		}
	}
}
