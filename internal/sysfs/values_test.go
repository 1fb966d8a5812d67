package sysfs

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseCodedValues(t *testing.T) {
	tests := []struct {
		in       string
		wantCode int
		wantName string
		wantErr  bool
	}{
		{in: "4: ACTIVE", wantCode: 4, wantName: "ACTIVE"},
		{in: "1: DOWN\n", wantCode: 1, wantName: "DOWN"},
		{in: "5: LinkUp", wantCode: 5, wantName: "LinkUp"},
		{in: "3: Disabled", wantCode: 3, wantName: "Disabled"},
		{in: "6: usNIC UDP", wantCode: 6, wantName: "usNIC UDP"},
		{in: "0: <unknown>", wantCode: 0, wantName: "<unknown>"},
		{in: "ACTIVE", wantErr: true},
		{in: "x: ACTIVE", wantErr: true},
		{in: "-1: X", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ps, err1 := ParsePortState(tt.in)
			phys, err2 := ParsePhysState(tt.in)
			nt, err3 := ParseNodeType(tt.in)
			for _, err := range []error{err1, err2, err3} {
				if (err != nil) != tt.wantErr {
					t.Fatalf("error = %v, want error: %v", err, tt.wantErr)
				}
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff(PortState{tt.wantCode, tt.wantName}, ps); diff != "" {
				t.Errorf("ParsePortState (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(PhysState{tt.wantCode, tt.wantName}, phys); diff != "" {
				t.Errorf("ParsePhysState (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(NodeType{tt.wantCode, tt.wantName}, nt); diff != "" {
				t.Errorf("ParseNodeType (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in        string
		want      Rate
		wantBytes uint64
		wantErr   bool
	}{
		{in: "2.5 Gb/sec (1X SDR)", want: Rate{2.5, 1, "SDR"}, wantBytes: 312500000},
		{in: "100 Gb/sec (4X EDR)\n", want: Rate{100, 4, "EDR"}, wantBytes: 12500000000},
		{in: "25 Gb/sec (1X EDR)", want: Rate{25, 1, "EDR"}, wantBytes: 3125000000},
		{in: "56 Gb/sec (4X FDR)", want: Rate{56, 4, "FDR"}, wantBytes: 7000000000},
		{in: "40 Gb/sec (4X FDR10)", want: Rate{40, 4, "FDR10"}, wantBytes: 5000000000},
		{in: "400 Gb/sec (4X NDR)", want: Rate{400, 4, "NDR"}, wantBytes: 50000000000},
		{in: "5 Gb/sec (2X SDR)", want: Rate{5, 2, "SDR"}, wantBytes: 625000000},
		{in: "30 Gb/sec (12X SDR)", want: Rate{30, 12, "SDR"}, wantBytes: 3750000000},
		{in: "10 Gb/sec (4X)", want: Rate{10, 4, "SDR"}, wantBytes: 1250000000}, // old kernels omit SDR
		{in: "N/A", wantErr: true},
		{in: "100 Gb/sec", wantErr: true},
		{in: "100 Gb/sec (EDR)", wantErr: true},
		{in: "x Gb/sec (4X EDR)", wantErr: true},
		{in: "100 Gb/sec (0X EDR)", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRate(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseRate(%q) error = %v, want error: %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseRate(%q) (-want +got):\n%s", tt.in, diff)
			}
			if b := got.BytesPerSecond(); b != tt.wantBytes {
				t.Errorf("BytesPerSecond() = %d, want %d", b, tt.wantBytes)
			}
		})
	}
}

func TestGUID(t *testing.T) {
	tests := []struct {
		in      string
		want    GUID
		wantHex string
		wantErr bool
	}{
		{in: "5054:00ff:fe77:0001", want: 0x505400fffe770001, wantHex: "505400fffe770001"},
		{in: "0c42:a103:0012:3456\n", want: 0x0c42a10300123456, wantHex: "0c42a10300123456"},
		{in: "0:0:0:1", want: 1, wantHex: "0000000000000001"},
		{in: "5054:00ff:fe77", wantErr: true},
		{in: "5054:00ff:fe77:00001", wantErr: true},
		{in: "5054:00ff:fe77:zzzz", wantErr: true},
		{in: "5054::fe77:0001", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseGUID(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseGUID(%q) error = %v, want error: %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got != tt.want || got.Hex() != tt.wantHex {
				t.Errorf("ParseGUID(%q) = %#x (%s), want %#x (%s)", tt.in, uint64(got), got.Hex(), uint64(tt.want), tt.wantHex)
			}
			back, err := ParseGUID(got.String())
			if err != nil || back != got {
				t.Errorf("String() %q does not parse back: %v", got.String(), err)
			}
		})
	}
}

func TestParseCounter(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantNA  bool
		wantErr bool
	}{
		{in: "0", want: 0},
		{in: "18446744073709551615", want: 1<<64 - 1},
		{in: "12\n", want: 12},
		{in: "0x10", want: 16},
		{in: "N/A (no PMA)", wantNA: true},
		{in: "N/A", wantNA: true},
		{in: "lots", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseCounter(tt.in)
			switch {
			case tt.wantNA:
				if !errors.Is(err, errNA) {
					t.Fatalf("parseCounter(%q) error = %v, want errNA", tt.in, err)
				}
			case tt.wantErr:
				if err == nil || errors.Is(err, errNA) {
					t.Fatalf("parseCounter(%q) error = %v, want a parse error", tt.in, err)
				}
			default:
				if err != nil || got != tt.want {
					t.Fatalf("parseCounter(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
				}
			}
		})
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"2.5 Gb/sec (1X SDR)", "100 Gb/sec (4X EDR)", "10 Gb/sec (4X)", "N/A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		if r.Width <= 0 || r.Gbps < 0 || r.Speed == "" {
			t.Errorf("ParseRate(%q) = %+v without error", s, r)
		}
		_, _ = r.ActiveWidth()
		_, _ = r.ActiveSpeed()
	})
}

func FuzzParseCoded(f *testing.F) {
	for _, s := range []string{"4: ACTIVE", "5: LinkUp", "1: CA", ":", "9999999999999999999: X"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParsePortState(s)
		if err != nil {
			return
		}
		if ps.Code < 0 {
			t.Errorf("ParsePortState(%q) = %+v", s, ps)
		}
		_, _ = NodeType(ps).Transport()
	})
}
