package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
)

// tinySuite replaces docs/ci.suite in the recipe's runs: the same shape
// (latency and bandwidth, enough runs for the runs basis), seconds long.
const tinySuite = `repetitions 4
timeout 2m
test lat write-lat --loopback -s 8 -n 300
test bw  write-bw --loopback -s 4096 -n 500
`

// TestCIRecipe runs the commands of docs/ci.md's GitHub Actions and
// GitLab CI jobs, as written, in a git repository holding this tree (the
// base and the change the same commit), with a tiny suite: the jobs must
// run, pass unless their report shows a regression (a false alarm, whose
// rate internal/calibrate bounds), and leave the Markdown report, the
// JUnit file, the comparison document and the runs. Then the jobs'
// compare step runs again on runs with a 60% regression: it must fail
// with exit code 3, and draw and link the plots.
func TestCIRecipe(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the recipe needs git: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "docs", "ci.md"))
	if err != nil {
		t.Fatal(err)
	}
	github := githubRuns(t, yamlBlock(t, string(md), "name: rperf regression"))
	gitlab := gitlabScript(t, yamlBlock(t, string(md), "rperf-regression:\n  stage: test"))
	if len(github) != 4 || len(gitlab) != 5 {
		t.Fatalf("found %d GitHub run steps and %d GitLab script lines; want 4 and 5 (docs/ci.md changed? update this test)", len(github), len(gitlab))
	}

	for _, job := range []struct {
		name  string
		steps []string
	}{{"github", github}, {"gitlab", gitlab}} {
		t.Run(job.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			sha := repository(t, root, src)
			summary := filepath.Join(dir, "summary.md")
			env := append(os.Environ(),
				"GITHUB_WORKSPACE="+src, "GITHUB_STEP_SUMMARY="+summary,
				"CI_PROJECT_DIR="+src, "CI_MERGE_REQUEST_DIFF_BASE_SHA="+sha,
				"GOFLAGS=-trimpath") // one build cache for both checkouts
			for i, step := range job.steps {
				step = strings.ReplaceAll(step, "${{ github.event.pull_request.base.sha }}", sha)
				out, code := shell(t, src, env, step)
				if code == 0 {
					continue
				}
				// The job fails exactly when the report shows a
				// regression. Base and change are one commit here, so
				// that is a false alarm, which the calibration bounds at
				// 5% of reports (about 1% of this suite's, measured); the
				// job's exit code must still agree with its report.
				var rep struct {
					Summary struct{ Failures int } `json:"summary"`
				}
				b, err := os.ReadFile(filepath.Join(src, "results", "compare.json"))
				if code != 3 || !strings.Contains(step, " compare ") || err != nil || json.Unmarshal(b, &rep) != nil || rep.Summary.Failures == 0 {
					t.Fatalf("step %d exited %d:\n%s\n%s", i+1, code, step, out)
				}
				t.Logf("a false alarm on no change (the report shows %d failures):\n%s", rep.Summary.Failures, out)
			}
			for _, f := range []string{"compare.md", "compare.xml", "compare.json", "suite.json", "baseline/lat-1.json", "candidate/bw-4.json"} {
				if _, err := os.Stat(filepath.Join(src, "results", f)); err != nil {
					t.Errorf("artifact %s: %v", f, err)
				}
			}
			if job.name == "github" {
				if b, err := os.ReadFile(summary); err != nil || !bytes.HasPrefix(b, []byte("### rperf compare: ")) {
					t.Errorf("job summary: %v\n%s", err, b)
				}
			}

			// The same compare step on a regression: the candidate's
			// runs 60% slower.
			compareStep := job.steps[len(job.steps)-1]
			if job.name == "github" {
				compareStep = job.steps[2]
			}
			regression(t, filepath.Join(src, "results"))
			for _, f := range []string{"compare.md", "compare.xml", "compare.json"} {
				os.Remove(filepath.Join(src, "results", f))
			}
			out, code := shell(t, src, env, compareStep)
			if code != 3 || !strings.Contains(out, "regressed: write_lat 8B") {
				t.Fatalf("compare on a regression: exit %d, want 3:\n%s", code, out)
			}
			pngs, _ := filepath.Glob(filepath.Join(src, "results", "plots", "write_lat-8B-*.png"))
			report, _ := os.ReadFile(filepath.Join(src, "results", "compare.md"))
			if len(pngs) == 0 || !strings.Contains(string(report), "([plot](plots/write_lat-8B-p50.png))") {
				t.Errorf("plots %v; report:\n%s", pngs, report)
			}
		})
	}
}

// repository makes src a git repository of the tree at root (what git
// tracks and what it would, uncommitted changes included), with the tiny
// suite as docs/ci.suite, committed; it returns the commit.
func repository(t *testing.T, root, src string) string {
	t.Helper()
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = root
	list, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		from, to := filepath.Join(root, f), filepath.Join(src, f)
		st, err := os.Lstat(from)
		if os.IsNotExist(err) {
			continue // deleted, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if st.Mode()&os.ModeSymlink != 0 { // sysfs fixtures link as sysfs does
			target, err := os.Readlink(from)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "docs", "ci.suite"), []byte(tinySuite), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"-c", "user.name=rperf", "-c", "user.email=rperf@localhost", "commit", "-q", "-m", "the tree under test"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	rev := exec.Command("git", "rev-parse", "HEAD")
	rev.Dir = src
	sha, err := rev.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(sha))
}

// shell runs a step as the CI systems do, bash with -e, within ten
// minutes, and returns its combined output and exit code.
func shell(t *testing.T, dir string, env []string, step string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", step)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("step did not finish within ten minutes:\n%s\n%s", step, out)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("step %q: %v", step, err)
	}
	return string(out), 0
}

// yamlBlock returns the ```yaml block of md that contains marker.
func yamlBlock(t *testing.T, md, marker string) string {
	t.Helper()
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(md, -1) {
		if strings.Contains(m[1], marker) {
			return m[1]
		}
	}
	t.Fatalf("docs/ci.md has no yaml block with %q", marker)
	return ""
}

// githubRuns returns the run: commands of a workflow's steps (a one-line
// run, or a block after "run: |"), skipping steps the job runs only to
// report (if: always()); the report step's command is returned last.
func githubRuns(t *testing.T, y string) []string {
	t.Helper()
	var runs []string
	lines := strings.Split(y, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		indent := len(l) - len(strings.TrimLeft(l, " "))
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "run:")
		if !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		if rest != "|" {
			runs = append(runs, rest)
			continue
		}
		var block []string
		for i+1 < len(lines) {
			next := lines[i+1]
			if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) <= indent {
				break
			}
			block = append(block, strings.TrimSpace(next))
			i++
		}
		runs = append(runs, strings.TrimSpace(strings.Join(block, "\n")))
	}
	return runs
}

// gitlabScript returns the lines of a job's script: list.
func gitlabScript(t *testing.T, y string) []string {
	t.Helper()
	var out []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(y))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.TrimSpace(l) == "script:":
			in = true
		case in && strings.HasPrefix(strings.TrimSpace(l), "- "):
			out = append(out, strings.TrimPrefix(strings.TrimSpace(l), "- "))
		case in && strings.TrimSpace(l) != "":
			in = false
		}
	}
	return out
}

// regression replaces the suite's documents with four runs per side of
// write_lat 8B whose samples are drawn around 1 us in the baseline and
// 1.6 us in the candidate: a regression whatever the machine's load did
// to the real runs (the A/A part ran on those), so that the check of the
// compare step's exit code and plots cannot depend on it.
func regression(t *testing.T, results string) {
	t.Helper()
	for _, side := range []struct {
		dir    string
		center float64
	}{{"baseline", 1000}, {"candidate", 1600}} {
		old, _ := filepath.Glob(filepath.Join(results, side.dir, "*.json"))
		for _, f := range old {
			os.Remove(f)
		}
		for i := range 4 {
			r := rand.New(rand.NewPCG(uint64(i), uint64(side.center)))
			rec, err := reports.NewRecorder(reports.RecorderOptions{Expected: 2000})
			if err != nil {
				t.Fatal(err)
			}
			for range 2000 {
				rec.Record(int64(2 * side.center * (0.95 + 0.1*r.Float64()))) // round trips
			}
			res, err := reports.NewLatencyResult(reports.LatencySpec{Test: "write_lat", Bytes: 8, Iterations: 2001, Mode: reports.ModeIterations, RTTFactor: 2}, rec)
			if err != nil {
				t.Fatal(err)
			}
			d := reports.NewDocument(reports.Env{Device: "shm0"})
			d.Results = []reports.Result{res}
			if err := d.WriteFile(filepath.Join(results, side.dir, fmt.Sprintf("lat-%d.json", i+1))); err != nil {
				t.Fatal(err)
			}
		}
	}
}
