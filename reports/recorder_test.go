package reports

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func newRec(t testing.TB, opts RecorderOptions) *Recorder {
	t.Helper()
	r, err := NewRecorder(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func recordAll(r *Recorder, samples []int64) {
	for _, s := range samples {
		r.Record(s)
	}
}

func TestRecordDoesNotAllocate(t *testing.T) {
	tests := []struct {
		name string
		opts RecorderOptions
	}{
		{"raw slice has room", RecorderOptions{Expected: 10000}},
		{"raw slice full (duration mode)", RecorderOptions{RawLimit: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRec(t, tt.opts)
			v := int64(1500)
			if a := testing.AllocsPerRun(5000, func() {
				r.Record(v)
				v++
			}); a != 0 {
				t.Errorf("Record allocates %v per call", a)
			}
			// Out-of-range values take the clamping path: still no allocation.
			if a := testing.AllocsPerRun(1000, func() {
				r.Record(-5)
				r.Record(2 * DefaultHighestNs)
			}); a != 0 {
				t.Errorf("Record of out-of-range values allocates %v per call", a)
			}
		})
	}
}

func TestRecorderExact(t *testing.T) {
	tests := []struct {
		name    string
		samples []int64
		want    Exact
	}{
		{
			// 1..10 us: mean 5.5 us; population variance Σ(x-5.5)²/10 = 82.5/10 = 8.25 us².
			name: "1..10us", samples: seq(10),
			want: Exact{Count: 10, MinNs: 1000, MaxNs: 10000, MeanNs: 5500, StdevNs: 1000 * math.Sqrt(8.25)},
		},
		{
			// 9×1000 + 1e6: mean = 1,009,000/10 = 100,900 ns. Deviations -99,900 (×9)
			// and 899,100: Σ = 9·99900² + 899100² = 898,200,900,000, /10 = 89,820,090,000
			// = 299,700², so stdev = 299,700 ns.
			name: "one huge outlier", samples: cat(repeat(1000, 9), []int64{1_000_000}),
			want: Exact{Count: 10, MinNs: 1000, MaxNs: 1_000_000, MeanNs: 100_900, StdevNs: 299_700},
		},
		{
			// Equal values: stdev exactly 0, not a rounding residue.
			name: "equal values", samples: repeat(123456789, 1000),
			want: Exact{Count: 1000, MinNs: 123456789, MaxNs: 123456789, MeanNs: 123456789},
		},
		{
			// Two samples far beyond float64's exact-integer range and the
			// histogram: mean (2^62 + 2^62+2)/2 = 2^62+1 exactly, stdev 1.
			// Both are recorded at the histogram's bound and counted.
			name: "huge values stay exact", samples: []int64{1 << 62, 1<<62 + 2},
			want: Exact{Count: 2, MinNs: 1 << 62, MaxNs: 1<<62 + 2, MeanNs: 1<<62 + 1, StdevNs: 1, HDROutOfRange: 2},
		},
		{
			// A negative sample (a clock going backwards) is kept in the exact
			// statistics, where it shows, and recorded as 0 in the histogram.
			// Mean (-100 + 300)/2 = 100, stdev 200.
			name: "negative sample", samples: []int64{-100, 300},
			want: Exact{Count: 2, MinNs: -100, MaxNs: 300, MeanNs: 100, StdevNs: 200, HDROutOfRange: 1},
		},
		{
			// A negative sum (two's complement 128-bit Σx): mean -200, stdev 100.
			name: "negative sum", samples: []int64{-100, -300},
			want: Exact{Count: 2, MinNs: -300, MaxNs: -100, MeanNs: -200, StdevNs: 100, HDROutOfRange: 2},
		},
		{
			// Extremes of int64 at once: Σx = MinInt64 + MaxInt64 = -1, mean -0.5;
			// deviations ±(2^64-1)/2, stdev (2^64-1)/2 ≈ 9.223372036854776e18.
			name: "int64 extremes", samples: []int64{math.MinInt64, math.MaxInt64},
			want: Exact{Count: 2, MinNs: math.MinInt64, MaxNs: math.MaxInt64, MeanNs: -0.5, StdevNs: 9.223372036854775807e18, HDROutOfRange: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, opts := range []RecorderOptions{{Expected: len(tt.samples)}, {RawLimit: 1}} {
				r := newRec(t, opts)
				recordAll(r, tt.samples)
				got, err := r.Exact()
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got, approx); diff != "" {
					t.Errorf("opts %+v (-want +got)\n%s", opts, diff)
				}
				if h := r.Histogram(); h.TotalCount() != tt.want.Count {
					t.Errorf("opts %+v: histogram holds %d samples, want all %d", opts, h.TotalCount(), tt.want.Count)
				}
			}
		})
	}
}

func TestRecorderEmpty(t *testing.T) {
	r := newRec(t, RecorderOptions{})
	if _, err := r.Exact(); !errors.Is(err, ErrNoSamples) {
		t.Errorf("Exact on empty recorder: err = %v, want ErrNoSamples", err)
	}
}

// TestRecorderDurationOverflow records more samples than the raw slice holds:
// the exact statistics and the histogram still see all of them, the raw slice
// keeps the first RawLimit.
func TestRecorderDurationOverflow(t *testing.T) {
	r := newRec(t, RecorderOptions{RawLimit: 5})
	recordAll(r, seq(10))
	if r.Count() != 10 || r.Stored() != 5 {
		t.Fatalf("Count, Stored = %d, %d; want 10, 5", r.Count(), r.Stored())
	}
	if diff := cmp.Diff(seq(5), r.Samples()); diff != "" {
		t.Errorf("Samples (-want +got)\n%s", diff)
	}
	ex, _ := r.Exact()
	if ex.MinNs != 1000 || ex.MaxNs != 10000 || ex.MeanNs != 5500 {
		t.Errorf("exact over all samples: min %d max %d mean %v", ex.MinNs, ex.MaxNs, ex.MeanNs)
	}
	// Recording after a flush continues correctly.
	r.Record(20000)
	ex, _ = r.Exact()
	if ex.Count != 11 || ex.MaxNs != 20000 || r.Histogram().TotalCount() != 11 {
		t.Errorf("after one more Record: count %d max %d hdr %d", ex.Count, ex.MaxNs, r.Histogram().TotalCount())
	}
}

// TestRecorderInterleavedFlush checks that asking for statistics in the
// middle of a run neither loses nor double-counts raw samples.
func TestRecorderInterleavedFlush(t *testing.T) {
	r := newRec(t, RecorderOptions{Expected: 100})
	for i := range 100 {
		r.Record(int64(i+1) * 1000)
		if i%7 == 0 {
			if _, err := r.Exact(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ex, _ := r.Exact()
	if ex.Count != 100 || ex.MeanNs != 50500 || r.Histogram().TotalCount() != 100 {
		t.Errorf("count %d mean %v hdr %d; want 100, 50500, 100", ex.Count, ex.MeanNs, r.Histogram().TotalCount())
	}
}

func TestRecorderReset(t *testing.T) {
	r := newRec(t, RecorderOptions{Expected: 10})
	recordAll(r, seq(10))
	r.Record(1) // overflow
	r.Reset()
	recordAll(r, []int64{7000, 9000})
	ex, _ := r.Exact()
	want := Exact{Count: 2, MinNs: 7000, MaxNs: 9000, MeanNs: 8000, StdevNs: 1000}
	if diff := cmp.Diff(want, ex, approx); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if r.Histogram().TotalCount() != 2 || r.Stored() != 2 {
		t.Errorf("after Reset: histogram %d, stored %d", r.Histogram().TotalCount(), r.Stored())
	}
}

func TestRecorderMerge(t *testing.T) {
	a := newRec(t, RecorderOptions{Expected: 5})
	b := newRec(t, RecorderOptions{RawLimit: 2})
	recordAll(a, seq(5))                                 // 1..5 us
	recordAll(b, []int64{6000, 7000, 8000, 9000, 10000}) // 6..10 us, 3 overflow
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	ex, _ := a.Exact()
	want := Exact{Count: 10, MinNs: 1000, MaxNs: 10000, MeanNs: 5500, StdevNs: 1000 * math.Sqrt(8.25)}
	if diff := cmp.Diff(want, ex, approx); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if a.Count() != 10 || a.Stored() != 7 || a.Histogram().TotalCount() != 10 {
		t.Errorf("Count %d Stored %d hdr %d; want 10, 7, 10", a.Count(), a.Stored(), a.Histogram().TotalCount())
	}
	c := newRec(t, RecorderOptions{HighestNs: 1e6})
	if err := a.Merge(c); err == nil {
		t.Error("merging different histogram ranges: no error")
	}
}

func TestNewRecorderOptions(t *testing.T) {
	for _, bad := range []RecorderOptions{{Expected: -1}, {RawLimit: -1}, {SigFigs: 6}, {HighestNs: 1}} {
		if _, err := NewRecorder(bad); err == nil {
			t.Errorf("NewRecorder(%+v): no error", bad)
		}
	}
	r := newRec(t, RecorderOptions{Expected: 1234})
	if cap(r.raw) != 1234 {
		t.Errorf("Expected 1234: raw capacity %d", cap(r.raw))
	}
	r = newRec(t, RecorderOptions{})
	if cap(r.raw) != DefaultRawLimit || r.Histogram().HighestTrackableValue() != DefaultHighestNs ||
		r.Histogram().SignificantFigures() != DefaultSigFigs {
		t.Errorf("defaults: raw %d, highest %d, sigfigs %d", cap(r.raw), r.Histogram().HighestTrackableValue(), r.Histogram().SignificantFigures())
	}
}
