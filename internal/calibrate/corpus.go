package calibrate

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rperf/rperf/internal/suite"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/compare"
)

// The corpus is gzipped CSV: '#' lines first (the campaign's conditions),
// then a header and one row per report, key, metric and side, with the
// runs' figures and their within-run spreads space-separated in run
// order, and for a latency percentile the fewest samples a run has
// beyond it. msg_rate is left out: it is bw_avg in other units, one question
// with it ([compare.Family]), and always the same verdict.
var corpusHeader = []string{"report", "test", "bytes", "path", "metric", "side", "values", "spreads", "tail"}

// LoadSuite measures a two-sided suite folder (baseline/ and candidate/)
// as rperf compare would: every default metric but msg_rate.
func LoadSuite(dir string) (Report, error) {
	var sides [2][]compare.Input
	for i, side := range []string{"baseline", "candidate"} {
		names, err := filepath.Glob(filepath.Join(dir, side, "*.json"))
		if err != nil || len(names) == 0 {
			return Report{}, fmt.Errorf("%s: no %s documents (a folder of rperf suite --baseline --candidate)", dir, side)
		}
		for _, n := range names {
			d, err := reports.ReadFile(n)
			if err != nil {
				return Report{}, fmt.Errorf("%s: %w", n, err)
			}
			sides[i] = append(sides[i], compare.Input{Name: n, Doc: d})
		}
	}
	metrics, err := compare.ParseMetrics(slices.DeleteFunc(slices.Clone(compare.DefaultMetrics), func(m string) bool { return m == "msg_rate" }))
	if err != nil {
		return Report{}, err
	}
	ms, err := compare.Measure(sides[0], sides[1], compare.Options{Metrics: metrics})
	if err != nil {
		return Report{}, fmt.Errorf("%s: %w", dir, err)
	}
	return Report{Name: filepath.Base(dir), Measured: ms}, nil
}

// Conditions are the campaign's facts kept at the top of the corpus.
type Conditions []string

// WriteCorpus writes reports as a corpus, the conditions first.
func WriteCorpus(w io.Writer, reports []Report, cond Conditions) error {
	zw := gzip.NewWriter(w)
	bw := bufio.NewWriter(zw)
	for _, c := range cond {
		fmt.Fprintf(bw, "# %s\n", c)
	}
	cw := csv.NewWriter(bw)
	if err := cw.Write(corpusHeader); err != nil {
		return err
	}
	for _, rep := range reports {
		for _, m := range rep.Measured {
			for _, side := range []struct {
				name string
				runs compare.Runs
			}{{"b", m.Baseline}, {"c", m.Candidate}} {
				row := []string{rep.Name, m.Key.Test, strconv.FormatInt(m.Key.Bytes, 10), m.Key.Path, m.Metric.Name, side.name,
					numbers(side.runs.Values, 6), numbers(side.runs.Spreads, 3), numbers(finiteOnly(side.runs.Tail), 6)}
				if err := cw.Write(row); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// finiteOnly is x as a list, empty when x is not a finite positive number.
func finiteOnly(x float64) []float64 {
	if x > 0 && !math.IsInf(x, 1) {
		return []float64{x}
	}
	return nil
}

func numbers(xs []float64, digits int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'g', digits, 64)
	}
	return strings.Join(s, " ")
}

// ReadCorpus reads a corpus written by [WriteCorpus]: its reports, in
// order, and its conditions.
func ReadCorpus(r io.Reader) ([]Report, Conditions, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, nil, fmt.Errorf("corpus: %w", err)
	}
	br := bufio.NewReader(zr)
	var cond Conditions
	for {
		b, err := br.Peek(1)
		if err != nil || b[0] != '#' {
			break
		}
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, nil, fmt.Errorf("corpus: %w", err)
		}
		cond = append(cond, strings.TrimSpace(strings.TrimPrefix(line, "#")))
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, nil, fmt.Errorf("corpus: %w", err)
	}
	if len(rows) == 0 || !slices.Equal(rows[0], corpusHeader) {
		return nil, nil, fmt.Errorf("corpus: want the header %v", corpusHeader)
	}
	var out []Report
	for i, row := range rows[1:] {
		line := i + 2
		if len(row) != len(corpusHeader) {
			return nil, nil, fmt.Errorf("corpus row %d: %d fields, want %d", line, len(row), len(corpusHeader))
		}
		bytes, err := strconv.ParseInt(row[2], 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("corpus row %d: bytes %q", line, row[2])
		}
		metric, err := compare.ParseMetric(row[4])
		if err != nil {
			return nil, nil, fmt.Errorf("corpus row %d: %w", line, err)
		}
		values, err1 := parseNumbers(row[6])
		spreads, err2 := parseNumbers(row[7])
		if err1 != nil || err2 != nil || len(values) == 0 || (len(spreads) != 0 && len(spreads) != len(values)) {
			return nil, nil, fmt.Errorf("corpus row %d: values %q, spreads %q", line, row[6], row[7])
		}
		tail, err3 := parseNumbers(row[8])
		if err3 != nil || len(tail) > 1 {
			return nil, nil, fmt.Errorf("corpus row %d: tail %q", line, row[8])
		}
		runs := summarize(compare.Runs{Values: values, Spreads: spreads}, metric.Latency)
		if len(tail) == 1 {
			runs.Tail = tail[0]
		}
		if len(out) == 0 || out[len(out)-1].Name != row[0] {
			out = append(out, Report{Name: row[0]})
		}
		rep := &out[len(out)-1]
		key := compare.Key{Test: row[1], Bytes: bytes, Path: row[3]}
		switch row[5] {
		case "b":
			rep.Measured = append(rep.Measured, compare.Measured{Key: key, Metric: metric, Baseline: runs})
		case "c":
			last := len(rep.Measured) - 1
			if last < 0 || rep.Measured[last].Key != key || rep.Measured[last].Metric.Name != metric.Name || rep.Measured[last].Candidate.Values != nil {
				return nil, nil, fmt.Errorf("corpus row %d: a candidate row without its baseline row before it", line)
			}
			rep.Measured[last].Candidate = runs
		default:
			return nil, nil, fmt.Errorf("corpus row %d: side %q, want b or c", line, row[5])
		}
	}
	for _, rep := range out {
		for _, m := range rep.Measured {
			if m.Candidate.Values == nil {
				return nil, nil, fmt.Errorf("corpus: report %s, %s %s has no candidate row", rep.Name, m.Key, m.Metric.Name)
			}
		}
	}
	return out, cond, nil
}

func parseNumbers(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Fields(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// ReadConditions reads only the conditions at the top of a corpus file,
// whatever its rows.
func ReadConditions(name string) (Conditions, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	var cond Conditions
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() && strings.HasPrefix(sc.Text(), "#") {
		cond = append(cond, strings.TrimSpace(strings.TrimPrefix(sc.Text(), "#")))
	}
	return cond, sc.Err()
}

// ReadCorpusFile reads a corpus file.
func ReadCorpusFile(name string) ([]Report, Conditions, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return ReadCorpus(f)
}

// SuiteConditions describes a campaign's machine from the first suite's
// manifest.
func SuiteConditions(dir string) (Conditions, error) {
	m, err := suite.ReadManifest(filepath.Join(dir, suite.ManifestName))
	if err != nil {
		return nil, err
	}
	e := m.Env
	cond := Conditions{
		fmt.Sprintf("machine: %s, %d CPUs (%s), governor %s, SMT %s, isolated CPUs %s, kernel %s", e.Host, e.CPUs, e.CPUModel, e.CPUGovernor, e.SMT, e.IsolatedCPUs, e.Kernel),
		fmt.Sprintf("provider %s, fabric %s, device %s; clock %s", e.Provider, e.Fabric, e.Device, e.Clock.Name),
		fmt.Sprintf("binary: %s; each report: %d vs %d interleaved runs of it", m.Sides[0].Version, m.Repetitions, m.Repetitions),
	}
	for _, t := range m.Tests {
		cond = append(cond, fmt.Sprintf("test %s: rperf %s", t.Name, strings.Join(t.Args, " ")))
	}
	return cond, nil
}

// Where make calibrate -update writes, relative to the module root; the
// unit test reads the corpus and the sample relative to this package.
const (
	CorpusFile = "internal/calibrate/testdata/corpus.csv.gz"
	SampleDir  = "internal/calibrate/testdata/sample"
	DocFile    = "docs/compare.md"
)

// SampleSizes are the message sizes the sample report keeps.
var SampleSizes = map[int64]bool{2: true, 4096: true, 65536: true}

// The rates in docs/compare.md sit between these lines.
const (
	docBegin = "<!-- calibration: begin (make calibrate UPDATE=1 writes this) -->"
	docEnd   = "<!-- calibration: end -->"
)

// DocBlock is what docs/compare.md shows of a campaign: its conditions
// and its rates.
func DocBlock(t Table, cond Conditions) string {
	var b strings.Builder
	b.WriteString(docBegin + "\n\n")
	b.WriteString(t.Markdown())
	b.WriteString("\nConditions, as the corpus records them:\n\n")
	for _, c := range cond {
		b.WriteString("- " + c + "\n")
	}
	b.WriteString("\n" + docEnd)
	return b.String()
}

// UpdateDoc replaces the block between the markers in the file.
func UpdateDoc(name, block string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, docBegin), strings.Index(s, docEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no calibration block (%q ... %q)", name, docBegin, docEnd)
	}
	return os.WriteFile(name, []byte(s[:i]+block+s[j+len(docEnd):]), 0o644)
}

// DocBlockIn returns the calibration block of a document's text.
func DocBlockIn(text string) (string, bool) {
	i, j := strings.Index(text, docBegin), strings.Index(text, docEnd)
	if i < 0 || j < i {
		return "", false
	}
	return text[i : j+len(docEnd)], true
}
