package comparecmd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/rperf/rperf/internal/cli/rperfcmd/plotcmd"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/compare"
	"github.com/rperf/rperf/reports/plot"
)

// drawFlagged draws every comparison the report flags, run by run, into
// dir as NAME.svg and NAME.png, and records the PNG in the comparison.
func drawFlagged(rep *compare.Report, base, cand []compare.Input, dir string) error {
	for i := range rep.Comparisons {
		c := &rep.Comparisons[i]
		if !c.Flagged() {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("--plots: %w", err)
		}
		m, err := compare.ParseMetric(c.Metric)
		if err != nil {
			return err
		}
		title := fmt.Sprintf("%s %s: %s, %s", c.Key(), c.Metric, formatChange(c.ChangePct), c.Verdict)
		if c.Verdict == compare.Unsure {
			title = fmt.Sprintf("%s %s: %s, unsure (%s)", c.Key(), c.Metric, formatChange(c.ChangePct), c.Direction())
		}
		f, err := plot.Runs(records(base, c.Key()), records(cand, c.Key()), plot.RunsOptions{Title: title, Percentile: m.Percentile, Metric: m.Name})
		if err != nil {
			return fmt.Errorf("--plots: %s %s: %w", c.Key(), c.Metric, err)
		}
		name := filepath.Join(dir, fileName(c))
		if err := plotcmd.WriteFigure(f, name+".svg", true); err != nil {
			return err
		}
		c.Plot = name + ".png"
	}
	return nil
}

// records are one side's records of a key, in input order.
func records(inputs []compare.Input, k compare.Key) []reports.Result {
	var out []reports.Result
	for _, in := range inputs {
		for _, r := range in.Doc.Results {
			if compare.KeyOf(r) == k {
				out = append(out, r)
			}
		}
	}
	return out
}

// unsafe are the characters a plot's file name does not keep.
var unsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// fileName names a comparison's plot: write_lat-64B-p99.9,
// send_bw-4096B-inline-bw_avg.
func fileName(c *compare.Comparison) string {
	name := fmt.Sprintf("%s-%dB", c.Test, c.Bytes)
	if c.Path != "" {
		name += "-" + c.Path
	}
	if c.Clock != "" {
		name += "-" + c.Clock
	}
	return unsafe.ReplaceAllString(name+"-"+c.Metric, "_")
}

func formatChange(pct float64) string {
	if pct >= 99.95 || pct <= -99.95 {
		return fmt.Sprintf("%+.0f%%", pct)
	}
	return fmt.Sprintf("%+.1f%%", pct)
}
