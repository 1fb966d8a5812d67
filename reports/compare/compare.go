package compare

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rperf/rperf/internal/stats"
)

// errNoMetric is returned when keys match but no metric applies to them.
var errNoMetric = errors.New("none of the metrics applies to the matching records")

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
	// FailUnsure counts an [Unsure] change in the worse direction as a
	// failure ([Report.Failures]), for CI jobs that can afford only one
	// run per side and prefer false alarms to missed regressions.
	FailUnsure bool
}

// Verdict is the outcome of one comparison.
type Verdict string

// Verdicts.
const (
	Better Verdict = "better"
	Worse  Verdict = "worse"
	// Same: the change is below the threshold or within noise.
	Same Verdict = "same"
	// Unsure: the change reaches the threshold and the sides do not
	// overlap, but there are too few runs to say so at the confidence
	// asked (noise basis range, histogram or none). One run per side sees
	// the noise within a run, not between runs; on the development VM two
	// identical write_lat runs differ by +35% at p99 and ×10 at p99.9.
	Unsure Verdict = "unsure"
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
	// NoiseRange: repetitions, but too few for a rank interval at the
	// confidence asked: each side's interval spans all its runs (and, for
	// latency, the within-run interval of the pooled samples). Overlapping
	// sides are the same within noise; apart, the verdict is Unsure.
	NoiseRange Noise = "range"
	// NoiseHistogram: one latency run per side: each side's interval is
	// the within-run interval of its histogram (order statistics for a
	// percentile, the standard error for the mean). Overlapping sides are
	// the same within noise; apart, the verdict is Unsure, since the
	// noise within a run is not the noise between runs.
	NoiseHistogram Noise = "histogram"
	// NoiseNone: one bandwidth run per side: nothing measures the noise.
	// A change beyond the threshold is Unsure.
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

// Direction is where the change points, whatever its size or noise:
// [Better], [Worse], or [Same] for no change.
func (c *Comparison) Direction() Verdict {
	switch {
	case c.ChangePct == 0:
		return Same
	case (c.ChangePct > 0) == (c.Better == "higher"):
		return Better
	}
	return Worse
}

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
		cmp.Reason = fmt.Sprintf("no relative change to judge: the baseline's %s is %s, the candidate's %s", m.Name, formatValue(b.value), formatValue(c.value))
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
	cmp.Verdict, cmp.Reason = decide(cmp, nb, nc, opts)
	return cmp, nil
}

// spread is a side's interval for the range and histogram bases: the
// within-run interval of its pooled value, widened to cover every run.
func spread(s measure) (lo, hi float64) {
	return min(s.lo, slices.Min(s.values)), max(s.hi, slices.Max(s.values))
}

// decide gives the verdict. Better or worse: the change reaches the
// threshold in that direction and its rank interval from enough runs lies
// on that side of zero. Same: below the threshold, or the interval (of
// whatever basis) includes no change. Unsure: beyond the threshold and
// the sides apart, but the basis is weaker than the confidence asked.
func decide(c Comparison, nb, nc int, opts Options) (Verdict, string) {
	change := c.ChangePct
	dir := c.Direction()
	runs := fmt.Sprintf("%d vs %d runs", nb, nc)
	thr := formatThreshold(opts.ThresholdPct)
	if change == 0 || math.Abs(change) < opts.ThresholdPct {
		return Same, fmt.Sprintf("the change, %s, is below the %s threshold", formatPct(change), thr)
	}
	more := fmt.Sprintf("repeat the runs (%d per side give %s)", RunsNeeded(opts.Confidence), formatConfidence(opts.Confidence))
	if c.Noise == NoiseNone {
		return Unsure, fmt.Sprintf("%s (%s) is beyond the %s threshold, but based on one sample per side, with no noise estimate: %s",
			formatPct(change), dir, thr, more)
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
			formatPct(change), thr, formatConfidence(iv.Confidence), ivs, runs)
	case NoiseRange:
		if !beyond {
			return Same, fmt.Sprintf("within noise: the sides' ranges overlap (change interval %s, %s)", ivs, runs)
		}
		return Unsure, fmt.Sprintf("%s (%s) is beyond the %s threshold and the sides' ranges do not overlap (change interval %s), but %s give at most %s confidence, not the %s asked: %s",
			formatPct(change), dir, thr, ivs, runs, formatConfidence(iv.Confidence), formatConfidence(opts.Confidence), more)
	default: // NoiseHistogram
		if !beyond {
			return Same, fmt.Sprintf("within noise, based on one sample per side: the histograms' %s intervals overlap (change interval %s)", formatConfidence(opts.Confidence), ivs)
		}
		return Unsure, fmt.Sprintf("%s (%s) is beyond the %s threshold, based on one sample per side: the histograms' %s intervals do not overlap (change interval %s), but they measure the noise within a run, not between runs: %s",
			formatPct(change), dir, thr, formatConfidence(opts.Confidence), ivs, more)
	}
}

// RunsNeeded returns the smallest number of runs per side (the same on
// both) whose rank interval can reach confidence conf: 4 for 95%, 5 for
// 99%.
func RunsNeeded(conf float64) int {
	n := 2
	for stats.MaxConfidence(n, n) < conf {
		n++
	}
	return n
}

func newSideReport(m measure) Side {
	return Side{Runs: len(m.values), Value: m.value, Median: stats.Median(m.values), Values: m.values, Samples: m.samples}
}
