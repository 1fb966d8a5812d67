package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failed []string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Errorf(format string, a ...any) { r.failed = append(r.failed, format) }
func (r *recorder) Fatalf(format string, a ...any) { r.failed = append(r.failed, format) }
func (r *recorder) Fatal(a ...any)                 { r.failed = append(r.failed, "fatal") }

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "x.txt")

	r := &recorder{TB: t}
	Check(r, path, []byte("a\n"))
	if len(r.failed) != 1 || !strings.Contains(r.failed[0], "go test -update writes it") {
		t.Errorf("missing file: %q", r.failed)
	}

	*update = true
	r = &recorder{TB: t}
	Check(r, path, []byte("a\n"))
	*update = false
	if b, err := os.ReadFile(path); err != nil || string(b) != "a\n" || len(r.failed) != 0 {
		t.Errorf("-update: %q, %v, failures %q", b, err, r.failed)
	}

	r = &recorder{TB: t}
	Check(r, path, []byte("a\n"))
	if len(r.failed) != 0 {
		t.Errorf("same bytes: %q", r.failed)
	}
	Check(r, path, []byte("b\n"))
	if len(r.failed) != 1 || !strings.Contains(r.failed[0], "differs") {
		t.Errorf("other bytes: %q", r.failed)
	}
	if Updating() {
		t.Error("Updating without -update")
	}
}
