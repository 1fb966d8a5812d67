// Package calibrate measures how often rperf compare cries wolf and how
// often it catches a regression, on real runs: an A/A campaign is many
// suites of one build against itself (every report of it has no change),
// and the same reports with a known regression injected into the
// candidate's figures say how many regressions are caught.
//
// The campaign's measured figures are kept as a small corpus
// (testdata/corpus.csv.gz), so the unit test recomputes the rates offline
// and fails when they leave their bounds; the campaign program
// (./campaign, make calibrate) runs a new campaign live. The method is in
// docs/compare.md.
package calibrate

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/rperf/rperf/internal/stats"
	"github.com/rperf/rperf/reports/compare"
)

// Report is one report of a campaign: every metric of every key, measured
// on both sides of one suite.
type Report struct {
	Name     string
	Measured []compare.Measured
}

// Injection is a known regression put into the candidate: every latency
// figure multiplied by Latency, every bandwidth figure by Bandwidth.
// Scaling a run's figures is scaling every sample of it, up to the
// histogram's buckets (0.1%).
type Injection struct {
	Name               string
	Latency, Bandwidth float64
}

// Injections are the campaign's: none (A/A), 10% and 25% worse.
var Injections = []Injection{
	{Name: "none (A/A)", Latency: 1, Bandwidth: 1},
	{Name: "10% worse", Latency: 1.10, Bandwidth: 0.90},
	{Name: "25% worse", Latency: 1.25, Bandwidth: 0.75},
}

// Inject returns ms with the candidate's figures scaled by inj.
func Inject(ms []compare.Measured, inj Injection) []compare.Measured {
	out := make([]compare.Measured, len(ms))
	for i, m := range ms {
		f := inj.Bandwidth
		if m.Metric.Latency {
			f = inj.Latency
		}
		c := m.Candidate
		c.Values = slices.Clone(c.Values)
		for j := range c.Values {
			c.Values[j] *= f
		}
		c.Value, c.Lo, c.Hi = c.Value*f, c.Lo*f, c.Hi*f
		m.Candidate = c
		out[i] = m
	}
	return out
}

// Only keeps the comparisons of latency metrics (latency true) or of
// bandwidth metrics.
func Only(ms []compare.Measured, latency bool) []compare.Measured {
	var out []compare.Measured
	for _, m := range ms {
		if m.Metric.Latency == latency {
			out = append(out, m)
		}
	}
	return out
}

// Rule decides whether a report fails the check (rperf compare would exit
// 3), and how many of its comparisons it flags.
type Rule struct {
	Name  string
	Judge func([]compare.Measured) (fails bool, flagged int)
}

// CompareRule is rperf compare's verdict with opts.
func CompareRule(opts compare.Options) Rule {
	return Rule{Name: "rperf compare", Judge: func(ms []compare.Measured) (bool, int) {
		rep, err := compare.Judge(ms, opts)
		if err != nil {
			panic(err) // the options are the caller's constants
		}
		n := len(rep.Failures())
		return n > 0, n
	}}
}

// BenchstatRule is what benchstat's statistics (golang.org/x/perf/
// benchmath: the Mann-Whitney U test, α = 0.05, on each metric alone)
// with rperf's threshold on the change of the medians would decide: a
// metric fails when the test rejects and the median got worse by at least
// thresholdPct.
func BenchstatRule(thresholdPct float64) Rule {
	return Rule{Name: "benchmath U test, α 0.05 per metric, + threshold", Judge: func(ms []compare.Measured) (bool, int) {
		n := 0
		for _, m := range ms {
			b := benchmath.NewSample(slices.Clone(m.Baseline.Values), &benchmath.DefaultThresholds)
			c := benchmath.NewSample(slices.Clone(m.Candidate.Values), &benchmath.DefaultThresholds)
			cmp := benchmath.AssumeNothing.Compare(b, c)
			bm, cm := stats.Median(m.Baseline.Values), stats.Median(m.Candidate.Values)
			change := 100 * (cm - bm) / bm
			if m.Metric.HigherIsBetter {
				change = -change
			}
			if cmp.P < cmp.Alpha && change >= thresholdPct {
				n++
			}
		}
		return n > 0, n
	}}
}

// Rate is how many of the reports failed the check.
type Rate struct {
	Failed, Reports int
	// Flagged counts the comparisons flagged over all reports.
	Flagged int
}

// Fraction is Failed / Reports.
func (r Rate) Fraction() float64 {
	if r.Reports == 0 {
		return math.NaN()
	}
	return float64(r.Failed) / float64(r.Reports)
}

func (r Rate) String() string {
	return fmt.Sprintf("%d of %d (%.1f%%)", r.Failed, r.Reports, 100*r.Fraction())
}

// Evaluate applies rule to every report with inj injected, keeping the
// comparisons keep keeps (nil keeps all).
func Evaluate(reports []Report, rule Rule, inj Injection, keep func([]compare.Measured) []compare.Measured) Rate {
	var r Rate
	for _, rep := range reports {
		ms := Inject(rep.Measured, inj)
		if keep != nil {
			ms = keep(ms)
		}
		if len(ms) == 0 {
			continue
		}
		fails, n := rule.Judge(ms)
		r.Reports++
		r.Flagged += n
		if fails {
			r.Failed++
		}
	}
	return r
}

// Resampled is [Evaluate] over every split of each report's runs into a
// baseline and a candidate of the report's sizes (with the first run in
// the baseline: 35 splits of 4 + 4 runs). With no change every split is an
// A/A report too; the rate over all of them estimates the same rate as
// Evaluate with far less spread, though the splits of one report are not
// independent of each other.
func Resampled(reports []Report, rule Rule, inj Injection, keep func([]compare.Measured) []compare.Measured) Rate {
	var all []Report
	for _, rep := range reports {
		all = append(all, Splits(rep)...)
	}
	return Evaluate(all, rule, inj, keep)
}

// Splits returns rep with its runs re-split every way into a baseline and
// a candidate of the same sizes as rep's (with equal sizes, the first run
// always in the baseline: the mirror split is the same question). The
// runs of all comparisons of one report are split alike, so a split keeps
// what a run did to every metric together.
func Splits(rep Report) []Report {
	if len(rep.Measured) == 0 {
		return nil
	}
	nb, nc := len(rep.Measured[0].Baseline.Values), len(rep.Measured[0].Candidate.Values)
	for _, m := range rep.Measured {
		if len(m.Baseline.Values) != nb || len(m.Candidate.Values) != nc {
			return nil // runs that do not line up cannot be re-split
		}
	}
	var out []Report
	for mask := 0; mask < 1<<(nb+nc); mask++ {
		if (nb == nc && mask&1 == 0) || popcount(mask) != nb {
			continue
		}
		r := Report{Name: fmt.Sprintf("%s/%b", rep.Name, mask)}
		for _, m := range rep.Measured {
			r.Measured = append(r.Measured, resplit(m, mask, nb+nc))
		}
		out = append(out, r)
	}
	return out
}

func popcount(x int) int {
	n := 0
	for ; x > 0; x >>= 1 {
		n += x & 1
	}
	return n
}

// resplit puts run i of the pooled runs in the baseline when bit i of
// mask is set.
func resplit(m compare.Measured, mask, n int) compare.Measured {
	values := slices.Concat(m.Baseline.Values, m.Candidate.Values)
	spreads := slices.Concat(m.Baseline.Spreads, m.Candidate.Spreads)
	out := compare.Measured{Key: m.Key, Metric: m.Metric}
	for i := range n {
		side := &out.Candidate
		if mask&(1<<i) != 0 {
			side = &out.Baseline
		}
		side.Values = append(side.Values, values[i])
		if len(spreads) == n {
			side.Spreads = append(side.Spreads, spreads[i])
		}
	}
	out.Baseline = summarize(out.Baseline, m.Metric.Latency)
	out.Candidate = summarize(out.Candidate, m.Metric.Latency)
	// Runs keep no tail of their own: the side's fewest is the split's,
	// exact when every run has as many samples (fixed iterations).
	out.Baseline.Tail = min(m.Baseline.Tail, m.Candidate.Tail)
	out.Candidate.Tail = out.Baseline.Tail
	return out
}

// summarize fills a side's figure from its runs alone: the median, which
// the corpus keeps in place of the pooled histogram (verdicts from
// repeated runs depend on the runs only).
func summarize(r compare.Runs, latency bool) compare.Runs {
	r.Value = stats.Median(r.Values)
	r.Lo, r.Hi, r.Within = r.Value, r.Value, latency
	return r
}

// Table is a campaign's rates: for each injection, the reports that fail
// with all metrics, latency metrics alone and bandwidth metrics alone,
// and over all splits of the runs; and benchmath's rule beside it.
type Table struct {
	Reports   int
	Rows      []Row
	Benchstat Row
}

// Row is one injection's rates.
type Row struct {
	Injection                     Injection
	All, Latency, Bandwidth, All2 Rate // All2: over every split
}

// Rates computes a campaign's table with rperf compare's default options.
func Rates(reports []Report) Table {
	rule := CompareRule(compare.Options{})
	lat := func(ms []compare.Measured) []compare.Measured { return Only(ms, true) }
	bw := func(ms []compare.Measured) []compare.Measured { return Only(ms, false) }
	t := Table{Reports: len(reports)}
	for _, inj := range Injections {
		t.Rows = append(t.Rows, Row{
			Injection: inj,
			All:       Evaluate(reports, rule, inj, nil),
			Latency:   Evaluate(reports, rule, inj, lat),
			Bandwidth: Evaluate(reports, rule, inj, bw),
			All2:      Resampled(reports, rule, inj, nil),
		})
	}
	bs := BenchstatRule(compare.DefaultThresholdPct)
	t.Benchstat = Row{Injection: Injections[0], All: Evaluate(reports, bs, Injections[0], nil),
		Latency: Evaluate(reports, bs, Injections[0], lat), Bandwidth: Evaluate(reports, bs, Injections[0], bw),
		All2: Resampled(reports, bs, Injections[0], nil)}
	return t
}

// Markdown renders the table for docs/compare.md.
func (t Table) Markdown() string {
	var b strings.Builder
	b.WriteString("| regression injected into the candidate | reports that fail (exit 3) | latency metrics alone | bandwidth metrics alone | all splits of the runs |\n")
	b.WriteString("|---|---|---|---|---|\n")
	row := func(name string, r Row) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.1f%% of %d |\n", name, r.All, r.Latency, r.Bandwidth, 100*r.All2.Fraction(), r.All2.Reports)
	}
	for _, r := range t.Rows {
		name := "none (A/A)"
		if r.Injection.Latency != 1 {
			name = fmt.Sprintf("latency ×%.2f, bandwidth ×%.2f", r.Injection.Latency, r.Injection.Bandwidth)
		}
		row(name, r)
	}
	row("none (A/A), benchstat's rule: U test p < 0.05 per metric, median beyond 5%", t.Benchstat)
	return b.String()
}
