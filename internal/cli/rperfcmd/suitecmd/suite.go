// Package suitecmd is rperf suite: a declared list of rperf tests run with
// repetitions, interleaved between a baseline and a candidate binary, into
// a folder of rperf/v1 documents for rperf compare. The engine is package
// internal/suite.
package suitecmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/suite"
	"github.com/rperf/rperf/reports"
)

// Options are rperf suite's flags and arguments.
type Options struct {
	File string
	Out  string
	// Baseline and Candidate are the binaries of a two-sided suite; both
	// empty runs this rperf alone.
	Baseline, Candidate string
	// Repetitions overrides the file's when positive.
	Repetitions int
	Quiet       bool
}

// New returns the suite command. A non-nil run replaces its action (tests
// of flag parsing use it); nil runs [Run].
func New(run func(*Options) error) *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "suite FILE --out DIR [--baseline BIN --candidate BIN]",
		Short: "run a declared list of tests with repetitions, interleaved between two builds, into a folder for rperf compare",
		Long: `Run the rperf tests a suite file declares, each several times, into a folder
of rperf --json documents, with the machine's environment captured once in
DIR/suite.json (CPU model, governor, SMT, isolated CPUs, kernel, provider,
device).

With --baseline and --candidate, two rperf binaries (the base build and the
change) run alternately, test by test and repetition by repetition, in ABBA
order, so that drift in the machine hits both sides alike; their documents
go to DIR/baseline and DIR/candidate, ready for

  rperf compare --baseline 'DIR/baseline/*.json' --candidate 'DIR/candidate/*.json'

Without them this rperf runs alone, into DIR. Every run is a new process
(the noise a regression check must see is between processes). The suite
stops at the first run that fails, and says which and where its output is.

The file, one declaration a line, '#' for comments:

  repetitions 5     measured runs of each test per side (default 5)
  warmup 1          runs of each test per side before them, not kept (default 0)
  timeout 5m        bound on each run (default 10m)
  test lat write-lat --loopback -a --max-size 4096 -n 2000
  test bw  write-bw --loopback -a --max-size 65536

A test line is a name (its files are NAME-REP.json and NAME-REP.log) and an
rperf command line without "rperf" and without --json, quoted as in a shell.
The format and a CI recipe: docs/ci.md.

Exit codes: 0 every run succeeded, 1 a run failed, 2 wrong flags or a wrong
suite file (or a test's flags), 4 a test cannot run on this machine, 130
interrupted.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(args); err != nil {
				return err
			}
			if run != nil {
				return run(o)
			}
			return Run(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Out, "out", "o", "", "the folder to write (it must not exist or be empty); required")
	f.StringVar(&o.Baseline, "baseline", "", "the baseline's rperf `BINARY` (with --candidate)")
	f.StringVar(&o.Candidate, "candidate", "", "the candidate's rperf `BINARY` (with --baseline)")
	f.IntVar(&o.Repetitions, "repetitions", 0, "measured runs of each test per side, instead of the file's")
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "print no progress")
	return cmd
}

func (o *Options) complete(args []string) error {
	if len(args) != 1 {
		return cli.Usagef("suite needs one suite file (got %d arguments); see --help for its format", len(args))
	}
	o.File = args[0]
	switch {
	case o.Out == "":
		return cli.Usagef("--out is required: name the folder for the documents")
	case (o.Baseline == "") != (o.Candidate == ""):
		return cli.Usagef("--baseline and --candidate go together: name both binaries, or neither to run this rperf alone")
	case o.Repetitions < 0 || o.Repetitions > 1000:
		return cli.Usagef("--repetitions %d: want 1 to 1000", o.Repetitions)
	}
	return nil
}

// Run parses the suite file and runs it.
func Run(cmd *cobra.Command, o *Options) error {
	f, err := os.Open(o.File)
	if err != nil {
		return cli.Usagef("suite file: %v", err)
	}
	s, err := suite.Parse(f, o.File)
	f.Close()
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	if o.Repetitions > 0 {
		s.Repetitions = o.Repetitions
	}
	var sides []suite.Side
	if o.Baseline != "" {
		for _, sd := range []suite.Side{{Name: "baseline", Binary: o.Baseline}, {Name: "candidate", Binary: o.Candidate}} {
			bin, err := binary(sd.Binary)
			if err != nil {
				return err
			}
			sd.Binary = bin
			sides = append(sides, sd)
		}
	} else {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cannot find this rperf's executable: %w; name it with --baseline and --candidate", err)
		}
		sides = []suite.Side{{Binary: self}}
	}
	stderr := cmd.ErrOrStderr()
	opts := suite.Options{Out: o.Out, Sides: sides, Env: reports.GatherEnv(reports.System{})}
	if !o.Quiet {
		opts.Progress, opts.Terminal = stderr, isTerminal(stderr)
	}
	m, err := suite.Run(cmd.Context(), s, opts)
	if err != nil {
		var re *suite.RunError
		if errors.As(err, &re) {
			switch re.Code {
			case cli.ExitUsage:
				return cli.Usagef("%v (the test line's flags, %s:%d)", err, o.File, testLine(s, re.Run.Test))
			case cli.ExitEnvironment:
				return &cli.EnvironmentError{Err: err}
			}
		}
		return err
	}
	return summary(cmd.OutOrStdout(), m, o)
}

// binary resolves a side's binary: a path, or a name on PATH.
func binary(name string) (string, error) {
	if !strings.ContainsRune(name, os.PathSeparator) {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return "", cli.Usagef("binary %s: %v", name, err)
	}
	st, err := os.Stat(abs)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", cli.Usagef("binary %s: not an executable file (build it first, e.g. go build -o %s ./cmd/rperf)", name, name)
	}
	return abs, nil
}

func testLine(s *suite.Suite, name string) int {
	for _, t := range s.Tests {
		if t.Name == name {
			return t.Line
		}
	}
	return 0
}

// summary says what was written and how to compare it.
func summary(w io.Writer, m *suite.Manifest, o *Options) error {
	runs := 0
	for _, r := range m.Runs {
		if r.Repetition > 0 {
			runs++
		}
	}
	tests := fmt.Sprintf("%d tests", len(m.Tests))
	if len(m.Tests) == 1 {
		tests = "1 test"
	}
	fmt.Fprintf(w, "rperf suite: %d documents of %s in %s (manifest %s)\n", runs, tests, o.Out, filepath.Join(o.Out, suite.ManifestName))
	if len(m.Sides) == 2 {
		fmt.Fprintf(w, "compare them: rperf compare --baseline '%s' --candidate '%s'\n",
			filepath.Join(o.Out, "baseline", "*.json"), filepath.Join(o.Out, "candidate", "*.json"))
	}
	return nil
}

// isTerminal says whether w is a terminal, where progress redraws one
// line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd())
}
