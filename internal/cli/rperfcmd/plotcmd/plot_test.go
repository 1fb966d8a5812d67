package plotcmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/cli/clitest"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/plot"
)

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want Options
		err  string
	}{
		{name: "defaults", args: []string{"a.json", "--out", "a.svg"},
			want: Options{Files: []string{"a.json"}, Out: "a.svg", Percentiles: plot.DefaultPercentiles, PNG: true}},
		{name: "everything", args: []string{"a.json", "b.json", "-o", "-", "--kind", "cdf", "--percentiles", "50,99.99", "--test", "send_lat", "--size", "64", "--title", "t", "--panels", "none", "--png=false"},
			want: Options{Files: []string{"a.json", "b.json"}, Out: "-", Kind: "cdf", Percentiles: []float64{50, 99.99}, Test: "send_lat", Size: 64, Title: "t", Panels: "none"}},
		{name: "png", args: []string{"a.json", "--out", "a.PNG"}, want: Options{Files: []string{"a.json"}, Out: "a.PNG", Percentiles: plot.DefaultPercentiles, PNG: true}},
		{name: "no file", args: []string{"--out", "a.svg"}, err: "plot needs at least one"},
		{name: "no out", args: []string{"a.json"}, err: "--out is required"},
		{name: "pdf", args: []string{"a.json", "--out", "a.pdf"}, err: "--out a.pdf: rperf plot writes SVG or PNG"},
		{name: "panels", args: []string{"a.json", "--out", "a.svg", "--panels", "grid"}, err: "--panels grid: want size, percentile or none"},
		{name: "kind", args: []string{"a.json", "--out", "a.svg", "--kind", "pie"}, err: "--kind pie: want latency, cdf or bandwidth"},
		{name: "percentile", args: []string{"a.json", "--out", "a.svg", "--percentiles", "0"}, err: "--percentiles: 0 is outside (0, 100]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *Options
			cmd := New(func(o *Options) error { got = o; return nil })
			cmd.SetArgs(tc.args)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err := cmd.Execute()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				if cli.ExitCode(err) != cli.ExitUsage {
					t.Errorf("exit code %d, want %d", cli.ExitCode(err), cli.ExitUsage)
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

// rperf runs the command as rperf's main does and returns the exit code,
// stdout and stderr.
func rperf(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Run("rperf", New(nil), args...)
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	d := reports.NewDocument(reports.Env{})
	for _, size := range []int64{64, 4096} {
		d.Results = append(d.Results, reports.Result{Test: "write_bw", Bytes: size, Bandwidth: &reports.Bandwidth{BWAvgGbps: float64(size) / 100}})
	}
	if err := d.WriteFile(p("bw.json")); err != nil {
		t.Fatal(err)
	}

	code, out, errs := rperf(t, p("bw.json"), "--out", p("bw.svg"))
	svg, err := os.ReadFile(p("bw.svg"))
	if code != 0 || out != "" || errs != "" || err != nil || !bytes.Contains(svg, []byte("<svg ")) || !bytes.Contains(svg, []byte("average bandwidth")) {
		t.Errorf("exit %d, stdout %q, stderr %q, file %v:\n%.200s", code, out, errs, err, svg)
	}
	// A PNG beside the SVG, and alone when asked.
	for _, name := range []string{"bw.png", "only.png"} {
		if name == "only.png" {
			if code, _, errs := rperf(t, p("bw.json"), "--out", p(name)); code != 0 {
				t.Fatalf("--out %s: exit %d: %s", name, code, errs)
			}
			if _, err := os.Stat(p("only.svg")); !os.IsNotExist(err) {
				t.Errorf("--out only.png wrote an SVG too: %v", err)
			}
		}
		b, err := os.ReadFile(p(name))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n")) {
			t.Errorf("%s: %v, %.8q", name, err, b)
		}
	}
	if code, _, _ := rperf(t, p("bw.json"), "--out", p("nopng.svg"), "--png=false"); code != 0 {
		t.Errorf("--png=false: exit %d", code)
	} else if _, err := os.Stat(p("nopng.png")); !os.IsNotExist(err) {
		t.Errorf("--png=false wrote a PNG: %v", err)
	}
	code, out, _ = rperf(t, p("bw.json"), "--out", "-")
	if code != 0 || out != string(svg) {
		t.Errorf("--out -: exit %d, stdout differs from the file", code)
	}
	code, _, errs = rperf(t, p("bw.json"), "--kind", "latency", "--out", p("x.svg"))
	if code != cli.ExitFailure || !strings.Contains(errs, "no latency records to draw a latency chart") {
		t.Errorf("latency of bandwidth records: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(p("x.svg")); !os.IsNotExist(err) {
		t.Errorf("a failed plot left a file: %v", err)
	}
	code, _, errs = rperf(t, p("nope.json"), "--out", p("x.svg"))
	if code != cli.ExitFailure || !strings.Contains(errs, "nope.json: read document: open") {
		t.Errorf("missing file: exit %d, %q", code, errs)
	}
}
