package reports

import (
	"math/rand/v2"
	"testing"
)

// benchSamples is a realistic spread of RDMA round trips: 1.5-3 us with a
// rare long tail.
func benchSamples() []int64 {
	rng := rand.New(rand.NewPCG(1, 2))
	s := make([]int64, 4096)
	for i := range s {
		s[i] = 1500 + rng.Int64N(1500)
		if i%1000 == 0 {
			s[i] = 50000 + rng.Int64N(100000)
		}
	}
	return s
}

// BenchmarkRecord measures Recorder.Record in its two regimes: while samples
// fit in the preallocated raw slice (iterations mode), and once it is full
// (duration mode past RawLimit), when each sample goes straight to the exact
// sums and the histogram.
func BenchmarkRecord(b *testing.B) {
	samples := benchSamples()
	b.Run("path=raw", func(b *testing.B) {
		r, err := NewRecorder(RecorderOptions{Expected: b.N + 1})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			r.Record(samples[i&4095])
		}
	})
	b.Run("path=full", func(b *testing.B) {
		r, err := NewRecorder(RecorderOptions{RawLimit: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			r.Record(samples[i&4095])
		}
	})
}

// BenchmarkFinalize measures the deferred work: folding 1e6 raw samples
// into the exact sums and histogram, as NewLatencyResult does once.
func BenchmarkFinalize(b *testing.B) {
	samples := benchSamples()
	r, err := NewRecorder(RecorderOptions{Expected: 1_000_000})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r.Reset()
		for i := range 1_000_000 {
			r.Record(samples[i&4095])
		}
		if _, err := r.Exact(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ns/sample")
}
