package roce

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidMTU(t *testing.T) {
	for n, want := range map[int]bool{256: true, 512: true, 1024: true, 2048: true, 4096: true,
		0: false, 128: false, 1500: false, 768: false, 8192: false, -256: false} {
		if got := ValidMTU(n); got != want {
			t.Errorf("ValidMTU(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestSegment(t *testing.T) {
	tests := []struct {
		only    Opcode
		length  int
		mtu     int
		ops     []Opcode
		lengths []int
	}{
		{RCSendOnly, 0, 1024, []Opcode{RCSendOnly}, []int{0}},
		{RCSendOnly, 1024, 1024, []Opcode{RCSendOnly}, []int{1024}},
		{RCSendOnly, 1025, 1024, []Opcode{RCSendFirst, RCSendLast}, []int{1024, 1}},
		{RCSendOnly, 2048, 1024, []Opcode{RCSendFirst, RCSendLast}, []int{1024, 1024}},
		{RCSendOnly, 2049, 1024, []Opcode{RCSendFirst, RCSendMiddle, RCSendLast}, []int{1024, 1024, 1}},
		{RCSendOnlyImm, 600, 256, []Opcode{RCSendFirst, RCSendMiddle, RCSendLastImm}, []int{256, 256, 88}},
		{RCSendOnlyInv, 513, 512, []Opcode{RCSendFirst, RCSendLastInv}, []int{512, 1}},
		{RCWriteOnly, 2048, 1024, []Opcode{RCWriteFirst, RCWriteLast}, []int{1024, 1024}},
		{RCWriteOnlyImm, 5000, 4096, []Opcode{RCWriteFirst, RCWriteLastImm}, []int{4096, 904}},
		{RCWriteOnlyImm, 100, 4096, []Opcode{RCWriteOnlyImm}, []int{100}},
		{RCReadResponseOnly, 64, 1024, []Opcode{RCReadResponseOnly}, []int{64}},
		{RCReadResponseOnly, 4096, 1024, []Opcode{RCReadResponseFirst, RCReadResponseMiddle, RCReadResponseMiddle, RCReadResponseLast}, []int{1024, 1024, 1024, 1024}},
		{UCSendOnly, 3000, 2048, []Opcode{UCSendFirst, UCSendLast}, []int{2048, 952}},
		{UCSendOnlyImm, 3000, 2048, []Opcode{UCSendFirst, UCSendLastImm}, []int{2048, 952}},
		{UCWriteOnly, 3000, 2048, []Opcode{UCWriteFirst, UCWriteLast}, []int{2048, 952}},
		{UCWriteOnlyImm, 5000, 2048, []Opcode{UCWriteFirst, UCWriteMiddle, UCWriteLastImm}, []int{2048, 2048, 904}},
		{UDSendOnly, 4096, 4096, []Opcode{UDSendOnly}, []int{4096}},
		{UDSendOnlyImm, 1, 256, []Opcode{UDSendOnlyImm}, []int{1}},
	}
	for _, tt := range tests {
		s, err := Segment(tt.only, tt.length, tt.mtu)
		if err != nil {
			t.Errorf("Segment(%v, %d, %v): %v", tt.only, tt.length, tt.mtu, err)
			continue
		}
		var ops []Opcode
		var lens []int
		total := 0
		for i := 0; i < s.Packets; i++ {
			op, err := s.Opcode(i)
			if err != nil {
				t.Fatal(err)
			}
			n, err := s.PayloadLen(i)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, op)
			lens = append(lens, n)
			total += n
		}
		if diff := cmp.Diff(tt.ops, ops); diff != "" {
			t.Errorf("Segment(%v, %d, %v) opcodes (-want +got):\n%s", tt.only, tt.length, tt.mtu, diff)
		}
		if diff := cmp.Diff(tt.lengths, lens); diff != "" {
			t.Errorf("Segment(%v, %d, %v) lengths (-want +got):\n%s", tt.only, tt.length, tt.mtu, diff)
		}
		if total != tt.length {
			t.Errorf("Segment(%v, %d, %v): lengths add up to %d", tt.only, tt.length, tt.mtu, total)
		}
		if _, err := s.Opcode(s.Packets); !errors.Is(err, ErrRange) {
			t.Errorf("Opcode(Packets): err = %v", err)
		}
		if _, err := s.PayloadLen(-1); !errors.Is(err, ErrRange) {
			t.Errorf("PayloadLen(-1): err = %v", err)
		}
	}
}

func TestSegmentErrors(t *testing.T) {
	tests := []struct {
		only   Opcode
		length int
		mtu    int
		want   error
	}{
		{RCSendOnly, 10, 0, ErrRange},
		{RCSendOnly, 10, 6, ErrRange},
		{RCSendOnly, 10, 1500, ErrRange},
		{RCSendOnly, -1, 256, ErrRange},
		{RCSendFirst, 10, 256, ErrUnknownOpcode},
		{RCAck, 10, 256, ErrUnknownOpcode},
		{RCReadRequest, 10, 256, ErrUnknownOpcode},
		{UDSendOnly, 4097, 4096, ErrLength},
	}
	for _, tt := range tests {
		if _, err := Segment(tt.only, tt.length, tt.mtu); !errors.Is(err, tt.want) {
			t.Errorf("Segment(%v, %d, %d): err = %v, want %v", tt.only, tt.length, tt.mtu, err, tt.want)
		}
	}
}
