package rperfcmd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/cli"
)

// TestCreateHGRM checks that --hgrm's files are created before the test
// runs, as --json's is: a bad path is a usage error naming the flag and the
// fix, and files the run did not write are removed.
func TestCreateHGRM(t *testing.T) {
	dir := t.TempDir()
	o, err := parse(t, "write-lat", "-a", "--max-size", "4", "--hgrm", filepath.Join(dir, "lat.hgrm"))
	if err != nil {
		t.Fatal(err)
	}
	p := &prepared{sizes: []int{2, 4}}
	if err := p.createHGRM(o); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lat-2.hgrm", "lat-4.hgrm"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("not created before the run: %v", err)
		}
	}
	p.close() // the run failed: nothing was written
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("unwritten .hgrm files left: %v", left)
	}

	o, err = parse(t, "write-lat", "--hgrm", "/nonexistent/dir/lat.hgrm")
	if err != nil {
		t.Fatal(err)
	}
	p = &prepared{sizes: []int{2}}
	err = p.createHGRM(o)
	p.close()
	var ue *cli.UsageError
	want := "--hgrm /nonexistent/dir/lat.hgrm: cannot create the file (no such file or directory); give a writable path"
	if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want a usage error containing %q", err, want)
	}

	// --hgrm - and no --hgrm create nothing.
	for _, args := range [][]string{{"--hgrm", "-"}, nil} {
		o, _ = parse(t, "write-lat", args...)
		p = &prepared{sizes: []int{2}}
		if err := p.createHGRM(o); err != nil || len(p.hgrm) != 0 {
			t.Errorf("%v: %v, files %v", args, err, p.hgrm)
		}
	}
}
