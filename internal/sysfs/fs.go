package sysfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
)

// DefaultMountPoint is where sysfs is mounted.
const DefaultMountPoint = "/sys"

// MaxFileSize is the most a single attribute read returns. sysfs
// attributes are at most one page; anything longer is reported as an
// error rather than truncated.
const MaxFileSize = 4096

// FS reads the RDMA and network classes of a sysfs tree. The zero value
// is not usable; use NewFS, NewDefaultFS or NewFSFrom.
type FS struct {
	fsys fs.FS
}

// NewFS returns an FS rooted at mountPoint, a directory laid out like
// /sys (tests use testdata/sys/<machine>). Symlinks are followed, so real
// sysfs and fixture trees made of plain directories read the same.
func NewFS(mountPoint string) (FS, error) {
	fi, err := os.Stat(mountPoint)
	if err != nil {
		return FS{}, fmt.Errorf("sysfs: new fs: %w", err)
	}
	if !fi.IsDir() {
		return FS{}, fmt.Errorf("sysfs: new fs: %s is not a directory", mountPoint)
	}
	return FS{fsys: os.DirFS(mountPoint)}, nil
}

// NewDefaultFS returns an FS rooted at DefaultMountPoint.
func NewDefaultFS() (FS, error) { return NewFS(DefaultMountPoint) }

// NewFSFrom returns an FS that reads fsys, whose root plays the role of
// /sys (for example an fstest.MapFS with "class/infiniband/..." keys).
func NewFSFrom(fsys fs.FS) FS { return FS{fsys: fsys} }

// FileError is a sysfs file that exists but could not be read or parsed.
// It degrades the one field the file feeds; readers keep going.
type FileError struct {
	Op   string // "read", "list" or "parse"
	Path string // relative to the mount point, e.g. "class/infiniband/rxe0/ports/1/rate"
	Err  error
}

// Error returns "sysfs: OP PATH: ERR".
func (e *FileError) Error() string {
	return "sysfs: " + e.Op + " " + e.Path + ": " + e.Err.Error()
}

// Unwrap returns the underlying error, so errors.Is(err, fs.ErrNotExist)
// and errors.Is(err, syscall.EISDIR) work.
func (e *FileError) Unwrap() error { return e.Err }

// cause strips *fs.PathError, whose path may be absolute; FileError
// carries the relative path instead.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readRaw reads one attribute with a single bounded read. sysfs computes
// an attribute's value on the first read(2) of the file and serves it
// whole; some drivers misbehave on repeated reads (EAGAIN forever, or
// the same bytes again), so there is no read loop. A trailing newline is
// removed.
func (f FS) readRaw(name string) (string, error) {
	file, err := f.fsys.Open(name)
	if err != nil {
		return "", cause(err)
	}
	defer file.Close()
	buf := make([]byte, MaxFileSize+1)
	n, err := file.Read(buf)
	if err != nil && !errors.Is(err, io.EOF) && n == 0 {
		return "", cause(err)
	}
	if n > MaxFileSize {
		return "", fmt.Errorf("longer than %d bytes", MaxFileSize)
	}
	return strings.TrimSuffix(string(buf[:n]), "\n"), nil
}

// list returns the names in a directory, in name order, without looking
// at their types: on real sysfs class entries are symlinks, in fixtures
// they may be directories, and both must be listed.
func (f FS) list(dir string) ([]string, error) {
	ents, err := fs.ReadDir(f.fsys, dir)
	if err != nil {
		return nil, cause(err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

// isDir reports whether name resolves to a directory.
func (f FS) isDir(name string) (bool, error) {
	fi, err := fs.Stat(f.fsys, name)
	if err != nil {
		return false, cause(err)
	}
	return fi.IsDir(), nil
}

// collector reads optional attributes below a directory and gathers the
// errors of files that exist but could not be read or parsed. A missing
// file is not an error: it leaves the field nil.
type collector struct {
	fs   FS
	dir  string
	errs []error
}

func (c *collector) path(rel string) string { return path.Join(c.dir, rel) }

func (c *collector) fail(op, rel string, err error) {
	c.errs = append(c.errs, &FileError{Op: op, Path: c.path(rel), Err: err})
}

// read returns the attribute's value, or ok=false when it is missing or
// unreadable (the latter recorded).
func (c *collector) read(rel string) (string, bool) {
	v, err := c.fs.readRaw(c.path(rel))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.fail("read", rel, err)
		}
		return "", false
	}
	return v, true
}

// optional reads rel and parses it with parse; nil when missing,
// unreadable or unparsable.
func optional[T any](c *collector, rel string, parse func(string) (T, error)) *T {
	v, ok := c.read(rel)
	if !ok {
		return nil
	}
	t, err := parse(v)
	if err != nil {
		c.fail("parse", rel, err)
		return nil
	}
	return &t
}

func parseString(s string) (string, error) { return s, nil }

func parseInt(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("parse %q: not an integer", s)
	}
	return v, nil
}

func parseUint32(s string) (uint32, error) {
	v, err := parseHexOrDec(s, 32)
	if err != nil {
		return 0, fmt.Errorf("parse %q: not a 32-bit number", s)
	}
	return uint32(v), nil
}

func parseUint8(s string) (uint8, error) {
	v, err := parseHexOrDec(s, 8)
	if err != nil {
		return 0, fmt.Errorf("parse %q: not an 8-bit number", s)
	}
	return uint8(v), nil
}

// isNotExist reports whether err says a file or directory is missing.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// numericNames returns the names that are non-negative integers, sorted
// numerically ("2" before "10"), and the rest.
func numericNames(names []string) (nums []int, others []string) {
	for _, n := range names {
		v, err := strconv.Atoi(n)
		if err != nil || v < 0 {
			others = append(others, n)
			continue
		}
		nums = append(nums, v)
	}
	sort.Ints(nums)
	return nums, others
}
