package suitecmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/cli/clitest"
	"github.com/rperf/rperf/reports"
)

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want Options
		err  string
	}{
		{name: "one side", args: []string{"ci.suite", "--out", "r"}, want: Options{File: "ci.suite", Out: "r"}},
		{name: "two sides", args: []string{"ci.suite", "-o", "r", "--baseline", "./a", "--candidate", "./b", "--repetitions", "3", "-q"},
			want: Options{File: "ci.suite", Out: "r", Baseline: "./a", Candidate: "./b", Repetitions: 3, Quiet: true}},
		{name: "no file", args: []string{"--out", "r"}, err: "suite needs one suite file (got 0 arguments)"},
		{name: "no out", args: []string{"ci.suite"}, err: "--out is required"},
		{name: "one binary", args: []string{"ci.suite", "--out", "r", "--baseline", "./a"}, err: "--baseline and --candidate go together"},
		{name: "repetitions", args: []string{"ci.suite", "--out", "r", "--repetitions", "-1"}, err: "--repetitions -1: want 1 to 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *Options
			cmd := New(func(o *Options) error { got = o; return nil })
			cmd.SetArgs(tc.args)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err := cmd.Execute()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || cli.ExitCode(err) != cli.ExitUsage {
					t.Fatalf("error %v (exit %d), want %q, exit %d", err, cli.ExitCode(err), tc.err, cli.ExitUsage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeRperf writes a shell script that acts as rperf: --version, and a
// copy of a real document to the path after --json; it exits with code
// 4 for a test on device "none" and 2 for flag "-Z".
func fakeRperf(t *testing.T, dir string) string {
	t.Helper()
	d := reports.NewDocument(reports.Env{Device: "shm0"})
	d.Results = []reports.Result{{Test: "write_bw", Bytes: 8, Iterations: 1, Bandwidth: &reports.Bandwidth{BWAvgGbps: 1, MsgRateMpps: 1}}}
	doc := filepath.Join(dir, "doc.json")
	if err := d.WriteFile(doc); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
[ "$1" = --version ] && { echo "rperf version fake"; exit 0; }
for a in "$@"; do
  case "$a" in
    none) echo "rperf: no such device none" >&2; exit 4 ;;
    -Z) echo "rperf: unknown shorthand flag: 'Z' in -Z" >&2; exit 2 ;;
  esac
done
while [ $# -gt 0 ]; do
  [ "$1" = --json ] && cp "` + doc + `" "$2"
  shift
done
`
	bin := filepath.Join(dir, "fake-rperf")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	bin := fakeRperf(t, dir)
	p := func(name string) string { return filepath.Join(dir, name) }
	write := func(name, text string) string {
		if err := os.WriteFile(p(name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p(name)
	}
	good := write("good.suite", "repetitions 3\ntest bw write-bw -s 8\n")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "two sides", args: []string{good, "--out", p("r1"), "--baseline", bin, "--candidate", bin, "--repetitions", "2"}, code: 0,
			stdout: "rperf suite: 4 documents of 1 test in " + p("r1") + " (manifest " + p("r1/suite.json") + ")\ncompare them: rperf compare --baseline '" + p("r1/baseline/*.json") + "' --candidate '" + p("r1/candidate/*.json") + "'\n",
			stderr: "rperf suite: run 4 of 4: baseline bw 2/2: "},
		{name: "quiet", args: []string{good, "--out", p("r2"), "--baseline", bin, "--candidate", bin, "-q"}, code: 0,
			stdout: "rperf suite: 6 documents of 1 test in "},
		{name: "no such suite file", args: []string{p("nope.suite"), "--out", p("r3")}, code: cli.ExitUsage,
			stderr: "rperf: suite file: open " + p("nope.suite") + ": no such file or directory"},
		{name: "wrong suite file", args: []string{write("bad.suite", "test bw\n"), "--out", p("r4")}, code: cli.ExitUsage,
			stderr: "rperf: " + p("bad.suite") + ":1: test needs a name and an rperf command line"},
		{name: "no such binary", args: []string{good, "--out", p("r5"), "--baseline", p("nope"), "--candidate", bin}, code: cli.ExitUsage,
			stderr: "rperf: binary " + p("nope") + ": not an executable file"},
		{name: "a test's device is missing", args: []string{write("dev.suite", "test d write-lat -d none\n"), "--out", p("r6"), "--baseline", bin, "--candidate", bin}, code: cli.ExitEnvironment,
			stderr: "rperf: baseline test d, repetition 1: " + bin + " exited with code 4: rperf: no such device none; its output is in " + p("r6/baseline/d-1.log")},
		{name: "a test's flags are wrong", args: []string{write("flag.suite", "\ntest f write-lat -Z\n"), "--out", p("r7"), "--baseline", bin, "--candidate", bin}, code: cli.ExitUsage,
			stderr: "(the test line's flags, " + p("flag.suite") + ":2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := clitest.Run("rperf", New(nil), tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errs)
			}
			if !strings.Contains(out, tc.stdout) {
				t.Errorf("stdout %q lacks %q", out, tc.stdout)
			}
			if !strings.Contains(errs, tc.stderr) {
				t.Errorf("stderr %q lacks %q", errs, tc.stderr)
			}
		})
	}
}
