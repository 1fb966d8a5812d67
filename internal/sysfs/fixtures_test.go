package sysfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/internal/sysfs/internal/dumptree"
)

// fixtureSources lists, per machine, the dumps its tree is generated from
// (the same lists as the go:generate lines in gen.go).
var fixtureSources = map[string][]string{
	"rxe":      {"testdata/src/rxe/sysfs-dump.txt", "testdata/src/rxe/extra.txt"},
	"ib":       {"testdata/src/ib.txt"},
	"roce":     {"testdata/src/roce.txt"},
	"portdown": {"testdata/src/portdown.txt"},
	"missing":  {"testdata/src/missing.txt"},
}

// snapshot describes a tree without following symlinks: files map to
// "file:" + contents, links to "link:" + target, directories to "dir".
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link:" + target
		case d.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file:" + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFixturesMatchSources regenerates every fixture tree from its dumps
// and compares it with the committed tree, so the trees stay exactly what
// the captures say. Run `go generate ./internal/sysfs` after editing a
// source.
func TestFixturesMatchSources(t *testing.T) {
	ents, err := os.ReadDir("testdata/sys")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, ok := fixtureSources[e.Name()]; !ok {
			t.Errorf("testdata/sys/%s has no entry in fixtureSources", e.Name())
		}
	}
	for machine, srcs := range fixtureSources {
		t.Run(machine, func(t *testing.T) {
			entries, err := dumptree.ParseFiles(srcs...)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), machine)
			if err := dumptree.Write(dir, entries); err != nil {
				t.Fatal(err)
			}
			want := snapshot(t, dir)
			got := snapshot(t, filepath.Join("testdata", "sys", machine))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("testdata/sys/%s differs from its sources; run go generate (-generated +committed):\n%s", machine, diff)
			}
		})
	}
}

// TestRXEFixtureIsTheCapture checks the rxe tree against the capture
// line by line: every dumped file has exactly the dumped contents when
// read through the class symlink, as on the captured machine.
func TestRXEFixtureIsTheCapture(t *testing.T) {
	f, err := os.Open("testdata/src/rxe/sysfs-dump.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := dumptree.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, e := range entries {
		p := filepath.Join("testdata", "sys", "rxe", filepath.FromSlash(e.Path))
		if e.IsLink() {
			target, err := os.Readlink(p)
			if err != nil {
				t.Errorf("%s: %v", e.Path, err)
				continue
			}
			if target != e.Link {
				t.Errorf("%s -> %s, want %s", e.Path, target, e.Link)
			}
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", e.Path, err)
			continue
		}
		if string(b) != e.Value {
			t.Errorf("%s = %q, want %q", e.Path, b, e.Value)
		}
		files++
	}
	if files < 3000 {
		t.Errorf("only %d files checked; the capture has more than 3000", files)
	}
	if fi, err := os.Lstat("testdata/sys/rxe/class/infiniband/rxe0"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("class/infiniband/rxe0 is not a symlink: %v", err)
	}
}

// TestFixturePathsAreModuleSafe keeps fixture file names within what Go
// module zips accept (no ':' and friends), so the module stays
// downloadable.
func TestFixturePathsAreModuleSafe(t *testing.T) {
	const punct = "!#$%&()+,-.=@[]^_{}~"
	err := filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, r := range d.Name() {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(punct, r)
			if !ok {
				t.Errorf("%s: character %q is not allowed in Go module file names", p, r)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
