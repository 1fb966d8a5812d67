package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rperf/rperf/reports"
)

// Schema is the schema string of the suite's manifest, suite.json.
const Schema = "rperf-suite/v1"

// ManifestName is the manifest's file name in the output folder.
const ManifestName = "suite.json"

// Side is one rperf binary the suite runs.
type Side struct {
	// Name names the side's subfolder ("baseline", "candidate"); empty
	// for a suite of one side, whose documents go in the folder itself.
	Name string `json:"name,omitempty"`
	// Binary is the rperf executable.
	Binary string `json:"binary"`
	// Version is what the binary's --version printed.
	Version string `json:"version,omitempty"`
}

// Options configures [Run].
type Options struct {
	// Out is the folder to write; it must not exist or be empty.
	Out string
	// Sides are the binaries, one or two, run alternately.
	Sides []Side
	// Env is the machine's environment, captured once before the runs
	// ([reports.GatherEnv]); the suite adds the provider, fabric and
	// device of its first document.
	Env reports.Env
	// Progress receives progress lines; nil for none.
	Progress io.Writer
	// Terminal redraws one progress line in place instead of printing a
	// line per run.
	Terminal bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Manifest is the suite's record of what it ran, written as suite.json
// in the output folder.
type Manifest struct {
	Schema string `json:"schema"`
	// Suite is the suite file's name.
	Suite       string `json:"suite"`
	Repetitions int    `json:"repetitions"`
	Warmup      int    `json:"warmup"`
	Timeout     string `json:"timeout"`
	// Tests are the declared tests.
	Tests []ManifestTest `json:"tests"`
	// Sides are the binaries, in the order of the first repetition.
	Sides []Side `json:"sides"`
	// Env is the machine, captured once before the first run, with the
	// provider, fabric and device of the first document.
	Env reports.Env `json:"env"`
	// Started and Finished are RFC 3339 times; Finished is empty when
	// the suite stopped early.
	Started  string `json:"started"`
	Finished string `json:"finished,omitempty"`
	// Runs lists every run made, in order, warm-up runs included.
	Runs []RunRecord `json:"runs"`
}

// ManifestTest is one declared test.
type ManifestTest struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
}

// RunRecord is one run of one test on one side.
type RunRecord struct {
	Side string `json:"side,omitempty"`
	Test string `json:"test"`
	// Repetition counts from 1; 0 is a warm-up run, whose document is
	// not kept.
	Repetition int `json:"repetition"`
	// File is the document, relative to the output folder; empty for a
	// warm-up run.
	File string `json:"file,omitempty"`
	// Log holds the run's stdout and stderr, relative to the output
	// folder.
	Log      string  `json:"log"`
	Seconds  float64 `json:"seconds"`
	ExitCode int     `json:"exit_code"`
}

// RunError is a run that failed: the binary exited with a nonzero code
// or did not finish within the timeout.
type RunError struct {
	Run RunRecord
	// Code is the binary's exit code (-1 when it was killed).
	Code int
	// Detail is the last line the run wrote to stderr, or what ended it.
	Detail string
	// Log is the run's output file.
	Log string
}

func (e *RunError) Error() string {
	side := ""
	if e.Run.Side != "" {
		side = e.Run.Side + " "
	}
	rep := fmt.Sprintf("repetition %d", e.Run.Repetition)
	if e.Run.Repetition == 0 {
		rep = "warm-up"
	}
	return fmt.Sprintf("%stest %s, %s: %s; its output is in %s", side, e.Run.Test, rep, e.Detail, e.Log)
}

// step is one planned run.
type step struct {
	side       int
	test       int
	repetition int // 0: warm-up
	warmIndex  int
}

// plan orders the runs: warm-ups first, then repetition by repetition,
// test by test, each test on every side in turn, the sides' order
// reversed every other time (ABBA), so that drift in the machine falls on
// both sides alike.
func plan(s *Suite, sides int) []step {
	var out []step
	for r := 1; r <= s.Warmup+s.Repetitions; r++ {
		for ti := range s.Tests {
			for k := range sides {
				side := k
				if (r+ti)%2 == 0 {
					side = sides - 1 - k
				}
				st := step{side: side, test: ti, repetition: r - s.Warmup}
				if r <= s.Warmup {
					st.repetition, st.warmIndex = 0, r
				}
				out = append(out, st)
			}
		}
	}
	return out
}

// Run runs the suite: every test, Repetitions times on every side after
// Warmup runs, interleaved ([plan]), each run a new process of the side's
// binary with --json, into Out (Out/SIDE/TEST-REP.json and .log), and
// writes the manifest, also when a run fails. It stops at the first run
// that fails ([*RunError]) or when ctx ends.
func Run(ctx context.Context, s *Suite, opts Options) (*Manifest, error) {
	if len(opts.Sides) == 0 || len(opts.Sides) > 2 {
		return nil, fmt.Errorf("a suite runs one or two binaries, not %d", len(opts.Sides))
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if err := emptyDir(opts.Out); err != nil {
		return nil, err
	}
	m := &Manifest{
		Schema: Schema, Suite: s.Name, Repetitions: s.Repetitions, Warmup: s.Warmup, Timeout: s.Timeout.String(),
		Env: opts.Env, Started: now().UTC().Format(time.RFC3339), Runs: []RunRecord{},
	}
	for _, t := range s.Tests {
		m.Tests = append(m.Tests, ManifestTest{Name: t.Name, Args: t.Args})
	}
	for _, sd := range opts.Sides {
		if err := os.MkdirAll(filepath.Join(opts.Out, sd.Name), 0o755); err != nil {
			return nil, err
		}
		sd.Version = version(ctx, sd.Binary)
		m.Sides = append(m.Sides, sd)
	}
	steps := plan(s, len(opts.Sides))
	width := len(fmt.Sprint(s.Repetitions))
	prog := &progress{w: opts.Progress, terminal: opts.Terminal, total: len(steps), reps: s.Repetitions, start: now(), now: now}
	var err error
	for i, st := range steps {
		sd, t := m.Sides[st.side], s.Tests[st.test]
		rec := RunRecord{Side: sd.Name, Test: t.Name, Repetition: st.repetition}
		base := fmt.Sprintf("%s-%0*d", t.Name, width, st.repetition)
		if st.repetition == 0 {
			base = fmt.Sprintf("%s-warmup-%d", t.Name, st.warmIndex)
		} else {
			rec.File = filepath.Join(sd.Name, base+".json")
		}
		rec.Log = filepath.Join(sd.Name, base+".log")
		prog.starting(i, rec)
		rec, err = runOne(ctx, s, sd, t, rec, opts.Out)
		m.Runs = append(m.Runs, rec)
		prog.done(i, rec, err)
		if err != nil {
			break
		}
		if rec.File != "" && m.Env.Device == "" {
			fillTestEnv(&m.Env, filepath.Join(opts.Out, rec.File))
		}
	}
	prog.finish()
	if err == nil {
		m.Finished = now().UTC().Format(time.RFC3339)
	}
	if werr := writeManifest(filepath.Join(opts.Out, ManifestName), m); werr != nil && err == nil {
		err = werr
	}
	return m, err
}

// runOne runs one step and checks its document.
func runOne(ctx context.Context, s *Suite, sd Side, t Test, rec RunRecord, out string) (RunRecord, error) {
	doc := os.DevNull
	if rec.File != "" {
		doc = filepath.Join(out, rec.File)
	}
	args := append(append([]string{}, t.Args...), "--json", doc)
	rctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, sd.Binary, args...)
	// stdout and stderr are copied by two goroutines into one log.
	var output lockedBuffer
	var stderr bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = io.MultiWriter(&output, &stderr)
	ownGroup(cmd)
	start := time.Now()
	err := cmd.Run()
	rec.Seconds = time.Since(start).Seconds()
	if werr := os.WriteFile(filepath.Join(out, rec.Log), output.bytes(), 0o644); werr != nil && err == nil {
		err = werr
	}
	fail := func(code int, detail string) (RunRecord, error) {
		rec.ExitCode = code
		return rec, &RunError{Run: rec, Code: code, Detail: detail, Log: filepath.Join(out, rec.Log)}
	}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return rec, ctx.Err()
	case rctx.Err() != nil:
		return fail(-1, fmt.Sprintf("did not finish within the timeout, %s (raise it with a \"timeout\" line)", s.Timeout))
	case errors.As(err, &ee):
		return fail(ee.ExitCode(), fmt.Sprintf("%s exited with code %d: %s", sd.Binary, ee.ExitCode(), lastLine(stderr.String())))
	case err != nil:
		return fail(-1, fmt.Sprintf("start %s: %v", sd.Binary, err))
	}
	if rec.File != "" {
		d, err := reports.ReadFile(doc)
		if err != nil {
			return fail(0, fmt.Sprintf("its document: %v", err))
		}
		if len(d.Results) == 0 {
			return fail(0, "its document has no results")
		}
	}
	return rec, nil
}

// lastLine is the last nonblank line of s, or a note that there is none.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return "no message"
}

// version asks a binary for its version; a failure is recorded, not
// fatal: the first run will say what is wrong with the binary.
func version(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}

// fillTestEnv copies what the machine's environment cannot know, the
// provider, fabric and device, from the first document.
func fillTestEnv(env *reports.Env, doc string) {
	d, err := reports.ReadFile(doc)
	if err != nil {
		return
	}
	env.Provider, env.Fabric, env.Device, env.MTU, env.Clock = d.Env.Provider, d.Env.Fabric, d.Env.Device, d.Env.MTU, d.Env.Clock
}

// emptyDir creates dir, or accepts it when it exists and is empty, so
// that two suites' documents never mix.
func emptyDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("no output folder: name one with --out")
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return fmt.Errorf("output folder: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("output folder %s is not empty: remove it or name another, so that two suites' documents do not mix", dir)
	}
	return nil
}

func writeManifest(path string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadManifest reads a suite's manifest.
func ReadManifest(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m.Schema != Schema {
		return nil, fmt.Errorf("%s: schema %q, want %q", path, m.Schema, Schema)
	}
	return &m, nil
}

// lockedBuffer is a buffer two goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Bytes()
}
