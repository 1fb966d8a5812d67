package oob

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var roceGID = [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 14: 0, 15: 2}

func TestKeyRoundTrip(t *testing.T) {
	allFF := [16]byte{}
	for i := range allFF {
		allFF[i] = 0xff
	}
	tests := []struct {
		name string
		in   Dest
		wire string // without the trailing NUL
		want Dest   // what parsing the wire form gives back
	}{
		{
			name: "zero/no GID",
			in:   Dest{},
			wire: "0000:0000:000000:000000:00000000:0000000000000000:00000000",
		},
		{
			name: "zero/GID",
			in:   Dest{HasGID: true},
			wire: "0000:0000:000000:000000:00000000:0000000000000000:" + strings.Repeat("00:", 16) + "00000000:",
		},
		{
			name: "typical/no GID",
			in:   Dest{LID: 0x1a, OutReads: 16, QPN: 0x11, PSN: 0x480aa1, RKey: 0x373, VAddr: 0x5564d7603000},
			wire: "001a:0010:000011:480aa1:00000373:00005564d7603000:00000000",
		},
		{
			name: "typical/GID (as in the rxe capture)",
			in:   Dest{OutReads: 1, QPN: 0x11, PSN: 0x480aa1, VAddr: 0x5564d7603000, GID: roceGID, HasGID: true},
			wire: "0000:0001:000011:480aa1:00000000:00005564d7603000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:02:00000000:",
		},
		{
			name: "max/no GID",
			in:   Dest{LID: 0xffff, OutReads: 0xffff, QPN: 0xffffff, PSN: 0xffffff, RKey: 0xffffffff, VAddr: ^uint64(0), SRQN: 0xffffffff},
			wire: "ffff:ffff:ffffff:ffffff:ffffffff:ffffffffffffffff:ffffffff",
		},
		{
			name: "max/GID",
			in:   Dest{LID: 0xffff, OutReads: 0xffff, QPN: 0xffffff, PSN: 0xffffff, RKey: 0xffffffff, VAddr: ^uint64(0), GID: allFF, HasGID: true, SRQN: 0xffffffff},
			wire: "ffff:ffff:ffffff:ffffff:ffffffff:ffffffffffffffff:" + strings.Repeat("ff:", 16) + "ffffffff:",
		},
		{
			name: "24-bit masking of QPN and PSN",
			in:   Dest{QPN: 0xff123456, PSN: 0x01abcdef},
			wire: "0000:0000:123456:abcdef:00000000:0000000000000000:00000000",
			want: Dest{QPN: 0x123456, PSN: 0xabcdef},
		},
		{
			name: "GID ignored without HasGID",
			in:   Dest{QPN: 1, GID: allFF},
			wire: "0000:0000:000001:000000:00000000:0000000000000000:00000000",
			want: Dest{QPN: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == (Dest{}) {
				want = tt.in
			}
			got := FormatKey(tt.in)
			if diff := cmp.Diff(tt.wire+"\x00", string(got)); diff != "" {
				t.Errorf("FormatKey mismatch (-want +got):\n%s", diff)
			}
			if len(got) != tt.in.KeyLen() {
				t.Errorf("len = %d, KeyLen() = %d", len(got), tt.in.KeyLen())
			}
			d, err := ParseKey(got)
			if err != nil {
				t.Fatalf("ParseKey: %v", err)
			}
			if diff := cmp.Diff(want, d); diff != "" {
				t.Errorf("ParseKey mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKeySizes(t *testing.T) {
	if n := len(FormatKey(Dest{})); n != KeySize {
		t.Errorf("no-GID key is %d bytes, want %d", n, KeySize)
	}
	if n := len(FormatKey(Dest{HasGID: true})); n != KeySizeGID {
		t.Errorf("GID key is %d bytes, want %d", n, KeySizeGID)
	}
}

func TestAppendKeyNoAlloc(t *testing.T) {
	buf := make([]byte, 0, KeySizeGID)
	d := Dest{QPN: 7, HasGID: true, GID: roceGID}
	if n := testing.AllocsPerRun(100, func() { buf = AppendKey(buf[:0], d) }); n != 0 {
		t.Errorf("AppendKey allocates %v times per call, want 0", n)
	}
}

func TestParseKeyUpperCase(t *testing.T) {
	d, err := ParseKey([]byte("00AB:0001:0000FF:ABCDEF:DEADBEEF:00007FFF00001000:0000000A\x00"))
	if err != nil {
		t.Fatal(err)
	}
	want := Dest{LID: 0xab, OutReads: 1, QPN: 0xff, PSN: 0xabcdef, RKey: 0xdeadbeef, VAddr: 0x7fff00001000, SRQN: 10}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseKeyErrors(t *testing.T) {
	good := string(FormatKey(Dest{QPN: 0x11, PSN: 0x22}))
	goodGID := string(FormatKey(Dest{QPN: 0x11, HasGID: true, GID: roceGID}))
	set := func(s string, i int, c byte) []byte {
		b := []byte(s)
		b[i] = c
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want string // substring of the error
	}{
		{"empty", nil, "0 bytes"},
		{"short", []byte(good[:58]), "58 bytes"},
		{"long", []byte(good + "\x00"), "60 bytes"},
		{"data-validation size", make([]byte, 76), "76 bytes"},
		{"no NUL", set(good, 58, '0'), "want NUL at offset 58"},
		{"colon moved", []byte("000:00000:000000:000000:00000000:0000000000000000:00000000\x00"), "LID must be 4 hex digits"},
		{"non-hex in QPN", set(good, 12, 'g'), "QPN must be 6 hex digits"},
		{"space in PSN", set(good, 17, ' '), "PSN must be 6 hex digits"},
		{"sign in RKEY", set(good, 24, '-'), "RKEY must be 8 hex digits"},
		{"0x prefix in VADDR", set(string(set(good, 33, '0')), 34, 'x'), "VADDR must be 16 hex digits"},
		{"NUL inside", set(good, 40, 0), "VADDR must be 16 hex digits"},
		{"missing separator before SRQN", set(good, 49, '0'), "before SRQN"},
		{"GID form/bad GID byte", set(goodGID, 51, 'z'), "GID[0] must be 2 hex digits"},
		{"GID form/missing trailing colon", set(goodGID, 106, 0), "want ':' at offset 106"},
		{"GID form/no NUL", set(goodGID, 107, ':'), "want NUL at offset 107"},
		{"GID form/separator", set(goodGID, 55, '.'), "before GID[2]"},
		{"all zero bytes", make([]byte, KeySize), "LID must be 4 hex digits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseKey(tt.in)
			if err == nil {
				t.Fatalf("ParseKey(%q) = %+v, want error", tt.in, d)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if !errors.Is(err, ErrProtocol) {
				t.Errorf("error %v does not match ErrProtocol", err)
			}
		})
	}
}

func FuzzParseKey(f *testing.F) {
	f.Add(FormatKey(Dest{}))
	f.Add(FormatKey(Dest{HasGID: true, GID: roceGID, QPN: 0x11, PSN: 0x480aa1, VAddr: 0x5564d7603000}))
	f.Add(FormatKey(Dest{LID: 0xffff, QPN: 0xffffff, RKey: 0xffffffff, VAddr: ^uint64(0), SRQN: 1}))
	f.Add([]byte("0000:0001:000011:480aa1:00000000:00005564d7603000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:02:00000000:\x00"))
	f.Add([]byte("done\x00"))
	f.Add(make([]byte, KeySizeGID))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseKey(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not match ErrProtocol", err)
			}
			return
		}
		// Anything accepted formats back to the same bytes, up to hex case,
		// and parses to the same Dest.
		out := FormatKey(d)
		if !bytes.EqualFold(out, b) {
			t.Fatalf("FormatKey(ParseKey(%q)) = %q", b, out)
		}
		d2, err := ParseKey(out)
		if err != nil {
			t.Fatalf("reparse of %q: %v", out, err)
		}
		if d2 != d {
			t.Fatalf("reparse: %+v != %+v", d2, d)
		}
	})
}

func FuzzKeyFields(f *testing.F) {
	f.Add(uint16(0), uint16(1), uint32(0x11), uint32(0x480aa1), uint32(0), uint64(0x5564d7603000), roceGID[:], true, uint32(0))
	f.Add(uint16(0xffff), uint16(0xffff), ^uint32(0), ^uint32(0), ^uint32(0), ^uint64(0), []byte{}, false, ^uint32(0))
	f.Fuzz(func(t *testing.T, lid, outReads uint16, qpn, psn, rkey uint32, vaddr uint64, gid []byte, hasGID bool, srqn uint32) {
		d := Dest{LID: lid, OutReads: outReads, QPN: qpn, PSN: psn, RKey: rkey, VAddr: vaddr, HasGID: hasGID, SRQN: srqn}
		if hasGID {
			copy(d.GID[:], gid)
		}
		b := FormatKey(d)
		if len(b) != d.KeyLen() {
			t.Fatalf("FormatKey(%+v) is %d bytes, want %d", d, len(b), d.KeyLen())
		}
		got, err := ParseKey(b)
		if err != nil {
			t.Fatalf("ParseKey(FormatKey(%+v)) = %v", d, err)
		}
		d.QPN &= 0xffffff
		d.PSN &= 0xffffff
		if got != d {
			t.Fatalf("round trip: got %+v, want %+v", got, d)
		}
	})
}
