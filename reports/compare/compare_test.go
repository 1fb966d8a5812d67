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

// TestVerdicts walks the verdict rules on bandwidth runs whose intervals
// are worked out by hand. Baselines of 10 Gb/s make the relative interval
// the absolute one ×10.
func TestVerdicts(t *testing.T) {
	base5 := []float64{9.8, 9.9, 10, 10.1, 10.2}
	for _, tc := range []struct {
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
	}{
		{
			// Candidate 1 Gb/s lower throughout: every difference is −1 ±
			// a few tenths. Differences c−b, sorted: −1.4, −1.3 ×2, ...
			// k = 3 at 95% for 5 vs 5: D(3) = −1.3, D(23) = −0.7.
			name: "5v5 worse", base: base5, cand: []float64{8.8, 8.9, 9, 9.1, 9.2},
			verdict: Worse, noise: NoiseRuns, change: -10, lo: -13, hi: -7, confidence: 1 - 8.0/252,
			reason: "beyond noise",
		},
		{
			name: "5v5 better", base: base5, cand: []float64{10.8, 10.9, 11, 11.1, 11.2},
			verdict: Better, noise: NoiseRuns, change: 10, lo: 7, hi: 13, confidence: 1 - 8.0/252,
		},
		{
			// Medians 10 and 10.5: +5% exactly reaches a 5% threshold.
			name: "at the threshold", base: base5, cand: []float64{10.3, 10.4, 10.5, 10.6, 10.7},
			verdict: Better, noise: NoiseRuns, change: 5, lo: 2, hi: 8, confidence: 1 - 8.0/252,
		},
		{
			name: "just below the threshold", base: base5, cand: []float64{10.3, 10.4, 10.499, 10.6, 10.7},
			verdict: Same, noise: NoiseRuns, change: 4.99, lo: 2, hi: 8, confidence: 1 - 8.0/252,
			reason: "below the 5% threshold",
		},
		{
			// Beyond a 2% threshold, but c−b runs from −0.1 to 0.7 with
			// D(3) = 0 (10.1−10.1 and 10.2−10.2): an interval that touches
			// 0 does not exclude "no change".
			name: "lower threshold, interval touching 0", base: base5, cand: []float64{10.1, 10.2, 10.3, 10.4, 10.5}, threshold: 2,
			verdict: Same, noise: NoiseRuns, change: 3, lo: 0, hi: 6, confidence: 1 - 8.0/252,
			reason: "within noise",
		},
		{
			name: "lower threshold", base: base5, cand: []float64{10.2, 10.3, 10.4, 10.5, 10.6}, threshold: 2,
			verdict: Better, noise: NoiseRuns, change: 4, lo: 1, hi: 7, confidence: 1 - 8.0/252,
		},
		{
			// Large change in the medians, but the runs overlap. Sorted
			// differences start −4.1, −3.5, −3.1 and end 2, 2.5, 3.
			name: "within noise", base: []float64{8, 9, 10, 11, 12}, cand: []float64{7.9, 8.5, 9, 10.5, 11},
			verdict: Same, noise: NoiseRuns, change: -10, lo: -31, hi: 20, confidence: 1 - 8.0/252,
			reason: "within noise",
		},
		{
			// 3 vs 3 cannot reach 95%: range basis, at most 90%, so apart
			// is unsure, not worse.
			name: "3v3 separated", base: []float64{9.9, 10, 10.1}, cand: []float64{8.9, 9, 9.1},
			verdict: Unsure, noise: NoiseRange, change: -10, lo: -12, hi: -8, confidence: 0.9,
			reason: "(worse) is beyond the 5% threshold and the sides' ranges do not overlap (change interval [-12.0%, -8.0%]), but 3 vs 3 runs give at most 90% confidence, not the 95% asked: repeat the runs (4 per side give 95%)",
		},
		{
			// Asking for 90% makes 3 vs 3 a rank interval.
			name: "3v3 separated at 90%", base: []float64{9.9, 10, 10.1}, cand: []float64{8.9, 9, 9.1}, conf: 0.9,
			verdict: Worse, noise: NoiseRuns, change: -10, lo: -12, hi: -8, confidence: 0.9,
			reason: "the 90% interval [-12.0%, -8.0%] from 3 vs 3 runs excludes no change",
		},
		{
			name: "3v3 overlapping", base: []float64{9, 10, 11}, cand: []float64{8, 9, 10.5},
			verdict: Same, noise: NoiseRange, change: -10, lo: -30, hi: 15, confidence: 0.9,
			reason: "ranges overlap",
		},
		{
			name: "1v1 beyond the threshold", base: []float64{10}, cand: []float64{9},
			verdict: Unsure, noise: NoiseNone, change: -10, lo: math.NaN(),
			reason: "-10.0% (worse) is beyond the 5% threshold, but based on one sample per side, with no noise estimate",
		},
		{
			name: "1v1 below the threshold", base: []float64{10}, cand: []float64{9.7},
			verdict: Same, noise: NoiseNone, change: -3, lo: math.NaN(),
		},
		{
			// 1 vs 3: the baseline's single value inside the candidate's range.
			name: "1v3 overlapping", base: []float64{10}, cand: []float64{9, 10.2, 8},
			verdict: Same, noise: NoiseRange, change: -10, lo: -20, hi: 2, confidence: 0.5,
		},
		{
			name: "baseline zero", base: []float64{0}, cand: []float64{9},
			verdict: NoVerdict, noise: NoiseNone, change: 0, lo: math.NaN(),
		},
	} {
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
			if math.IsNaN(tc.lo) {
				if c.Interval != nil {
					t.Errorf("interval %+v, want none", *c.Interval)
				}
			} else if c.Interval == nil {
				t.Errorf("no interval, want [%v, %v]", tc.lo, tc.hi)
			} else if !approx(c.Interval.LoPct, tc.lo) || !approx(c.Interval.HiPct, tc.hi) || !approx(c.Interval.Confidence, tc.confidence) {
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
		if m.value != want {
			t.Errorf("p%v: merged %v, one histogram of all samples %v", p, m.value, want)
		}
		if m.samples != int64(len(all)) {
			t.Errorf("p%v: %d samples, want %d", p, m.samples, len(all))
		}
	}
	m, err := g.measure(Metric{Name: "mean", Latency: true}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if !approx(m.value, one.MeanUs) {
		t.Errorf("pooled mean %v, mean of all samples %v", m.value, one.MeanUs)
	}
	// The pooled standard error uses the pooled stdev: check it against
	// the stdev of all samples.
	half := (m.hi - m.lo) / 2
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
		if math.Abs(m.value-tc.value) > tc.tl+1e-12 || math.Abs(m.lo-tc.lo) > tc.tl+1e-12 || math.Abs(m.hi-tc.hi) > tc.tl+1e-12 {
			t.Errorf("%s: %v in [%v, %v], want %v in [%v, %v]", tc.metric, m.value, m.lo, m.hi, tc.value, tc.lo, tc.hi)
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
		if c.Noise != NoiseRuns || c.Baseline.Runs != 5 || len(c.Candidate.Values) != 5 {
			t.Errorf("%s: noise %s, %d runs", c.Metric, c.Noise, c.Baseline.Runs)
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
}
