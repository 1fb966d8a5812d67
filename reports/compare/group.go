package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rperf/rperf/internal/stats"
	"github.com/rperf/rperf/reports"
)

// group is one side's repetitions of one key.
type group struct {
	key     Key
	latency bool
	runs    []run

	// Latency groups, filled by decode: each run's histogram, all of
	// them merged, and the largest true maximum (ns, before rtt_factor).
	hists  []*hdr.Histogram
	merged *hdr.Histogram
	maxNs  int64
}

// add appends a repetition, checking that it measured the same kind of
// thing as those before it.
func (g *group) add(r run) error {
	if (r.res.Latency != nil) != g.latency {
		return fmt.Errorf("%s: %s holds a %s record where an earlier one was a %s record", g.key, r.file, kindName(!g.latency), kindName(g.latency))
	}
	if g.latency && len(g.runs) > 0 {
		if a, b := g.runs[0].res.RTTFactor, r.res.RTTFactor; a != b {
			return fmt.Errorf("%s: rtt_factor %d in %s but %d in %s: not the same measurement", g.key, a, g.runs[0].file, b, r.file)
		}
	}
	g.runs = append(g.runs, r)
	return nil
}

func kindName(latency bool) string {
	if latency {
		return "latency"
	}
	return "bandwidth"
}

func (g *group) rtt() int { return g.runs[0].res.RTTFactor }

// decode decodes every run's histogram and merges them exactly
// ([reports.MergeHistograms]): the merged histogram is the one a single
// recorder would have built from every sample.
func (g *group) decode() error {
	if g.merged != nil {
		return nil
	}
	for _, r := range g.runs {
		if r.res.HDR == "" {
			return fmt.Errorf("%s: %s: the record has no hdr histogram", g.key, r.file)
		}
		h, err := reports.DecodeHDR(r.res.HDR)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", g.key, r.file, err)
		}
		g.hists = append(g.hists, h)
		g.maxNs = max(g.maxNs, r.res.Latency.MaxNs())
	}
	m, err := reports.MergeHistograms(g.hists)
	if err != nil {
		return fmt.Errorf("%s (runs in %s): %w", g.key, g.files(), err)
	}
	g.merged = m
	return nil
}

// files lists the files the group's runs came from, each once.
func (g *group) files() string {
	var fs []string
	for _, r := range g.runs {
		if !slices.Contains(fs, r.file) {
			fs = append(fs, r.file)
		}
	}
	return strings.Join(fs, ", ")
}

// measure is one side's view of one metric for one key.
type measure struct {
	// values holds each run's figure.
	values []float64
	// value is the side's figure: for latency, from every sample of every
	// run (the merged histogram, or the pooled mean); for bandwidth, the
	// median of the runs.
	value float64
	// lo and hi bound value by the within-run noise of the pooled samples
	// (latency only; hasWithin says they are set).
	lo, hi    float64
	hasWithin bool
	// samples is the number of latency samples behind value.
	samples int64
}

// measure computes metric m over the group's runs; conf is the confidence
// of the within-run interval.
func (g *group) measure(m Metric, conf float64) (measure, error) {
	if !g.latency {
		var out measure
		for _, r := range g.runs {
			v := r.res.BWAvgGbps
			if m.Name == "msg_rate" {
				v = r.res.MsgRateMpps
			}
			out.values = append(out.values, v)
		}
		out.value = stats.Median(out.values)
		return out, nil
	}
	if err := g.decode(); err != nil {
		return measure{}, err
	}
	out := measure{samples: g.merged.TotalCount(), hasWithin: true}
	q := 1000 * float64(g.rtt())
	z := stats.NormalQuantile((1 + conf) / 2)
	if m.Percentile == 0 { // the mean, exact: from each run's exact mean and stdev
		var n, sum float64
		for _, r := range g.runs {
			out.values = append(out.values, r.res.MeanUs)
			n += float64(r.res.Samples)
			sum += r.res.MeanUs * float64(r.res.Samples)
		}
		mean := sum / n
		var ss float64 // Σ n_i (s_i² + (m_i − mean)²): the pooled sum of squares
		for _, r := range g.runs {
			d := r.res.MeanUs - mean
			ss += float64(r.res.Samples) * (r.res.StdevUs*r.res.StdevUs + d*d)
		}
		half := z * math.Sqrt(ss/n) / math.Sqrt(n)
		out.value, out.lo, out.hi = mean, mean-half, mean+half
		out.samples = int64(n)
		return out, nil
	}
	p := []float64{m.Percentile}
	key := reports.PercentileKey(m.Percentile)
	for i, h := range g.hists {
		out.values = append(out.values, reports.PercentilesUs(h, p, g.rtt(), g.runs[i].res.Latency.MaxNs())[key])
	}
	out.value = reports.PercentilesUs(g.merged, p, g.rtt(), g.maxNs)[key]
	out.lo, out.hi = out.value, out.value
	if n := g.merged.TotalCount(); m.Percentile < 100 && n > 0 {
		lo, hi := stats.QuantileRanks(n, m.Percentile/100, conf)
		at := func(rank int64) float64 {
			return float64(min(g.merged.ValueAtPercentile(100*float64(rank)/float64(n)), g.maxNs)) / q
		}
		out.lo, out.hi = min(at(lo), out.value), max(at(hi), out.value)
	}
	return out, nil
}
