package rdiagcmd

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// docExample is one "$ rdiag ..." block of docs/rdiag.md.
type docExample struct {
	args   []string
	output string
	code   int // -1 when the block does not show it
	cut    bool
}

// docExamples returns the console blocks of the manual.
func docExamples(t *testing.T, doc string) []docExample {
	t.Helper()
	var out []docExample
	for _, block := range strings.Split(doc, "```console\n")[1:] {
		body, _, ok := strings.Cut(block, "```")
		if !ok {
			t.Fatalf("unterminated console block: %.60q", block)
		}
		lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
		cmd, ok := strings.CutPrefix(lines[0], "$ rdiag ")
		if !ok {
			continue
		}
		ex := docExample{args: strings.Fields(cmd), code: -1}
		var outLines []string
		for i := 1; i < len(lines); i++ {
			if lines[i] == "$ echo $?" && i+1 < len(lines) {
				ex.code, _ = strconv.Atoi(lines[i+1])
				break
			}
			if lines[i] == "..." {
				ex.cut = true
			}
			outLines = append(outLines, lines[i])
		}
		ex.output = strings.Join(outLines, "\n") + "\n"
		out = append(out, ex)
	}
	return out
}

// TestDocExamples re-runs the examples of docs/rdiag.md that do not
// depend on this machine (fixture trees and captures, no built-in engine
// devices in the output), so the manual's output stays real.
func TestDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/rdiag.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := docExamples(t, string(doc))
	t.Chdir("../../..") // the examples' paths are relative to the repository
	checked := 0
	for _, ex := range examples {
		machine := strings.Contains(ex.output, "shm0") || !strings.Contains(strings.Join(ex.args, " "), "testdata/") ||
			(len(ex.args) > 0 && ex.args[len(ex.args)-1] == "check") || slicesContains(ex.args, "check")
		if machine {
			continue
		}
		checked++
		t.Run(strings.Join(ex.args, " "), func(t *testing.T) {
			r := run(t, fakeEnv(), ex.args...)
			got := r.stdout + r.stderr
			if ex.cut {
				n := strings.Count(ex.output, "\n") - 1
				got = strings.Join(strings.SplitAfter(got, "\n")[:n], "") + "...\n"
			}
			if diff := cmp.Diff(ex.output, got); diff != "" {
				t.Errorf("docs/rdiag.md example differs from rdiag's output (-doc +rdiag):\n%s", diff)
			}
			if ex.code >= 0 && r.code != ex.code {
				t.Errorf("exit %d, the manual says %d", r.code, ex.code)
			}
		})
	}
	if checked < 5 {
		t.Errorf("only %d examples re-run; the manual should show the fixtures", checked)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestDocVMExamples checks that the rxe0 examples of docs/rdiag.md are the
// rxe VM's capture, which devinfotest compares with ibv_devinfo and rdma.
func TestDocVMExamples(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/rdiag.md")
	if err != nil {
		t.Fatal(err)
	}
	capture := func(name string) string { return readFile(t, vmCapture+name+".txt") }
	for name, block := range map[string]string{
		"info -v":        "```console\n$ rdiag info -v rxe0\n" + capture("rdiag-info-v") + "```\n",
		"ports and gids": "```console\n$ rdiag ports\n" + capture("rdiag-ports") + "$ rdiag gids\n" + capture("rdiag-gids") + "```\n",
	} {
		if !strings.Contains(string(doc), block) {
			t.Errorf("docs/rdiag.md lacks the VM capture of rdiag %s:\n%s", name, block)
		}
	}
}
