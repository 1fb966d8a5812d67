package diag

import (
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/internal/sysfs"
)

func ptr[T any](v T) *T { return &v }

// fixture reads one of internal/sysfs's committed machines.
func fixture(t *testing.T, machine string) sysfs.Report {
	t.Helper()
	f, err := sysfs.NewFS(filepath.Join("..", "sysfs", "testdata", "sys", machine))
	if err != nil {
		t.Fatal(err)
	}
	return f.Report()
}

func severities(fs []Finding) []Severity {
	var out []Severity
	for _, f := range fs {
		out = append(out, f.Severity)
	}
	return out
}

func TestRDMADevices(t *testing.T) {
	noClass := sysfs.Report{Errs: []error{&sysfs.FileError{Op: "list", Path: sysfs.InfiniBandClassPath, Err: fs.ErrNotExist}}}
	noUVerbs := fixture(t, "ib")
	noUVerbs.Devices[0].UVerbs = nil
	classErr := fixture(t, "rxe")
	classErr.Errs = []error{&sysfs.FileError{Op: "list", Path: sysfs.NetClassPath, Err: syscall.EIO}}
	tests := []struct {
		name     string
		report   sysfs.Report
		want     []Severity
		wantWhat string
	}{
		{"rxe", fixture(t, "rxe"), []Severity{Pass}, "rxe0: CA (InfiniBand), 1 port(s), user space opens it as /dev/infiniband/uverbs0"},
		{"no class directory", noClass, []Severity{Fail}, "no /sys/class/infiniband"},
		{"empty class directory", sysfs.Report{}, []Severity{Fail}, "no RDMA devices in /sys/class/infiniband"},
		{"no uverbs", noUVerbs, []Severity{Fail}, "mlx5_0: no uverbs character device"},
		{"class-level error", classErr, []Severity{Warn, Pass}, "sysfs: sysfs: list class/net: input/output error"},
		// bnxt_re0 has unreadable files, broken0 is not a device, siw0 is fine.
		{"missing", fixture(t, "missing"), []Severity{Warn, Pass, Warn, Pass}, "bnxt_re0: 2 sysfs file(s) could not be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RDMADevices(tt.report)
			if diff := cmp.Diff(tt.want, severities(got)); diff != "" {
				t.Errorf("severities (-want +got):\n%s\nfindings: %v", diff, got)
			}
			for _, f := range got {
				checkFinding(t, f, CheckRDMADevices, f.Severity)
			}
			if !strings.Contains(got[0].What, tt.wantWhat) {
				t.Errorf("What = %q, want it to contain %q", got[0].What, tt.wantWhat)
			}
		})
	}
}

func port(state, phys int, linkLayer string) sysfs.Port {
	return sysfs.Port{
		Number:    1,
		State:     &sysfs.PortState{Code: state},
		PhysState: &sysfs.PhysState{Code: phys},
		LinkLayer: ptr(linkLayer),
	}
}

func TestPortState(t *testing.T) {
	dev := sysfs.Device{Name: "dev0"}
	up := &sysfs.NetDev{Name: "eth0", OperState: ptr("up")}
	down := &sysfs.NetDev{Name: "eth0", OperState: ptr("down")}
	eth, ib := sysfs.LinkLayerEthernet, sysfs.LinkLayerInfiniBand
	tests := []struct {
		name    string
		port    sysfs.Port
		nd      *sysfs.NetDev
		want    Severity
		wantFix string
	}{
		{"active", port(sysfs.PortActive, sysfs.PhysLinkUp, eth), up, Pass, ""},
		{"active, phys unknown", sysfs.Port{Number: 1, State: &sysfs.PortState{Code: 4}}, nil, Pass, ""},
		{"active but phys not up", port(sysfs.PortActive, sysfs.PhysPolling, eth), up, Warn, "physical link"},
		{"active defer", port(sysfs.PortActiveDefer, sysfs.PhysLinkUp, ib), nil, Warn, "about to leave"},
		{"armed", port(sysfs.PortArmed, sysfs.PhysLinkUp, ib), nil, Fail, "opensm"},
		{"init on IB: no SM", port(sysfs.PortInit, sysfs.PhysLinkUp, ib), nil, Fail, "subnet manager"},
		{"init on Ethernet", port(sysfs.PortInit, sysfs.PhysLinkUp, eth), up, Fail, "ip link set dev eth0 up"},
		{"down, netdev down", port(sysfs.PortDown, sysfs.PhysDisabled, eth), down, Fail, "ip link set dev eth0 up"},
		{"down, disabled, Ethernet", port(sysfs.PortDown, sysfs.PhysDisabled, eth), up, Fail, "disabled"},
		{"down, disabled, IB", port(sysfs.PortDown, sysfs.PhysDisabled, ib), nil, Fail, "ibportstate"},
		{"down, polling", port(sysfs.PortDown, sysfs.PhysPolling, ib), nil, Fail, "cable"},
		{"down, other", port(sysfs.PortDown, sysfs.PhysSleep, ib), nil, Fail, "no link"},
		{"unknown state", port(9, sysfs.PhysLinkUp, ib), nil, Fail, "unknown port state"},
		{"unreadable", sysfs.Port{Number: 1}, nil, Warn, "rdma link show"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := PortState(dev, tt.port, tt.nd)
			checkFinding(t, f, CheckPortState, tt.want)
			if !strings.Contains(f.Fix, tt.wantFix) {
				t.Errorf("Fix = %q, want it to contain %q", f.Fix, tt.wantFix)
			}
		})
	}
}

func TestPortStateFixtures(t *testing.T) {
	tests := []struct {
		machine  string
		want     Severity
		wantWhat string
	}{
		{"rxe", Pass, "rxe0/1: PORT_ACTIVE (4), LINK_UP (5), netdev eth0 up, 2.5 Gb/s (1X SDR)"},
		{"ib", Pass, "mlx5_0/1: PORT_ACTIVE (4), LINK_UP (5), 100 Gb/s (4X EDR)"},
		{"portdown", Fail, "mlx5_1/1: PORT_DOWN (1), DISABLED (3), netdev ens1f1np1 down"},
	}
	for _, tt := range tests {
		t.Run(tt.machine, func(t *testing.T) {
			fs := Ports(fixture(t, tt.machine), nil, false)
			f := fs[0]
			checkFinding(t, f, CheckPortState, tt.want)
			if !strings.HasPrefix(f.What, tt.wantWhat) {
				t.Errorf("What = %q, want prefix %q", f.What, tt.wantWhat)
			}
		})
	}
}

func TestPortMTU(t *testing.T) {
	ca := &sysfs.NodeType{Code: sysfs.NodeCA, Name: "CA"}
	hw := sysfs.Device{Name: "mlx5_0", NodeType: ca}
	rxe := sysfs.Device{Name: "rxe0", NodeType: ca, Parent: ptr("eth0")}
	siw := sysfs.Device{Name: "siw0", NodeType: &sysfs.NodeType{Code: sysfs.NodeRNIC}, Parent: ptr("eth0")}
	eth := port(sysfs.PortActive, sysfs.PhysLinkUp, sysfs.LinkLayerEthernet)
	ib := port(sysfs.PortActive, sysfs.PhysLinkUp, sysfs.LinkLayerInfiniBand)
	nd := func(mtu int) *sysfs.NetDev { return &sysfs.NetDev{Name: "eth0", MTU: ptr(mtu)} }
	tests := []struct {
		name     string
		dev      sysfs.Device
		port     sysfs.Port
		nd       *sysfs.NetDev
		attr     PortAttr
		want     Severity
		wantWhat string
	}{
		{"iWARP", siw, eth, nd(1500), PortAttr{}, Info, "iWARP"},
		{"InfiniBand", hw, ib, nil, PortAttr{ActiveMTU: sysfs.MTU4096}, Info, "active_mtu 4096 (5)"},
		{"no netdev", hw, eth, nil, PortAttr{}, Warn, "cannot tell which netdev"},
		{"netdev MTU unreadable", hw, eth, &sysfs.NetDev{Name: "eth0"}, PortAttr{}, Warn, "unreadable"},
		{"netdev MTU too small", hw, eth, nd(300), PortAttr{}, Fail, "no room"},
		{"active above what fits", hw, eth, nd(1500), PortAttr{ActiveMTU: sysfs.MTU4096}, Fail, "fits IB MTU 1024, but the port's active_mtu is 4096"},
		{"active below what fits", hw, eth, nd(9000), PortAttr{ActiveMTU: sysfs.MTU1024}, Warn, "fits IB MTU 4096, but the port's active_mtu is only 1024"},
		{"rxe at 1500: 1024 of 4096", rxe, eth, nd(1500), PortAttr{}, Info, "netdev eth0 MTU 1500 gives IB MTU 1024 (after 80 bytes of RoCE headers); the port supports 4096"},
		{"matching attrs below max", hw, eth, nd(2200), PortAttr{ActiveMTU: sysfs.MTU2048, MaxMTU: sysfs.MTU4096}, Info, "gives IB MTU 2048"},
		{"jumbo", hw, eth, nd(9000), PortAttr{}, Pass, "netdev eth0 MTU 9000 gives IB MTU 4096"},
		{"max below 4096 reached", hw, eth, nd(2200), PortAttr{ActiveMTU: sysfs.MTU2048, MaxMTU: sysfs.MTU2048}, Pass, "gives IB MTU 2048"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := PortMTU(tt.dev, tt.port, tt.nd, tt.attr)
			checkFinding(t, f, CheckMTU, tt.want)
			if !strings.Contains(f.What, tt.wantWhat) {
				t.Errorf("What = %q, want it to contain %q", f.What, tt.wantWhat)
			}
		})
	}
}

func TestPortMTUFixtures(t *testing.T) {
	tests := []struct {
		machine string
		want    Severity
	}{
		{"rxe", Info},  // 1500 -> 1024 of 4096
		{"roce", Pass}, // 9000 -> 4096
		{"ib", Info},   // InfiniBand: set by the SM
	}
	for _, tt := range tests {
		t.Run(tt.machine, func(t *testing.T) {
			for _, f := range Ports(fixture(t, tt.machine), nil, false) {
				if f.Check == CheckMTU {
					checkFinding(t, f, CheckMTU, tt.want)
				}
			}
		})
	}
}

func TestRoCEGID(t *testing.T) {
	eth := port(sysfs.PortActive, sysfs.PhysLinkUp, sysfs.LinkLayerEthernet)
	dev := sysfs.Device{Name: "dev0", NodeType: &sysfs.NodeType{Code: sysfs.NodeCA}, Parent: ptr("eth0")}
	withGIDs := func(gs ...string) sysfs.Port {
		p := eth
		for i, s := range gs {
			typ, addr, _ := strings.Cut(s, " ")
			g := sysfs.GID{Index: i, NetDev: "eth0"}
			raw, err := sysfs.ParseGID(addr)
			if err != nil {
				t.Fatal(err)
			}
			g.Raw = raw
			switch typ {
			case "v1":
				g.Type = sysfs.GIDTypeRoCEv1
			case "v2":
				g.Type = sysfs.GIDTypeRoCEv2
			}
			p.GIDs = append(p.GIDs, g)
		}
		return p
	}
	const (
		ll   = "fe80:0000:0000:0000:5054:00ff:fe77:0001"
		v4   = "0000:0000:0000:0000:0000:ffff:0a4d:0001"
		v4ll = "0000:0000:0000:0000:0000:ffff:a9fe:0101"
		v6   = "2001:0db8:0000:0000:0000:0000:0000:0001"
	)
	tests := []struct {
		name     string
		dev      sysfs.Device
		port     sysfs.Port
		ipv6     bool
		want     Severity
		wantWhat string
	}{
		{"InfiniBand port", dev, port(4, 5, sysfs.LinkLayerInfiniBand), false, Info, "not a RoCE port"},
		{"iWARP", sysfs.Device{Name: "siw0", NodeType: &sysfs.NodeType{Code: sysfs.NodeRNIC}}, eth, false, Info, "not a RoCE port"},
		{"no GIDs", dev, eth, false, Fail, "eth0 has no IP address"},
		{"types unreadable", dev, withGIDs("? " + v4), false, Warn, "unreadable"},
		{"v1 only", dev, withGIDs("v1 "+ll, "v1 "+v4), false, Warn, "only RoCE v1"},
		{"best is v1", dev, withGIDs("v2 "+v4ll, "v1 "+v4), false, Warn, "GID[1] ::ffff:10.77.0.1 RoCE v1 on eth0, not a RoCE v2 GID"},
		{"no IPv4 address", dev, withGIDs("v2 "+ll, "v2 "+v6), false, Warn, "no IPv4 RoCE v2 GID; perftest would pick GID[1] 2001:db8::1"},
		{"IPv4 link-local only", dev, withGIDs("v2 " + v4ll), false, Warn, "link-local GID[0] ::ffff:169.254.1.1"},
		{"IPv6 wanted, link-local only", dev, withGIDs("v2 "+ll, "v2 "+v4), true, Warn, "link-local GID[0] fe80::5054:ff:fe77:1"},
		{"rxe capture", dev, withGIDs("v2 "+ll, "v2 "+v4), false, Pass, "dev0/1: perftest would pick GID[1] ::ffff:10.77.0.1 RoCE v2 on eth0"},
		{"IPv6 wanted and present", dev, withGIDs("v2 "+v4, "v2 "+v6), true, Pass, "GID[1] 2001:db8::1 RoCE v2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := RoCEGID(tt.dev, tt.port, tt.ipv6)
			checkFinding(t, f, CheckRoCEGID, tt.want)
			if !strings.Contains(f.What, tt.wantWhat) {
				t.Errorf("What = %q, want it to contain %q", f.What, tt.wantWhat)
			}
		})
	}
}

func TestRoCEGIDFixture(t *testing.T) {
	r := fixture(t, "roce")
	d := r.Devices[0]
	f := RoCEGID(d, d.Ports[0], false)
	checkFinding(t, f, CheckRoCEGID, Pass)
	if want := "GID[3] ::ffff:192.168.10.5 RoCE v2 on ens2f0np0"; !strings.Contains(f.What, want) {
		t.Errorf("What = %q, want it to contain %q", f.What, want)
	}
}

func TestPortsWithoutDevices(t *testing.T) {
	got := Ports(sysfs.Report{}, nil, false)
	want := []Finding{
		{Check: CheckPortState, Severity: Info, What: "no RDMA ports to check"},
		{Check: CheckMTU, Severity: Info, What: "no RDMA ports to check"},
		{Check: CheckRoCEGID, Severity: Info, What: "no RDMA ports to check"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Ports() (-want +got):\n%s", diff)
	}
}

func TestPortsUsesAttrs(t *testing.T) {
	r := fixture(t, "rxe")
	attrs := map[PortKey]PortAttr{{"rxe0", 1}: {ActiveMTU: sysfs.MTU4096, MaxMTU: sysfs.MTU4096}}
	for _, f := range Ports(r, attrs, false) {
		if f.Check == CheckMTU && f.Severity != Fail {
			t.Errorf("with active_mtu 4096 over a 1500 netdev: %s, want FAIL", f)
		}
	}
	if got := (PortKey{"rxe0", 1}).String(); got != "rxe0/1" {
		t.Errorf("PortKey.String() = %q", got)
	}
}
