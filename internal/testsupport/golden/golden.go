// Package golden compares what a test produced with a golden file, and
// rewrites the file when the test runs with -update. It is the
// repository's one golden-file helper, for tests only; the flag is
// registered here, so a test package that imports it must not define its
// own -update.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files with what the tests produce")

// Updating reports whether the tests run with -update.
func Updating() bool { return *update }

// Check compares got with the golden file at path (relative to the test's
// package directory, e.g. testdata/x.json). Under -update it writes got
// there first, creating the directories. A missing file, or one that
// differs, fails the test with a diff and the command that rewrites it.
func Check(tb testing.TB, path string, got []byte) {
	tb.Helper()
	want, ok := Want(tb, path, got)
	if !ok {
		return
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		tb.Errorf("%s differs (-want +got); go test -update rewrites it if the change is intended\n%s", path, diff)
	}
}

// Want returns the golden file at path for a test that compares it with
// got in its own way (after normalising parts that may differ, say);
// under -update it writes got there first, creating the directories. A
// missing file fails the test with the command that writes it, and ok is
// false.
func Want(tb testing.TB, path string, got []byte) (want []byte, ok bool) {
	tb.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
			return nil, false
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
			return nil, false
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (go test -update writes it)", err)
		return nil, false
	}
	return want, true
}
