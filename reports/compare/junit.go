package compare

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// JUnit XML, as CI systems read it (Jenkins, GitLab, GitHub test
// reporters): one testsuite, one testcase per (key, metric) with the key
// as classname and the metric as name. A regression ([Report.Failures])
// is a failure whose message carries the numbers; an unsure comparison
// that does not fail is skipped (the check could not decide); the others
// pass. Every testcase has the reason and the runs' values as system-out.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Props    []junitProp `xml:"properties>property"`
	Cases    []junitCase `xml:"testcase"`
}

type junitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

// junitSkipped marks an unsure comparison that does not fail: the
// check could not decide.
type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// junitText is element text kept verbatim (CDATA), newlines included.
type junitText struct {
	Text string `xml:",cdata"`
}

// WriteJUnit writes the report as JUnit XML.
func (r *Report) WriteJUnit(w io.Writer) error {
	suite := junitSuite{
		Name:  "rperf compare",
		Tests: len(r.Comparisons),
		Props: []junitProp{
			{"baseline", strings.Join(names(r.Baseline), " ")},
			{"candidate", strings.Join(names(r.Candidate), " ")},
			{"threshold_pct", formatThreshold(r.ThresholdPct)},
			{"confidence", formatConfidence(r.Confidence)},
		},
	}
	if f := r.Family; f != nil {
		suite.Props = append(suite.Props,
			junitProp{"family_rule", f.Rule},
			junitProp{"family_tests", fmt.Sprint(f.Tests)},
			junitProp{"interval_confidence", formatConfidence(f.IntervalConfidence)})
	}
	for i := range r.Comparisons {
		c := &r.Comparisons[i]
		tc := junitCase{Name: c.Metric, Classname: c.Key().String()}
		detail := fmt.Sprintf("%s: %s\nbaseline runs: %s %s\ncandidate runs: %s %s\n",
			verdictText(c), c.Reason, joinValues(c.Baseline.Values), c.Unit, joinValues(c.Candidate.Values), c.Unit)
		if c.Plot != "" {
			detail += "plot: " + c.Plot + "\n"
		}
		numbers := fmt.Sprintf("%s -> %s %s (%s, interval %s, %s; threshold %s)",
			formatValue(c.Baseline.Value), formatValue(c.Candidate.Value), c.Unit,
			formatPct(c.ChangePct), formatInterval(c.Interval), noiseLabel(c), formatThreshold(r.ThresholdPct))
		switch {
		case r.fails(c):
			suite.Failures++
			tc.Failure = &junitFailure{Type: "regression", Message: fmt.Sprintf("%s %s regressed (%s): %s", c.Key(), c.Metric, verdictText(c), numbers), Text: detail}
		case c.Verdict == Unsure:
			suite.Skipped++
			tc.Skipped = &junitSkipped{Message: fmt.Sprintf("%s %s %s: not shown to reach the threshold: %s", c.Key(), c.Metric, verdictText(c), numbers)}
			tc.SystemOut = &junitText{detail}
		default:
			tc.SystemOut = &junitText{detail}
		}
		suite.Cases = append(suite.Cases, tc)
	}
	doc := junitSuites{Name: "rperf compare", Tests: suite.Tests, Failures: suite.Failures, Skipped: suite.Skipped, Suites: []junitSuite{suite}}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	if _, err := io.WriteString(w, xml.Header+string(b)+"\n"); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	return nil
}

func names(fs []File) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

func joinValues(vs []float64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = formatValue(v)
	}
	return strings.Join(s, " ")
}
