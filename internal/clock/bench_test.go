package clock

import (
	"testing"
	"time"
	_ "unsafe" // for go:linkname in the comparison benchmark
)

//go:linkname runtimeNanotime runtime.nanotime
func runtimeNanotime() int64

var sink int64

// BenchmarkRead compares the candidate sources; see the package doc.
func BenchmarkRead(b *testing.B) {
	b.Run("src=Now", func(b *testing.B) {
		for b.Loop() {
			sink += Now()
		}
	})
	b.Run("src=linkname-nanotime", func(b *testing.B) {
		for b.Loop() {
			sink += runtimeNanotime()
		}
	})
	b.Run("src=time.Now", func(b *testing.B) {
		for b.Loop() {
			sink += time.Now().UnixNano()
		}
	})
	b.Run("src=tsc-ticks", func(b *testing.B) {
		tsc := calibrated(b)
		for b.Loop() {
			sink += int64(tsc.Ticks())
		}
	})
	b.Run("src=tsc-ns", func(b *testing.B) {
		tsc := calibrated(b)
		for b.Loop() {
			sink += tsc.Now()
		}
	})
}

// BenchmarkMeasure reports what Measure reports, as metrics.
func BenchmarkMeasure(b *testing.B) {
	var info Info
	for b.Loop() {
		info = Measure()
	}
	b.ReportMetric(info.CostNs, "cost-ns")
	b.ReportMetric(float64(info.ResolutionNs), "resolution-ns")
}
