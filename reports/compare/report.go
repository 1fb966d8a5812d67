package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/rperf/rperf/reports"
)

// Schema is the schema string of the comparison document (SCHEMA.md beside
// this file).
const Schema = "rperf-compare/v1"

// Report is the result of [Compare]. Its JSON form is the comparison
// document, schema [Schema].
type Report struct {
	Schema       string  `json:"schema"`
	ThresholdPct float64 `json:"threshold_pct"`
	Confidence   float64 `json:"confidence"`
	// FailUnsure: unsure changes in the worse direction count as
	// failures ([Options.FailUnsure]).
	FailUnsure bool     `json:"fail_unsure"`
	Metrics    []string `json:"metrics"`
	// Baseline and Candidate describe the documents of each side.
	Baseline  []File `json:"baseline"`
	Candidate []File `json:"candidate"`
	// Family says how the confidence holds over all the comparisons
	// judged from repeated runs; nil when there are none.
	Family *Family `json:"family,omitempty"`
	// Summary counts the verdicts.
	Summary     Summary      `json:"summary"`
	Comparisons []Comparison `json:"comparisons"`
	// OnlyBaseline and OnlyCandidate are the keys found on one side
	// only, which were not compared.
	OnlyBaseline  []string `json:"only_baseline"`
	OnlyCandidate []string `json:"only_candidate"`
	// Notes are differences between the environments of the two sides
	// that a reader should weigh (another host, device or MTU).
	Notes []string `json:"notes"`
	// LinkBase is the folder the Markdown's links to plots are relative
	// to (where the Markdown file goes); "" leaves them as they are.
	LinkBase string `json:"-"`
}

// Flagged says whether a comparison is one the report points at: a
// verdict other than same, with a relative change to judge.
func (c *Comparison) Flagged() bool { return c.Verdict != Same && c.Verdict != NoVerdict }

// File describes one input document.
type File struct {
	Name         string `json:"name"`
	Records      int    `json:"records"`
	Time         string `json:"time,omitempty"`
	Host         string `json:"host,omitempty"`
	RperfVersion string `json:"rperf_version,omitempty"`
	Device       string `json:"device,omitempty"`
}

// Summary counts the verdicts of a report, and the failures among them
// ([Report.Failures]).
type Summary struct {
	Worse    int `json:"worse"`
	Better   int `json:"better"`
	Same     int `json:"same"`
	Unsure   int `json:"unsure"`
	NA       int `json:"n_a"`
	Failures int `json:"failures"`
}

func newReport(opts Options) *Report {
	r := &Report{
		Schema:        Schema,
		ThresholdPct:  opts.ThresholdPct,
		Confidence:    opts.Confidence,
		FailUnsure:    opts.FailUnsure,
		Baseline:      []File{},
		Candidate:     []File{},
		Comparisons:   []Comparison{},
		OnlyBaseline:  []string{},
		OnlyCandidate: []string{},
		Notes:         []string{},
	}
	for _, m := range opts.Metrics {
		r.Metrics = append(r.Metrics, m.Name)
	}
	return r
}

func files(inputs []Input) []File {
	out := make([]File, 0, len(inputs))
	for _, in := range inputs {
		e := in.Doc.Env
		out = append(out, File{Name: in.Name, Records: len(in.Doc.Results), Time: e.Time, Host: e.Host, RperfVersion: e.RperfVersion, Device: e.Device})
	}
	return out
}

func (r *Report) add(c Comparison) {
	r.Comparisons = append(r.Comparisons, c)
	switch c.Verdict {
	case Worse:
		r.Summary.Worse++
	case Better:
		r.Summary.Better++
	case Same:
		r.Summary.Same++
	case Unsure:
		r.Summary.Unsure++
	default:
		r.Summary.NA++
	}
	if r.fails(&c) {
		r.Summary.Failures++
	}
}

// fails says whether c counts as a regression: worse, or, with
// FailUnsure, unsure in the worse direction.
func (r *Report) fails(c *Comparison) bool {
	return c.Verdict == Worse || (r.FailUnsure && c.Verdict == Unsure && c.Direction() == Worse)
}

// Failures returns the comparisons that count as regressions: those whose
// verdict is [Worse], and with FailUnsure those [Unsure] in the worse
// direction. rperf compare exits with code 3 when there is any.
func (r *Report) Failures() []Comparison {
	var out []Comparison
	for i := range r.Comparisons {
		if r.fails(&r.Comparisons[i]) {
			out = append(out, r.Comparisons[i])
		}
	}
	return out
}

// WriteJSON writes the comparison document as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("write comparison: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write comparison: %w", err)
	}
	return nil
}

// envField is one environment fact that, when it differs between the
// sides, makes a comparison measure more than the change under test.
type envField struct {
	name string
	get  func(reports.Env) string
}

// envFields are the facts that move latency and bandwidth without any
// change to the code: where it ran, on what CPU settings, kernel and
// toolchain, over which device and path, with which clock. The rperf
// version is left out: it is what a comparison usually compares.
var envFields = []envField{
	{"host", func(e reports.Env) string { return e.Host }},
	{"cpu_model", func(e reports.Env) string { return e.CPUModel }},
	{"cpus", func(e reports.Env) string { return strconv.Itoa(e.CPUs) }},
	{"cpu_governor", func(e reports.Env) string { return e.CPUGovernor }},
	{"smt", func(e reports.Env) string { return e.SMT }},
	{"isolated_cpus", func(e reports.Env) string { return e.IsolatedCPUs }},
	{"kernel", func(e reports.Env) string { return e.Kernel }},
	{"go_version", func(e reports.Env) string { return e.GoVersion }},
	{"provider", func(e reports.Env) string { return e.Provider }},
	{"fabric", func(e reports.Env) string { return e.Fabric }},
	{"device", func(e reports.Env) string { return e.Device }},
	{"mtu", func(e reports.Env) string { return strconv.Itoa(e.MTU) }},
	{"send_path", func(e reports.Env) string { return e.SendPath }},
	{"clock", func(e reports.Env) string { return e.Clock.Name }},
}

// envNotes names the environment facts whose values differ between the
// two sides. A fact some document does not record (written by an rperf
// that did not gather it) is not compared.
func envNotes(baseline, candidate []Input) []string {
	notes := []string{}
	values := func(inputs []Input, f envField) ([]string, bool) {
		var vs []string
		for _, in := range inputs {
			v := f.get(in.Doc.Env)
			if v == "" {
				return nil, false
			}
			if !slices.Contains(vs, v) {
				vs = append(vs, v)
			}
		}
		slices.Sort(vs)
		return vs, true
	}
	for _, f := range envFields {
		b, ok1 := values(baseline, f)
		c, ok2 := values(candidate, f)
		if ok1 && ok2 && !slices.Equal(b, c) {
			notes = append(notes, fmt.Sprintf("%s differs: baseline %s, candidate %s", f.name, strings.Join(b, ", "), strings.Join(c, ", ")))
		}
	}
	return notes
}
