package clock

import "testing"

func TestInvariantTSC(t *testing.T) {
	tests := []struct {
		name, cpuinfo string
		want          bool
	}{
		{"both flags, two cpus",
			"processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc rdtscp\n\nprocessor\t: 1\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n", true},
		{"second cpu lacks nonstop_tsc",
			"processor\t: 0\nflags\t\t: constant_tsc nonstop_tsc\n\nprocessor\t: 1\nflags\t\t: constant_tsc\n", false},
		{"no constant_tsc", "flags\t\t: tsc nonstop_tsc\n", false},
		{"no flags line (arm64 has Features)", "processor\t: 0\nFeatures\t: fp asimd\n", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := invariantTSC([]byte(tt.cpuinfo)); got != tt.want {
				t.Errorf("invariantTSC = %v, want %v", got, tt.want)
			}
		})
	}
}
