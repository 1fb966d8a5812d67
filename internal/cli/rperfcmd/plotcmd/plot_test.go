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
			want: Options{Files: []string{"a.json"}, Out: "a.svg", Percentiles: plot.DefaultPercentiles}},
		{name: "everything", args: []string{"a.json", "b.json", "-o", "-", "--kind", "cdf", "--percentiles", "50,99.99", "--test", "send_lat", "--size", "64", "--title", "t"},
			want: Options{Files: []string{"a.json", "b.json"}, Out: "-", Kind: "cdf", Percentiles: []float64{50, 99.99}, Test: "send_lat", Size: 64, Title: "t"}},
		{name: "no file", args: []string{"--out", "a.svg"}, err: "plot needs at least one"},
		{name: "no out", args: []string{"a.json"}, err: "--out is required"},
		{name: "png", args: []string{"a.json", "--out", "a.png"}, err: "--out a.png: rperf plot writes SVG"},
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
	if code != 0 || out != "" || errs != "" || err != nil || !bytes.HasPrefix(svg, []byte("<svg ")) || !bytes.Contains(svg, []byte("average bandwidth")) {
		t.Errorf("exit %d, stdout %q, stderr %q, file %v:\n%.200s", code, out, errs, err, svg)
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
