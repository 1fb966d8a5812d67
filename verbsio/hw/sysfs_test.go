package hw

import (
	"os"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

func TestSysfsDevicesFixture(t *testing.T) {
	got, err := sysfsDevices(os.DirFS("testdata/sys"))
	if err != nil {
		t.Fatal(err)
	}
	want := []verbsio.DeviceInfo{
		{Name: "mlx5_0", Provider: "ibverbs", Transport: "InfiniBand", NodeGUID: 0x0c42a1030002c3d4, Netdev: "ens1f0np0", Ports: 2},
		{Name: "rxe0", Provider: "ibverbs", Transport: "InfiniBand", NodeGUID: 0x505400fffe770001, Netdev: "eth0", Ports: 1},
		// Unparsable node_guid: listed anyway, GUID unknown (0).
		{Name: "siw_broken", Provider: "ibverbs", Transport: "iWARP", Ports: 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("devices (-want +got):\n%s", d)
	}
}

func TestSysfsDevicesEdgeCases(t *testing.T) {
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
		want []verbsio.DeviceInfo
	}{
		{"no class directory", fstest.MapFS{"class/net/lo/mtu": {Data: []byte("65536\n")}}, []verbsio.DeviceInfo{}},
		{"empty class directory", fstest.MapFS{"class/infiniband": {Mode: 0o755 | 1<<31}}, []verbsio.DeviceInfo{}},
		{"device with no files", fstest.MapFS{"class/infiniband/irdma0": {Mode: 0o755 | 1<<31}},
			[]verbsio.DeviceInfo{{Name: "irdma0", Provider: "ibverbs"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := sysfsDevices(c.fsys)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestSysfsGIDAttrs(t *testing.T) {
	fsys := os.DirFS("testdata/sys")
	for _, c := range []struct {
		index  int
		ll     string
		want   verbsio.GIDType
		netdev string
	}{
		{0, sysfs.LinkLayerEthernet, verbsio.GIDTypeRoCEv1, "eth0"},
		{0, sysfs.LinkLayerInfiniBand, verbsio.GIDTypeIB, "eth0"},
		{1, sysfs.LinkLayerEthernet, verbsio.GIDTypeRoCEv2, "eth0"},
		{2, sysfs.LinkLayerEthernet, verbsio.GIDTypeIB, ""}, // missing: unknown reads as IB
	} {
		if got := gidTypeFromSysfs(sysfsGIDType(fsys, "rxe0", 1, c.index, c.ll)); got != c.want {
			t.Errorf("type of GID %d (%s) = %s, want %s", c.index, c.ll, got, c.want)
		}
		if got := sysfsGIDNetdev(fsys, "rxe0", 1, c.index); got != c.netdev {
			t.Errorf("netdev of GID %d = %q, want %q", c.index, got, c.netdev)
		}
	}
	if got := sysfsPortNetdev(fsys, "mlx5_0", 2); got != "ens1f0np0" {
		t.Errorf("netdev of mlx5_0 port 2 = %q, want the device's ens1f0np0", got)
	}
}
