package compare

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/testsupport/golden"
	"github.com/rperf/rperf/reports"
)

// fixture is a comparison with every kind of row: latency with five runs
// per side (one key regressed, one unchanged), bandwidth with three runs
// per side on a path and with one run per side, keys on one side only,
// and a kernel upgrade between the sides.
func fixture(t *testing.T) *Report {
	t.Helper()
	var base, cand []*reports.Document
	for i := range 5 {
		s := uint64(100 * i)
		b := doc("shm0",
			latencyResult(t, "write_lat", 2, 2, spreadSamples(s+1, 2000, 400)),
			latencyResult(t, "write_lat", 64, 2, spreadSamples(s+2, 2000, 500)),
		)
		c := doc("shm0",
			latencyResult(t, "write_lat", 2, 2, spreadSamples(s+3, 2000, 480)),
			latencyResult(t, "write_lat", 64, 2, spreadSamples(s+4, 2000, 500)),
		)
		c.Env.Kernel = "6.19"
		if i < 3 {
			b.Results = append(b.Results, withPath(bwResult("send_bw", 4096, 30+float64(i), 0.9+0.01*float64(i)), "inline"))
			c.Results = append(c.Results, withPath(bwResult("send_bw", 4096, 34+float64(i), 1.04+0.01*float64(i)), "inline"))
		}
		if i == 0 {
			b.Results = append(b.Results, bwResult("write_bw", 65536, 40, 0.0763), latencyResult(t, "write_lat", 4, 2, spreadSamples(9, 100, 400)))
			c.Results = append(c.Results, bwResult("write_bw", 65536, 39, 0.0744), latencyResult(t, "read_lat", 2, 1, spreadSamples(9, 100, 900)))
		}
		base, cand = append(base, b), append(cand, c)
	}
	rep, err := Compare(inputs("base", base...), inputs("cand", cand...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestGoldenText(t *testing.T) {
	var b bytes.Buffer
	if err := fixture(t).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "compare.txt"), b.Bytes())
}

func TestGoldenMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := fixture(t).WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "compare.md"), b.Bytes())
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "|") && strings.Count(strings.ReplaceAll(l, `\|`, ""), "|") != 9 {
			t.Errorf("table line with other than 8 cells: %q", l)
		}
	}
}

func TestGoldenJUnit(t *testing.T) {
	rep := fixture(t)
	var b bytes.Buffer
	if err := rep.WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "compare.xml"), b.Bytes())
	var back junitSuites
	if err := xml.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	failures, skipped := 0, 0
	for _, c := range back.Suites[0].Cases {
		if c.Failure != nil {
			failures++
			if !strings.Contains(c.Failure.Message, "regressed") {
				t.Errorf("failure message %q", c.Failure.Message)
			}
		}
		if c.Skipped != nil {
			skipped++
		}
	}
	if want := len(rep.Failures()); failures != want || back.Failures != want || back.Tests != len(rep.Comparisons) || want == 0 {
		t.Errorf("%d failing testcases, failures=%d, tests=%d; want %d regressions of %d", failures, back.Failures, back.Tests, want, len(rep.Comparisons))
	}
	if skipped != rep.Summary.Unsure || back.Skipped != skipped || skipped == 0 {
		t.Errorf("%d skipped testcases, skipped=%d; want the %d unsure", skipped, back.Skipped, rep.Summary.Unsure)
	}
}

func TestGoldenJSON(t *testing.T) {
	rep := fixture(t)
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "compare.json"), b.Bytes())
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Schema != Schema || len(back.Comparisons) != len(rep.Comparisons) || back.Summary != rep.Summary {
		t.Errorf("round trip: schema %q, %d comparisons, summary %+v", back.Schema, len(back.Comparisons), back.Summary)
	}
}

// TestFixtureVerdicts pins what the golden files show.
func TestFixtureVerdicts(t *testing.T) {
	rep := fixture(t)
	got := map[string]string{}
	for _, c := range rep.Comparisons {
		got[c.Key().String()+" "+c.Metric] = string(c.Verdict) + " " + string(c.Noise)
	}
	for k, want := range map[string]string{
		"write_lat 2B p50":                 "worse runs",
		"write_lat 64B p50":                "same runs",
		"send_bw 4096B path=inline bw_avg": "unsure range",
		"write_bw 65536B bw_avg":           "same none",
	} {
		if got[k] != want {
			t.Errorf("%s: %q, want %q", k, got[k], want)
		}
	}
	if len(rep.OnlyBaseline) != 1 || len(rep.OnlyCandidate) != 1 || len(rep.Notes) != 1 {
		t.Errorf("only baseline %q, only candidate %q, notes %q", rep.OnlyBaseline, rep.OnlyCandidate, rep.Notes)
	}
}
