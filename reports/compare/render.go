package compare

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// header is the comparison table's header.
func (r *Report) header() []string {
	return []string{"key", "metric", "baseline", "candidate", "change", "interval", "noise", "verdict"}
}

// alignment: text columns left, numbers right.
var alignment = []tw.Align{tw.AlignLeft, tw.AlignLeft, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft, tw.AlignLeft}

// verdictText is the verdict as the tables show it: an unsure verdict
// names its direction, "unsure (worse)".
func verdictText(c *Comparison) string {
	if c.Verdict == Unsure {
		return fmt.Sprintf("%s (%s)", c.Verdict, c.Direction())
	}
	return string(c.Verdict)
}

// rows returns one table row per comparison; mark decorates a verdict.
func (r *Report) rows(mark func(*Comparison) string) [][]string {
	out := make([][]string, 0, len(r.Comparisons))
	for i := range r.Comparisons {
		c := &r.Comparisons[i]
		out = append(out, []string{
			c.Key().String(),
			c.Metric,
			formatValue(c.Baseline.Value) + " " + c.Unit,
			formatValue(c.Candidate.Value) + " " + c.Unit,
			formatPct(c.ChangePct),
			formatInterval(c.Interval),
			noiseLabel(c),
			mark(c),
		})
	}
	return out
}

// summaryLine is "12 metrics compared: 1 worse, 0 better, 11 same."
func (r *Report) summaryLine() string {
	s := r.Summary
	line := fmt.Sprintf("%s compared: %d worse, %d better, %d same", plural(len(r.Comparisons), "metric"), s.Worse, s.Better, s.Same)
	if s.Unsure > 0 {
		line += fmt.Sprintf(", %d unsure (not shown to reach the threshold)", s.Unsure)
	}
	if s.NA > 0 {
		line += fmt.Sprintf(", %d without a verdict", s.NA)
	}
	line += "."
	switch {
	case s.Failures > 0:
		line += fmt.Sprintf(" %s.", plural(s.Failures, "regression"))
	case s.Unsure > 0 && !r.FailUnsure:
		line += " No regression shown, and none ruled out: unsure changes do not fail (--fail-unsure makes them)."
	}
	return line
}

// settings names the inputs and the settings, one line each.
func (r *Report) settings() []string {
	out := []string{
		fmt.Sprintf("baseline: %s (%s)", plural(len(r.Baseline), "document"), fileNames(r.Baseline)),
		fmt.Sprintf("candidate: %s (%s)", plural(len(r.Candidate), "document"), fileNames(r.Candidate)),
		fmt.Sprintf("threshold %s, confidence %s; lower latency, higher bandwidth and message rate are better",
			formatThreshold(r.ThresholdPct), formatConfidence(r.Confidence)),
	}
	if f := r.Family; f != nil {
		out = append(out, r.familyLine())
	}
	return out
}

// familyLine says how the confidence holds for the whole report.
func (r *Report) familyLine() string {
	f := r.Family
	if f.Tests == 1 {
		return fmt.Sprintf("one comparison from repeated runs, its interval at %s", formatConfidence(f.IntervalConfidence))
	}
	return fmt.Sprintf("%d comparisons from repeated runs, each interval at %s so that all hold together at %s (Bonferroni): a report of no change shows a false regression at most %s of the time",
		f.Tests, formatConfidence(f.IntervalConfidence), formatConfidence(f.Confidence), formatConfidence(1-f.Confidence))
}

// findings lists the verdicts other than same, with their reasons;
// link formats a plot's reference ("" for none).
func (r *Report) findings(link func(string) string) []string {
	var out []string
	for i := range r.Comparisons {
		c := &r.Comparisons[i]
		if c.Verdict == Same {
			continue
		}
		f := fmt.Sprintf("%s: %s %s: %s -> %s %s: %s", verdictText(c), c.Key(), c.Metric,
			formatValue(c.Baseline.Value), formatValue(c.Candidate.Value), c.Unit, c.Reason)
		if c.Plot != "" {
			f += link(c.Plot)
		}
		out = append(out, f)
	}
	return out
}

// notes lists the keys on one side only and the environment differences.
func (r *Report) notes() []string {
	var out []string
	if len(r.OnlyBaseline) > 0 {
		out = append(out, "only in the baseline, not compared: "+strings.Join(r.OnlyBaseline, ", "))
	}
	if len(r.OnlyCandidate) > 0 {
		out = append(out, "only in the candidate, not compared: "+strings.Join(r.OnlyCandidate, ", "))
	}
	return append(out, r.Notes...)
}

// legend explains the noise bases that appear in the report.
func (r *Report) legend() []string {
	text := map[Noise]string{
		NoiseRuns:      "runs: t interval of the change between the sides' runs, on a log scale, at the confidence shown; each metric's noise is the largest of its own runs', its family's (the same metric of the test at the other sizes) and its runs' histograms'; worse or better only when the whole interval lies beyond the threshold",
		NoiseRange:     "range: too few runs for the confidence asked; each side spans all its runs (and, for latency, its histogram's interval); the confidence shown is the most these runs can give; sides apart are unsure, not worse",
		NoiseHistogram: "histogram: one latency run per side; each side's interval is its histogram's (order statistics, or the mean's standard error): noise within a run, not between runs; sides apart are unsure, not worse",
		NoiseNone:      "none: one bandwidth run per side; nothing measures the noise; a change beyond the threshold is unsure",
	}
	var out []string
	for _, n := range []Noise{NoiseRuns, NoiseRange, NoiseHistogram, NoiseNone} {
		for i := range r.Comparisons {
			if r.Comparisons[i].Noise == n && r.Comparisons[i].Verdict != NoVerdict {
				out = append(out, text[n])
				break
			}
		}
	}
	return out
}

// WriteText writes the report as a plain text table for terminals and CI
// logs, followed by the summary, the reasons for every verdict other than
// same, notes, and what the noise column means.
func (r *Report) WriteText(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("rperf compare\n")
	for _, l := range r.settings() {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	b.WriteString("\n")
	if err := writeTable(&b, renderer.NewBlueprint(tw.Rendition{
		Borders:  tw.BorderNone,
		Settings: tw.Settings{Separators: tw.SeparatorsNone, Lines: tw.LinesNone},
	}), true, r.header(), r.rows(verdictText)); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\n%s\n", r.summaryLine())
	for _, f := range r.findings(func(p string) string { return " (plot: " + p + ")" }) {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	if ns := r.notes(); len(ns) > 0 {
		b.WriteString("notes:\n")
		for _, n := range ns {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	if l := r.legend(); len(l) > 0 {
		b.WriteString("noise:\n")
		for _, l := range l {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteMarkdown writes the report as Markdown for a CI comment: a
// heading with the outcome, the settings, the table, and the same lists
// as [Report.WriteText].
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b bytes.Buffer
	title := "no regression"
	if n := r.Summary.Failures; n > 0 {
		title = plural(n, "regression")
	} else if r.Summary.Unsure > 0 {
		title += fmt.Sprintf(", %d unsure", r.Summary.Unsure)
	}
	fmt.Fprintf(&b, "### rperf compare: %s\n\n", title)
	for _, l := range r.settings() {
		fmt.Fprintf(&b, "%s  \n", mdEscape(strings.ToUpper(l[:1])+l[1:]))
	}
	b.WriteString("\n")
	rows := r.rows(func(c *Comparison) string {
		if r.fails(c) {
			return "**" + verdictText(c) + "**"
		}
		return verdictText(c)
	})
	for _, row := range rows {
		for i := range row[:len(row)-1] {
			row[i] = mdEscape(row[i])
		}
	}
	if err := writeTable(&b, renderer.NewMarkdown(), false, r.header(), rows); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\n%s\n", r.summaryLine())
	if fs := r.findings(func(string) string { return "" }); len(fs) > 0 {
		b.WriteString("\n")
		i := 0
		for _, c := range r.Comparisons {
			if c.Verdict == Same {
				continue
			}
			line := "- " + mdEscape(fs[i])
			if c.Plot != "" {
				line += " ([plot](" + r.link(c.Plot) + "))"
			}
			b.WriteString(line + "\n")
			i++
		}
	}
	if ns := r.notes(); len(ns) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range ns {
			fmt.Fprintf(&b, "- %s\n", mdEscape(n))
		}
	}
	if l := r.legend(); len(l) > 0 {
		b.WriteString("\nNoise:\n\n")
		for _, l := range l {
			fmt.Fprintf(&b, "- %s\n", mdEscape(l))
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// mdEscape escapes the characters Markdown would read as table cell
// separators, emphasis or code. An underscore inside a word (write_lat)
// is not emphasis in CommonMark and is left alone.
var mdEscape = strings.NewReplacer(`|`, `\|`, `*`, `\*`, "`", "\\`").Replace

// writeTable renders a table with the header as given (tablewriter's
// header auto-format is off: "p99.9" must stay "p99.9"), cells never
// wrapped, text left- and numbers right-aligned. plain pads columns with
// two spaces and trims trailing blanks, for terminals and golden files.
func writeTable(w *bytes.Buffer, rend tw.Renderer, plain bool, header []string, rows [][]string) error {
	opts := []tablewriter.Option{
		tablewriter.WithRenderer(rend),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignmentConfig(tw.CellAlignment{PerColumn: alignment}),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: alignment}),
	}
	if plain {
		opts = append(opts, tablewriter.WithPadding(tw.Padding{Left: "", Right: "  ", Overwrite: true}))
	}
	var buf bytes.Buffer
	t := tablewriter.NewTable(&buf, opts...)
	t.Header(toAny(header)...)
	for _, r := range rows {
		if err := t.Append(toAny(r)...); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		w.WriteString(strings.TrimRight(l, " "))
		w.WriteByte('\n')
	}
	return nil
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// link is a plot's path as the Markdown links it: relative to LinkBase,
// with forward slashes and spaces escaped.
func (r *Report) link(p string) string {
	if r.LinkBase != "" {
		if rel, err := filepath.Rel(r.LinkBase, p); err == nil {
			p = rel
		}
	}
	return strings.ReplaceAll(filepath.ToSlash(p), " ", "%20")
}
