package main_test

import (
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rperf/rperf/reports"
)

// TestCompareAndPlot runs the CI workflow through the binary: real
// loopback runs with --json, rperf compare (exit 0 on the same build; exit
// 3 and a failing JUnit testcase on a regression), and rperf plot.
func TestCompareAndPlot(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, name := range []string{"a.json", "b.json"} {
		if r := rperf(t, "write-lat", "--loopback", "-n", "2000", "-a", "--max-size", "8", "--json", p(name)); r.code != 0 {
			t.Fatalf("write-lat: exit %d; stderr: %s", r.code, r.stderr)
		}
	}
	// One run per side of the same build never fails the check: a change
	// past the threshold is at most unsure.
	r := rperf(t, "compare", p("a.json"), p("b.json"))
	if r.code != 0 || !strings.Contains(r.stdout, "write_lat 8B") || !strings.Contains(r.stdout, "12 metrics compared") {
		t.Errorf("compare of two runs: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// Bandwidth: four real runs as the baseline, and as the candidate the
	// same four scaled down until the fastest is half the slowest baseline
	// run. Halving each run is not enough: on a busy machine the fastest
	// of four runs can be more than twice the slowest, and their halves
	// then overlap the baseline, which the comparison rightly calls noise.
	// Scaled this way the t interval's upper end lies below -50% whatever
	// the spread of the four runs (see reports/compare). bw_avg and
	// msg_rate are one question, so the interval is at 95%.
	var base, cand []string
	var docs []*reports.Document
	lo, hi := math.Inf(1), 0.0
	for i := range 4 {
		b := p(fmt.Sprintf("bw-%d.json", i))
		if r := rperf(t, "write-bw", "--loopback", "-n", "2000", "-s", "4096", "--json", b); r.code != 0 {
			t.Fatalf("write-bw: exit %d; stderr: %s", r.code, r.stderr)
		}
		d, err := reports.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range d.Results {
			lo, hi = min(lo, res.BWAvgGbps), max(hi, res.BWAvgGbps)
		}
		docs, base = append(docs, d), append(base, "--baseline", b)
	}
	scale := lo / hi / 2
	for i, d := range docs {
		c := p(fmt.Sprintf("slow-%d.json", i))
		for _, res := range d.Results {
			res.BWAvgGbps *= scale
			res.MsgRateMpps *= scale
		}
		if err := d.WriteFile(c); err != nil {
			t.Fatal(err)
		}
		cand = append(cand, "--candidate", c)
	}
	args := append(append(append([]string{"compare"}, base...), cand...), "--junit", p("c.xml"))
	r = rperf(t, args...)
	if r.code != 3 || !strings.Contains(r.stderr, "rperf: 2 of 2 metrics regressed: write_bw 4096B") || !strings.Contains(r.stdout, "4v4 runs, 95%") {
		t.Errorf("compare against runs at most half the slowest: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	x, err := os.ReadFile(p("c.xml"))
	var suites struct {
		Failures int `xml:"failures,attr"`
	}
	if err != nil || xml.Unmarshal(x, &suites) != nil || suites.Failures != 2 {
		t.Errorf("JUnit: %v, %d failures:\n%s", err, suites.Failures, x)
	}

	for _, kind := range []string{"latency", "cdf"} {
		out := p(kind + ".svg")
		r = rperf(t, "plot", p("a.json"), p("b.json"), "--kind", kind, "--out", out)
		svg, err := os.ReadFile(out)
		if r.code != 0 || err != nil || !strings.Contains(string(svg), "<svg ") {
			t.Errorf("plot --kind %s: exit %d, %v; stderr: %s", kind, r.code, err, r.stderr)
		}
	}
	if r = rperf(t, "plot", p("a.json"), "--kind", "bandwidth", "--out", p("x.svg")); r.code != 1 || !strings.Contains(r.stderr, "no bandwidth records") {
		t.Errorf("plot of latency records as bandwidth: exit %d; stderr: %s", r.code, r.stderr)
	}
}
