package compare

import (
	"errors"
	"fmt"
	"math"
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
	// Confidence is the confidence of the report as a whole, in (0.5,
	// 1); 0 means [DefaultConfidence]. The intervals of the comparisons
	// judged from repeated runs hold together with this probability, so
	// a report with no real change calls something better or worse with
	// probability at most 1 − Confidence, however many metrics it has
	// ([Family]). Comparisons with too few runs use it as their own level.
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
	// Same: no change beyond the threshold is shown: the interval
	// includes no change (within noise) or lies within the threshold.
	Same Verdict = "same"
	// Unsure: there is a change, but it is not shown to reach the
	// threshold: with repeated runs, the interval excludes no change and
	// reaches past the threshold without lying wholly beyond it; with too
	// few runs for that (noise basis range, histogram or none), the
	// change reaches the threshold and the sides do not overlap. One run
	// per side sees the noise within a run, not between runs; on the
	// development VM two identical write_lat runs differ by +35% at p99
	// and ×10 at p99.9.
	Unsure Verdict = "unsure"
	// NoVerdict: the baseline's value is 0, so there is no relative
	// change to judge.
	NoVerdict Verdict = "n/a"
)

// Noise says what the interval of a change was computed from.
type Noise string

// Noise bases, from the strongest to none.
const (
	// NoiseRuns: enough repetitions on both sides that a difference could
	// be shown without assuming a distribution (a rank interval at the
	// confidence asked exists: 4 and 4 runs at 95%): the interval is
	// Student's t interval of the difference of the sides' mean log
	// figures, at the level that holds the report's confidence over all
	// its comparisons ([Family]).
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
	// Confidence is the interval's own confidence: for the runs basis
	// the per-comparison level of [Family] (above the report's
	// confidence when there are several comparisons); for range, the
	// exact confidence of the widest rank interval, below the level
	// asked; 0 (omitted) when no figure can be given.
	Confidence float64 `json:"confidence,omitempty"`
	// The runs basis only (omitted otherwise):
	//
	// EstimatePct is the interval's centre: the change of the geometric
	// means of the runs' figures.
	EstimatePct float64 `json:"estimate_pct,omitempty"`
	// DF is the degrees of freedom of the t quantile.
	DF float64 `json:"df,omitempty"`
	// NoiseFrom says which estimate of the noise between runs set the
	// width: "runs" (this comparison's runs), "family" (the same metric
	// of the same test at the other message sizes, when it is noisier:
	// an empirical Bayes estimate) or "histograms" (the runs' own
	// within-run spread, when it is larger still).
	NoiseFrom string `json:"noise_from,omitempty"`
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
	Test  string `json:"test"`
	Bytes int64  `json:"bytes"`
	Path  string `json:"path,omitempty"`
	// Clock is the records' clock when not the software clock
	// ("completion": completion timestamps).
	Clock  string `json:"clock,omitempty"`
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
	// Plot is the picture of this comparison's runs, when rperf compare
	// drew one (--plots: every comparison it flags).
	Plot string `json:"plot,omitempty"`

	// tail is, when a latency percentile rests on too few samples per run
	// to be judged from the runs, the fewest it rests on.
	tail float64
}

// Key returns the comparison's key.
func (c *Comparison) Key() Key {
	return Key{Test: c.Test, Bytes: c.Bytes, Path: c.Path, Clock: c.Clock}
}

// Direction is where the change points, whatever its size or noise:
// [Better], [Worse], or [Same] for no change. It is the side of zero
// the interval lies on when it excludes no change, else the sign of
// ChangePct.
func (c *Comparison) Direction() Verdict {
	higher := c.Better == "higher"
	if iv := c.Interval; iv != nil && (iv.LoPct > 0 || iv.HiPct < 0) {
		if (iv.LoPct > 0) == higher {
			return Better
		}
		return Worse
	}
	switch {
	case c.ChangePct == 0:
		return Same
	case (c.ChangePct > 0) == higher:
		return Better
	}
	return Worse
}

// Measured is one metric of one key, measured on both sides: what
// [Judge] decides on. [Compare] measures it from the documents.
type Measured struct {
	Key    Key
	Metric Metric
	// Baseline and Candidate are the two sides' figures.
	Baseline, Candidate Runs
}

// Compare compares the candidate's records with the baseline's, key by
// key (keys in the baseline's order) and metric by metric (in the order
// given), and judges every comparison together ([Judge]). Keys on one
// side only are listed in the report. It fails when no key is on both
// sides ([*NoMatchError]) or when the records of a key cannot be
// repetitions of each other.
func Compare(baseline, candidate []Input, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ms, onlyBase, onlyCand, err := measure(baseline, candidate, opts)
	if err != nil {
		return nil, err
	}
	rep, err := Judge(ms, opts)
	if err != nil {
		return nil, err
	}
	rep.Baseline, rep.Candidate = files(baseline), files(candidate)
	rep.OnlyBaseline = append(rep.OnlyBaseline, onlyBase...)
	rep.OnlyCandidate = append(rep.OnlyCandidate, onlyCand...)
	rep.Notes = envNotes(baseline, candidate)
	return rep, nil
}

// Measure measures what [Compare] would judge: every metric of every key
// on both sides. [Judge] of its result is Compare's verdicts.
func Measure(baseline, candidate []Input, opts Options) ([]Measured, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ms, _, _, err := measure(baseline, candidate, opts)
	return ms, err
}

// measure groups both sides by key and measures every metric of every key
// on both; it also returns the keys on one side only.
func measure(baseline, candidate []Input, opts Options) (ms []Measured, onlyBase, onlyCand []string, err error) {
	base, err := newSide("baseline", baseline)
	if err != nil {
		return nil, nil, nil, err
	}
	cand, err := newSide("candidate", candidate)
	if err != nil {
		return nil, nil, nil, err
	}
	matched := 0
	for _, k := range base.keys {
		bg, cg := base.groups[k], cand.groups[k]
		if cg == nil {
			onlyBase = append(onlyBase, k.String())
			continue
		}
		matched++
		if bg.latency != cg.latency {
			return nil, nil, nil, fmt.Errorf("%s: a %s record in the baseline, a %s record in the candidate", k, kindName(bg.latency), kindName(cg.latency))
		}
		if bg.latency && bg.rtt() != cg.rtt() {
			return nil, nil, nil, fmt.Errorf("%s: rtt_factor %d in the baseline but %d in the candidate: not the same measurement", k, bg.rtt(), cg.rtt())
		}
		for _, m := range opts.Metrics {
			if m.Latency != bg.latency {
				continue
			}
			b, err := bg.measure(m, opts.Confidence)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("baseline: %w", err)
			}
			c, err := cg.measure(m, opts.Confidence)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("candidate: %w", err)
			}
			ms = append(ms, Measured{Key: k, Metric: m, Baseline: b, Candidate: c})
		}
	}
	for _, k := range cand.keys {
		if base.groups[k] == nil {
			onlyCand = append(onlyCand, k.String())
		}
	}
	if matched == 0 {
		return nil, nil, nil, &NoMatchError{Baseline: base.keys, Candidate: cand.keys}
	}
	if len(ms) == 0 {
		names := make([]string, len(opts.Metrics))
		for i, m := range opts.Metrics {
			names[i] = m.Name
		}
		return nil, nil, nil, fmt.Errorf("%w (metrics %s)", errNoMetric, strings.Join(names, ","))
	}
	return ms, onlyBase, onlyCand, nil
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

func newSideReport(r Runs) Side {
	return Side{Runs: len(r.Values), Value: r.Value, Median: stats.Median(r.Values), Values: r.Values, Samples: r.Samples}
}
