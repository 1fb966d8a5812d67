package diag

import (
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The capture's /dev/infiniband (rdma-and-dev.txt): uverbs0 and rdma_cm
// are crw-rw-rw-, umad0 and issm0 crw-------, all root:root.
func captureDir() DevDir {
	cdev := fs.ModeDevice | fs.ModeCharDevice
	return DevDir{Nodes: []DevNode{
		{Name: "issm0", Mode: cdev | 0o600},
		{Name: "rdma_cm", Mode: cdev | 0o666},
		{Name: "umad0", Mode: cdev | 0o600},
		{Name: "uverbs0", Mode: cdev | 0o666},
	}}
}

func withNode(d DevDir, n DevNode) DevDir {
	out := DevDir{}
	for _, old := range d.Nodes {
		if old.Name != n.Name {
			out.Nodes = append(out.Nodes, old)
		}
	}
	if n.Mode != 0 {
		out.Nodes = append(out.Nodes, n)
	}
	return out
}

func TestDevInfiniband(t *testing.T) {
	cdev := fs.ModeDevice | fs.ModeCharDevice
	user := Creds{UID: 1000, GIDs: []uint32{1000, 27}}
	tests := []struct {
		name     string
		dir      DevDir
		uverbs   []string
		creds    Creds
		want     []Severity
		wantWhat string
	}{
		{"capture, as a user", captureDir(), []string{"uverbs0"}, user, []Severity{Pass, Pass}, "/dev/infiniband/uverbs0 is a -rw-rw-rw- character device"},
		{"capture, sysfs names none: use what is there", captureDir(), nil, user, []Severity{Pass, Pass}, "uverbs0"},
		{"does not exist (this machine)", DevDir{Err: &fs.PathError{Op: "open", Path: "/dev/infiniband", Err: fs.ErrNotExist}}, nil, user, []Severity{Fail}, "/dev/infiniband does not exist"},
		{"unreadable", DevDir{Err: syscall.EACCES}, nil, user, []Severity{Fail}, "cannot list"},
		{"no uverbs nodes", withNode(captureDir(), DevNode{Name: "uverbs0"}), nil, user, []Severity{Fail, Pass}, "no uverbs nodes"},
		{"node sysfs names is missing", captureDir(), []string{"uverbs0", "uverbs1"}, user, []Severity{Pass, Fail, Pass}, "uverbs1 is missing"},
		{"not a character device", withNode(captureDir(), DevNode{Name: "uverbs0", Mode: 0o666}), []string{"uverbs0"}, user, []Severity{Fail, Pass}, "not a character device"},
		{"no permission", withNode(captureDir(), DevNode{Name: "uverbs0", Mode: cdev | 0o600}), []string{"uverbs0"}, user, []Severity{Fail, Pass}, "uid 1000 cannot open it"},
		{"root may open 0600", withNode(captureDir(), DevNode{Name: "uverbs0", Mode: cdev | 0o600}), []string{"uverbs0"}, Creds{UID: 0}, []Severity{Pass, Pass}, "uverbs0"},
		{"group access", withNode(captureDir(), DevNode{Name: "uverbs0", Mode: cdev | 0o660, GID: 27}), []string{"uverbs0"}, user, []Severity{Pass, Pass}, "uverbs0"},
		{"owner access", withNode(captureDir(), DevNode{Name: "uverbs0", Mode: cdev | 0o600, UID: 1000}), []string{"uverbs0"}, user, []Severity{Pass, Pass}, "uverbs0"},
		{"owner bits rule even if other allows", withNode(captureDir(), DevNode{Name: "uverbs0", Mode: cdev | 0o066, UID: 1000}), []string{"uverbs0"}, user, []Severity{Fail, Pass}, "cannot open"},
		{"read-only is not enough", withNode(captureDir(), DevNode{Name: "uverbs0", Mode: cdev | 0o444}), []string{"uverbs0"}, user, []Severity{Fail, Pass}, "cannot open"},
		{"rdma_cm missing", withNode(captureDir(), DevNode{Name: "rdma_cm"}), []string{"uverbs0"}, user, []Severity{Pass, Warn}, "uverbs0"},
		{"rdma_cm not usable", withNode(captureDir(), DevNode{Name: "rdma_cm", Mode: cdev | 0o600}), []string{"uverbs0"}, user, []Severity{Pass, Warn}, "uverbs0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DevInfiniband(tt.dir, tt.uverbs, tt.creds)
			if diff := cmp.Diff(tt.want, severities(got)); diff != "" {
				t.Errorf("severities (-want +got):\n%s\nfindings: %v", diff, got)
			}
			for _, f := range got {
				checkFinding(t, f, CheckDevInfiniband, f.Severity)
			}
			var all []string
			for _, f := range got {
				all = append(all, f.What)
			}
			if !strings.Contains(strings.Join(all, "\n"), tt.wantWhat) {
				t.Errorf("findings %q do not mention %q", all, tt.wantWhat)
			}
		})
	}
}

func TestDevInfinibandSeverityDependsOnEngine(t *testing.T) {
	missing := DevInfiniband(DevDir{Err: fs.ErrNotExist}, nil, Creds{})
	for _, tt := range []struct {
		engine Engine
		want   Severity
	}{{EngineKernel, Fail}, {EngineBuiltin, Info}, {EngineAuto, Warn}} {
		got := ForEngine(missing, tt.engine)
		if got[0].Severity != tt.want {
			t.Errorf("missing /dev/infiniband under %v: %v, want %v", tt.engine, got[0].Severity, tt.want)
		}
	}
}
