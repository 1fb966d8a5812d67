package reports

import (
	"math"
	"strings"
	"testing"
)

func bwRec(path string, mpps float64) Result {
	return Result{Test: "send_bw", Bytes: 64, Path: path, Bandwidth: &Bandwidth{MsgRateMpps: mpps}}
}

func latRec(path string, p50 float64) Result {
	return Result{Test: "write_lat", Bytes: 2, Path: path, Latency: &Latency{RTTFactor: 2, Percentiles: map[string]float64{"50": p50, "99": 9}}}
}

func TestMedianRepetition(t *testing.T) {
	// Five repetitions: the median is the third smallest, 3.0 (rep 4).
	reps := []Result{bwRec("dv", 5), bwRec("dv", 1), bwRec("dv", 4), bwRec("dv", 2), bwRec("dv", 3)}
	reps[4].Iterations = 44
	m, err := MedianRepetition(reps)
	if err != nil {
		t.Fatal(err)
	}
	if m.MsgRateMpps != 3 || m.Iterations != 44 || m.Repetitions != 5 || m.Merit != MeritMsgRate || *m.MeritMin != 1 || *m.MeritMax != 5 ||
		len(m.Merits) != 5 || m.Merits[0] != 5 || m.Merits[4] != 3 {
		t.Errorf("median of 5: %+v (min %v max %v)", m, *m.MeritMin, *m.MeritMax)
	}
	m, _ = MedianRepetition([]Result{bwRec("dv", 7)})
	if m.MsgRateMpps != 7 || *m.MeritMin != 7 || *m.MeritMax != 7 || m.Repetitions != 1 {
		t.Errorf("one repetition: %+v", m)
	}
	// Latency records compare their median latency.
	m, _ = MedianRepetition([]Result{latRec("dm", 0.9), latRec("dm", 0.7), latRec("dm", 0.8)})
	if m.Merit != MeritP50 || m.Percentiles["50"] != 0.8 || *m.MeritMin != 0.7 || *m.MeritMax != 0.9 {
		t.Errorf("latency: %+v", m)
	}
	for name, bad := range map[string][]Result{
		"none":     nil,
		"mixed":    {bwRec("dv", 1), latRec("dv", 1)},
		"no p50":   {{Test: "write_lat", Latency: &Latency{Percentiles: map[string]float64{"99": 1}}}},
		"no kind":  {{Test: "x"}},
		"kind mix": {latRec("dv", 1), bwRec("dv", 1)},
	} {
		if _, err := MedianRepetition(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// With an even count the record is the lower of the two middle
// repetitions: a real run, not an average of two.
func TestMedianRepetitionEven(t *testing.T) {
	m, _ := MedianRepetition([]Result{bwRec("x", 1), bwRec("x", 4), bwRec("x", 2), bwRec("x", 3)})
	if m.MsgRateMpps != 2 {
		t.Errorf("median repetition of 1 4 2 3: %v, want 2 (the lower middle)", m.MsgRateMpps)
	}
}

func TestVerdictOf(t *testing.T) {
	cases := []struct {
		name      string
		path, ref []float64
		higher    bool
		want      string
	}{
		// Five a side, apart: every one of the 25 differences is positive,
		// and the 95% interval [D(3), D(23)] lies above 0.
		{"apart", []float64{6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5}, true, VerdictBetter},
		{"apart, lower is better", []float64{6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5}, false, VerdictWorse},
		{"below", []float64{0.1, 0.2, 0.3, 0.4, 0.5}, []float64{1, 2, 3, 4, 5}, true, VerdictWorse},
		{"below, lower is better", []float64{0.1, 0.2, 0.3, 0.4, 0.5}, []float64{1, 2, 3, 4, 5}, false, VerdictBetter},
		// One stray repetition: 5 of 25 differences are negative (U = 5;
		// P(U <= 5) = 19/252, two-sided 0.15), so D(3) < 0: no verdict.
		{"one stray", []float64{2.5, 2.6, 2.55, 2.45, 1.0}, []float64{2.0, 2.1, 2.2, 2.05, 2.15}, true, VerdictSame},
		// But one tie-free swap of neighbours is still 95%: U = 1.
		{"one swap", []float64{2.15, 2.6, 2.55, 2.45, 2.5}, []float64{2.0, 2.1, 2.2, 2.05, 1.9}, true, VerdictBetter},
		{"overlapping", []float64{1.5, 2.5, 3, 2, 1}, []float64{1, 2, 3, 1.5, 2.5}, true, VerdictSame},
		// Three a side cannot reach 95% (at most 1 - 2/20): the widest
		// interval decides, which is whether the ranges are apart.
		{"three apart", []float64{4, 5, 6}, []float64{1, 2, 3}, true, VerdictBetter},
		{"three touching", []float64{2.5, 5, 6}, []float64{1, 2, 3}, true, VerdictSame},
		{"none", nil, []float64{1}, true, VerdictSame},
	}
	for _, c := range cases {
		if got := VerdictOf(c.path, c.ref, c.higher); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestSetRatios(t *testing.T) {
	med := func(rs ...Result) Result {
		m, err := MedianRepetition(rs)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	gen := med(bwRec("generic", 2.0), bwRec("generic", 2.2), bwRec("generic", 1.9))
	rs := []Result{
		gen,
		med(bwRec("burst", 3.0), bwRec("burst", 3.3), bwRec("burst", 2.9)),
		med(bwRec("inline", 2.1), bwRec("inline", 1.8), bwRec("inline", 2.05)),
	}
	if err := SetRatios(gen, rs); err != nil {
		t.Fatal(err)
	}
	// generic's median is 2.0; burst's 3.0 (ratio 1.5), inline's 2.05.
	want := []struct {
		ratio   float64
		verdict string
	}{{1, ""}, {1.5, VerdictBetter}, {1.025, VerdictSame}}
	for i, w := range want {
		if math.Abs(*rs[i].RatioToGeneric-w.ratio) > 1e-12 || rs[i].Verdict != w.verdict {
			t.Errorf("%s: ratio %v verdict %q, want %v %q", rs[i].Path, *rs[i].RatioToGeneric, rs[i].Verdict, w.ratio, w.verdict)
		}
	}
	// Latency: the ratio of medians, lower is better.
	lg := med(latRec("generic", 1.0), latRec("generic", 1.1), latRec("generic", 0.95))
	ls := []Result{med(latRec("dm", 1.5), latRec("dm", 1.4), latRec("dm", 1.6))}
	if err := SetRatios(lg, ls); err != nil {
		t.Fatal(err)
	}
	if math.Abs(*ls[0].RatioToGeneric-1.5) > 1e-12 || ls[0].Verdict != VerdictWorse {
		t.Errorf("dm: ratio %v verdict %q, want 1.5 worse", *ls[0].RatioToGeneric, ls[0].Verdict)
	}
	if err := SetRatios(bwRec("generic", 0), nil); err == nil || !strings.Contains(err.Error(), "no usable") {
		t.Errorf("zero reference: %v", err)
	}
}

func TestNewGap(t *testing.T) {
	rec, err := NewRecorder(RecorderOptions{Expected: 4})
	if err != nil {
		t.Fatal(err)
	}
	// Gaps of 1000, 1000, 1000 and 5000 ns: mean 2000, population stdev
	// sqrt((3·1000² + 3000²)/4) = sqrt(3e6) = 1732.05 ns.
	for _, g := range []int64{1000, 1000, 5000, 1000} {
		rec.Record(g)
	}
	g, err := NewGap(rec, 1000, []float64{50, 75, 100})
	if err != nil {
		t.Fatal(err)
	}
	if g.Samples != 4 || g.ExpectedUs != 1 || g.MinUs != 1 || g.MaxUs != 5 || g.MeanUs != 2 || math.Abs(g.StdevUs-math.Sqrt(3)) > 1e-9 {
		t.Errorf("gap: %+v", g)
	}
	if g.Percentiles["50"] != 1 || g.Percentiles["75"] != 1 || g.Percentiles["100"] != 5 || g.HDR == "" || g.HDRUnit != "ns" {
		t.Errorf("gap percentiles: %v", g.Percentiles)
	}
	rec.Reset()
	if _, err := NewGap(rec, 1000, nil); err == nil {
		t.Error("no gaps: no error")
	}
}

func TestRateMbpsAndError(t *testing.T) {
	// 1000 messages of 1250 bytes (10^4 bits each) in 10 ms: 10^7 bits in
	// 10^-2 s = 10^9 b/s = 1000 Mb/s.
	r, err := RateMbps(1250, 1000, 10_000_000)
	if err != nil || r != 1000 {
		t.Errorf("RateMbps = %v, %v; want 1000", r, err)
	}
	if _, err := RateMbps(1250, 0, 1); err == nil {
		t.Error("no messages: no error")
	}
	if e := ErrorPct(100, 99.5); math.Abs(e-(-0.5)) > 1e-12 {
		t.Errorf("ErrorPct(100, 99.5) = %v, want -0.5", e)
	}
	if e := ErrorPct(1000, 1010); math.Abs(e-1) > 1e-12 {
		t.Errorf("ErrorPct(1000, 1010) = %v, want 1", e)
	}
	if !math.IsNaN(ErrorPct(0, 1)) {
		t.Error("ErrorPct with no request is not NaN")
	}
}
