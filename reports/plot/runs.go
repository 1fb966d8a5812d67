package plot

import (
	"fmt"
	"strconv"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rperf/rperf/reports"
)

// RunsOptions configures [Runs].
type RunsOptions struct {
	// Title is the figure's title, e.g. the comparison and its verdict.
	Title string
	// Percentile marks a latency percentile on the distribution (0 for
	// none, as for the mean).
	Percentile float64
	// Metric is the bandwidth figure drawn: "bw_avg" (Gb/s, the default)
	// or "msg_rate" (Mpps).
	Metric string
}

// Runs draws one key of a comparison run by run: for latency, every run's
// percentile distribution thin and each side's merged one bold, baseline
// and candidate in two colours, with the compared percentile marked; for
// bandwidth, each run's figure in the order the runs were given. The
// records must all be latency or all bandwidth records of one key.
func Runs(baseline, candidate []reports.Result, opts RunsOptions) (*Figure, error) {
	if len(baseline) == 0 || len(candidate) == 0 {
		return nil, fmt.Errorf("plot: runs of both sides are needed")
	}
	latency := baseline[0].Latency != nil
	for _, r := range append(append([]reports.Result{}, baseline...), candidate...) {
		if (r.Latency != nil) != latency || (!latency && r.Bandwidth == nil) {
			return nil, fmt.Errorf("plot: %s %dB: latency and bandwidth records, or records of neither, under one key", r.Test, r.Bytes)
		}
	}
	c := &chart{title: opts.Title}
	sides := []struct {
		name  string
		color string
		runs  []reports.Result
	}{{"baseline", palette[0], baseline}, {"candidate", palette[1], candidate}}
	if !latency {
		unit, get := "average bandwidth [Gb/s]", func(r reports.Result) float64 { return r.BWAvgGbps }
		if opts.Metric == "msg_rate" {
			unit, get = "message rate [Mpps]", func(r reports.Result) float64 { return r.MsgRateMpps }
		}
		n := 0
		for _, sd := range sides {
			s := series{label: sd.name + " runs", color: sd.color, markers: true}
			for i, r := range sd.runs {
				s.points = append(s.points, point{float64(i + 1), get(r)})
			}
			n = max(n, len(sd.runs))
			c.series = append(c.series, s)
		}
		_, _, _, yhi := c.bounds()
		c.x = runAxis(n)
		c.y = newAxis(unit, linear, 0, yhi)
		return &Figure{panels: []*chart{c}}, nil
	}
	for _, sd := range sides {
		var hs []*hdr.Histogram
		var maxNs int64
		rtt := sd.runs[0].RTTFactor
		for i, r := range sd.runs {
			if r.RTTFactor != rtt {
				return nil, fmt.Errorf("plot: %s runs with rtt_factor %d and %d", sd.name, rtt, r.RTTFactor)
			}
			h, err := reports.DecodeHDR(r.HDR)
			if err != nil {
				return nil, fmt.Errorf("plot: %s run %d: %w", sd.name, i+1, err)
			}
			hs = append(hs, h)
			maxNs = max(maxNs, r.Latency.MaxNs())
			label := ""
			if i == 0 {
				label = sd.name + " runs"
			}
			c.series = append(c.series, series{label: label, color: sd.color, width: 0.7,
				points: (&histogram{h: h, maxNs: r.Latency.MaxNs(), rtt: rtt}).tailPoints()})
		}
		m, err := reports.MergeHistograms(hs)
		if err != nil {
			return nil, fmt.Errorf("plot: %s: %w", sd.name, err)
		}
		c.series = append(c.series, series{label: sd.name + ", all runs", color: sd.color, width: 2.4,
			points: (&histogram{h: m, maxNs: maxNs, rtt: rtt}).tailPoints()})
	}
	cdfAxes(c)
	if p := opts.Percentile; p > 0 && p < 100 {
		x := 100 / (100 - p)
		c.series = append(c.series, series{label: "p" + reports.PercentileKey(p), color: "#000000", dash: "2 3", width: 1,
			points: []point{{x, c.y.min}, {x, c.y.max}}})
	}
	return &Figure{panels: []*chart{c}}, nil
}

// runAxis numbers the runs 1..n.
func runAxis(n int) axis {
	a := axis{label: "run", scale: linear, min: 0.5, max: float64(n) + 0.5}
	for i := 1; i <= n; i++ {
		a.ticks = append(a.ticks, tick{float64(i), strconv.Itoa(i)})
	}
	return a
}
