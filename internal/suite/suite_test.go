package suite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/reports"
)

// The test binary doubles as a fake rperf when fakeEnv is set: it writes
// a one-record document to the path after --json, prints its arguments,
// and obeys "fail" (exit 3 with a message) and "hang" (sleep).
const fakeEnv = "RPERF_SUITE_FAKE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "" {
		os.Exit(m.Run())
	}
	args := os.Args[1:]
	if slices.Contains(args, "--version") {
		fmt.Println("rperf version fake")
		os.Exit(0)
	}
	fmt.Println("fake rperf", strings.Join(args, " "))
	if slices.Contains(args, "hang") {
		time.Sleep(time.Minute)
	}
	if slices.Contains(args, "fail") {
		fmt.Fprintln(os.Stderr, "rperf: no such device mlx5_9; list them with rdiag")
		os.Exit(4)
	}
	i := slices.Index(args, "--json")
	d := reports.NewDocument(reports.Env{Provider: "soft", Fabric: "shm", Device: "shm0"})
	d.Results = []reports.Result{{Test: "write_bw", Bytes: 8, Iterations: 1, Bandwidth: &reports.Bandwidth{BWAvgGbps: 1, MsgRateMpps: 1}}}
	if err := d.WriteFile(args[i+1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// fake returns a side whose binary is this test binary as a fake rperf.
func fake(t *testing.T, name string) Side {
	t.Helper()
	t.Setenv(fakeEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Side{Name: name, Binary: exe}
}

func TestParse(t *testing.T) {
	good := `# CI suite
repetitions 4   # per side
warmup 1
timeout 90s
test lat  write-lat --loopback -a --max-size 4096 -n 2000
test bw   rperf write-bw --loopback -s 65536 --title 'a b' "c \"d\""
`
	s, err := Parse(strings.NewReader(good), "ci.suite")
	if err != nil {
		t.Fatal(err)
	}
	want := &Suite{Name: "ci.suite", Repetitions: 4, Warmup: 1, Timeout: 90 * time.Second, Tests: []Test{
		{Name: "lat", Args: []string{"write-lat", "--loopback", "-a", "--max-size", "4096", "-n", "2000"}, Line: 5},
		{Name: "bw", Args: []string{"write-bw", "--loopback", "-s", "65536", "--title", "a b", `c "d"`}, Line: 6},
	}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if s, err := Parse(strings.NewReader("test a send-lat\n"), "x"); err != nil || s.Repetitions != DefaultRepetitions || s.Timeout != DefaultTimeout || s.Warmup != 0 {
		t.Errorf("defaults: %+v, %v", s, err)
	}

	for _, tc := range []struct{ in, err string }{
		{"", "x declares no test"},
		{"repetitions 0\ntest a write-lat", "x:1: repetitions 0: want a whole number from 1 to 1000"},
		{"repetitions\n", "x:1: repetitions takes one number"},
		{"warmup -1\n", "x:1: warmup -1: want a whole number from 0 to 1000"},
		{"timeout soon\n", `x:1: timeout takes one positive duration, e.g. "timeout 5m"`},
		{"\n\ntset a write-lat\n", `x:3: unknown declaration "tset": want repetitions, warmup, timeout or test`},
		{"test a\n", "x:1: test needs a name and an rperf command line"},
		{"test a/b write-lat\n", `x:1: test name "a/b": use letters, digits`},
		{"test a --loopback\n", "x:1: test a: the command line must start with an rperf command"},
		{"test a compare x y\n", "x:1: test a: rperf compare measures nothing"},
		{"test a write-lat --json=r.json\n", "x:1: test a: drop --json: the suite writes each run's --json document itself"},
		{"test a write-lat --hgrm h\n", "x:1: test a: drop --hgrm"},
		{"test a write-lat\ntest a send-lat\n", "x:2: test a is declared twice"},
		{"test a write-lat 'oops\n", "x:1: unterminated single quote"},
		{`test a write-lat "oops` + "\n", "x:1: unterminated double quote"},
	} {
		_, err := Parse(strings.NewReader(tc.in), "x")
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Parse(%q): %v, want %q", tc.in, err, tc.err)
		}
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"a  b\tc", []string{"a", "b", "c"}},
		{"a#b # comment", []string{"a#b"}},
		{`'x y'"z"\ w`, []string{"x yz w"}},
		{`"a\$b\\c\n"`, []string{`a$b\c\n`}},
		{"''", []string{""}},
		{"  # only a comment", nil},
	} {
		got, err := split(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("split(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestPlan: warm-ups first, then each repetition runs every test on both
// sides, the sides' order alternating (ABBA) from one test and one
// repetition to the next.
func TestPlan(t *testing.T) {
	s := &Suite{Repetitions: 2, Warmup: 1, Tests: []Test{{Name: "x"}, {Name: "y"}}}
	var got []string
	for _, st := range plan(s, 2) {
		got = append(got, fmt.Sprintf("%c%s%d", 'A'+st.side, s.Tests[st.test].Name, st.repetition))
	}
	want := []string{"Ax0", "Bx0", "By0", "Ay0", "Bx1", "Ax1", "Ay1", "By1", "Ax2", "Bx2", "By2", "Ay2"}
	if !slices.Equal(got, want) {
		t.Errorf("plan %v, want %v", got, want)
	}
	if n := len(plan(s, 1)); n != 6 {
		t.Errorf("one side: %d runs, want 6", n)
	}
}

func TestRun(t *testing.T) {
	s, err := Parse(strings.NewReader("repetitions 2\nwarmup 1\ntest lat write-lat --loopback\ntest bw write-bw -s 8\n"), "t.suite")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results")
	var prog bytes.Buffer
	env := reports.Env{Host: "vm", CPUGovernor: "none"}
	m, err := Run(context.Background(), s, Options{Out: out, Sides: []Side{fake(t, "baseline"), fake(t, "candidate")}, Env: env, Progress: &prog})
	if err != nil {
		t.Fatal(err)
	}
	for _, side := range []string{"baseline", "candidate"} {
		for _, f := range []string{"lat-1.json", "lat-2.json", "bw-1.json", "bw-2.json", "lat-1.log", "lat-warmup-1.log"} {
			if _, err := os.Stat(filepath.Join(out, side, f)); err != nil {
				t.Error(err)
			}
		}
		if j, _ := filepath.Glob(filepath.Join(out, side, "*.json")); len(j) != 4 {
			t.Errorf("%s: %d documents, want 4 (no warm-up document kept): %v", side, len(j), j)
		}
	}
	log, _ := os.ReadFile(filepath.Join(out, "candidate", "bw-2.log"))
	if want := "fake rperf write-bw -s 8 --json " + filepath.Join(out, "candidate", "bw-2.json"); !strings.Contains(string(log), want) {
		t.Errorf("log %q lacks %q", log, want)
	}
	back, err := ReadManifest(filepath.Join(out, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, back); diff != "" {
		t.Errorf("manifest on disk (-returned +read)\n%s", diff)
	}
	if len(m.Runs) != 12 || m.Finished == "" || m.Sides[0].Version != "rperf version fake" || m.Env.Host != "vm" || m.Env.Device != "shm0" || m.Env.Provider != "soft" {
		t.Errorf("manifest: %d runs, finished %q, sides %+v, env %+v", len(m.Runs), m.Finished, m.Sides, m.Env)
	}
	if r := m.Runs[5]; r.Side != "baseline" || r.Test != "lat" || r.Repetition != 1 || r.File != filepath.Join("baseline", "lat-1.json") {
		t.Errorf("sixth run %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(prog.String()), "\n")
	if len(lines) != 12 || !strings.HasPrefix(lines[11], "rperf suite: run 12 of 12: baseline bw 2/2: ") || !strings.Contains(lines[0], "lat warm-up") {
		t.Errorf("progress:\n%s", prog.String())
	}

	// The folder now holds a suite: a second one must not mix in.
	if _, err := Run(context.Background(), s, Options{Out: out, Sides: []Side{fake(t, "")}}); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Errorf("second suite into the same folder: %v", err)
	}
}

// TestRunFails: a failing run stops the suite with its exit code, its
// last message and where its output is; a hung run is killed at the
// timeout; both leave a manifest of what ran.
func TestRunFails(t *testing.T) {
	for _, tc := range []struct {
		file string
		code int
		want string
	}{
		{"test ok write-lat\ntest dev write-lat -d mlx5_9 fail\n", 4,
			"test dev, repetition 1: %s exited with code 4: rperf: no such device mlx5_9; list them with rdiag; its output is in %s"},
		{"timeout 300ms\ntest slow write-lat hang\n", -1,
			"test slow, repetition 1: did not finish within the timeout, 300ms (raise it with a \"timeout\" line); its output is in %[2]s"},
	} {
		s, err := Parse(strings.NewReader(tc.file), "t")
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		side := fake(t, "")
		start := time.Now()
		m, err := Run(context.Background(), s, Options{Out: out, Sides: []Side{side}})
		var re *RunError
		if !errors.As(err, &re) || re.Code != tc.code {
			t.Fatalf("error %v, want a RunError with code %d", err, tc.code)
		}
		if want := fmt.Sprintf(tc.want, side.Binary, re.Log); err.Error() != want {
			t.Errorf("error %q\nwant  %q", err, want)
		}
		if time.Since(start) > 30*time.Second {
			t.Errorf("took %v", time.Since(start))
		}
		back, rerr := ReadManifest(filepath.Join(out, ManifestName))
		if rerr != nil || back.Finished != "" || len(back.Runs) != len(m.Runs) || back.Runs[len(back.Runs)-1].ExitCode != tc.code {
			t.Errorf("manifest %+v, %v", back, rerr)
		}
	}
}

// TestProgressTerminal: on a terminal one line is redrawn in place, with
// the time left once a run has finished, and a last line says how long
// the whole suite took.
func TestProgressTerminal(t *testing.T) {
	s, err := Parse(strings.NewReader("repetitions 2\ntest a write-lat\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(30 * time.Second); return clock }
	if _, err := Run(context.Background(), s, Options{Out: t.TempDir(), Sides: []Side{fake(t, "")}, Progress: &out, Terminal: true, Now: now}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"\r\033[Krperf suite: run 1 of 2: a 1/2 (0:30 elapsed)",
		"\r\033[Krperf suite: run 2 of 2: a 2/2 (1:00 elapsed, about 1:00 left)",
		"\r\033[Krperf suite: 2 runs in 1:30\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("progress %q lacks %q", got, want)
		}
	}
	if strings.Count(got, "\n") != 1 {
		t.Errorf("progress on a terminal printed %d lines, want 1: %q", strings.Count(got, "\n"), got)
	}
}
