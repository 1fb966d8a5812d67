package reports

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ignoreHDR leaves the encoded histogram out of result comparisons; the HDR
// round-trip test covers it.
var ignoreHDR = cmpopts.IgnoreFields(Latency{}, "HDR")

func latencyResult(t *testing.T, spec LatencySpec, opts RecorderOptions, samples []int64) Result {
	t.Helper()
	r := newRec(t, opts)
	recordAll(r, samples)
	res, err := NewLatencyResult(spec, r)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestNewLatencyResult(t *testing.T) {
	tests := []struct {
		name    string
		spec    LatencySpec
		opts    RecorderOptions
		samples []int64
		want    Result
	}{
		{
			// Samples 1..10 us, READ (rtt 1), 11 iterations (ping-pong: 10 samples).
			// perftest fields: see TestPerftestFromSamples "1..10us rtt1".
			// True: min 1, max 10, mean 5.5, stdev sqrt(8.25).
			// HDR percentiles (nearest rank, rank = int(p/100·10 + 0.5)), then the
			// bucket's highest equivalent value (4 ns buckets in 4096..8191 ns,
			// 8 ns in 8192..16383 ns), capped at the true max:
			//   p50  rank 5  → 5000 ns → 5003 → 5.003 us
			//   p90  rank 9  → 9000 ns → 9007 → 9.007 us
			//   p99, p99.9, p99.99 rank 10 → 10000 → 10007 → capped 10000 → 10 us
			name: "iterations rtt1 1..10us",
			spec: LatencySpec{Test: "read_lat", Bytes: 2, Iterations: 11, Mode: ModeIterations, RTTFactor: 1},
			opts: RecorderOptions{Expected: 10}, samples: seq(10),
			want: Result{Test: "read_lat", Bytes: 2, Iterations: 11, Mode: ModeIterations, Latency: &Latency{
				RTTFactor: 1, Samples: 10,
				Perftest: &Perftest{TMinUs: 1, TMaxUs: 9, TTypicalUs: 4.5, TAvgUs: 4.5, TStdevUs: math.Sqrt(3.5),
					P99Us: 9, P999Us: 9, Samples: 10, AllSamples: true},
				TrueMinUs: 1, TrueMaxUs: 10, MeanUs: 5.5, StdevUs: math.Sqrt(8.25),
				Percentiles: map[string]float64{"50": 5.003, "90": 9.007, "99": 10, "99.9": 10, "99.99": 10},
				HDRUnit:     "ns",
			}},
		},
		{
			// Same samples as WRITE round trips (rtt 2): every true figure halves,
			// including the percentiles (5003/2000 = 2.5015 ...).
			name: "iterations rtt2 1..10us, custom percentiles",
			spec: LatencySpec{Test: "write_lat", Bytes: 64, Iterations: 11, Mode: ModeIterations, RTTFactor: 2, Percentiles: []float64{50, 100}},
			opts: RecorderOptions{Expected: 10}, samples: seq(10),
			want: Result{Test: "write_lat", Bytes: 64, Iterations: 11, Mode: ModeIterations, Latency: &Latency{
				RTTFactor: 2, Samples: 10,
				Perftest: &Perftest{TMinUs: 0.5, TMaxUs: 4.5, TTypicalUs: 2.25, TAvgUs: 2.25, TStdevUs: math.Sqrt(0.5),
					P99Us: 4.5, P999Us: 4.5, Samples: 10, AllSamples: true},
				TrueMinUs: 0.5, TrueMaxUs: 5, MeanUs: 2.75, StdevUs: math.Sqrt(8.25) / 2,
				Percentiles: map[string]float64{"50": 2.5015, "100": 5},
				HDRUnit:     "ns",
			}},
		},
		{
			// Sub-us jitter, 6×1.0 us + 6×1.8 us: perftest's t_stdev truncates
			// to 0.00 (see TestPerftestFromSamples), the true stdev is 0.4 us
			// (mean 1.4, every sample 0.4 away). HDR: 1000 and 1800 ns are
			// exact (1 ns buckets below 2048); p50 rank 6 → 1000; p90 rank
			// int(11.3) = 11 → 1800.
			name: "sub-us jitter",
			spec: LatencySpec{Test: "send_lat", Bytes: 2, Iterations: 13, Mode: ModeIterations, RTTFactor: 1, Percentiles: []float64{50, 90}},
			opts: RecorderOptions{Expected: 12}, samples: cat(repeat(1000, 6), repeat(1800, 6)),
			want: Result{Test: "send_lat", Bytes: 2, Iterations: 13, Mode: ModeIterations, Latency: &Latency{
				RTTFactor: 1, Samples: 12,
				Perftest: &Perftest{TMinUs: 1, TMaxUs: 1.8, TTypicalUs: 1, TAvgUs: 1.32, TStdevUs: 0,
					P99Us: 1.8, P999Us: 1.8, Samples: 12, AllSamples: true},
				TrueMinUs: 1, TrueMaxUs: 1.8, MeanUs: 1.4, StdevUs: 0.4,
				Percentiles: map[string]float64{"50": 1, "90": 1.8},
				HDRUnit:     "ns",
			}},
		},
		{
			// Two samples: too few for perftest's fields (nil), true stats still
			// exact: mean 1.5, stdev 0.5.
			name: "n < 3: no perftest fields",
			spec: LatencySpec{Test: "read_lat", Bytes: 2, Iterations: 3, Mode: ModeIterations, RTTFactor: 1, Percentiles: []float64{50}},
			opts: RecorderOptions{Expected: 2}, samples: seq(2),
			want: Result{Test: "read_lat", Bytes: 2, Iterations: 3, Mode: ModeIterations, Latency: &Latency{
				RTTFactor: 1, Samples: 2,
				TrueMinUs: 1, TrueMaxUs: 2, MeanUs: 1.5, StdevUs: 0.5,
				Percentiles: map[string]float64{"50": 1},
				HDRUnit:     "ns",
			}},
		},
		{
			// Duration mode, raw slice of 5 for 10 samples (1..10 us, rtt 2):
			// perftest's fields come from the first 5 stored (1..5 us → halved;
			// n=3 kept {0.5,1,1.5}: t_max = sorted[3] = 2, median 1, 99% = sorted[3]),
			// AllSamples false; t_avg is perftest's duration definition:
			// 20,000,000 ns window / 1000 / 2 / 10,000 iterations = 1 us, and
			// tps = 10,000 / 0.02 s = 500,000. True stats cover all 10 samples.
			name: "duration mode, raw slice full",
			spec: LatencySpec{Test: "write_lat", Bytes: 2, Iterations: 10000, Mode: ModeDuration, RTTFactor: 2,
				Percentiles: []float64{50}, ElapsedNs: 20_000_000},
			opts: RecorderOptions{RawLimit: 5}, samples: seq(10),
			want: Result{Test: "write_lat", Bytes: 2, Iterations: 10000, Mode: ModeDuration, ElapsedNs: 20_000_000, Latency: &Latency{
				RTTFactor: 2, Samples: 10,
				Perftest: &Perftest{TMinUs: 0.5, TMaxUs: 2, TTypicalUs: 1, TAvgUs: 1, TStdevUs: 0,
					P99Us: 2, P999Us: 2, Samples: 5, AllSamples: false},
				TPSAverage: 500000,
				TrueMinUs:  0.5, TrueMaxUs: 5, MeanUs: 2.75, StdevUs: math.Sqrt(8.25) / 2,
				Percentiles: map[string]float64{"50": 2.5015},
				HDRUnit:     "ns",
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := latencyResult(t, tt.spec, tt.opts, tt.samples)
			if diff := cmp.Diff(tt.want, got, approx, ignoreHDR); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestNewLatencyResultErrors(t *testing.T) {
	empty := newRec(t, RecorderOptions{})
	full := newRec(t, RecorderOptions{})
	recordAll(full, seq(10))
	tests := []struct {
		name string
		spec LatencySpec
		rec  *Recorder
	}{
		{"rtt 0", LatencySpec{Mode: ModeIterations}, full},
		{"bad mode", LatencySpec{Mode: "forever", RTTFactor: 1}, full},
		{"no samples", LatencySpec{Mode: ModeIterations, RTTFactor: 1}, empty},
		{"bad percentile", LatencySpec{Mode: ModeIterations, RTTFactor: 1, Percentiles: []float64{0}}, full},
		{"percentile over 100", LatencySpec{Mode: ModeIterations, RTTFactor: 1, Percentiles: []float64{100.5}}, full},
		{"duration without window", LatencySpec{Mode: ModeDuration, RTTFactor: 1, Iterations: 10}, full},
	}
	for _, tt := range tests {
		if _, err := NewLatencyResult(tt.spec, tt.rec); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

// TestHDRRoundTrip decodes the hdr field of a result, recomputes its
// percentiles, and expects exactly the stored ones.
func TestHDRRoundTrip(t *testing.T) {
	samples := benchSamples() // 1.5-3 us with a 50-150 us tail
	for _, rtt := range []int{1, 2} {
		spec := LatencySpec{Test: "write_lat", Bytes: 2, Iterations: int64(len(samples)), Mode: ModeIterations,
			RTTFactor: rtt, Percentiles: []float64{1, 25, 50, 90, 99, 99.9, 99.99, 100}}
		res := latencyResult(t, spec, RecorderOptions{Expected: len(samples)}, samples)
		h, err := DecodeHDR(res.HDR)
		if err != nil {
			t.Fatal(err)
		}
		if h.TotalCount() != int64(len(samples)) {
			t.Fatalf("decoded histogram holds %d samples, want %d", h.TotalCount(), len(samples))
		}
		got := PercentilesUs(h, spec.Percentiles, res.RTTFactor, res.MaxNs())
		if diff := cmp.Diff(res.Percentiles, got); diff != "" {
			t.Errorf("rtt %d: recomputed percentiles (-stored +recomputed)\n%s", rtt, diff)
		}
		r := newRec(t, RecorderOptions{Expected: len(samples)})
		recordAll(r, samples)
		if !r.Histogram().Equals(h) {
			t.Errorf("rtt %d: decoded histogram differs from the recorded one", rtt)
		}
	}
}

func TestPercentileKey(t *testing.T) {
	for p, want := range map[float64]string{50: "50", 99: "99", 99.9: "99.9", 99.99: "99.99", 99.999: "99.999", 100: "100"} {
		if got := PercentileKey(p); got != want {
			t.Errorf("PercentileKey(%v) = %q, want %q", p, got, want)
		}
	}
	keys := SortedPercentileKeys(map[string]float64{"99.99": 0, "50": 0, "99.9": 0, "100": 0, "9": 0})
	if diff := cmp.Diff([]string{"9", "50", "99.9", "99.99", "100"}, keys); diff != "" {
		t.Errorf("SortedPercentileKeys (-want +got)\n%s", diff)
	}
}
