package plot

import (
	"math"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rperf/rperf/reports"
)

// histogram is the merged histogram of one size's latency records.
type histogram struct {
	h     *hdr.Histogram
	maxNs int64 // the largest true maximum, before rtt_factor
	rtt   int
}

// percentileUs returns percentile p in microseconds, as rperf reports it:
// nearest rank, capped at the true maximum, divided by rtt_factor.
func (h *histogram) percentileUs(p float64) float64 {
	return reports.PercentilesUs(h.h, []float64{p}, h.rtt, h.maxNs)[reports.PercentileKey(p)]
}

// tailPoints samples the percentile distribution at cdfSteps points per
// decade of x = 1/(1−q), from x = 1 (the minimum) up to the largest x
// below the sample count, and ends with the true maximum at x = samples.
func (h *histogram) tailPoints() []point {
	n := float64(h.h.TotalCount())
	us := func(ns int64) float64 { return float64(min(ns, h.maxNs)) / (1000 * float64(h.rtt)) }
	var pts []point
	for k := 0; ; k++ {
		x := math.Pow(10, float64(k)/cdfSteps)
		if x >= n {
			break
		}
		pts = append(pts, point{x, us(h.h.ValueAtPercentile(100 * (1 - 1/x)))})
	}
	return append(pts, point{max(n, 1), us(h.maxNs)})
}
