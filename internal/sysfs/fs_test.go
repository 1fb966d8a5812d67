package sysfs

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// faultyFS wraps an fs.FS and makes reads of chosen files fail with a
// chosen errno, the way misbehaving sysfs attributes do (EIO from a dead
// device, EAGAIN from a broken driver, EINVAL for "no value").
type faultyFS struct {
	fs.FS
	fail map[string]error
	// reads counts Read calls per file, to prove reads are single.
	reads map[string]int
}

func (f *faultyFS) Open(name string) (fs.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, name: name, fs: f}, nil
}

func (f *faultyFS) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(f.FS, name) }

type faultyFile struct {
	fs.File
	name string
	fs   *faultyFS
}

func (f *faultyFile) Read(b []byte) (int, error) {
	if f.fs.reads != nil {
		f.fs.reads[f.name]++
	}
	if err, ok := f.fs.fail[f.name]; ok {
		return 0, &fs.PathError{Op: "read", Path: "/abs/" + f.name, Err: err}
	}
	return f.File.Read(b)
}

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

// oneDevice is a minimal RoCE device, rxe-like, in a MapFS.
func oneDevice() fstest.MapFS {
	const d = "class/infiniband/dev0/"
	return fstest.MapFS{
		d + "node_type":                 file("1: CA\n"),
		d + "node_guid":                 file("0000:0000:0000:0001\n"),
		d + "fw_ver":                    file("1.2.3\n"),
		d + "ports/1/state":             file("4: ACTIVE\n"),
		d + "ports/1/phys_state":        file("5: LinkUp\n"),
		d + "ports/1/rate":              file("10 Gb/sec (4X SDR)\n"),
		d + "ports/1/link_layer":        file("Ethernet\n"),
		d + "ports/1/gids/0":            file("0000:0000:0000:0000:0000:ffff:0a00:0001\n"),
		d + "ports/1/gid_attrs/types/0": file("RoCE v2\n"),
		d + "ports/1/gid_attrs/ndevs/0": file("eth0\n"),
		d + "ports/1/hw_counters/a":     file("1\n"),
		d + "ports/1/hw_counters/b":     file("2\n"),
		"class/net/eth0/mtu":            file("1500\n"),
		"class/net/eth0/carrier":        file("1\n"),
		"class/net/eth0/speed":          file("10000\n"),
	}
}

// TestFaultsDegradeOneField: a read error on one file leaves that field
// nil, records a FileError with a relative path and the errno, and leaves
// every other field intact.
func TestFaultsDegradeOneField(t *testing.T) {
	const d = "class/infiniband/dev0/"
	tests := []struct {
		name    string
		file    string
		err     error
		check   func(Report) bool // true when the field is degraded as expected
		wantErr string            // "" when the fault must not be reported
	}{
		{
			name: "EIO on rate", file: d + "ports/1/rate", err: syscall.EIO,
			check:   func(r Report) bool { return r.Devices[0].Ports[0].Rate == nil },
			wantErr: "sysfs: read class/infiniband/dev0/ports/1/rate: input/output error",
		},
		{
			name: "EAGAIN on fw_ver", file: d + "fw_ver", err: syscall.EAGAIN,
			check:   func(r Report) bool { return r.Devices[0].FWVer == nil },
			wantErr: "sysfs: read class/infiniband/dev0/fw_ver: resource temporarily unavailable",
		},
		{
			name: "EIO on a GID type", file: d + "ports/1/gid_attrs/types/0", err: syscall.EIO,
			check: func(r Report) bool {
				g := r.Devices[0].Ports[0].GIDs
				return len(g) == 1 && g[0].Type == GIDTypeUnknown && g[0].NetDev == "eth0"
			},
			wantErr: "sysfs: read class/infiniband/dev0/ports/1/gid_attrs/types/0: input/output error",
		},
		{
			name: "EINVAL on a GID netdev means none", file: d + "ports/1/gid_attrs/ndevs/0", err: syscall.EINVAL,
			check: func(r Report) bool {
				g := r.Devices[0].Ports[0].GIDs
				return len(g) == 1 && g[0].NetDev == "" && g[0].Type == GIDTypeRoCEv2
			},
		},
		{
			name: "EIO on a counter", file: d + "ports/1/hw_counters/a", err: syscall.EIO,
			check: func(r Report) bool {
				return cmp.Equal(r.Devices[0].Ports[0].HWCounters, map[string]uint64{"b": 2})
			},
			wantErr: "sysfs: read class/infiniband/dev0/ports/1/hw_counters/a: input/output error",
		},
		{
			name: "EINVAL on carrier means unknown", file: "class/net/eth0/carrier", err: syscall.EINVAL,
			check: func(r Report) bool { return r.NetDevs[0].Carrier == nil && r.NetDevs[0].MTU != nil },
		},
		{
			name: "EIO on speed is reported", file: "class/net/eth0/speed", err: syscall.EIO,
			check:   func(r Report) bool { return r.NetDevs[0].SpeedMbps == nil },
			wantErr: "sysfs: read class/net/eth0/speed: input/output error",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := NewFSFrom(oneDevice()).Report()
			r := NewFSFrom(&faultyFS{FS: oneDevice(), fail: map[string]error{tt.file: tt.err}}).Report()
			if !tt.check(r) {
				t.Errorf("field not degraded as expected: %+v", r)
			}
			var errs []string
			for _, dev := range r.Devices {
				for _, e := range dev.Errs {
					errs = append(errs, e.Error())
				}
				for _, p := range dev.Ports {
					for _, e := range p.Errs {
						errs = append(errs, e.Error())
					}
				}
			}
			for _, n := range r.NetDevs {
				for _, e := range n.Errs {
					errs = append(errs, e.Error())
				}
			}
			var want []string
			if tt.wantErr != "" {
				want = []string{tt.wantErr}
			}
			if diff := cmp.Diff(want, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if tt.wantErr != "" {
				// The error keeps its errno for errors.Is.
				var all []error
				for _, p := range r.Devices[0].Ports {
					all = append(all, p.Errs...)
				}
				all = append(all, r.Devices[0].Errs...)
				all = append(all, r.NetDevs[0].Errs...)
				if len(all) != 1 || !errors.Is(all[0], tt.err) {
					t.Errorf("errors.Is(%v, %v) = false", all, tt.err)
				}
			}
			// Nothing else changed: the node type is still there.
			if diff := cmp.Diff(base.Devices[0].NodeType, r.Devices[0].NodeType); diff != "" {
				t.Errorf("unrelated field changed:\n%s", diff)
			}
		})
	}
}

func TestReadsAreSingleAndBounded(t *testing.T) {
	m := oneDevice()
	m["class/infiniband/dev0/node_desc"] = file(strings.Repeat("x", MaxFileSize+1))
	m["class/infiniband/dev0/board_id"] = file(strings.Repeat("y", MaxFileSize))
	ffs := &faultyFS{FS: m, reads: map[string]int{}}
	d := NewFSFrom(ffs).Report().Devices[0]
	if d.NodeDesc != nil {
		t.Errorf("NodeDesc of %d bytes was accepted", MaxFileSize+1)
	}
	if d.BoardID == nil || len(*d.BoardID) != MaxFileSize {
		t.Errorf("BoardID of exactly %d bytes was not read whole", MaxFileSize)
	}
	want := "sysfs: read class/infiniband/dev0/node_desc: longer than 4096 bytes"
	if len(d.Errs) != 1 || d.Errs[0].Error() != want {
		t.Errorf("Errs = %v, want [%s]", d.Errs, want)
	}
	for name, n := range ffs.reads {
		if n != 1 {
			t.Errorf("%s read %d times, want 1", name, n)
		}
	}
}

// eagainForever is a file whose every read fails with EAGAIN, like the
// broken hwmon attributes that make os.ReadFile spin.
type eagainForever struct{}

func (eagainForever) Stat() (fs.FileInfo, error) { return nil, errors.New("no stat") }
func (eagainForever) Read([]byte) (int, error)   { return 0, syscall.EAGAIN }
func (eagainForever) Close() error               { return nil }

type eagainFS struct{ fs.FS }

func (e eagainFS) Open(name string) (fs.File, error) {
	if strings.HasSuffix(name, "/rate") {
		return eagainForever{}, nil
	}
	return e.FS.Open(name)
}

func TestEAGAINDoesNotHang(t *testing.T) {
	r := NewFSFrom(eagainFS{oneDevice()}).Report()
	p := r.Devices[0].Ports[0]
	if p.Rate != nil || len(p.Errs) != 1 || !errors.Is(p.Errs[0], syscall.EAGAIN) {
		t.Errorf("rate = %v, errs = %v; want nil and one EAGAIN", p.Rate, p.Errs)
	}
}

func TestNoInfiniBandClass(t *testing.T) {
	r := NewFSFrom(fstest.MapFS{"class/net/lo/mtu": file("65536\n")}).Report()
	if !r.NoInfiniBandClass() {
		t.Error("NoInfiniBandClass() = false for a tree without class/infiniband")
	}
	if len(r.Devices) != 0 || len(r.NetDevs) != 1 || r.ABIVersion != nil {
		t.Errorf("Report = %+v", r)
	}
	if len(r.Errs) != 1 || !errors.Is(r.Errs[0], fs.ErrNotExist) {
		t.Errorf("Errs = %v, want one fs.ErrNotExist", r.Errs)
	}
	if _, err := NewFSFrom(fstest.MapFS{}).InfiniBandClass(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("InfiniBandClass() error = %v, want fs.ErrNotExist", err)
	}
	if _, err := NewFSFrom(fstest.MapFS{}).ABIVersion(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ABIVersion() error = %v, want fs.ErrNotExist", err)
	}
	if mustFS(t, "rxe").Report().NoInfiniBandClass() {
		t.Error("NoInfiniBandClass() = true for the rxe fixture")
	}
}

func TestNewFS(t *testing.T) {
	if _, err := NewFS("testdata/does-not-exist"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NewFS(missing) error = %v, want fs.ErrNotExist", err)
	}
	if _, err := NewFS("gen.go"); err == nil {
		t.Error("NewFS(a file) succeeded")
	}
}

// TestListsWithoutTypeFilter: a class entry that is a symlink in one tree
// and a directory in another reads the same.
func TestListsWithoutTypeFilter(t *testing.T) {
	linked := mustFS(t, "rxe") // class/infiniband/rxe0 is a symlink
	plain := mustFS(t, "ib")   // class/infiniband/mlx5_0 is a directory
	for _, f := range []FS{linked, plain} {
		devs, err := f.InfiniBandClass()
		if err != nil || len(devs) != 1 || len(devs[0].Ports) != 1 || devs[0].Ports[0].State == nil {
			t.Errorf("InfiniBandClass() = %+v, %v", devs, err)
		}
	}
}

// TestGarbageValues: unparsable values leave their field nil and say
// which file and why; the rest of the device is still read.
func TestGarbageValues(t *testing.T) {
	const d = "class/infiniband/dev0/"
	m := oneDevice()
	m[d+"node_guid"] = file("not-a-guid\n")
	m[d+"ports/1/state"] = file("ACTIVE\n")
	m[d+"ports/1/lid"] = file("0xzz\n")
	m[d+"ports/1/sm_sl"] = file("300\n")
	m[d+"ports/1/gids/1"] = file("nonsense\n")
	m[d+"ports/1/gids/2"] = file("0000:0000:0000:0000:0000:ffff:0a00:0002\n")
	m[d+"ports/1/gid_attrs/types/2"] = file("RoCE v9\n")
	m["class/net/eth0/carrier"] = file("2\n")
	m["class/net/eth0/mtu"] = file("big\n")
	m["class/infiniband_verbs/abi_version"] = file("six\n")
	r := NewFSFrom(m).Report()
	dev, p, n := r.Devices[0], r.Devices[0].Ports[0], r.NetDevs[0]
	if dev.NodeGUID != nil || p.State != nil || p.LID != nil || p.SMSL != nil || n.Carrier != nil || n.MTU != nil || r.ABIVersion != nil {
		t.Errorf("garbage was accepted: %+v %+v %+v", dev, p, n)
	}
	if dev.NodeType == nil || p.Rate == nil || n.SpeedMbps == nil {
		t.Error("good fields next to garbage were lost")
	}
	if len(p.GIDs) != 2 || p.GIDs[1].Index != 2 || p.GIDs[1].Type != GIDTypeUnknown || p.GIDTableLen != 3 {
		t.Errorf("GIDs = %+v, table %d", p.GIDs, p.GIDTableLen)
	}
	var got []string
	for _, e := range append(append(append(dev.Errs, p.Errs...), n.Errs...), r.Errs...) {
		got = append(got, e.Error())
	}
	want := []string{
		`sysfs: parse class/infiniband/dev0/node_guid: guid: parse "not-a-guid": want 4 groups`,
		`sysfs: parse class/infiniband/dev0/ports/1/state: port state: parse "ACTIVE": want "N: NAME"`,
		`sysfs: parse class/infiniband/dev0/ports/1/lid: parse "0xzz": not a 32-bit number`,
		`sysfs: parse class/infiniband/dev0/ports/1/sm_sl: parse "300": not an 8-bit number`,
		`sysfs: parse class/infiniband/dev0/ports/1/gids/1: gid: parse "nonsense": want 8 groups`,
		`sysfs: parse class/infiniband/dev0/ports/1/gid_attrs/types/2: gid type: parse "RoCE v9": unknown type`,
		`sysfs: parse class/net/eth0/mtu: parse "big": not an integer`,
		`sysfs: parse class/net/eth0/carrier: parse "2": want 0 or 1`,
		`sysfs: parse class/infiniband_verbs/abi_version: parse "six": not an integer`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if g := p.GIDs[0]; g.Addr().String() != "::ffff:10.0.0.1" {
		t.Errorf("Addr() = %s", g.Addr())
	}
}

// TestDefaultFS reads this machine's /sys. Whatever is there, reading
// must not fail as a whole; without RDMA the class is reported missing.
func TestDefaultFS(t *testing.T) {
	f, err := NewDefaultFS()
	if err != nil {
		t.Skipf("no %s here: %v", DefaultMountPoint, err)
	}
	r := f.Report()
	if r.NoInfiniBandClass() && len(r.Devices) != 0 {
		t.Errorf("no class/infiniband but %d devices", len(r.Devices))
	}
	t.Logf("%d RDMA devices, %d netdevs, class missing: %v", len(r.Devices), len(r.NetDevs), r.NoInfiniBandClass())
}
