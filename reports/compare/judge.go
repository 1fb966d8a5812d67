package compare

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rperf/rperf/internal/stats"
)

// MinTailSamples is how many samples (rounded) every run must have beyond
// a latency percentile for it to be judged from repeated runs. Fewer, and the
// percentile is one of a handful of samples: whether a run had a stall
// or two, which repeated runs then split between the sides by chance
// (p99.9 of 2000 samples rests on 2). Such a comparison gets the range
// basis and is at most unsure; more samples per run (10000 for p99.9)
// make it judgeable.
const MinTailSamples = 10

// FamilyRule is the rule that holds a report's confidence over all its
// comparisons ([Family]).
const FamilyRule = "bonferroni"

// Family says how a report holds its confidence over all its comparisons
// judged from repeated runs (noise basis runs): each interval is at level
// 1 − (1 − Confidence)/Tests (Bonferroni), so all of them cover their true
// changes together with probability at least Confidence, whatever the
// dependence between them. On a change of nothing, the report then calls
// something better or worse with probability at most 1 − Confidence.
type Family struct {
	// Rule is [FamilyRule].
	Rule string `json:"rule"`
	// Tests is the number of distinct questions asked: one per key and
	// latency metric, and one per key for bandwidth, whose bw_avg and
	// msg_rate are the same figure in two units and always agree.
	Tests int `json:"tests"`
	// Confidence is the report's confidence ([Options.Confidence]).
	Confidence float64 `json:"confidence"`
	// IntervalConfidence is each comparison's level.
	IntervalConfidence float64 `json:"interval_confidence"`
}

// Judge gives every measured comparison its verdict, and returns them as a
// report (without the input files and notes that [Compare] adds).
//
// A comparison with enough runs (noise basis runs) is judged on the
// natural logarithms of the runs' figures, where a regression is a
// ratio: its interval is Welch's, d ± t·√(s_b²/n + s_c²/m), d the
// difference of the sides' mean logs, t Student's quantile with
// Satterthwaite's degrees of freedom at the level [Family] sets. Each
// side's noise is the largest of three estimates: its runs' own; the
// same, moderated by the family of this metric (an empirical Bayes prior,
// [stats.FitVariancePrior], fitted to the same test, path and metric at
// the other message sizes, when there are three or more), with the
// prior's degrees of freedom added; and the runs' within-run spread
// (their histograms', for latency). So a metric whose runs happen to
// agree is not trusted more than its family's typical noise, a metric
// noisier than its family keeps its own, and a side much noisier than the
// other brings the degrees of freedom down to its own. A latency
// percentile with fewer than [MinTailSamples] samples beyond it in some
// run is not judged from the runs (range basis).
//
// It is [Worse] or [Better] when the whole interval lies beyond the
// threshold in that direction; [Same] when it includes no change, or lies
// within the threshold on both sides; [Unsure] otherwise (a change, not
// shown to reach the threshold). With too few runs for the runs basis,
// the range, histogram and none bases apply, each at the confidence
// asked ([Noise]).
func Judge(ms []Measured, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	rep := newReport(opts)
	cs := make([]Comparison, len(ms))
	logs := make([]*logRuns, len(ms))
	for i := range ms {
		cs[i], logs[i] = prepare(&ms[i], opts)
	}
	fam := family(ms, logs, opts)
	if fam.Tests > 0 {
		rep.Family = &fam
	}
	for i := range cs {
		if cs[i].Verdict != "" {
			rep.add(cs[i])
			continue
		}
		c := &cs[i]
		if l := logs[i]; l != nil {
			runsInterval(c, l, fam)
		}
		c.Verdict, c.Reason = decide(*c, opts, fam)
		rep.add(*c)
	}
	return rep, nil
}

// prepare fills a comparison's sides and change, and the interval of
// every basis but runs; for the runs basis it returns the logarithms to
// judge together with the others. A comparison without a relative change
// is returned with its verdict set.
func prepare(m *Measured, opts Options) (Comparison, *logRuns) {
	b, c := m.Baseline, m.Candidate
	k := m.Key
	cmp := Comparison{
		Test: k.Test, Bytes: k.Bytes, Path: k.Path, Clock: k.Clock,
		Metric: m.Metric.Name, Unit: m.Metric.Unit, Better: m.Metric.better(),
		Baseline:  newSideReport(b),
		Candidate: newSideReport(c),
	}
	if !(b.Value > 0) || !finite(b.Value) || !finite(c.Value) || len(b.Values) == 0 || len(c.Values) == 0 {
		cmp.Noise = NoiseNone
		cmp.Verdict = NoVerdict
		cmp.Reason = fmt.Sprintf("no relative change to judge: the baseline's %s is %s, the candidate's %s", m.Metric.Name, formatValue(b.Value), formatValue(c.Value))
		return cmp, nil
	}
	pct := func(d float64) float64 { return 100 * d / b.Value }
	cmp.ChangePct = pct(c.Value - b.Value)

	nb, nc := len(b.Values), len(c.Values)
	if stats.MaxConfidence(nb, nc) >= opts.Confidence {
		if m.Metric.Percentile > 0 && math.Round(min(b.Tail, c.Tail)) < MinTailSamples {
			cmp.tail = max(min(b.Tail, c.Tail), 1e-9)
		} else if l, ok := newLogRuns(m); ok {
			cmp.Noise = NoiseRuns
			return cmp, l
		}
	}
	shift, _ := stats.ShiftCI(b.Values, c.Values, opts.Confidence)
	switch {
	case b.Within && c.Within:
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
		blo, bhi := slices.Min(b.Values), slices.Max(b.Values)
		clo, chi := slices.Min(c.Values), slices.Max(c.Values)
		cmp.Baseline.Lo, cmp.Baseline.Hi = &blo, &bhi
		cmp.Candidate.Lo, cmp.Candidate.Hi = &clo, &chi
		cmp.Noise = NoiseRange
		cmp.Interval = &Interval{LoPct: pct(shift.Lo), HiPct: pct(shift.Hi), Confidence: shift.Confidence}
	default:
		cmp.Noise = NoiseNone
	}
	return cmp, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// spread is a side's interval for the range and histogram bases: the
// within-run interval of its pooled value, widened to cover every run.
func spread(s Runs) (lo, hi float64) {
	return min(s.Lo, slices.Min(s.Values)), max(s.Hi, slices.Max(s.Values))
}

// logRuns is a runs-basis comparison on the log scale.
type logRuns struct {
	// d is the difference of the sides' mean logs, candidate − baseline.
	d float64
	// s2 and df are the pooled variance of the logs and its degrees of
	// freedom, what the family's prior is fitted to.
	s2, df float64
	// sides are the baseline's and the candidate's own noise.
	sides [2]sideNoise
	// within is the median of the runs' within-run variances of their
	// logs: the noise between runs is at least the typical run's own.
	within float64
	// family groups the comparisons whose noise is alike: one metric of
	// one test and path, with the same run counts.
	family familyKey
	// question counts distinct questions: bandwidth metrics of one key
	// share one.
	question questionKey
}

// sideNoise is one side's variance of its runs' logs.
type sideNoise struct {
	n      int
	v, df  float64
	source string // "runs", "family" or "histograms"
}

type familyKey struct {
	test, path, clock, metric string
	n, m                      int
}

type questionKey struct {
	key    Key
	metric string
}

// newLogRuns takes the logarithms of both sides' figures; ok is false
// when a figure is not positive and finite (a run that moved nothing).
func newLogRuns(ms *Measured) (*logRuns, bool) {
	lb, ok1 := logsOf(ms.Baseline.Values)
	lc, ok2 := logsOf(ms.Candidate.Values)
	if !ok1 || !ok2 {
		return nil, false
	}
	mb, vb := stats.MeanVar(lb)
	mc, vc := stats.MeanVar(lc)
	s2, df := stats.PooledVariance(lb, lc)
	var w []float64
	for _, s := range slices.Concat(ms.Baseline.Spreads, ms.Candidate.Spreads) {
		if finite(s) {
			w = append(w, s*s)
		}
	}
	q := questionKey{key: ms.Key, metric: ms.Metric.Name}
	if !ms.Metric.Latency {
		q.metric = "bandwidth"
	}
	sides := [2]sideNoise{
		{n: len(lb), v: vb, df: float64(len(lb) - 1), source: "runs"},
		{n: len(lc), v: vc, df: float64(len(lc) - 1), source: "runs"},
	}
	// A side of one run has no variance of its own: it gets the other
	// side's (the pooled one), with its degrees of freedom.
	for k := range sides {
		if sides[k].n < 2 {
			sides[k].v, sides[k].df = s2, df
		}
	}
	return &logRuns{
		d: mc - mb, s2: s2, df: df, within: medianOr0(w), sides: sides,
		family:   familyKey{test: ms.Key.Test, path: ms.Key.Path, clock: ms.Key.Clock, metric: ms.Metric.Name, n: len(lb), m: len(lc)},
		question: q,
	}, true
}

func logsOf(vs []float64) ([]float64, bool) {
	out := make([]float64, len(vs))
	for i, v := range vs {
		if !(v > 0) || math.IsInf(v, 1) {
			return nil, false
		}
		out[i] = math.Log(v)
	}
	return out, true
}

// family counts the distinct questions of the runs-basis comparisons,
// sets the level of each interval, and moderates each comparison's
// variance by a prior fitted to the other members of its family (at
// least three), where that is larger.
func family(ms []Measured, logs []*logRuns, opts Options) Family {
	questions := map[questionKey]bool{}
	members := map[familyKey][]*logRuns{}
	for _, l := range logs {
		if l == nil {
			continue
		}
		questions[l.question] = true
		members[l.family] = append(members[l.family], l)
	}
	f := Family{Rule: FamilyRule, Tests: len(questions), Confidence: opts.Confidence, IntervalConfidence: opts.Confidence}
	if f.Tests == 0 {
		return f
	}
	f.IntervalConfidence = 1 - (1-opts.Confidence)/float64(f.Tests)
	for _, ls := range members {
		own := make([]float64, len(ls))
		for i, l := range ls {
			own[i] = l.s2
		}
		for i, l := range ls {
			// The prior comes from the other members alone: a member
			// whose runs happen to agree must not pull its own prior down.
			prior, ok := stats.FitVariancePrior(slices.Delete(slices.Clone(own), i, i+1), l.df)
			if !ok {
				continue
			}
			for k := range l.sides {
				sd := &l.sides[k]
				if v, df := prior.Moderate(sd.v, sd.df); v > sd.v {
					sd.v, sd.df, sd.source = v, df, "family"
				}
			}
		}
	}
	return f
}

// runsInterval sets the interval of a runs-basis comparison from its log
// figures at the family's level: Welch's interval of the difference of
// the sides' means, each side's variance its own, its family's moderated
// one if larger, and the runs' within-run one if larger still, with
// Satterthwaite's degrees of freedom. When one side is much noisier than
// the other (four runs that each had a stall against four that had
// none), the degrees of freedom fall towards that side's own and the
// interval widens: a difference in noise is not a shift.
func runsInterval(c *Comparison, l *logRuns, f Family) {
	from := "runs"
	var se2, dfDen float64
	for k := range l.sides {
		sd := &l.sides[k]
		if sd.source == "family" {
			from = "family"
		}
		if l.within > sd.v {
			sd.v, sd.source = l.within, "histograms"
		}
		u := sd.v / float64(sd.n)
		se2 += u
		if sd.df > 0 {
			dfDen += u * u / sd.df
		}
	}
	if l.sides[0].source == "histograms" && l.sides[1].source == "histograms" {
		from = "histograms"
	}
	df := l.sides[0].df + l.sides[1].df
	if dfDen > 0 {
		df = min(se2*se2/dfDen, df)
	}
	df = max(df, 1)
	t := stats.TQuantile(1-(1-f.IntervalConfidence)/2, df)
	se := math.Sqrt(se2)
	pct := func(x float64) float64 { return 100 * math.Expm1(x) }
	c.Interval = &Interval{
		LoPct: pct(l.d - t*se), HiPct: pct(l.d + t*se), Confidence: f.IntervalConfidence,
		EstimatePct: pct(l.d), DF: df, NoiseFrom: from,
	}
}

// decide gives the verdict and its reason.
func decide(c Comparison, opts Options, f Family) (Verdict, string) {
	thr := formatThreshold(opts.ThresholdPct)
	if c.Noise == NoiseRuns {
		return decideRuns(c, opts.ThresholdPct, f)
	}
	change := c.ChangePct
	dir := c.Direction()
	runs := fmt.Sprintf("%d vs %d runs", c.Baseline.Runs, c.Candidate.Runs)
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
	if c.tail > 0 {
		p := strings.TrimPrefix(c.Metric, "p")
		few := fmt.Sprintf("%s rests on %s samples of a run, too few to judge between runs (%d needed: %s samples per run)",
			c.Metric, strconv.FormatFloat(math.Round(c.tail), 'f', 0, 64), MinTailSamples, strconv.FormatFloat(math.Ceil(MinTailSamples/(1-parsePct(p)/100)-1e-6), 'f', 0, 64))
		if !beyond {
			return Same, fmt.Sprintf("within noise: the sides' ranges overlap (change interval %s, %s); %s", ivs, runs, few)
		}
		return Unsure, fmt.Sprintf("%s (%s) is beyond the %s threshold and the sides' ranges do not overlap (change interval %s), but %s: a stall or two decides it",
			formatPct(change), dir, thr, ivs, few)
	}
	if c.Noise == NoiseRange {
		if !beyond {
			return Same, fmt.Sprintf("within noise: the sides' ranges overlap (change interval %s, %s)", ivs, runs)
		}
		return Unsure, fmt.Sprintf("%s (%s) is beyond the %s threshold and the sides' ranges do not overlap (change interval %s), but %s give at most %s confidence, not the %s asked: %s",
			formatPct(change), dir, thr, ivs, runs, formatConfidence(iv.Confidence), formatConfidence(opts.Confidence), more)
	}
	// NoiseHistogram
	if !beyond {
		return Same, fmt.Sprintf("within noise, based on one sample per side: the histograms' %s intervals overlap (change interval %s)", formatConfidence(opts.Confidence), ivs)
	}
	return Unsure, fmt.Sprintf("%s (%s) is beyond the %s threshold, based on one sample per side: the histograms' %s intervals do not overlap (change interval %s), but they measure the noise within a run, not between runs: %s",
		formatPct(change), dir, thr, formatConfidence(opts.Confidence), ivs, more)
}

// decideRuns judges a runs-basis comparison by where its interval lies:
// wholly beyond the threshold (worse or better), across no change or
// within the threshold (same), or off zero but not wholly beyond the
// threshold (unsure).
func decideRuns(c Comparison, thrPct float64, f Family) (Verdict, string) {
	iv := c.Interval
	thr := formatThreshold(thrPct)
	ivs := fmt.Sprintf("the %s interval %s from %d vs %d runs", formatConfidence(iv.Confidence), formatInterval(iv), c.Baseline.Runs, c.Candidate.Runs)
	if f.Tests > 1 {
		ivs += fmt.Sprintf(" (%d such intervals hold together at %s)", f.Tests, formatConfidence(f.Confidence))
	}
	est := formatPct(iv.EstimatePct) + " by the runs' geometric means"
	switch {
	case iv.LoPct >= thrPct || iv.HiPct <= -thrPct:
		side := "above +" + thr
		if iv.HiPct <= -thrPct {
			side = "below -" + thr
		}
		return c.Direction(), fmt.Sprintf("%s, confidently beyond the %s threshold: %s lies wholly %s", est, thr, ivs, side)
	case iv.LoPct <= 0 && iv.HiPct >= 0:
		return Same, fmt.Sprintf("within noise: %s includes no change", ivs)
	case iv.LoPct > -thrPct && iv.HiPct < thrPct:
		return Same, fmt.Sprintf("a change below the %s threshold: %s lies within ±%s", thr, ivs, thr)
	}
	return Unsure, fmt.Sprintf("%s (%s): a change, but not shown to reach the %s threshold: %s excludes no change but reaches inside ±%s; more runs narrow it",
		est, c.Direction(), thr, ivs, thr)
}

func medianOr0(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return stats.Median(xs)
}

func parsePct(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}
