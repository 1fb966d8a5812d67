package rdiagcmd

import (
	"math"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in      string
		want    uint64
		wantErr string
	}{
		{"4096", 4096, ""},
		{"64MiB", 64 << 20, ""},
		{"64M", 64 << 20, ""},
		{"64 mb", 64 << 20, ""},
		{"1.5G", 3 << 29, ""},
		{"2KiB", 2048, ""},
		{"1T", 1 << 40, ""},
		{"unlimited", math.MaxUint64, ""},
		{"", 0, "want a number"},
		{"MiB", 0, "want a number"},
		{"10 furlongs", 0, `unknown unit "furlongs"`},
		{"1.2.3M", 0, "bad number"},
		{"99999999999T", 0, "too large"},
	}
	for _, c := range cases {
		got, err := parseSize(c.in)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("parseSize(%q) error = %v, want %q", c.in, err, c.wantErr)
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("parseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}
