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

// Runs is one side's figures of one metric of one key: what [Judge]
// compares.
type Runs struct {
	// Values holds each run's figure, in input order.
	Values []float64
	// Spreads holds each run's own uncertainty: the standard deviation of
	// the natural logarithm of its figure, from its histogram (half the
	// log distance between the order statistics one standard deviation of
	// the rank either side of a percentile; the standard error of the
	// mean over the mean); nil for bandwidth, whose records are single
	// numbers.
	Spreads []float64
	// Value is the side's figure: for latency, from every sample of every
	// run (the merged histogram, or the pooled mean); for bandwidth, the
	// median of the runs.
	Value float64
	// Lo and Hi bound Value by the within-run noise of the pooled samples
	// (latency only; Within says they are set).
	Lo, Hi float64
	Within bool
	// Samples is the number of latency samples behind Value.
	Samples int64
	// Tail is, for a latency percentile, the fewest samples any run has
	// beyond it, n·(1 − p/100): how many samples its figure rests on; 0
	// otherwise.
	Tail float64
}

// measure computes metric m over the group's runs; conf is the confidence
// of the within-run intervals.
func (g *group) measure(m Metric, conf float64) (Runs, error) {
	if !g.latency {
		var out Runs
		for _, r := range g.runs {
			v := r.res.BWAvgGbps
			if m.Name == "msg_rate" {
				v = r.res.MsgRateMpps
			}
			out.Values = append(out.Values, v)
		}
		out.Value = stats.Median(out.Values)
		return out, nil
	}
	if err := g.decode(); err != nil {
		return Runs{}, err
	}
	out := Runs{Samples: g.merged.TotalCount(), Within: true}
	q := 1000 * float64(g.rtt())
	z := stats.NormalQuantile((1 + conf) / 2)
	if m.Percentile == 0 { // the mean, exact: from each run's exact mean and stdev
		var n, sum float64
		for _, r := range g.runs {
			out.Values = append(out.Values, r.res.MeanUs)
			out.Spreads = append(out.Spreads, logSpread(r.res.StdevUs/math.Sqrt(float64(max(r.res.Samples, 1))), r.res.MeanUs))
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
		out.Value, out.Lo, out.Hi = mean, mean-half, mean+half
		out.Samples = int64(n)
		return out, nil
	}
	p := []float64{m.Percentile}
	key := reports.PercentileKey(m.Percentile)
	out.Tail = math.Inf(1)
	for i, h := range g.hists {
		out.Tail = min(out.Tail, float64(h.TotalCount())*(1-m.Percentile/100))
		maxNs := g.runs[i].res.Latency.MaxNs()
		v := reports.PercentilesUs(h, p, g.rtt(), maxNs)[key]
		out.Values = append(out.Values, v)
		spread := 0.0 // the order statistics one standard deviation either side
		if lo, hi, ok := rankInterval(h, maxNs, m.Percentile, oneSigma); ok && lo > 0 {
			spread = math.Log(float64(hi)/float64(lo)) / 2
		}
		out.Spreads = append(out.Spreads, spread)
	}
	out.Value = reports.PercentilesUs(g.merged, p, g.rtt(), g.maxNs)[key]
	out.Lo, out.Hi = out.Value, out.Value
	if lo, hi, ok := rankInterval(g.merged, g.maxNs, m.Percentile, conf); ok {
		out.Lo, out.Hi = min(float64(lo)/q, out.Value), max(float64(hi)/q, out.Value)
	}
	return out, nil
}

// oneSigma is the confidence of ±1 standard deviation of a normal
// distribution: the order statistics at that confidence are one standard
// deviation of the rank either side of a percentile.
const oneSigma = 0.6826894921370859

// rankInterval returns the values (ns) of the order statistics around
// percentile pct of histogram h at confidence conf ([stats.QuantileRanks]),
// capped at maxNs; ok is false for p100 or an empty histogram.
func rankInterval(h *hdr.Histogram, maxNs int64, pct, conf float64) (lo, hi int64, ok bool) {
	n := h.TotalCount()
	if pct >= 100 || n <= 0 {
		return 0, 0, false
	}
	rlo, rhi := stats.QuantileRanks(n, pct/100, conf)
	at := func(rank int64) int64 { return min(h.ValueAtPercentile(100*float64(rank)/float64(n)), maxNs) }
	return at(rlo), at(rhi), true
}

// logSpread is the standard deviation of ln(x) for an estimate x with
// standard error se: se/x by the delta method; 0 when x is not positive.
func logSpread(se, x float64) float64 {
	if !(x > 0) || math.IsNaN(se) {
		return 0
	}
	return se / x
}
