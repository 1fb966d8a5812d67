package roce

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// marshaler is what every fixed-size header implements.
type marshaler interface {
	Marshal([]byte) error
	Unmarshal([]byte) error
}

func unhex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestHeaderRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		in    marshaler
		empty func() marshaler
		wire  string
	}{
		{"bth zero", &BTH{}, func() marshaler { return &BTH{} }, "00 00 0000 00000000 00000000"},
		{"bth all", &BTH{Opcode: RCSendLastImm, SE: true, M: true, PadCnt: 3, TVer: 0, PKey: 0xffff, FECN: true, BECN: true, Resv6: 0x3f, DestQP: 0xabcdef, AckReq: true, Resv7: 0x7f, PSN: 0xffffff},
			func() marshaler { return &BTH{} }, "03 f0 ffff ffabcdef ffffffff"},
		{"bth fields", &BTH{Opcode: RCWriteFirst, M: true, PadCnt: 2, TVer: 5, PKey: 0x8001, BECN: true, DestQP: 0x12, PSN: 0x757202},
			func() marshaler { return &BTH{} }, "06 65 8001 40000012 00757202"},
		{"reth", &RETH{VA: 0x0000557200337000, RKey: 0x3bd, DMALen: 2048}, func() marshaler { return &RETH{} }, "0000557200337000 000003bd 00000800"},
		{"aeth ack", &AETH{Syndrome: SyndromeACKUnlimited, MSN: 1}, func() marshaler { return &AETH{} }, "1f000001"},
		{"aeth rnr", &AETH{Syndrome: RNRNAKSyndrome(14), MSN: 0xffffff}, func() marshaler { return &AETH{} }, "2effffff"},
		{"aeth nak", &AETH{Syndrome: SyndromeNAKPSNSeqErr, MSN: 0x123456}, func() marshaler { return &AETH{} }, "60123456"},
		{"atomiceth", &AtomicETH{VA: 0x0102030405060708, RKey: 0x090a0b0c, SwapAdd: 0x1112131415161718, Compare: 0x2122232425262728},
			func() marshaler { return &AtomicETH{} }, "0102030405060708 090a0b0c 1112131415161718 2122232425262728"},
		{"atomicacketh", &AtomicAckETH{OrigData: 0x914173efe7d4c060}, func() marshaler { return &AtomicAckETH{} }, "914173efe7d4c060"},
		{"immdt", &ImmDt{Data: 0xdeadbeef}, func() marshaler { return &ImmDt{} }, "deadbeef"},
		{"deth", &DETH{QKey: 0x11111111, SrcQP: 0x000001}, func() marshaler { return &DETH{} }, "11111111 00000001"},
		{"deth resv", &DETH{QKey: 0x80010000, Resv8: 0xaa, SrcQP: 0xfedcba}, func() marshaler { return &DETH{} }, "80010000 aafedcba"},
		{"ieth", &IETH{RKey: 0xcafef00d}, func() marshaler { return &IETH{} }, "cafef00d"},
		{"feth", &FETH{PlacementType: 2, Selectivity: 1}, func() marshaler { return &FETH{} }, "00000012"},
		{"feth reserved", &FETH{PlacementType: 0xf, Selectivity: 3, Reserved: 1<<26 - 1}, func() marshaler { return &FETH{} }, "ffffffff"},
		{"cnp", &CNPPad{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, func() marshaler { return &CNPPad{} }, "0102030405060708090a0b0c0d0e0f10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.wire)
			buf := make([]byte, len(want)+3)
			for i := range buf {
				buf[i] = 0x5a
			}
			if err := tt.in.Marshal(buf); err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if diff := cmp.Diff(want, buf[:len(want)]); diff != "" {
				t.Errorf("Marshal (-want +got):\n%s", diff)
			}
			for _, c := range buf[len(want):] {
				if c != 0x5a {
					t.Errorf("Marshal wrote past the header: % x", buf[len(want):])
					break
				}
			}
			got := tt.empty()
			if err := got.Unmarshal(want); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(tt.in, got); diff != "" {
				t.Errorf("Unmarshal (-want +got):\n%s", diff)
			}
			if err := tt.empty().Unmarshal(want[:len(want)-1]); !errors.Is(err, ErrTooShort) {
				t.Errorf("Unmarshal of %d bytes: err = %v, want ErrTooShort", len(want)-1, err)
			}
			if err := tt.in.Marshal(make([]byte, len(want)-1)); !errors.Is(err, ErrShortBuffer) {
				t.Errorf("Marshal into %d bytes: err = %v, want ErrShortBuffer", len(want)-1, err)
			}
		})
	}
}

func TestHeaderRange(t *testing.T) {
	tests := []struct {
		name string
		h    marshaler
	}{
		{"bth padcnt", &BTH{PadCnt: 4}},
		{"bth tver", &BTH{TVer: 16}},
		{"bth resv6", &BTH{Resv6: 0x40}},
		{"bth destqp", &BTH{DestQP: 1 << 24}},
		{"bth psn", &BTH{PSN: 1 << 24}},
		{"bth resv7", &BTH{Resv7: 0x80}},
		{"aeth msn", &AETH{MSN: 1 << 24}},
		{"deth srcqp", &DETH{SrcQP: 1 << 24}},
		{"feth placement", &FETH{PlacementType: 16}},
		{"feth selectivity", &FETH{Selectivity: 4}},
		{"feth reserved", &FETH{Reserved: 1 << 26}},
	}
	for _, tt := range tests {
		if err := tt.h.Marshal(make([]byte, 64)); !errors.Is(err, ErrRange) {
			t.Errorf("%s: err = %v, want ErrRange", tt.name, err)
		}
	}
}

func TestSyndrome(t *testing.T) {
	tests := []struct {
		s       Syndrome
		kind    SyndromeKind
		value   uint8
		ack     bool
		rnr     bool
		nak     bool
		nakCode NAKCode
	}{
		{ACKSyndrome(5), SynACK, 5, true, false, false, 5},
		{SyndromeACKUnlimited, SynACK, 31, true, false, false, 31},
		{RNRNAKSyndrome(0), SynRNRNAK, 0, false, true, false, 0},
		{RNRNAKSyndrome(0xff), SynRNRNAK, 31, false, true, false, 31},
		{SyndromeNAKPSNSeqErr, SynNAK, 0, false, false, true, NAKPSNSequenceError},
		{SyndromeNAKInvalidRequest, SynNAK, 1, false, false, true, NAKInvalidRequest},
		{SyndromeNAKRemoteAccess, SynNAK, 2, false, false, true, NAKRemoteAccessError},
		{SyndromeNAKRemoteOp, SynNAK, 3, false, false, true, NAKRemoteOperationalErr},
		{NAKSyndrome(NAKInvalidRDRequest), SynNAK, 4, false, false, true, NAKInvalidRDRequest},
		{Syndrome(0x41), SynReserved, 1, false, false, false, 1},
	}
	for _, tt := range tests {
		if tt.s.Kind() != tt.kind || tt.s.Value() != tt.value || tt.s.IsACK() != tt.ack || tt.s.IsRNRNAK() != tt.rnr || tt.s.IsNAK() != tt.nak || tt.s.NAKCode() != tt.nakCode {
			t.Errorf("%#x: kind %v value %d ack %v rnr %v nak %v code %v", uint8(tt.s), tt.s.Kind(), tt.s.Value(), tt.s.IsACK(), tt.s.IsRNRNAK(), tt.s.IsNAK(), tt.s.NAKCode())
		}
	}
	if ACKSyndrome(7).Credits() != 7 {
		t.Error("Credits")
	}
	if got := []Syndrome{SyndromeNAKPSNSeqErr, SyndromeNAKInvalidRequest, SyndromeNAKRemoteAccess, SyndromeNAKRemoteOp}; got[0] != 0x60 || got[1] != 0x61 || got[2] != 0x62 || got[3] != 0x63 {
		t.Errorf("NAK syndromes %#x", got)
	}
	if RNRNAKSyndrome(3) != 0x23 {
		t.Errorf("RNRNAKSyndrome(3) = %#x, want 0x23", RNRNAKSyndrome(3))
	}
}

func TestRNRTimer(t *testing.T) {
	tests := []struct {
		code uint8
		want time.Duration
	}{
		{0, 655360 * time.Microsecond},
		{1, 10 * time.Microsecond},
		{5, 60 * time.Microsecond},
		{14, 1280 * time.Microsecond},
		{18, 5120 * time.Microsecond},
		{31, 491520 * time.Microsecond},
		{32 + 1, 10 * time.Microsecond},
	}
	for _, tt := range tests {
		if got := RNRTimer(tt.code); got != tt.want {
			t.Errorf("RNRTimer(%d) = %v, want %v", tt.code, got, tt.want)
		}
	}
}
