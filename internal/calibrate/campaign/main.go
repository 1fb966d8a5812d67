// Command campaign runs rperf compare's A/A calibration campaign live:
// reports of one rperf build against itself, each one rperf suite with
// the build as baseline and candidate, then the false-alarm and
// detection rates (package calibrate). make calibrate runs it; with
// -update it rewrites the corpus the unit test reads and the rates in
// docs/compare.md.
//
//	go run ./internal/calibrate/campaign -rperf bin/rperf [-reports 40] [-out DIR] [-update]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rperf/rperf/internal/calibrate"
	"github.com/rperf/rperf/reports"
)

func main() {
	rperf := flag.String("rperf", "", "the rperf binary to calibrate (required)")
	n := flag.Int("reports", 40, "reports in the campaign")
	suiteFile := flag.String("suite", "internal/calibrate/testdata/calibrate.suite", "the suite each report runs")
	out := flag.String("out", "", "the campaign's folder (default: a new temporary one)")
	from := flag.String("from", "", "use the reports already in this folder instead of running them")
	update := flag.Bool("update", false, "rewrite internal/calibrate/testdata and the rates in docs/compare.md")
	flag.Parse()
	if err := run(*rperf, *n, *suiteFile, *out, *from, *update); err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		os.Exit(1)
	}
}

func run(rperf string, n int, suiteFile, out, from string, update bool) error {
	var cond calibrate.Conditions
	if from != "" {
		out = from
	} else {
		if rperf == "" {
			return fmt.Errorf("-rperf is required: the binary to calibrate (make calibrate builds bin/rperf)")
		}
		if out == "" {
			dir, err := os.MkdirTemp("", "rperf-calibrate-")
			if err != nil {
				return err
			}
			out = dir
		}
		var err error
		if cond, err = campaign(rperf, n, suiteFile, out); err != nil {
			return err
		}
	}
	dirs, err := filepath.Glob(filepath.Join(out, "r[0-9]*"))
	if err != nil || len(dirs) == 0 {
		return fmt.Errorf("%s holds no reports (r01, r02, ...)", out)
	}
	corpusFile := filepath.Join(out, "corpus.csv.gz")
	if from != "" {
		// Measured again (the measure may have changed); the conditions the
		// campaign ran in come from its first corpus.
		if old, err := calibrate.ReadConditions(corpusFile); err == nil {
			for _, c := range old {
				if strings.HasPrefix(c, "campaign:") || strings.HasPrefix(c, "1-minute load") {
					cond = append(cond, c)
				}
			}
		}
	}
	var reps []calibrate.Report
	for _, d := range dirs {
		r, err := calibrate.LoadSuite(d)
		if err != nil {
			return err
		}
		reps = append(reps, r)
	}
	machine, err := calibrate.SuiteConditions(dirs[0])
	if err != nil {
		return err
	}
	cond = append(machine, cond...)
	var corpus bytes.Buffer
	if err := calibrate.WriteCorpus(&corpus, reps, cond); err != nil {
		return err
	}
	if err := os.WriteFile(corpusFile, corpus.Bytes(), 0o644); err != nil {
		return err
	}
	// Rates from the corpus, as the unit test computes them.
	reps, cond, err = calibrate.ReadCorpus(bytes.NewReader(corpus.Bytes()))
	if err != nil {
		return err
	}
	table := calibrate.Rates(reps)
	fmt.Printf("campaign %s: %d reports\n", out, len(reps))
	for _, c := range cond {
		fmt.Println("  " + c)
	}
	fmt.Println()
	fmt.Print(table.Markdown())
	if !update {
		return nil
	}
	if err := os.WriteFile(calibrate.CorpusFile, corpus.Bytes(), 0o644); err != nil {
		return err
	}
	if err := sample(dirs[0]); err != nil {
		return err
	}
	return calibrate.UpdateDoc(calibrate.DocFile, calibrate.DocBlock(table, cond))
}

// campaign runs n reports into out and returns the conditions they ran
// in.
func campaign(rperf string, n int, suiteFile, out string) (calibrate.Conditions, error) {
	start := time.Now()
	var loads []string
	for i := 1; i <= n; i++ {
		dir := filepath.Join(out, fmt.Sprintf("r%02d", i))
		load := loadavg()
		loads = append(loads, load)
		cmd := exec.Command(rperf, "suite", suiteFile, "--out", dir, "--baseline", rperf, "--candidate", rperf, "--quiet")
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("report %d: rperf suite: %w", i, err)
		}
		fmt.Fprintf(os.Stderr, "campaign: report %d of %d done, %s elapsed, load average %s\n", i, n, time.Since(start).Round(time.Second), load)
	}
	return calibrate.Conditions{
		fmt.Sprintf("campaign: %d reports from %s to %s UTC (%s)", n, start.UTC().Format("2006-01-02 15:04"), time.Now().UTC().Format("15:04"), time.Since(start).Round(time.Second)),
		"1-minute load average at each report's start (2 CPUs shared with other jobs): " + strings.Join(loads, " "),
	}, nil
}

// loadavg is the 1-minute load average, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// sample keeps a trimmed copy of the first report, two sizes of each
// test, for the unit test that checks the corpus against the documents.
func sample(dir string) error {
	if err := os.RemoveAll(calibrate.SampleDir); err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".json" || filepath.Base(path) == "suite.json" {
			return err
		}
		doc, err := reports.ReadFile(path)
		if err != nil {
			return err
		}
		var keep []reports.Result
		for _, r := range doc.Results {
			if calibrate.SampleSizes[r.Bytes] {
				keep = append(keep, r)
			}
		}
		doc.Results = keep
		rel, _ := filepath.Rel(dir, path)
		dst := filepath.Join(calibrate.SampleDir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return doc.WriteFile(dst)
	})
}
