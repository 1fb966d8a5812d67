//go:build !(linux && cgo && ibverbs)

package hw

import (
	"errors"
	"io/fs"
	"os"
	"testing"
	"testing/fstest"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

func TestStubOpen(t *testing.T) {
	_, err := Provider{}.Open("mlx5_0")
	var ue *verbsio.UnsupportedError
	if !errors.As(err, &ue) {
		t.Fatalf("Open error %T %v, want *verbsio.UnsupportedError", err, err)
	}
	if ue.Feature != "kernel RDMA device mlx5_0" || ue.Provider != "ibverbs" ||
		ue.Reason != "this rperf was built without the ibverbs provider" ||
		ue.Fix != "rebuild with: make build-ibverbs (needs libibverbs-dev: apt-get install libibverbs-dev)" {
		t.Errorf("unexpected fields: %+v", *ue)
	}
	want := "kernel RDMA device mlx5_0 is not available from provider ibverbs: this rperf was built without the ibverbs provider; rebuild with: make build-ibverbs (needs libibverbs-dev: apt-get install libibverbs-dev)"
	if err.Error() != want {
		t.Errorf("error text\n got %q\nwant %q", err, want)
	}
	if !errors.Is(err, verbsio.ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("errors.Is(err, ErrNotSupported / EOPNOTSUPP) = false")
	}
	if Built {
		t.Errorf("Built is true in the stub build")
	}
}

// withSysfsRoot points the provider at fsys for the test.
func withSysfsRoot(t *testing.T, fsys fs.FS) {
	old := sysfsRoot
	sysfsRoot = fsys
	t.Cleanup(func() { sysfsRoot = old })
}

func TestStubDevices(t *testing.T) {
	withSysfsRoot(t, os.DirFS("testdata/sys"))
	devs, err := Provider{}.Devices()
	if err != nil || len(devs) != 3 || devs[0].Name != "mlx5_0" || devs[0].Fabric != "" {
		t.Errorf("Devices() = %+v, %v; want the fixture's 3 devices", devs, err)
	}
	withSysfsRoot(t, fstest.MapFS{})
	devs, err = Provider{}.Devices()
	if err != nil || devs == nil || len(devs) != 0 {
		t.Errorf("Devices() without /sys/class/infiniband = %#v, %v; want an empty list and no error", devs, err)
	}
}

func TestStubRegistered(t *testing.T) {
	for _, p := range verbsio.Providers() {
		if p.Name() == "ibverbs" {
			return
		}
	}
	t.Errorf("provider ibverbs is not registered")
}
