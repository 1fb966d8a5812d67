package comparecmd

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/cli/clitest"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/compare"
)

// TestFlags checks parsing alone, through the run seam.
func TestFlags(t *testing.T) {
	def := Options{ThresholdPct: 5, Confidence: 0.95, Metrics: compare.DefaultMetrics}
	with := func(f func(*Options)) Options { o := def; f(&o); return o }
	for _, tc := range []struct {
		name string
		args []string
		want Options
		err  string
	}{
		{name: "two files", args: []string{"a.json", "b.json"},
			want: with(func(o *Options) { o.Baseline, o.Candidate = []string{"a.json"}, []string{"b.json"} })},
		{name: "repetitions", args: []string{"--baseline", "a1.json", "--baseline", "a2.json", "--candidate", "b*.json"},
			want: with(func(o *Options) { o.Baseline, o.Candidate = []string{"a1.json", "a2.json"}, []string{"b*.json"} })},
		{name: "file names with commas stay whole", args: []string{"--baseline", "a,1.json", "--candidate", "b.json"},
			want: with(func(o *Options) { o.Baseline, o.Candidate = []string{"a,1.json"}, []string{"b.json"} })},
		{name: "settings", args: []string{"a", "b", "--threshold", "2.5%", "--confidence", "0.99", "--fail-unsure", "--metrics", "p50,p99.99", "--markdown", "c.md", "--junit", "-", "--json", "c.json"},
			want: with(func(o *Options) {
				o.Baseline, o.Candidate = []string{"a"}, []string{"b"}
				o.ThresholdPct, o.Confidence, o.FailUnsure, o.Metrics = 2.5, 0.99, true, []string{"p50", "p99.99"}
				o.Markdown, o.JUnit, o.JSON = "c.md", "-", "c.json"
			})},
		{name: "threshold without %", args: []string{"a", "b", "--threshold", "10"},
			want: with(func(o *Options) { o.Baseline, o.Candidate, o.ThresholdPct = []string{"a"}, []string{"b"}, 10 })},
		{name: "one file", args: []string{"a.json"}, err: "compare needs a baseline and a candidate"},
		{name: "three files", args: []string{"a", "b", "c"}, err: "got 3 arguments"},
		{name: "baseline alone", args: []string{"--baseline", "a"}, err: "--baseline and --candidate go together"},
		{name: "both forms", args: []string{"--baseline", "a", "--candidate", "b", "c"}, err: "not both"},
		{name: "threshold 0", args: []string{"a", "b", "--threshold", "0"}, err: "want a percentage above 0"},
		{name: "threshold word", args: []string{"a", "b", "--threshold", "five"}, err: "want a percentage above 0"},
		{name: "confidence", args: []string{"a", "b", "--confidence", "95"}, err: "--confidence 95: want a level between 0.5 and 1"},
		{name: "two to stdout", args: []string{"a", "b", "--json", "-", "--junit", "-"}, err: "only one of --markdown, --junit and --json can go to stdout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *Options
			cmd := New(func(o *Options) error { got = o; return nil })
			cmd.SetArgs(tc.args)
			cmd.SetOut(new(bytes.Buffer))
			cmd.SetErr(new(bytes.Buffer))
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err := cmd.Execute()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// latency writes a document of write_lat records, one per seed, with
// samples around center ns.
func latency(t *testing.T, path string, center float64, seeds ...uint64) {
	t.Helper()
	d := reports.NewDocument(reports.Env{Host: "vm", Device: "shm0"})
	for _, s := range seeds {
		r := rand.New(rand.NewPCG(s, 1))
		rec, err := reports.NewRecorder(reports.RecorderOptions{Expected: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for range 1000 {
			rec.Record(int64(center * (0.95 + 0.1*r.Float64())))
		}
		res, err := reports.NewLatencyResult(reports.LatencySpec{Test: "write_lat", Bytes: 2, Iterations: 1001, Mode: reports.ModeIterations, RTTFactor: 2}, rec)
		if err != nil {
			t.Fatal(err)
		}
		d.Results = append(d.Results, res)
	}
	if err := d.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// rperf runs the command as rperf's main does and returns the exit code,
// stdout and stderr.
func rperf(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Run("rperf", New(nil), args...)
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	latency(t, p("base.json"), 1000, 1)
	latency(t, p("same.json"), 1000, 2)
	latency(t, p("slow.json"), 1300, 3)
	for i := range 4 {
		latency(t, p("rb-"+string(rune('1'+i))+".json"), 1000, uint64(10+i))
		latency(t, p("rc-"+string(rune('1'+i))+".json"), 1100, uint64(20+i))
	}
	if err := os.WriteFile(p("perftest.json"), []byte(`{"results": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("future.json"), []byte(`{"schema": "rperf/v2"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	udp, err := reports.ReadFile(p("same.json"))
	if err != nil {
		t.Fatal(err)
	}
	udp.Env.Device, udp.Env.CPUGovernor = "udp_lo", "powersave"
	if err := udp.WriteFile(p("udp.json")); err != nil {
		t.Fatal(err)
	}
	other := reports.NewDocument(reports.Env{})
	other.Results = []reports.Result{{Test: "send_bw", Bytes: 65536, Bandwidth: &reports.Bandwidth{BWAvgGbps: 1}}}
	if err := other.WriteFile(p("bw.json")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		stdout   []string // substrings
		stderr   string   // substring; "" means empty
		notInOut string
	}{
		{name: "same", args: []string{p("base.json"), p("same.json")}, code: 0,
			stdout: []string{"write_lat 2B", "1v1 histogram", "4 metrics compared: 0 worse, 0 better, 4 same."}},
		{name: "one run per side: unsure", args: []string{p("base.json"), p("slow.json")}, code: 0,
			stdout: []string{"unsure (worse): write_lat 2B p50", "based on one sample per side", "4 unsure", "--fail-unsure makes them"}},
		{name: "one run per side, --fail-unsure", args: []string{p("base.json"), p("slow.json"), "--fail-unsure"}, code: cli.ExitRegression,
			stdout: []string{"4 regressions."}, stderr: "rperf: 4 of 4 metrics regressed: write_lat 2B p50 +30.0% (unsure), "},
		{name: "improvement, --fail-unsure", args: []string{p("slow.json"), p("base.json"), "--fail-unsure"}, code: 0, stdout: []string{"unsure (better)"}},
		{name: "threshold above the change", args: []string{p("base.json"), p("slow.json"), "--threshold", "40%"}, code: 0,
			stdout: []string{"threshold 40%", "0 worse, 0 better, 4 same."}},
		{name: "repetitions by glob", args: []string{"--baseline", p("rb-*.json"), "--candidate", p("rc-*.json"), "--metrics", "p50"}, code: cli.ExitRegression,
			stdout: []string{"4v4 runs, 95%", "worse"}, stderr: "1 of 1 metrics regressed"},
		{name: "environments differ", args: []string{p("base.json"), p("udp.json")}, code: 0,
			stdout: []string{"notes:", "device differs: baseline shm0, candidate udp_lo"},
			stderr: "rperf: warning: the sides' environments differ: device differs: baseline shm0, candidate udp_lo; the comparison measures that too\n"},
		{name: "json to stdout replaces the table", args: []string{p("base.json"), p("same.json"), "--json", "-"}, code: 0,
			stdout: []string{`"schema": "rperf-compare/v1"`}, notInOut: "metrics compared"},
		{name: "missing file", args: []string{p("base.json"), p("nope.json")}, code: cli.ExitFailure,
			stderr: "rperf: candidate " + p("nope.json") + ": read document: open " + p("nope.json") + ": no such file or directory"},
		{name: "perftest's JSON", args: []string{p("perftest.json"), p("base.json")}, code: cli.ExitFailure,
			stderr: `baseline ` + p("perftest.json") + `: read document: no "schema" field: not an rperf document`},
		{name: "other schema", args: []string{p("base.json"), p("future.json")}, code: cli.ExitFailure,
			stderr: `read document: unknown schema "rperf/v2": this build reads "rperf/v1"`},
		{name: "no match", args: []string{p("base.json"), p("bw.json")}, code: cli.ExitFailure,
			stderr: "rperf: no matching records: the baseline has write_lat 2B; the candidate has send_bw 65536B"},
		{name: "glob without match", args: []string{"--baseline", p("zz-*.json"), "--candidate", p("base.json")}, code: cli.ExitFailure,
			stderr: "matches no file"},
		{name: "bad metric", args: []string{p("base.json"), p("same.json"), "--metrics", "p50,median"}, code: cli.ExitUsage,
			stderr: `--metrics: unknown metric "median"`},
		{name: "no arguments", args: nil, code: cli.ExitUsage, stderr: "Run 'rperf compare --help' for usage."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := rperf(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errs)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			if tc.notInOut != "" && strings.Contains(out, tc.notInOut) {
				t.Errorf("stdout has %q:\n%s", tc.notInOut, out)
			}
			if (tc.stderr == "") != (errs == "") || !strings.Contains(errs, tc.stderr) {
				t.Errorf("stderr %q, want %q", errs, tc.stderr)
			}
		})
	}
}

// TestOutputFiles: every output is written, also when the exit code
// reports a regression.
func TestOutputFiles(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	latency(t, p("base.json"), 1000, 1)
	latency(t, p("slow.json"), 1300, 3)
	code, _, _ := rperf(t, p("base.json"), p("slow.json"), "--fail-unsure", "--markdown", p("c.md"), "--junit", p("c.xml"), "--json", p("c.json"))
	if code != cli.ExitRegression {
		t.Fatalf("exit code %d", code)
	}
	md, err := os.ReadFile(p("c.md"))
	if err != nil || !strings.HasPrefix(string(md), "### rperf compare: 4 regressions") || !strings.Contains(string(md), "| **unsure (worse)** |") {
		t.Errorf("markdown %v:\n%s", err, md)
	}
	x, err := os.ReadFile(p("c.xml"))
	var suites struct {
		Failures int `xml:"failures,attr"`
	}
	if err != nil || xml.Unmarshal(x, &suites) != nil || suites.Failures != 4 {
		t.Errorf("junit %v, %d failures:\n%s", err, suites.Failures, x)
	}
	j, err := os.ReadFile(p("c.json"))
	var rep compare.Report
	if err != nil || json.Unmarshal(j, &rep) != nil || rep.Schema != compare.Schema || rep.Summary.Failures != 4 || !rep.FailUnsure {
		t.Errorf("json %v: %+v", err, rep.Summary)
	}
}

// TestPlots: --plots draws every flagged comparison as SVG and PNG, and
// every output points at it; the Markdown link is relative to the
// Markdown file.
func TestPlots(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	for i := range 4 {
		latency(t, p("rb-"+string(rune('1'+i))+".json"), 1000, uint64(10+i))
		latency(t, p("rc-"+string(rune('1'+i))+".json"), 1200, uint64(20+i))
	}
	if err := os.MkdirAll(p("out"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errs := rperf(t, "--baseline", p("rb-*.json"), "--candidate", p("rc-*.json"), "--metrics", "p50,p99",
		"--plots", p("out/plots"), "--markdown", p("out/compare.md"), "--json", p("out/compare.json"), "--junit", p("out/compare.xml"))
	if code != cli.ExitRegression {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, f := range []string{"write_lat-2B-p50.svg", "write_lat-2B-p50.png", "write_lat-2B-p99.png"} {
		if st, err := os.Stat(p("out/plots/" + f)); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", f, err)
		}
	}
	png := p("out/plots/write_lat-2B-p50.png")
	if !strings.Contains(out, "(plot: "+png+")") {
		t.Errorf("stdout does not name the plot:\n%s", out)
	}
	md, _ := os.ReadFile(p("out/compare.md"))
	if !strings.Contains(string(md), "([plot](plots/write_lat-2B-p50.png))") {
		t.Errorf("markdown does not link the plot relative to itself:\n%s", md)
	}
	var rep compare.Report
	j, _ := os.ReadFile(p("out/compare.json"))
	if err := json.Unmarshal(j, &rep); err != nil || rep.Comparisons[0].Plot != png {
		t.Errorf("json: %v, plot %q", err, rep.Comparisons[0].Plot)
	}
	if x, _ := os.ReadFile(p("out/compare.xml")); !strings.Contains(string(x), "plot: "+png) {
		t.Errorf("junit does not name the plot")
	}
}
