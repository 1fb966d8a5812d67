package compare

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rperf/rperf/reports"
)

func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b)) }

// geo returns center·e^o for each offset o: runs whose logarithms are
// the offsets around ln(center), so the t interval is worked out by hand.
func geo(center float64, offsets ...float64) []float64 {
	out := make([]float64, len(offsets))
	for i, o := range offsets {
		out[i] = center * math.Exp(o)
	}
	return out
}

// Offsets of five runs with a sample variance of 2.5e-4 on the log scale,
// so 5 vs 5 runs have a standard error of √(2.5e-4 · 2/5) = 0.01, and of
// three runs with a variance of 1e-4 (3 vs 3: 0.01·√(2/3)).
var (
	off5 = []float64{-0.02, -0.01, 0, 0.01, 0.02}
	off3 = []float64{-0.01, 0, 0.01}
)

func scaled(k float64, xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = k * x
	}
	return out
}

// tInterval is the interval of a ratio r of geometric means with a
// standard error se of the log difference and a t quantile q, in percent.
func tInterval(r, q, se float64) (lo, hi float64) {
	return 100 * (r*math.Exp(-q*se) - 1), 100 * (r*math.Exp(q*se) - 1)
}

// TestVerdicts walks the verdict rules on bandwidth runs whose intervals
// are worked out by hand: one metric, so the interval is at the report's
// confidence, t quantiles from the tables (8 degrees of freedom: 2.306004
// at 97.5%; 4: 2.131847 at 95%).
//
// Against the rule before the report-wide one, a change at the threshold
// is no longer enough: its interval must lie wholly beyond it ("at the
// threshold" and "lower threshold" were better, and are unsure now).
func TestVerdicts(t *testing.T) {
	const t8, t4 = 2.306004, 2.131847
	type tc struct {
		name       string
		base, cand []float64
		threshold  float64
		conf       float64
		verdict    Verdict
		noise      Noise
		change     float64
		lo, hi     float64 // interval, percent; NaN: no interval
		confidence float64
		reason     string // a substring of the reason
		tolerance  float64
	}
	// runs: 5 vs 5 runs, the candidate's those of the baseline times
	// ratio, both spread so that the standard error is se.
	runs := func(name string, ratio, se, q float64, v Verdict, reason string) tc {
		lo, hi := tInterval(ratio, q, se)
		off := scaled(se/0.01, off5)
		return tc{name: name, base: geo(10, off...), cand: geo(10*ratio, off...), verdict: v, noise: NoiseRuns,
			change: 100 * (ratio - 1), lo: lo, hi: hi, confidence: 0.95, reason: reason, tolerance: 1e-5}
	}
	lower := runs("lower threshold", 1.05, 0.01, t8, Better, "")
	lower.threshold = 2
	lowerUnsure := runs("lower threshold, not wholly beyond it", 1.03, 0.01, t8, Unsure, "reaches inside ±2%")
	lowerUnsure.threshold = 2
	cases := []tc{
		runs("5v5 worse", 0.9, 0.01, t8, Worse, "-10.0% by the runs' geometric means, confidently beyond the 5% threshold: the 95% interval [-12.1%, -7.9%] from 5 vs 5 runs lies wholly below -5%"),
		runs("5v5 better", 1.1, 0.01, t8, Better, "lies wholly above +5%"),
		runs("at the threshold", 1.05, 0.01, t8, Unsure, "+5.0% by the runs' geometric means (better): a change, but not shown to reach the 5% threshold: the 95% interval [+2.6%, +7.4%]"),
		runs("the whole interval beyond the threshold", 1.08, 0.01, t8, Better, "[+5.5%, +10.5%]"),
		runs("within noise", 0.9, 0.1, t8, Same, "within noise: the 95% interval [-28.5%, +13.3%] from 5 vs 5 runs includes no change"),
		runs("a change below the threshold", 1.03, 0.002, t8, Same, "a change below the 5% threshold: the 95% interval [+2.5%, +3.5%] from 5 vs 5 runs lies within ±5%"),
		lower, lowerUnsure,
	}
	sep3lo, sep3hi := tInterval(0.9, t4, 0.01*math.Sqrt(2.0/3))
	cases = append(cases,
		tc{
			// 3 vs 3 cannot reach 95%: range basis, at most 90%, so apart
			// is unsure, not worse.
			name: "3v3 separated", base: []float64{9.9, 10, 10.1}, cand: []float64{8.9, 9, 9.1},
			verdict: Unsure, noise: NoiseRange, change: -10, lo: -12, hi: -8, confidence: 0.9,
			reason: "(worse) is beyond the 5% threshold and the sides' ranges do not overlap (change interval [-12.0%, -8.0%]), but 3 vs 3 runs give at most 90% confidence, not the 95% asked: repeat the runs (4 per side give 95%)",
		},
		tc{
			// Asking for 90% makes 3 vs 3 a runs basis.
			name: "3v3 separated at 90%", base: geo(10, off3...), cand: geo(9, off3...), conf: 0.9,
			verdict: Worse, noise: NoiseRuns, change: -10, lo: sep3lo, hi: sep3hi, confidence: 0.9, tolerance: 1e-5,
			reason: "the 90% interval [-11.6%, -8.4%] from 3 vs 3 runs lies wholly below -5%",
		},
		tc{
			name: "3v3 overlapping", base: []float64{9, 10, 11}, cand: []float64{8, 9, 10.5},
			verdict: Same, noise: NoiseRange, change: -10, lo: -30, hi: 15, confidence: 0.9,
			reason: "ranges overlap",
		},
		tc{
			name: "1v1 beyond the threshold", base: []float64{10}, cand: []float64{9},
			verdict: Unsure, noise: NoiseNone, change: -10, lo: math.NaN(),
			reason: "-10.0% (worse) is beyond the 5% threshold, but based on one sample per side, with no noise estimate",
		},
		tc{
			name: "1v1 below the threshold", base: []float64{10}, cand: []float64{9.7},
			verdict: Same, noise: NoiseNone, change: -3, lo: math.NaN(),
		},
		tc{
			// 1 vs 3: the baseline's single value inside the candidate's range.
			name: "1v3 overlapping", base: []float64{10}, cand: []float64{9, 10.2, 8},
			verdict: Same, noise: NoiseRange, change: -10, lo: -20, hi: 2, confidence: 0.5,
		},
		tc{
			name: "baseline zero", base: []float64{0}, cand: []float64{9},
			verdict: NoVerdict, noise: NoiseNone, change: 0, lo: math.NaN(),
		},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Compare(inputs("b", bwDocs("write_bw", 65536, tc.base...)...), inputs("c", bwDocs("write_bw", 65536, tc.cand...)...),
				Options{Metrics: mustMetrics(t, "bw_avg"), ThresholdPct: tc.threshold, Confidence: tc.conf})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Comparisons) != 1 {
				t.Fatalf("%d comparisons, want 1", len(rep.Comparisons))
			}
			c := rep.Comparisons[0]
			if c.Verdict != tc.verdict || c.Noise != tc.noise {
				t.Errorf("verdict %s, noise %s; want %s, %s (%s)", c.Verdict, c.Noise, tc.verdict, tc.noise, c.Reason)
			}
			if !approx(c.ChangePct, tc.change) {
				t.Errorf("change %v%%, want %v%%", c.ChangePct, tc.change)
			}
			near := func(a, b float64) bool { return approx(a, b) || math.Abs(a-b) <= tc.tolerance }
			if math.IsNaN(tc.lo) {
				if c.Interval != nil {
					t.Errorf("interval %+v, want none", *c.Interval)
				}
			} else if c.Interval == nil {
				t.Errorf("no interval, want [%v, %v]", tc.lo, tc.hi)
			} else if !near(c.Interval.LoPct, tc.lo) || !near(c.Interval.HiPct, tc.hi) || !approx(c.Interval.Confidence, tc.confidence) {
				t.Errorf("interval %+v, want [%v, %v] at %v", *c.Interval, tc.lo, tc.hi, tc.confidence)
			}
			if !strings.Contains(c.Reason, tc.reason) {
				t.Errorf("reason %q does not say %q", c.Reason, tc.reason)
			}
			if got := len(rep.Failures()); got != btoi(tc.verdict == Worse) {
				t.Errorf("%d failures", got)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func mustMetrics(t *testing.T, names ...string) []Metric {
	t.Helper()
	ms, err := ParseMetrics(names)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestMergeExact checks that a side's percentiles, read from the merged
// histograms of its runs, equal those of one histogram of all samples,
// and that its pooled mean equals the mean of all samples.
func TestMergeExact(t *testing.T) {
	var runs [][]int64
	var all []int64
	for i := range 4 {
		s := spreadSamples(uint64(i+1), 2000+500*i, 1500*float64(i+1)) // different centres: a multimodal union
		runs = append(runs, s)
		all = append(all, s...)
	}
	g := group{latency: true}
	for i, s := range runs {
		if err := g.add(run{file: "f", res: latencyResult(t, "write_lat", 2, 2, s)}); err != nil {
			t.Fatal(i, err)
		}
	}
	one := latencyResult(t, "write_lat", 2, 2, all)
	for _, p := range []float64{1, 25, 50, 90, 99, 99.5, 99.9, 99.99, 100} {
		m, err := g.measure(Metric{Name: "p", Latency: true, Percentile: p}, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		h, err := reports.DecodeHDR(one.HDR)
		if err != nil {
			t.Fatal(err)
		}
		want := reports.PercentilesUs(h, []float64{p}, 2, one.MaxNs())[reports.PercentileKey(p)]
		if m.Value != want {
			t.Errorf("p%v: merged %v, one histogram of all samples %v", p, m.Value, want)
		}
		if m.Samples != int64(len(all)) {
			t.Errorf("p%v: %d samples, want %d", p, m.Samples, len(all))
		}
	}
	m, err := g.measure(Metric{Name: "mean", Latency: true}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if !approx(m.Value, one.MeanUs) {
		t.Errorf("pooled mean %v, mean of all samples %v", m.Value, one.MeanUs)
	}
	// The pooled standard error uses the pooled stdev: check it against
	// the stdev of all samples.
	half := (m.Hi - m.Lo) / 2
	wantHalf := 1.959963985 * one.StdevUs / math.Sqrt(float64(len(all)))
	if math.Abs(half-wantHalf) > 1e-6*wantHalf {
		t.Errorf("mean's half interval %v, want %v", half, wantHalf)
	}
}

// TestWithinRunInterval checks the histogram interval on samples 1..1000
// ns (exact in the histogram, rtt factor 1): p50 is 500 ns and its 95%
// order-statistic ranks are 469 and 532; the mean is 500.5 ns with a
// population stdev of sqrt((1000²−1)/12) = 288.675 ns, so its half
// interval is 1.95996 × 288.675 / sqrt(1000) = 17.892 ns.
func TestWithinRunInterval(t *testing.T) {
	s := make([]int64, 1000)
	for i := range s {
		s[i] = int64(i + 1)
	}
	g := group{latency: true}
	if err := g.add(run{file: "f", res: latencyResult(t, "read_lat", 8, 1, s)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		metric            string
		value, lo, hi, tl float64
	}{
		{"p50", 0.500, 0.469, 0.532, 0},
		{"p99", 0.990, 0.984, 0.997, 0},
		{"mean", 0.5005, 0.5005 - 0.017892, 0.5005 + 0.017892, 1e-6},
	} {
		m, err := g.measure(mustMetrics(t, tc.metric)[0], 0.95)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(m.Value-tc.value) > tc.tl+1e-12 || math.Abs(m.Lo-tc.lo) > tc.tl+1e-12 || math.Abs(m.Hi-tc.hi) > tc.tl+1e-12 {
			t.Errorf("%s: %v in [%v, %v], want %v in [%v, %v]", tc.metric, m.Value, m.Lo, m.Hi, tc.value, tc.lo, tc.hi)
		}
	}
}

// TestLatencyOneRun covers one run per side: the histogram basis.
func TestLatencyOneRun(t *testing.T) {
	base := latencyResult(t, "write_lat", 2, 2, spreadSamples(1, 5000, 1000))
	for _, tc := range []struct {
		name    string
		cand    []int64
		metric  string
		verdict Verdict
		reason  string
	}{
		{"20% slower", spreadSamples(2, 5000, 1200), "p50", Unsure, "(worse) is beyond the 5% threshold, based on one sample per side"},
		{"20% faster", spreadSamples(3, 5000, 800), "p50", Unsure, "(better) is beyond the 5% threshold, based on one sample per side: the histograms' 95% intervals do not overlap"},
		{"same distribution", spreadSamples(4, 5000, 1000), "p50", Same, "below the 5% threshold"},
		{"same distribution, mean", spreadSamples(4, 5000, 1000), "mean", Same, ""},
		{"20% slower, p90", spreadSamples(5, 5000, 1200), "p90", Unsure, "not between runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cand := latencyResult(t, "write_lat", 2, 2, tc.cand)
			rep, err := Compare(inputs("b", doc("shm0", base)), inputs("c", doc("shm0", cand)), Options{Metrics: mustMetrics(t, tc.metric)})
			if err != nil {
				t.Fatal(err)
			}
			c := rep.Comparisons[0]
			if c.Verdict != tc.verdict || c.Noise != NoiseHistogram {
				t.Errorf("verdict %s, noise %s, want %s, histogram (%s)", c.Verdict, c.Noise, tc.verdict, c.Reason)
			}
			if !strings.Contains(c.Reason, tc.reason) {
				t.Errorf("reason %q does not say %q", c.Reason, tc.reason)
			}
			if c.Baseline.Lo == nil || !(*c.Baseline.Lo <= c.Baseline.Value && c.Baseline.Value <= *c.Baseline.Hi) {
				t.Errorf("baseline interval does not hold its value: %+v", c.Baseline)
			}
		})
	}
}

// TestLatencyRepetitions: five runs per side in one document each, or
// all in one document, give the same comparison.
func TestLatencyRepetitions(t *testing.T) {
	var base, cand []reports.Result
	for i := range 5 {
		base = append(base, latencyResult(t, "send_lat", 64, 2, spreadSamples(uint64(10+i), 1000, 2000)))
		cand = append(cand, latencyResult(t, "send_lat", 64, 2, spreadSamples(uint64(20+i), 1000, 2400)))
	}
	oneDoc, err := Compare(inputs("b", doc("shm0", base...)), inputs("c", doc("shm0", cand...)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var bd, cd []*reports.Document
	for i := range base {
		bd, cd = append(bd, doc("shm0", base[i])), append(cd, doc("shm0", cand[i]))
	}
	manyDocs, err := Compare(inputs("b", bd...), inputs("c", cd...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(oneDoc.Comparisons); got != 4 {
		t.Fatalf("%d comparisons, want 4 (p50 p99 p99.9 mean)", got)
	}
	for i, c := range oneDoc.Comparisons {
		m := manyDocs.Comparisons[i]
		if c.Verdict != m.Verdict || c.ChangePct != m.ChangePct || *c.Interval != *m.Interval {
			t.Errorf("%s: one document %+v, five documents %+v", c.Metric, c, m)
		}
		// p99.9 of 1000 samples rests on one sample of each run: too
		// few beyond it to judge between runs (MinTailSamples).
		want := NoiseRuns
		if c.Metric == "p99.9" {
			want = NoiseRange
		}
		if c.Noise != want || c.Baseline.Runs != 5 || len(c.Candidate.Values) != 5 {
			t.Errorf("%s: noise %s, %d runs; want %s", c.Metric, c.Noise, c.Baseline.Runs, want)
		}
	}
	if c := oneDoc.Comparisons[0]; c.Metric != "p50" || c.Verdict != Worse {
		t.Errorf("p50: %s %s: %s", c.Metric, c.Verdict, c.Reason)
	}
}

// heavyTail returns n samples around center ns with a Pareto tail (5%
// of samples), the tail scaled by tailScale.
func heavyTail(seed uint64, n int, center, tailScale float64) []int64 {
	r := rand.New(rand.NewPCG(seed, 9))
	out := make([]int64, n)
	for i := range out {
		v := center * (0.95 + 0.1*r.Float64())
		if r.IntN(20) == 0 {
			v *= 2 * tailScale / math.Pow(1-r.Float64(), 0.8)
		}
		out[i] = int64(v)
	}
	return out
}

// TestTailWithinNoise: p99.9 of 5000 samples rests on five values; with
// a heavy tail two runs of one distribution differ there by more than the
// threshold, and the histograms' intervals say it is noise.
func TestTailWithinNoise(t *testing.T) {
	base := latencyResult(t, "write_lat", 2, 2, heavyTail(6, 5000, 1000, 1))
	cand := latencyResult(t, "write_lat", 2, 2, heavyTail(7, 5000, 1000, 1))
	rep, err := Compare(inputs("b", doc("shm0", base)), inputs("c", doc("shm0", cand)), Options{Metrics: mustMetrics(t, "p99.9")})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Comparisons[0]
	if math.Abs(c.ChangePct) < 5 || c.Verdict != Same || !strings.Contains(c.Reason, "within noise, based on one sample per side") {
		t.Errorf("change %.1f%%, verdict %s: %s", c.ChangePct, c.Verdict, c.Reason)
	}
}

func TestRunsNeeded(t *testing.T) {
	for _, tc := range []struct {
		conf float64
		want int
	}{{0.5, 2}, {0.9, 3}, {0.95, 4}, {0.99, 5}, {0.999, 7}} {
		if got := RunsNeeded(tc.conf); got != tc.want {
			t.Errorf("RunsNeeded(%v) = %d, want %d", tc.conf, got, tc.want)
		}
	}
}

// TestFailUnsure: unsure changes fail only with FailUnsure, and only in
// the worse direction.
func TestFailUnsure(t *testing.T) {
	for _, tc := range []struct {
		cand       float64
		failUnsure bool
		failures   int
	}{{9, false, 0}, {9, true, 1}, {11, true, 0}} {
		rep, err := Compare(inputs("b", bwDocs("write_bw", 8, 10)...), inputs("c", bwDocs("write_bw", 8, tc.cand)...),
			Options{Metrics: mustMetrics(t, "bw_avg"), FailUnsure: tc.failUnsure})
		if err != nil {
			t.Fatal(err)
		}
		if c := rep.Comparisons[0]; c.Verdict != Unsure {
			t.Fatalf("verdict %s", c.Verdict)
		}
		if got := len(rep.Failures()); got != tc.failures || rep.Summary.Failures != tc.failures {
			t.Errorf("candidate %v, FailUnsure %v: %d failures (summary %d), want %d", tc.cand, tc.failUnsure, got, rep.Summary.Failures, tc.failures)
		}
	}
}

func TestErrors(t *testing.T) {
	lat := func(test string, bytes int64, rtt int) reports.Result {
		return latencyResult(t, test, bytes, rtt, []int64{100, 200, 300})
	}
	for _, tc := range []struct {
		name       string
		base, cand []Input
		metrics    []string
		want       string
	}{
		{"no match", inputs("b", doc("shm0", lat("write_lat", 2, 2), lat("write_lat", 4, 2))), inputs("c", doc("shm0", bwResult("send_bw", 65536, 1, 1))), nil,
			"no matching records: the baseline has write_lat 2B, write_lat 4B; the candidate has send_bw 65536B"},
		{"path differs", inputs("b", doc("shm0", bwResult("send_bw", 8, 1, 1))), inputs("c", doc("shm0", withPath(bwResult("send_bw", 8, 1, 1), "inline"))), nil,
			"the candidate has send_bw 8B path=inline"},
		{"rtt factor", inputs("b", doc("shm0", lat("x_lat", 2, 2))), inputs("c", doc("shm0", lat("x_lat", 2, 1))), nil,
			"x_lat 2B: rtt_factor 2 in the baseline but 1 in the candidate"},
		{"rtt factor within a side", inputs("b", doc("shm0", lat("x_lat", 2, 2), lat("x_lat", 2, 1))), inputs("c", doc("shm0", lat("x_lat", 2, 1))), nil,
			"baseline: x_lat 2B: rtt_factor 2 in b-1.json but 1 in b-1.json"},
		{"kind", inputs("b", doc("shm0", lat("x", 2, 2))), inputs("c", doc("shm0", bwResult("x", 2, 1, 1))), nil,
			"x 2B: a latency record in the baseline, a bandwidth record in the candidate"},
		{"empty", inputs("b", doc("shm0")), inputs("c", doc("shm0", lat("x", 2, 2))), nil,
			"baseline b-1.json has no results"},
		{"no metric applies", inputs("b", doc("shm0", lat("x", 2, 2))), inputs("c", doc("shm0", lat("x", 2, 2))), []string{"bw_avg"},
			"none of the metrics applies to the matching records (metrics bw_avg)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts Options
			if tc.metrics != nil {
				opts.Metrics = mustMetrics(t, tc.metrics...)
			}
			_, err := Compare(tc.base, tc.cand, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	_, err := Compare(inputs("b", doc("shm0", bwResult("a", 1, 1, 1))), inputs("c", doc("shm0", bwResult("b", 1, 1, 1))), Options{})
	var nm *NoMatchError
	if !errors.As(err, &nm) || len(nm.Baseline) != 1 || len(nm.Candidate) != 1 {
		t.Errorf("error %v is not a NoMatchError with one key per side", err)
	}
	if _, err := Compare(inputs("b", doc("shm0", bwResult("a", 1, 1, 1))), inputs("c", doc("shm0", bwResult("a", 1, 1, 1))), Options{Confidence: 1.5}); err == nil {
		t.Error("confidence 1.5 accepted")
	}
}

func withPath(r reports.Result, path string) reports.Result {
	r.Path = path
	return r
}

func TestParseMetric(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Metric
		err  bool
	}{
		{in: "p50", want: Metric{Name: "p50", Unit: "us", Latency: true, Percentile: 50}},
		{in: "p99.90", want: Metric{Name: "p99.9", Unit: "us", Latency: true, Percentile: 99.9}},
		{in: "p100", want: Metric{Name: "p100", Unit: "us", Latency: true, Percentile: 100}},
		{in: "mean", want: Metric{Name: "mean", Unit: "us", Latency: true}},
		{in: "bw_avg", want: Metric{Name: "bw_avg", Unit: "Gb/s", HigherIsBetter: true}},
		{in: "msg_rate", want: Metric{Name: "msg_rate", Unit: "Mpps", HigherIsBetter: true}},
		{in: "p0", err: true},
		{in: "p101", err: true},
		{in: "median", err: true},
		{in: "", err: true},
	} {
		got, err := ParseMetric(tc.in)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("ParseMetric(%q) = %+v, %v", tc.in, got, err)
		}
	}
	ms, err := ParseMetrics([]string{"p99", " mean", "p99.0"})
	if err != nil || len(ms) != 2 {
		t.Errorf("ParseMetrics dropped no repeat: %v, %v", ms, err)
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0.1975, "0.1975"}, {52.4905, "52.49"}, {9.86204, "9.862"}, {38523.59, "38524"}, {0, "0"}, {1, "1.000"}, {0.00123456, "0.001235"},
	} {
		if got := formatValue(tc.v); got != tc.want {
			t.Errorf("formatValue(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	for _, tc := range []struct {
		p    float64
		want string
	}{
		{4.14, "+4.1%"}, {-12, "-12.0%"}, {0, "+0.0%"}, {99.94, "+99.9%"}, {99.96, "+100%"}, {-262.4, "-262%"}, {21677.02, "+21677%"},
	} {
		if got := formatPct(tc.p); got != tc.want {
			t.Errorf("formatPct(%v) = %q, want %q", tc.p, got, tc.want)
		}
	}
	for _, tc := range []struct {
		c    float64
		want string
	}{
		{0.95, "95%"}, {1 - 8.0/252, "96.8%"}, {0.9, "90%"}, {0.995, "99.5%"},
		{1 - 0.05/8, "99.38%"}, {1 - 0.05/64, "99.922%"}, {0.99999, "99.999%"}, {0.99, "99%"},
	} {
		if got := formatConfidence(tc.c); got != tc.want {
			t.Errorf("formatConfidence(%v) = %q, want %q", tc.c, got, tc.want)
		}
	}
}

// TestEnvNotes: a different device or MTU is noted; a different rperf
// version, the point of most comparisons, is not.
func TestEnvNotes(t *testing.T) {
	b := doc("shm0", bwResult("a", 1, 1, 1))
	c := doc("udp0", bwResult("a", 1, 1, 1))
	c.Env.MTU = 1024
	c.Env.RperfVersion = "v1.2.0"
	got := envNotes(inputs("b", b), inputs("c", c))
	want := []string{"device differs: baseline shm0, candidate udp0", "mtu differs: baseline 4096, candidate 1024"}
	if !slices.Equal(got, want) {
		t.Errorf("notes %q, want %q", got, want)
	}

	// CPU settings: a governor that differs on one of the candidate's
	// runs is named; SMT, recorded by one side only (an older rperf on
	// the other), is not compared.
	b1, b2, c1, c2 := doc("shm0"), doc("shm0"), doc("shm0"), doc("shm0")
	for _, d := range []*reports.Document{b1, b2, c1, c2} {
		d.Env.CPUGovernor, d.Env.IsolatedCPUs = "performance", "none"
	}
	c2.Env.CPUGovernor = "powersave"
	b1.Env.SMT, b2.Env.SMT, c1.Env.SMT = "off", "off", "on"
	got = envNotes(inputs("b", b1, b2), inputs("c", c1, c2))
	want = []string{"cpu_governor differs: baseline performance, candidate performance, powersave"}
	if !slices.Equal(got, want) {
		t.Errorf("notes %q, want %q", got, want)
	}
}

// TestFamily checks how a report holds its confidence over its
// comparisons: the Bonferroni level over distinct questions (bw_avg and
// msg_rate of one key are one), the family's noise taking over from a
// metric whose runs happen to agree, and the runs' histograms setting a
// floor when nothing else measures the noise.
func TestFamily(t *testing.T) {
	t.Run("bonferroni over distinct questions", func(t *testing.T) {
		var b, c []*reports.Document
		for i, o := range off5 {
			b = append(b, doc("shm0", bwResult("write_bw", 64, 10*math.Exp(o), math.Exp(o)), bwResult("write_bw", 128, 20*math.Exp(o), 2*math.Exp(o))))
			c = append(c, doc("shm0", bwResult("write_bw", 64, 9*math.Exp(off5[4-i]), 0.9*math.Exp(off5[4-i])), bwResult("write_bw", 128, 20*math.Exp(o), 2*math.Exp(o))))
		}
		rep, err := Compare(inputs("b", b...), inputs("c", c...), Options{})
		if err != nil {
			t.Fatal(err)
		}
		f := rep.Family
		if f == nil || f.Tests != 2 || !approx(f.IntervalConfidence, 0.975) || f.Rule != "bonferroni" {
			t.Fatalf("family %+v; want 2 tests at 97.5%%", f)
		}
		// 97.5% two-sided with 8 degrees of freedom: t = 2.751524.
		lo, hi := tInterval(0.9, 2.751524, 0.01)
		for _, cmp := range rep.Comparisons[:2] {
			if iv := cmp.Interval; iv == nil || math.Abs(iv.LoPct-lo) > 1e-5 || math.Abs(iv.HiPct-hi) > 1e-5 || cmp.Verdict != Worse {
				t.Errorf("%s %s: %s %+v, want worse in [%v, %v]", cmp.Key(), cmp.Metric, cmp.Verdict, cmp.Interval, lo, hi)
			}
		}
		if !strings.Contains(rep.Comparisons[0].Reason, "(2 such intervals hold together at 95%)") {
			t.Errorf("reason %q does not name the family", rep.Comparisons[0].Reason)
		}
	})

	t.Run("the family's noise", func(t *testing.T) {
		// Seven sizes whose runs vary by about 5%, and one (4096 B)
		// whose runs agree to 0.01% and whose candidate is 8% faster. On
		// its own runs that is better beyond doubt; against the noise of
		// the same metric at the other sizes it is not shown.
		sizes := []int64{8, 16, 32, 64, 128, 256, 512, 4096}
		var b, c []*reports.Document
		for i := range off5 {
			var br, cr []reports.Result
			for j, s := range sizes {
				k, ratio := 5.0*(1+0.1*float64(j)), 1.0
				if s == 4096 {
					k, ratio = 0.01, 1.08
				}
				x := math.Exp(k * off5[i])
				y := math.Exp(k * off5[(i+j)%5])
				br = append(br, bwResult("write_bw", s, x, x))
				cr = append(cr, bwResult("write_bw", s, ratio*y, ratio*y))
			}
			b, c = append(b, doc("shm0", br...)), append(c, doc("shm0", cr...))
		}
		rep, err := Compare(inputs("b", b...), inputs("c", c...), Options{Metrics: mustMetrics(t, "bw_avg")})
		if err != nil {
			t.Fatal(err)
		}
		last := rep.Comparisons[len(rep.Comparisons)-1]
		if last.Bytes != 4096 || last.Interval == nil || last.Interval.NoiseFrom != "family" || last.Verdict != Same || last.Interval.DF <= 8 {
			t.Errorf("4096B: %s, %+v (%s); want same, from the family's noise with more than 8 degrees of freedom", last.Verdict, last.Interval, last.Reason)
		}
		for _, cmp := range rep.Comparisons[:len(sizes)-1] {
			if cmp.Interval.NoiseFrom == "family" && cmp.Interval.HiPct-cmp.Interval.LoPct < 10 {
				t.Errorf("%s: a narrow interval %+v from the family", cmp.Key(), cmp.Interval)
			}
		}
	})

	t.Run("one side noisier: Welch's degrees of freedom", func(t *testing.T) {
		// The baseline's runs agree; the candidate's spread over a factor
		// of 7 (a stall in each, of different length), all far above. The
		// pooled interval would have 6 degrees of freedom; Welch's has
		// about the candidate's 3, and the interval is wider by the
		// quantile's ratio.
		base := []float64{1.00, 1.01, 0.99, 1.00}
		cand := []float64{50, 120, 350, 80}
		rep, err := Compare(inputs("b", bwDocs("write_bw", 8, base...)...), inputs("c", bwDocs("write_bw", 8, cand...)...),
			Options{Metrics: mustMetrics(t, "bw_avg")})
		if err != nil {
			t.Fatal(err)
		}
		lb, lc := make([]float64, 4), make([]float64, 4)
		for i := range 4 {
			lb[i], lc[i] = math.Log(base[i]), math.Log(cand[i])
		}
		vb, vc := sampleVar(lb), sampleVar(lc)
		ub, uc := vb/4, vc/4
		df := (ub + uc) * (ub + uc) / (ub*ub/3 + uc*uc/3)
		if iv := rep.Comparisons[0].Interval; iv == nil || math.Abs(iv.DF-df) > 1e-9 || iv.DF > 3.1 {
			t.Errorf("interval %+v; want Welch's %v degrees of freedom", iv, df)
		}
	})

	t.Run("a tail percentile on few samples", func(t *testing.T) {
		// p99.9 of 2000 samples rests on 2 of each run: not judged from
		// the runs, at most unsure; of 20000 samples, on 20: judged.
		for _, tc := range []struct {
			n     int
			noise Noise
		}{{2000, NoiseRange}, {20000, NoiseRuns}} {
			var b, c []*reports.Document
			for i := range 4 {
				b = append(b, doc("shm0", latencyResult(t, "write_lat", 2, 2, spreadSamples(uint64(i), tc.n, 1000))))
				c = append(c, doc("shm0", latencyResult(t, "write_lat", 2, 2, spreadSamples(uint64(10+i), tc.n, 1500))))
			}
			rep, err := Compare(inputs("b", b...), inputs("c", c...), Options{Metrics: mustMetrics(t, "p99.9")})
			if err != nil {
				t.Fatal(err)
			}
			cmp := rep.Comparisons[0]
			if cmp.Noise != tc.noise || cmp.Verdict == Worse && tc.noise == NoiseRange {
				t.Errorf("%d samples: %s, %s: %s", tc.n, cmp.Noise, cmp.Verdict, cmp.Reason)
			}
			if tc.noise == NoiseRange && !strings.Contains(cmp.Reason, "p99.9 rests on 2 samples of a run, too few to judge between runs (10 needed: 10000 samples per run)") {
				t.Errorf("reason %q", cmp.Reason)
			}
		}
	})

	t.Run("the histograms' floor", func(t *testing.T) {
		// Four runs per side with the same samples: the runs agree
		// exactly, and only the histograms say how uncertain a median of
		// 400 samples is.
		s := spreadSamples(1, 400, 1000)
		slow := make([]int64, len(s))
		for i, v := range s {
			slow[i] = v * 103 / 100
		}
		var b, c []*reports.Document
		for range 4 {
			b = append(b, doc("shm0", latencyResult(t, "write_lat", 2, 2, s)))
			c = append(c, doc("shm0", latencyResult(t, "write_lat", 2, 2, slow)))
		}
		rep, err := Compare(inputs("b", b...), inputs("c", c...), Options{Metrics: mustMetrics(t, "p50")})
		if err != nil {
			t.Fatal(err)
		}
		cmp := rep.Comparisons[0]
		if iv := cmp.Interval; iv == nil || iv.NoiseFrom != "histograms" || !(iv.HiPct-iv.LoPct > 1) || iv.LoPct > 3 || iv.HiPct < 3 {
			t.Errorf("interval %+v; want one around +3%% from the histograms", cmp.Interval)
		}
	})
}

func sampleVar(xs []float64) float64 {
	var m float64
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return v / float64(len(xs)-1)
}
