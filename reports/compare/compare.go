package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rperf/rperf/internal/stats"
)

// Defaults for [Options].
const (
	DefaultThresholdPct = 5
	DefaultConfidence   = 0.95
)

// Options configures [Compare].
type Options struct {
	// Metrics to compare; nil means [DefaultMetrics].
	Metrics []Metric
	// ThresholdPct is the smallest relative change, in percent, that
	// counts as better or worse; a smaller change is "same" however
	// clear. 0 means [DefaultThresholdPct]; use a tiny positive value to
	// call any change beyond noise.
	ThresholdPct float64
	// Confidence is the confidence level of the noise intervals, in
	// (0.5, 1); 0 means [DefaultConfidence].
	Confidence float64
}

// Verdict is the outcome of one comparison.
type Verdict string

// Verdicts.
const (
	Better Verdict = "better"
	Worse  Verdict = "worse"
	// Same: the change is below the threshold or within noise.
	Same Verdict = "same"
	// NoVerdict: the baseline's value is 0, so there is no relative
	// change to judge.
	NoVerdict Verdict = "n/a"
)

// Noise says what the interval of a change was computed from.
type Noise string

// Noise bases, from the strongest to none.
const (
	// NoiseRuns: enough repetitions on both sides for a rank interval at
	// the confidence asked: the Hodges-Lehmann interval of the shift
	// between the two sides' per-run values.
	NoiseRuns Noise = "runs"
	// NoiseRange: repetitions, but too few for that confidence: each
	// side's interval spans all its runs (and, for latency, the
	// within-run interval of the pooled samples); the intervals must not
	// overlap.
	NoiseRange Noise = "range"
	// NoiseHistogram: one latency run per side: each side's interval is
	// the within-run interval of its histogram (order statistics for a
	// percentile, the standard error for the mean). It sees the noise
	// within a run, not the variation between runs.
	NoiseHistogram Noise = "histogram"
	// NoiseNone: one bandwidth run per side: nothing measures the noise,
	// and the threshold alone decides.
	NoiseNone Noise = "none"
)

// Interval bounds a relative change, in percent.
type Interval struct {
	LoPct float64 `json:"lo_pct"`
	HiPct float64 `json:"hi_pct"`
	// Confidence is the interval's exact confidence for the runs and
	// range bases (a rank interval's, which can exceed the level asked
	// for, or fall short of it for range); 0 (omitted) when no figure can
	// be given.
	Confidence float64 `json:"confidence,omitempty"`
}

// Side is one side of a comparison.
type Side struct {
	// Runs is the number of repetitions (records) compared.
	Runs int `json:"runs"`
	// Value is the side's figure: for latency, over every sample of every
	// run (percentiles of the merged histogram, the pooled exact mean);
	// for bandwidth, the median of the runs.
	Value float64 `json:"value"`
	// Median is the median of the per-run values.
	Median float64 `json:"median"`
	// Values holds each run's figure, in input order.
	Values []float64 `json:"values"`
	// Samples is the number of latency samples pooled (0 for bandwidth).
	Samples int64 `json:"samples,omitempty"`
	// Lo and Hi are the side's interval, set when the noise basis is
	// range or histogram.
	Lo *float64 `json:"lo,omitempty"`
	Hi *float64 `json:"hi,omitempty"`
}

// Comparison is the verdict on one metric of one key.
type Comparison struct {
	Test   string `json:"test"`
	Bytes  int64  `json:"bytes"`
	Path   string `json:"path,omitempty"`
	Metric string `json:"metric"`
	Unit   string `json:"unit"`
	// Better is "lower" (latency) or "higher" (bandwidth, message rate).
	Better    string `json:"better"`
	Baseline  Side   `json:"baseline"`
	Candidate Side   `json:"candidate"`
	// ChangePct is (candidate − baseline) / baseline × 100 of the sides'
	// values.
	ChangePct float64 `json:"change_pct"`
	// Interval bounds the change; nil when the basis is none.
	Interval *Interval `json:"interval,omitempty"`
	Noise    Noise     `json:"noise"`
	Verdict  Verdict   `json:"verdict"`
	// Reason explains the verdict in one sentence.
	Reason string `json:"reason"`
}

// Key returns the comparison's key.
func (c *Comparison) Key() Key { return Key{Test: c.Test, Bytes: c.Bytes, Path: c.Path} }

// Compare compares the candidate's records with the baseline's, key by
// key (keys in the baseline's order) and metric by metric (in the order
// given). Keys on one side only are listed in the report. It fails when
// no key is on both sides ([*NoMatchError]) or when the records of a key
// cannot be repetitions of each other.
func Compare(baseline, candidate []Input, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	base, err := newSide("baseline", baseline)
	if err != nil {
		return nil, err
	}
	cand, err := newSide("candidate", candidate)
	if err != nil {
		return nil, err
	}
	rep := newReport(baseline, candidate, opts)
	matched := 0
	for _, k := range base.keys {
		bg, cg := base.groups[k], cand.groups[k]
		if cg == nil {
			rep.OnlyBaseline = append(rep.OnlyBaseline, k.String())
			continue
		}
		matched++
		if bg.latency != cg.latency {
			return nil, fmt.Errorf("%s: a %s record in the baseline, a %s record in the candidate", k, kindName(bg.latency), kindName(cg.latency))
		}
		if bg.latency && bg.rtt() != cg.rtt() {
			return nil, fmt.Errorf("%s: rtt_factor %d in the baseline but %d in the candidate: not the same measurement", k, bg.rtt(), cg.rtt())
		}
		for _, m := range opts.Metrics {
			if m.Latency != bg.latency {
				continue
			}
			c, err := compareGroups(bg, cg, m, opts)
			if err != nil {
				return nil, err
			}
			rep.add(c)
		}
	}
	for _, k := range cand.keys {
		if base.groups[k] == nil {
			rep.OnlyCandidate = append(rep.OnlyCandidate, k.String())
		}
	}
	if matched == 0 {
		return nil, &NoMatchError{Baseline: base.keys, Candidate: cand.keys}
	}
	if len(rep.Comparisons) == 0 {
		return nil, fmt.Errorf("%w (metrics %s)", errNoMetric, strings.Join(rep.Metrics, ","))
	}
	return rep, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Metrics == nil {
		ms, err := ParseMetrics(DefaultMetrics)
		if err != nil {
			return o, err
		}
		o.Metrics = ms
	}
	if o.ThresholdPct == 0 {
		o.ThresholdPct = DefaultThresholdPct
	}
	if o.Confidence == 0 {
		o.Confidence = DefaultConfidence
	}
	if !(o.ThresholdPct > 0) || math.IsInf(o.ThresholdPct, 0) {
		return o, fmt.Errorf("threshold %v%%: want a positive percentage", o.ThresholdPct)
	}
	if !(o.Confidence > 0.5 && o.Confidence < 1) {
		return o, fmt.Errorf("confidence %v: want a level between 0.5 and 1, e.g. 0.95", o.Confidence)
	}
	return o, nil
}

// compareGroups compares one metric of one key.
func compareGroups(bg, cg *group, m Metric, opts Options) (Comparison, error) {
	b, err := bg.measure(m, opts.Confidence)
	if err != nil {
		return Comparison{}, fmt.Errorf("baseline: %w", err)
	}
	c, err := cg.measure(m, opts.Confidence)
	if err != nil {
		return Comparison{}, fmt.Errorf("candidate: %w", err)
	}
	k := bg.key
	cmp := Comparison{
		Test: k.Test, Bytes: k.Bytes, Path: k.Path,
		Metric: m.Name, Unit: m.Unit, Better: m.better(),
		Baseline:  newSideReport(b),
		Candidate: newSideReport(c),
	}
	if b.value <= 0 || math.IsNaN(b.value) || math.IsNaN(c.value) {
		cmp.Noise = NoiseNone
		cmp.Verdict = NoVerdict
		cmp.Reason = fmt.Sprintf("the baseline's %s is %s: there is no relative change to judge", m.Name, formatValue(b.value))
		return cmp, nil
	}
	pct := func(d float64) float64 { return 100 * d / b.value }
	cmp.ChangePct = pct(c.value - b.value)

	nb, nc := len(b.values), len(c.values)
	shift, ok := stats.ShiftCI(b.values, c.values, opts.Confidence)
	switch {
	case ok:
		cmp.Noise = NoiseRuns
		cmp.Interval = &Interval{LoPct: pct(shift.Lo), HiPct: pct(shift.Hi), Confidence: shift.Confidence}
	case b.hasWithin && c.hasWithin:
		// Each side's interval covers its within-run interval and all its
		// runs; the change's interval is their difference.
		blo, bhi := spread(b)
		clo, chi := spread(c)
		cmp.Baseline.Lo, cmp.Baseline.Hi = &blo, &bhi
		cmp.Candidate.Lo, cmp.Candidate.Hi = &clo, &chi
		cmp.Interval = &Interval{LoPct: pct(clo - bhi), HiPct: pct(chi - blo)}
		cmp.Noise = NoiseHistogram
		if nb > 1 || nc > 1 {
			cmp.Noise = NoiseRange
			cmp.Interval.Confidence = shift.Confidence // it contains the widest rank interval
		}
	case nb > 1 || nc > 1:
		blo, bhi := slices.Min(b.values), slices.Max(b.values)
		clo, chi := slices.Min(c.values), slices.Max(c.values)
		cmp.Baseline.Lo, cmp.Baseline.Hi = &blo, &bhi
		cmp.Candidate.Lo, cmp.Candidate.Hi = &clo, &chi
		cmp.Noise = NoiseRange
		cmp.Interval = &Interval{LoPct: pct(shift.Lo), HiPct: pct(shift.Hi), Confidence: shift.Confidence}
	default:
		cmp.Noise = NoiseNone
	}
	cmp.Verdict, cmp.Reason = decide(cmp, m, nb, nc, opts)
	return cmp, nil
}

// spread is a side's interval for the range and histogram bases: the
// within-run interval of its pooled value, widened to cover every run.
func spread(s measure) (lo, hi float64) {
	return min(s.lo, slices.Min(s.values)), max(s.hi, slices.Max(s.values))
}

// decide gives the verdict: better or worse when the change reaches the
// threshold in that direction and its interval excludes no change on
// the same side; with no noise estimate, the threshold alone decides.
func decide(c Comparison, m Metric, nb, nc int, opts Options) (Verdict, string) {
	change := c.ChangePct
	dir := Worse
	if (change > 0) == m.HigherIsBetter {
		dir = Better
	}
	runs := fmt.Sprintf("%d vs %d runs", nb, nc)
	if change == 0 || math.Abs(change) < opts.ThresholdPct {
		return Same, fmt.Sprintf("the change, %s, is below the %s threshold", formatPct(change), formatThreshold(opts.ThresholdPct))
	}
	if c.Noise == NoiseNone {
		return dir, fmt.Sprintf("%s beyond the %s threshold, based on one sample per side: no noise estimate, the threshold alone decided (repeat the runs to measure the noise)",
			formatPct(change), formatThreshold(opts.ThresholdPct))
	}
	iv := c.Interval
	beyond := (change > 0 && iv.LoPct > 0) || (change < 0 && iv.HiPct < 0)
	ivs := formatInterval(iv)
	switch c.Noise {
	case NoiseRuns:
		if !beyond {
			return Same, fmt.Sprintf("within noise: the %s interval %s from %s includes no change", formatConfidence(iv.Confidence), ivs, runs)
		}
		return dir, fmt.Sprintf("%s, beyond the %s threshold and beyond noise: the %s interval %s from %s excludes no change",
			formatPct(change), formatThreshold(opts.ThresholdPct), formatConfidence(iv.Confidence), ivs, runs)
	case NoiseRange:
		few := fmt.Sprintf("%s are too few for a %s rank interval", runs, formatConfidence(opts.Confidence))
		if !beyond {
			return Same, fmt.Sprintf("within noise: the sides' ranges overlap (change interval %s); %s", ivs, few)
		}
		return dir, fmt.Sprintf("%s, beyond the %s threshold, and the sides' ranges do not overlap (change interval %s); %s, so this is weaker evidence than repeated runs give",
			formatPct(change), formatThreshold(opts.ThresholdPct), ivs, few)
	default: // NoiseHistogram
		if !beyond {
			return Same, fmt.Sprintf("within noise, based on one sample per side: the histograms' %s intervals overlap (change interval %s)", formatConfidence(opts.Confidence), ivs)
		}
		return dir, fmt.Sprintf("%s, beyond the %s threshold, based on one sample per side: the histograms' %s intervals do not overlap (change interval %s), which covers the noise within a run but not between runs",
			formatPct(change), formatThreshold(opts.ThresholdPct), formatConfidence(opts.Confidence), ivs)
	}
}

func newSideReport(m measure) Side {
	return Side{Runs: len(m.values), Value: m.value, Median: stats.Median(m.values), Values: m.values, Samples: m.samples}
}
