package reports

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// us returns samples in nanoseconds from values in microseconds.
func us(vs ...float64) []int64 {
	out := make([]int64, len(vs))
	for i, v := range vs {
		out[i] = int64(math.Round(v * 1000))
	}
	return out
}

// seq returns the samples 1, 2, ..., m microseconds.
func seq(m int) []int64 {
	out := make([]int64, m)
	for i := range out {
		out[i] = int64(i+1) * 1000
	}
	return out
}

// repeat returns n copies of v.
func repeat(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func cat(parts ...[]int64) []int64 {
	var out []int64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var approx = cmpopts.EquateApprox(0, 1e-12)

func TestPerftestFromSamples(t *testing.T) {
	tests := []struct {
		name    string
		samples []int64 // ns, any order
		rtt     int
		want    Perftest
	}{
		{
			// m=10 → n=8 kept {1..8}; q=1000 ns/us.
			// t_max = sorted[8] = 9 (second largest; 10 is never shown).
			// median, n even: (sorted[3]+sorted[4])/2 = (4000+5000)/2 = 4500 ns.
			// avg = 36/8 = 4.5. d = int(4.5-x) = 3,2,1,0,0,-1,-2,-3 → Σd² = 28,
			// stdev = sqrt(28/8) = sqrt(3.5).
			// 99%: ceil(8·0.99)=ceil(7.92)=8 → sorted[8] = 9; 99.9%: ceil(7.992)=8 → 9.
			name: "1..10us rtt1", samples: []int64{10000, 3000, 1000, 9000, 2000, 8000, 4000, 7000, 5000, 6000}, rtt: 1,
			want: Perftest{TMinUs: 1, TMaxUs: 9, TTypicalUs: 4.5, TAvgUs: 4.5, TStdevUs: math.Sqrt(3.5), P99Us: 9, P999Us: 9, Samples: 10},
		},
		{
			// Same samples, rtt 2: q=2000. Everything halves except the stdev:
			// avg = 2.25, x/2 = .5,1,...,4 → d = int(2.25-x/2) = 1,1,0,0,0,0,-1,-1,
			// Σd² = 4, stdev = sqrt(4/8) = 0.7071 (not 1.8708/2 = 0.9354: the
			// truncation happens after the rtt division).
			name: "1..10us rtt2", samples: seq(10), rtt: 2,
			want: Perftest{TMinUs: 0.5, TMaxUs: 4.5, TTypicalUs: 2.25, TAvgUs: 2.25, TStdevUs: math.Sqrt(0.5), P99Us: 4.5, P999Us: 4.5, Samples: 10},
		},
		{
			// 5 equal samples of 2us, rtt 2 → 1us each. n=3 (odd): median = sorted[1].
			// 99%: ceil(2.97)=3 → sorted[3] = 1.
			name: "5 equal values", samples: repeat(2000, 5), rtt: 2,
			want: Perftest{TMinUs: 1, TMaxUs: 1, TTypicalUs: 1, TAvgUs: 1, TStdevUs: 0, P99Us: 1, P999Us: 1, Samples: 5},
		},
		{
			// One 1000us outlier among nine 1us samples: it is the largest, so it
			// is dropped, and t_max = sorted[8] = 1us. perftest shows no trace of it.
			name: "one huge outlier hidden", samples: cat(repeat(1000, 9), []int64{1_000_000}), rtt: 1,
			want: Perftest{TMinUs: 1, TMaxUs: 1, TTypicalUs: 1, TAvgUs: 1, TStdevUs: 0, P99Us: 1, P999Us: 1, Samples: 10},
		},
		{
			// Two outliers (500us, 1000us): both dropped from the statistics, but
			// t_max = sorted[n] = sorted[8] is the second largest, 500us, and so
			// are 99% and 99.9% (index 8 for n=8).
			name: "two outliers, t_max is the second largest", samples: cat(repeat(1000, 8), []int64{500_000, 1_000_000}), rtt: 1,
			want: Perftest{TMinUs: 1, TMaxUs: 500, TTypicalUs: 1, TAvgUs: 1, TStdevUs: 0, P99Us: 500, P999Us: 500, Samples: 10},
		},
		{
			// m=7 → n=5 (odd): median = sorted[2] = 3. avg = 15/5 = 3,
			// d = 2,1,0,-1,-2 → Σd² = 10, stdev = sqrt(2). t_max = sorted[5] = 6.
			// 99%: ceil(4.95) = 5 → 6; 99.9%: ceil(4.995) = 5 → 6.
			name: "odd kept count", samples: seq(7), rtt: 1,
			want: Perftest{TMinUs: 1, TMaxUs: 6, TTypicalUs: 3, TAvgUs: 3, TStdevUs: math.Sqrt(2), P99Us: 6, P999Us: 6, Samples: 7},
		},
		{
			// m=4 → n=2 (even): median = (1001+1002)/2 = 1001 in integer ns
			// (perftest's cycles_t division truncates 1001.5), while the average
			// is the float 1.0015. t_max = sorted[2] = 5; 99%: ceil(1.98) = 2 → 5.
			name: "median truncated to integer ticks", samples: []int64{6000, 1002, 5000, 1001}, rtt: 1,
			want: Perftest{TMinUs: 1.001, TMaxUs: 5, TTypicalUs: 1.001, TAvgUs: 1.0015, TStdevUs: 0, P99Us: 5, P999Us: 5, Samples: 4},
		},
		{
			// Smallest valid input: m=3 → n=1. median = sorted[0]; t_max = sorted[1];
			// 99%: ceil(0.99) = 1 → sorted[1] = 0.2.
			name: "three samples", samples: []int64{300, 100, 200}, rtt: 1,
			want: Perftest{TMinUs: 0.1, TMaxUs: 0.2, TTypicalUs: 0.1, TAvgUs: 0.1, TStdevUs: 0, P99Us: 0.2, P999Us: 0.2, Samples: 3},
		},
		{
			// Sub-microsecond jitter: six 1.0us and six 1.8us samples. The two
			// largest (1.8) are dropped: kept 6×1.0 + 4×1.8, avg = 13.2/10 = 1.32,
			// median (n=10) = (sorted[4]+sorted[5])/2 = 1.0.
			// Every deviation (0.32 or -0.48) truncates to 0, so t_stdev = 0.00
			// although the samples clearly vary (true stdev 0.4us, see
			// TestNewLatencyResultTrueStats).
			name: "sub-us jitter truncates stdev to 0", samples: cat(repeat(1000, 6), repeat(1800, 6)), rtt: 1,
			want: Perftest{TMinUs: 1, TMaxUs: 1.8, TTypicalUs: 1, TAvgUs: 1.32, TStdevUs: 0, P99Us: 1.8, P999Us: 1.8, Samples: 12},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PerftestFromSamples(tt.samples, tt.rtt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, approx); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestPerftestPercentileIndex checks the 99% and 99.9% indices at the
// boundaries where they leave the kept samples. Samples are 1..m us, so
// sorted[k] = k+1 us and the value names the index.
func TestPerftestPercentileIndex(t *testing.T) {
	tests := []struct {
		m                 int     // samples; n = m-2 kept
		wantTMax          float64 // sorted[n]
		wantP99, wantP999 float64
	}{
		// n=99: ceil(98.01) = 99 = n → sorted[99], a dropped sample = t_max.
		{m: 101, wantTMax: 100, wantP99: 100, wantP999: 100},
		// n=100: ceil(99) = 99 → sorted[99] = 100, the largest kept, below t_max.
		{m: 102, wantTMax: 101, wantP99: 100, wantP999: 101},
		// n=101: ceil(99.99) = 100 → sorted[100] = 101; 99.9%: ceil(100.899) = 101 = n → t_max.
		{m: 103, wantTMax: 102, wantP99: 101, wantP999: 102},
		// n=999: 99.9%: ceil(998.001) = 999 = n → t_max (1000).
		// 99%: ceil(989.01) = 990 → 991.
		{m: 1001, wantTMax: 1000, wantP99: 991, wantP999: 1000},
		// n=1000: 99.9%: ceil(999) = 999 → 1000, the largest kept; t_max = 1001.
		// 99%: ceil(990) = 990 → 991.
		{m: 1002, wantTMax: 1001, wantP99: 991, wantP999: 1000},
		// n=4 (perftest's minimum, -n 5): both indices are ceil(3.96) = 4 = n.
		{m: 6, wantTMax: 5, wantP99: 5, wantP999: 5},
	}
	for _, tt := range tests {
		got, err := PerftestFromSorted(seq(tt.m), 1)
		if err != nil {
			t.Fatal(err)
		}
		if got.TMaxUs != tt.wantTMax || got.P99Us != tt.wantP99 || got.P999Us != tt.wantP999 {
			t.Errorf("m=%d: t_max, 99%%, 99.9%% = %v, %v, %v; want %v, %v, %v",
				tt.m, got.TMaxUs, got.P99Us, got.P999Us, tt.wantTMax, tt.wantP99, tt.wantP999)
		}
	}
}

func TestPerftestTooFewSamples(t *testing.T) {
	for m := range 3 {
		_, err := PerftestFromSamples(seq(m), 2)
		if !errors.Is(err, ErrTooFewSamples) {
			t.Errorf("m=%d: err = %v, want ErrTooFewSamples", m, err)
		}
	}
	if _, err := PerftestFromSamples(seq(5), 0); err == nil {
		t.Error("rtt factor 0: no error")
	}
}

func TestPerftestDuration(t *testing.T) {
	// 2 s window, 1e6 round trips, rtt 2: t_avg = 2e9 ns / 1000 / 2 / 1e6 = 1 us;
	// tps = 1e6 / 2 s = 500000.
	tAvg, tps, err := PerftestDuration(2e9, 1e6, 2)
	if err != nil {
		t.Fatal(err)
	}
	if tAvg != 1 || tps != 500000 {
		t.Errorf("t_avg, tps = %v, %v; want 1, 500000", tAvg, tps)
	}
	// rtt 1 (READ): 3 s, 1.5e6 → t_avg = 2 us, tps = 500000.
	if tAvg, tps, _ = PerftestDuration(3e9, 1.5e6, 1); tAvg != 2 || tps != 500000 {
		t.Errorf("rtt 1: t_avg, tps = %v, %v; want 2, 500000", tAvg, tps)
	}
	for _, bad := range [][3]int64{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}} {
		if _, _, err := PerftestDuration(bad[0], bad[1], int(bad[2])); err == nil {
			t.Errorf("PerftestDuration%v: no error", bad)
		}
	}
}
