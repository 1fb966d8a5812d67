// Package dumptree turns a text dump of a sysfs tree into a real directory
// tree, so that sysfs fixtures can be regenerated from the captures they
// were made from.
//
// The dump format is the one used by the captures in
// /work/shared/reference/rxe/sysfs-dump.txt:
//
//	/sys/class/infiniband/rxe0/node_type=1: CA|
//	/sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/2=
//	/sys/class/infiniband/rxe0 -> ../../devices/virtual/infiniband/rxe0
//
// A line "PATH=VALUE" is a regular file; every '|' in VALUE stands for a
// newline, so a value without a trailing '|' is a file without a trailing
// newline (the capture shows unreadable attributes this way). A line
// "PATH -> TARGET" is a symbolic link. Blank lines and lines starting with
// '#' are comments (the captures have none; hand-written fixture sources
// use them).
//
// Real sysfs reaches device directories through symlinks, and a dump lists
// files under the link's path (class/infiniband/rxe0/...). Write therefore
// resolves every path through the links in the same dump, so the files
// land in the link's target directory and the link itself is created as a
// symlink, exactly as on the machine the dump came from.
package dumptree

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Entry is one line of a dump: a file with its contents, or a symlink.
type Entry struct {
	// Path is the slash-separated path relative to the sysfs mount point,
	// for example "class/infiniband/rxe0/node_type".
	Path string
	// Value is the file's contents, with the dump's '|' turned back into
	// newlines. Empty for symlinks.
	Value string
	// Link is the symlink target as written in the dump; empty for files.
	Link string
}

// IsLink reports whether e is a symlink.
func (e Entry) IsLink() bool { return e.Link != "" }

// Prefix is the mount point that dump paths start with.
const Prefix = "/sys/"

// Parse reads a dump. Paths must start with Prefix, which is removed.
func Parse(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var e Entry
		var p string
		if i := strings.IndexByte(text, '='); i >= 0 {
			p = text[:i]
			e.Value = strings.ReplaceAll(text[i+1:], "|", "\n")
		} else if i := strings.Index(text, " -> "); i >= 0 {
			p = text[:i]
			e.Link = text[i+len(" -> "):]
			if e.Link == "" {
				return nil, fmt.Errorf("dumptree: parse line %d: empty symlink target", line)
			}
		} else {
			return nil, fmt.Errorf("dumptree: parse line %d: neither PATH=VALUE nor PATH -> TARGET", line)
		}
		if !strings.HasPrefix(p, Prefix) {
			return nil, fmt.Errorf("dumptree: parse line %d: path %q does not start with %s", line, p, Prefix)
		}
		rel := strings.TrimPrefix(p, Prefix)
		if rel == "" || path.Clean(rel) != rel || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("dumptree: parse line %d: bad path %q", line, p)
		}
		e.Path = rel
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dumptree: read: %w", err)
	}
	return out, nil
}

// ParseFiles parses and concatenates several dumps, in order.
func ParseFiles(names ...string) ([]Entry, error) {
	var all []Entry
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("dumptree: %w", err)
		}
		es, err := Parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		all = append(all, es...)
	}
	return all, nil
}

// resolver maps dump paths to their location on disk, following the
// dump's own symlinks for every proper prefix of a path.
type resolver struct {
	links map[string]string // where a link lives -> its resolved target (both relative to root)
}

func newResolver(entries []Entry) (*resolver, error) {
	r := &resolver{links: map[string]string{}}
	// Resolve shorter links first so that a link inside a linked directory
	// is itself placed correctly.
	var links []Entry
	for _, e := range entries {
		if e.IsLink() {
			links = append(links, e)
		}
	}
	sort.SliceStable(links, func(i, j int) bool {
		return strings.Count(links[i].Path, "/") < strings.Count(links[j].Path, "/")
	})
	for _, l := range links {
		where := r.place(l.Path)
		if _, dup := r.links[where]; dup {
			return nil, fmt.Errorf("dumptree: duplicate symlink %s", l.Path)
		}
		target := path.Clean(path.Join(path.Dir(where), l.Link))
		if target == ".." || strings.HasPrefix(target, "../") {
			return nil, fmt.Errorf("dumptree: symlink %s escapes the tree", l.Path)
		}
		r.links[where] = target
	}
	return r, nil
}

// resolveDir resolves every component of dir through known links.
func (r *resolver) resolveDir(dir string) string {
	if dir == "." || dir == "" {
		return "."
	}
	out := "."
	for _, part := range strings.Split(dir, "/") {
		next := path.Join(out, part)
		if t, ok := r.links[next]; ok {
			next = t
		}
		out = next
	}
	return out
}

// place returns where p lives on disk: its parent directory resolved
// through links, plus its own base name.
func (r *resolver) place(p string) string {
	return path.Join(r.resolveDir(path.Dir(p)), path.Base(p))
}

// Write creates the tree for entries under dir, which must not exist yet
// or be empty. Files get mode 0644 and directories 0755, like git stores
// them.
func Write(dir string, entries []Entry) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("dumptree: write %s: directory is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("dumptree: write %s: %w", dir, err)
	}
	r, err := newResolver(entries)
	if err != nil {
		return err
	}
	seen := map[string]string{}
	for _, e := range entries {
		where := r.place(e.Path)
		if prev, dup := seen[where]; dup {
			return fmt.Errorf("dumptree: %s and %s land on the same path %s", prev, e.Path, where)
		}
		seen[where] = e.Path
		full := filepath.Join(dir, filepath.FromSlash(where))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("dumptree: write %s: %w", e.Path, err)
		}
		if e.IsLink() {
			if err := os.Symlink(e.Link, full); err != nil {
				return fmt.Errorf("dumptree: symlink %s: %w", e.Path, err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(e.Value), 0o644); err != nil {
			return fmt.Errorf("dumptree: write %s: %w", e.Path, err)
		}
	}
	return nil
}
