package calibrate

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rperf/rperf/reports/compare"
)

// Bounds the campaign must meet: rperf compare fails at most 5% of the
// reports of no change, and catches at least 90% of those with the
// 25% regression.
const (
	maxFalseAlarms = 0.05
	minDetection25 = 0.90
	minReports     = 20
)

// corpus reads the recorded campaign, relative to this package.
func corpus(t *testing.T) ([]Report, Conditions) {
	t.Helper()
	reps, cond, err := ReadCorpusFile(filepath.Join("testdata", filepath.Base(CorpusFile)))
	if err != nil {
		t.Fatal(err)
	}
	return reps, cond
}

// TestCorpusRates recomputes the false-alarm and detection rates of rperf
// compare on the recorded campaign of real runs, checks them against the
// bounds, and checks that docs/compare.md prints these rates.
func TestCorpusRates(t *testing.T) {
	reps, cond := corpus(t)
	if len(reps) < minReports {
		t.Fatalf("%d reports in the corpus, want at least %d", len(reps), minReports)
	}
	for _, r := range reps {
		if len(r.Measured) == 0 || len(r.Measured[0].Baseline.Values) != 4 || len(r.Measured[0].Candidate.Values) != 4 {
			t.Fatalf("report %s: want 4 vs 4 runs", r.Name)
		}
	}
	table := Rates(reps)
	t.Logf("%d reports:\n%s", len(reps), table.Markdown())
	aa, r10, r25 := table.Rows[0], table.Rows[1], table.Rows[2]
	for _, c := range []struct {
		what string
		rate Rate
		ok   bool
	}{
		{"A/A reports failing", aa.All, aa.All.Fraction() <= maxFalseAlarms},
		{"A/A splits failing", aa.All2, aa.All2.Fraction() <= maxFalseAlarms},
		{"A/A latency alone", aa.Latency, aa.Latency.Fraction() <= maxFalseAlarms},
		{"A/A bandwidth alone", aa.Bandwidth, aa.Bandwidth.Fraction() <= maxFalseAlarms},
		{"25% regressions caught", r25.All, r25.All.Fraction() >= minDetection25},
		{"25% regressions caught over splits", r25.All2, r25.All2.Fraction() >= minDetection25},
	} {
		if !c.ok {
			t.Errorf("%s: %s, out of bounds (at most %.0f%% false alarms, at least %.0f%% caught at 25%%)", c.what, c.rate, 100*maxFalseAlarms, 100*minDetection25)
		}
	}
	if r10.All.Fraction() > r25.All.Fraction() || aa.All.Fraction() > r10.All.Fraction() {
		t.Errorf("detection does not grow with the regression: %s, %s, %s", aa.All, r10.All, r25.All)
	}
	// benchstat's rule, per metric at 5%, cries wolf: that is why
	// rperf compare does not use it (docs/compare.md).
	if table.Benchstat.All.Fraction() <= aa.All.Fraction() {
		t.Errorf("benchmath's rule fails %s of A/A reports, no more than rperf compare's %s", table.Benchstat.All, aa.All)
	}

	doc, err := os.ReadFile(filepath.Join("..", "..", DocFile))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := DocBlockIn(string(doc))
	if want := DocBlock(table, cond); !ok || got != want {
		t.Errorf("%s does not show the corpus's rates; run make calibrate UPDATE=1, or paste:\n%s", DocFile, want)
	}
}

// TestSampleMatchesCorpus measures the trimmed copy of the corpus's first
// report from its documents, as rperf compare does, and finds the
// corpus's figures: the corpus is what the documents say.
func TestSampleMatchesCorpus(t *testing.T) {
	reps, _ := corpus(t)
	sample, err := LoadSuite(filepath.Join("testdata", filepath.Base(SampleDir)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]compare.Measured{}
	for _, m := range reps[0].Measured {
		want[m.Key.String()+" "+m.Metric.Name] = m
	}
	if len(sample.Measured) < 4 {
		t.Fatalf("sample: %d comparisons", len(sample.Measured))
	}
	same := func(a, b []float64, digits int) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			x, _ := strconv.ParseFloat(strconv.FormatFloat(a[i], 'g', digits, 64), 64)
			if math.Abs(x-b[i]) > 1e-12*math.Abs(b[i]) {
				return false
			}
		}
		return true
	}
	for _, m := range sample.Measured {
		c, ok := want[m.Key.String()+" "+m.Metric.Name]
		if !ok {
			t.Errorf("%s %s: not in the corpus's first report", m.Key, m.Metric.Name)
			continue
		}
		for _, s := range []struct {
			name       string
			docs, corp compare.Runs
		}{{"baseline", m.Baseline, c.Baseline}, {"candidate", m.Candidate, c.Candidate}} {
			if !same(s.docs.Values, s.corp.Values, 6) || !same(s.docs.Spreads, s.corp.Spreads, 3) || !same(finiteOnly(s.docs.Tail), finiteOnly(s.corp.Tail), 6) {
				t.Errorf("%s %s %s: documents %v %v, corpus %v %v", m.Key, m.Metric.Name, s.name, s.docs.Values, s.docs.Spreads, s.corp.Values, s.corp.Spreads)
			}
		}
	}
}

func measured(test string, bytes int64, metric string, b, c []float64) compare.Measured {
	m, err := compare.ParseMetric(metric)
	if err != nil {
		panic(err)
	}
	runs := func(v []float64) compare.Runs {
		r := compare.Runs{Values: v}
		if m.Latency {
			for range v {
				r.Spreads = append(r.Spreads, 0.01)
			}
		}
		return summarize(r, m.Latency)
	}
	return compare.Measured{Key: compare.Key{Test: test, Bytes: bytes}, Metric: m, Baseline: runs(b), Candidate: runs(c)}
}

func TestCorpusRoundTrip(t *testing.T) {
	reps := []Report{
		{Name: "r01", Measured: []compare.Measured{
			withTail(measured("write_lat", 2, "p50", []float64{0.1945, 0.204, 0.188, 0.1945}, []float64{0.197, 0.209, 0.1875, 0.205}), 999.5),
			measured("write_bw", 65536, "bw_avg", []float64{100.5, 318.7, 313.3, 343.4}, []float64{209.9, 333.7, 319.4, 192.2}),
		}},
		{Name: "r02", Measured: []compare.Measured{measured("write_lat", 2, "p99.9", []float64{1, 2}, []float64{3, 4})}},
	}
	var b bytes.Buffer
	if err := WriteCorpus(&b, reps, Conditions{"machine: test", "load 1.0"}); err != nil {
		t.Fatal(err)
	}
	back, cond, err := ReadCorpus(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cond, Conditions{"machine: test", "load 1.0"}) || len(back) != 2 || len(back[0].Measured) != 2 {
		t.Fatalf("read back %d reports, conditions %q", len(back), cond)
	}
	for i, m := range back[0].Measured {
		w := reps[0].Measured[i]
		if m.Key != w.Key || m.Metric != w.Metric || !slices.Equal(m.Baseline.Values, w.Baseline.Values) ||
			!slices.Equal(m.Candidate.Spreads, w.Candidate.Spreads) || m.Baseline.Value != w.Baseline.Value || m.Candidate.Tail != w.Candidate.Tail {
			t.Errorf("comparison %d: read %+v, wrote %+v", i, m, w)
		}
	}

	for _, tc := range []struct{ name, csv, err string }{
		{"header", "a,b\n", "want the header"},
		{"orphan candidate", corpusHead + "r,write_lat,2,,p50,c,1 2,,\n", "without its baseline row"},
		{"missing candidate", corpusHead + "r,write_lat,2,,p50,b,1 2,,\n", "has no candidate row"},
		{"metric", corpusHead + "r,write_lat,2,,p0,b,1,,\n", "unknown metric"},
		{"values", corpusHead + "r,write_lat,2,,p50,b,1 x,,\n", `values "1 x"`},
		{"fields", corpusHead + "r,write_lat,2,,p50,b,1\n", "corpus row 2: 7 fields, want 9"},
	} {
		var z bytes.Buffer
		if err := writeGzip(&z, tc.csv); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadCorpus(&z); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

// TestSplits: 4 + 4 runs split 35 ways, each run on one side, the first
// always in the baseline, every metric's runs split alike.
func TestSplits(t *testing.T) {
	rep := Report{Name: "r", Measured: []compare.Measured{
		measured("write_lat", 2, "p50", []float64{1, 2, 3, 4}, []float64{5, 6, 7, 8}),
		measured("write_lat", 2, "mean", []float64{10, 20, 30, 40}, []float64{50, 60, 70, 80}),
	}}
	splits := Splits(rep)
	if len(splits) != 35 {
		t.Fatalf("%d splits, want C(8,4)/2 = 35", len(splits))
	}
	seen := map[string]bool{}
	for _, s := range splits {
		p50, mean := s.Measured[0], s.Measured[1]
		all := slices.Sorted(slices.Values(slices.Concat(p50.Baseline.Values, p50.Candidate.Values)))
		if !slices.Equal(all, []float64{1, 2, 3, 4, 5, 6, 7, 8}) || p50.Baseline.Values[0] != 1 || len(p50.Baseline.Values) != 4 {
			t.Errorf("split %s: %v | %v", s.Name, p50.Baseline.Values, p50.Candidate.Values)
		}
		for i, v := range p50.Baseline.Values {
			if mean.Baseline.Values[i] != 10*v {
				t.Errorf("split %s: the metrics' runs split differently", s.Name)
			}
		}
		seen[fmt.Sprint(p50.Baseline.Values)] = true
	}
	if len(seen) != 35 {
		t.Errorf("%d distinct splits", len(seen))
	}
	if got := Splits(Report{Measured: []compare.Measured{measured("x", 1, "p50", []float64{1, 2}, []float64{3})}}); len(got) != 3 {
		t.Errorf("2 + 1 runs: %d splits, want 3", len(got))
	}
}

// TestInject: the candidate's latency figures scale by the latency
// factor, bandwidth by the bandwidth factor; the baseline is untouched.
func TestInject(t *testing.T) {
	ms := []compare.Measured{
		measured("write_lat", 2, "p50", []float64{1, 2}, []float64{1, 2}),
		measured("write_bw", 8, "bw_avg", []float64{10, 20}, []float64{10, 20}),
	}
	got := Inject(ms, Injection{Latency: 1.25, Bandwidth: 0.5})
	if !slices.Equal(got[0].Candidate.Values, []float64{1.25, 2.5}) || !slices.Equal(got[1].Candidate.Values, []float64{5, 10}) ||
		got[0].Candidate.Value != 1.875 || !slices.Equal(got[0].Baseline.Values, []float64{1, 2}) || !slices.Equal(ms[0].Candidate.Values, []float64{1, 2}) {
		t.Errorf("injected %+v", got)
	}
}

const corpusHead = "report,test,bytes,path,metric,side,values,spreads,tail\n"

func writeGzip(w *bytes.Buffer, text string) error {
	zw := gzip.NewWriter(w)
	if _, err := zw.Write([]byte(text)); err != nil {
		return err
	}
	return zw.Close()
}

func withTail(m compare.Measured, tail float64) compare.Measured {
	m.Baseline.Tail, m.Candidate.Tail = tail, tail
	return m
}
