// Package comparecmd is rperf compare: a candidate run against a
// baseline, with a verdict per measurement and metric and an exit code
// for CI. The statistics are package reports/compare's.
package comparecmd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/compare"
)

// Options are rperf compare's flags and arguments.
type Options struct {
	// Baseline and Candidate are file names or glob patterns.
	Baseline, Candidate []string
	ThresholdPct        float64
	Confidence          float64
	FailUnsure          bool
	Metrics             []string
	// Markdown, JUnit and JSON name extra output files; "-" writes that
	// output to stdout instead of the text table.
	Markdown, JUnit, JSON string
	// Plots is a folder for a plot (SVG and PNG) of every comparison the
	// report flags; "" draws none.
	Plots string
}

// New returns the compare command. A non-nil run replaces its action
// (tests of flag parsing use it); nil runs [Run].
func New(run func(*Options) error) *cobra.Command {
	o := &Options{ThresholdPct: compare.DefaultThresholdPct, Confidence: compare.DefaultConfidence}
	cmd := &cobra.Command{
		Use:   "compare BASELINE.json CANDIDATE.json",
		Short: "compare runs against a baseline: better, worse or same within noise (exit 3 on a regression)",
		Long: `Compare rperf --json documents: a candidate against a baseline, for each
test, message size and path found on both sides, and for each metric (latency
p50, p99, p99.9 and mean; bandwidth and message rate). Each comparison gets a
verdict: better, worse, or same (below the threshold, or within noise).

Repetitions make the verdict trustworthy. Several records of one test and size
on a side, in one document or in several (--baseline and --candidate repeat,
and take glob patterns), are runs of one measurement: latency histograms are
merged exactly, and the noise is measured between the runs. Give 4 runs per
side or more, interleaved (rperf suite runs them so).

The verdict holds for the report as a whole: every comparison's interval is
wide enough that all of them hold together at --confidence (Bonferroni), so a
report of no change fails at most 5% of the time however many metrics it has.
A change is worse or better only when its whole interval lies beyond
--threshold; a change not shown to reach it is "unsure" and does not fail.
Each metric's noise is the largest of its own runs', the same metric's at the
other sizes, and its runs' histograms'. With fewer than 4 runs per side a
change past the threshold is at most unsure: one run per side cannot tell a
change from run-to-run noise (two identical runs can differ by 30% at p99).
Lower latency, higher bandwidth and message rate are better. The method and
its calibration on real runs: docs/compare.md.

Exit codes: 0 no metric regressed, 3 a metric got worse (or, with
--fail-unsure, is unsure in the worse direction), 1 an input could not be read
or compared, 2 wrong flags or arguments. Every output is written before the
exit.

Examples:
  rperf compare base.json cand.json
  rperf compare --baseline 'base-*.json' --candidate 'cand-*.json' --junit compare.xml
  rperf compare base.json cand.json --fail-unsure       one run per side, in CI
  rperf compare base.json cand.json --threshold 10% --metrics p50,p99 --markdown comment.md
  rperf compare --baseline 'r/baseline/*.json' --candidate 'r/candidate/*.json' --plots r/plots`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(cmd, args); err != nil {
				return err
			}
			if run != nil {
				return run(o)
			}
			return Run(o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.Baseline, "baseline", nil, "a baseline document or glob pattern (repeat for repetitions)")
	f.StringArrayVar(&o.Candidate, "candidate", nil, "a candidate document or glob pattern (repeat for repetitions)")
	f.Var((*percent)(&o.ThresholdPct), "threshold", "the smallest relative change called better or worse, in percent (5 or 5%)")
	f.Float64Var(&o.Confidence, "confidence", o.Confidence, "confidence of the report as a whole: all its intervals hold together at this level")
	f.BoolVar(&o.FailUnsure, "fail-unsure", false, "also exit 3 on a change in the worse direction not shown to reach the threshold (too few runs, or an interval across it)")
	f.StringSliceVar(&o.Metrics, "metrics", compare.DefaultMetrics, "metrics to compare: pNN (any latency percentile), mean, bw_avg, msg_rate")
	f.StringVar(&o.Markdown, "markdown", "", "also write the comparison as Markdown to `FILE` (- for stdout)")
	f.StringVar(&o.JUnit, "junit", "", "also write JUnit XML to `FILE`, a regression being a failing testcase (- for stdout)")
	f.StringVar(&o.JSON, "json", "", "also write the comparison document (schema rperf-compare/v1) to `FILE` (- for stdout)")
	f.StringVar(&o.Plots, "plots", "", "draw every comparison the report flags, run by run, as SVG and PNG into `DIR`; the reports link them")
	return cmd
}

// percent is a flag holding a percentage, written 5 or 5%.
type percent float64

func (p *percent) String() string { return strconv.FormatFloat(float64(*p), 'f', -1, 64) + "%" }
func (p *percent) Type() string   { return "percent" }
func (p *percent) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || !(v > 0 && v < 1000) {
		return fmt.Errorf("want a percentage above 0, e.g. 5 or 5%%")
	}
	*p = percent(v)
	return nil
}

// complete takes the positional arguments and checks the combinations
// the flags alone cannot.
func (o *Options) complete(cmd *cobra.Command, args []string) error {
	flags := cmd.Flags().Changed("baseline") || cmd.Flags().Changed("candidate")
	switch {
	case !flags && len(args) == 2:
		o.Baseline, o.Candidate = args[:1], args[1:]
	case flags && len(args) == 0 && len(o.Baseline) > 0 && len(o.Candidate) > 0:
	case flags && len(args) > 0:
		return cli.Usagef("give the documents either as BASELINE.json CANDIDATE.json or with --baseline and --candidate, not both (got %d arguments)", len(args))
	case flags:
		return cli.Usagef("--baseline and --candidate go together: name at least one document for each")
	default:
		return cli.Usagef("compare needs a baseline and a candidate: BASELINE.json CANDIDATE.json, or --baseline and --candidate (got %d arguments)", len(args))
	}
	if !(o.Confidence > 0.5 && o.Confidence < 1) {
		return cli.Usagef("--confidence %v: want a level between 0.5 and 1, e.g. 0.95", o.Confidence)
	}
	stdout := 0
	for _, f := range []string{o.Markdown, o.JUnit, o.JSON} {
		if f == "-" {
			stdout++
		}
	}
	if stdout > 1 {
		return cli.Usagef("only one of --markdown, --junit and --json can go to stdout (-)")
	}
	return nil
}

// Run compares, writes every output asked for, warns on stderr when the
// sides' environments differ in what moves the figures, and returns an
// *cli.ExitError with [cli.ExitRegression] when a metric regressed
// ([compare.Report.Failures]).
func Run(o *Options, stdout, stderr io.Writer) error {
	metrics, err := compare.ParseMetrics(o.Metrics)
	if err != nil {
		return &cli.UsageError{Err: fmt.Errorf("--metrics: %w", err)}
	}
	base, err := load("baseline", o.Baseline)
	if err != nil {
		return err
	}
	cand, err := load("candidate", o.Candidate)
	if err != nil {
		return err
	}
	rep, err := compare.Compare(base, cand, compare.Options{Metrics: metrics, ThresholdPct: o.ThresholdPct, Confidence: o.Confidence, FailUnsure: o.FailUnsure})
	if err != nil {
		return err
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(stderr, "rperf: warning: the sides' environments differ: %s; the comparison measures that too\n", n)
	}
	if o.Plots != "" {
		if err := drawFlagged(rep, base, cand, o.Plots); err != nil {
			return err
		}
	}
	if o.Markdown != "" && o.Markdown != "-" {
		rep.LinkBase = filepath.Dir(o.Markdown)
	}
	outputs := []struct {
		name  string
		write func(io.Writer) error
	}{
		{o.Markdown, rep.WriteMarkdown},
		{o.JUnit, rep.WriteJUnit},
		{o.JSON, rep.WriteJSON},
	}
	text := true
	for _, out := range outputs {
		switch out.name {
		case "":
		case "-":
			text = false
			if err := out.write(stdout); err != nil {
				return err
			}
		default:
			if err := writeFile(out.name, out.write); err != nil {
				return err
			}
		}
	}
	if text {
		if err := rep.WriteText(stdout); err != nil {
			return err
		}
	}
	if regs := rep.Failures(); len(regs) > 0 {
		return &cli.ExitError{Code: cli.ExitRegression, Msg: regressionMessage(regs, len(rep.Comparisons))}
	}
	return nil
}

// regressionMessage is the one line cli.Main prints for a regression.
func regressionMessage(regs []compare.Comparison, total int) string {
	const shown = 4
	var parts []string
	for i, c := range regs {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(regs)-shown))
			break
		}
		p := fmt.Sprintf("%s %s %+.1f%%", c.Key(), c.Metric, c.ChangePct)
		if c.Verdict == compare.Unsure {
			p += " (unsure)"
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("%d of %d metrics regressed: %s", len(regs), total, strings.Join(parts, ", "))
}

// load reads the documents of one side, expanding glob patterns.
func load(side string, args []string) ([]compare.Input, error) {
	var out []compare.Input
	for _, a := range args {
		names := []string{a}
		if strings.ContainsAny(a, "*?[") {
			m, err := filepath.Glob(a)
			if err != nil {
				return nil, cli.Usagef("--%s %q: %v", side, a, err)
			}
			if len(m) == 0 {
				return nil, fmt.Errorf("%s %q matches no file", side, a)
			}
			names = m
		}
		for _, n := range names {
			d, err := reports.ReadFile(n)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", side, n, err)
			}
			out = append(out, compare.Input{Name: n, Doc: d})
		}
	}
	return out, nil
}

// writeFile renders into memory first, so a failure leaves no partial
// file.
func writeFile(name string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
