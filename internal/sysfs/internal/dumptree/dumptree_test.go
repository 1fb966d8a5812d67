package dumptree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Entry
		wantErr string
	}{
		{
			name: "file with newline",
			in:   "/sys/class/infiniband/rxe0/node_type=1: CA|\n",
			want: []Entry{{Path: "class/infiniband/rxe0/node_type", Value: "1: CA\n"}},
		},
		{
			name: "file without newline and with '=' in value",
			in:   "/sys/a/uevent=NAME=rxe0|\n/sys/a/empty=\n",
			want: []Entry{
				{Path: "a/uevent", Value: "NAME=rxe0\n"},
				{Path: "a/empty", Value: ""},
			},
		},
		{
			name: "multi-line value",
			in:   "/sys/a/b=x|y|\n",
			want: []Entry{{Path: "a/b", Value: "x\ny\n"}},
		},
		{
			name: "symlink and comments",
			in:   "# comment\n\n/sys/class/infiniband/rxe0 -> ../../devices/virtual/infiniband/rxe0\n",
			want: []Entry{{Path: "class/infiniband/rxe0", Link: "../../devices/virtual/infiniband/rxe0"}},
		},
		{name: "not under /sys", in: "/proc/x=1|\n", wantErr: "does not start with"},
		{name: "garbage", in: "hello\n", wantErr: "neither"},
		{name: "dot-dot", in: "/sys/../etc/passwd=x\n", wantErr: "bad path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteResolvesLinks(t *testing.T) {
	const dump = `/sys/class/infiniband/rxe0/node_type=1: CA|
/sys/class/infiniband/rxe0/ports/1/state=4: ACTIVE|
/sys/class/infiniband/rxe0/subsystem -> ../../../../class/infiniband
/sys/class/infiniband/rxe0 -> ../../devices/virtual/infiniband/rxe0
`
	es, err := Parse(strings.NewReader(dump))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tree")
	if err := Write(dir, es); err != nil {
		t.Fatal(err)
	}
	// The file lands in the link target and is reachable through the link.
	b, err := os.ReadFile(filepath.Join(dir, "devices/virtual/infiniband/rxe0/ports/1/state"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "4: ACTIVE\n" {
		t.Errorf("state = %q", b)
	}
	b, err = os.ReadFile(filepath.Join(dir, "class/infiniband/rxe0/node_type"))
	if err != nil || string(b) != "1: CA\n" {
		t.Errorf("read through link = %q, %v", b, err)
	}
	target, err := os.Readlink(filepath.Join(dir, "devices/virtual/infiniband/rxe0/subsystem"))
	if err != nil || target != "../../../../class/infiniband" {
		t.Errorf("subsystem link = %q, %v", target, err)
	}
	// The subsystem link points back at the class directory.
	if _, err := os.Stat(filepath.Join(dir, "class/infiniband/rxe0/subsystem/rxe0/node_type")); err != nil {
		t.Errorf("subsystem link does not resolve: %v", err)
	}
}

func TestWriteRejects(t *testing.T) {
	tests := []struct {
		name string
		dump string
	}{
		{"escaping link", "/sys/a -> ../../../etc\n"},
		{"duplicate path", "/sys/a/b=1|\n/sys/a/b=2|\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es, err := Parse(strings.NewReader(tt.dump))
			if err != nil {
				t.Fatal(err)
			}
			if err := Write(filepath.Join(t.TempDir(), "x"), es); err == nil {
				t.Fatal("Write() succeeded, want an error")
			}
		})
	}
}
