package devinfo

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

func TestTabsTo(t *testing.T) {
	// Columns of ibv_devinfo's output (the rxe capture): device values
	// at column 40, port values at 48.
	cases := []struct {
		indent int
		label  string
		target int
		want   string
	}{
		{1, "transport", 40, "\t\t\t"},
		{1, "fw_ver", 40, "\t\t\t\t"},
		{1, "max_qp", 40, "\t\t\t\t"},
		{1, "device_cap_flags", 40, "\t\t"},
		{1, "max_total_mcast_qp_attach", 40, "\t"},
		{1, "max_rwq_indirection_table_size", 40, "\t"},
		{3, "state", 48, "\t\t\t"},
		{3, "max_mtu", 48, "\t\t"},
		{3, "port_cap_flags2", 48, "\t"},
		{3, "GID[  0]", 48, "\t\t"},
	}
	for _, c := range cases {
		if got := tabsTo(c.indent*8+len(c.label)+1, c.target); got != c.want {
			t.Errorf("tabsTo(%s) = %d tabs, want %d", c.label, len(got), len(c.want))
		}
	}
}

func TestDeviceCapFlagNames(t *testing.T) {
	// rxe's device_cap_flags and the names ibv_devinfo -v printed for them.
	want := []string{"BAD_PKEY_CNTR", "BAD_QKEY_CNTR", "AUTO_PATH_MIG", "CHANGE_PHY_PORT", "UD_AV_PORT_ENFORCE",
		"PORT_ACTIVE_EVENT", "SYS_IMAGE_GUID", "RC_RNR_NAK_GEN", "SRQ_RESIZE", "MEM_WINDOW", "MEM_MGT_EXTENSIONS",
		"MEM_WINDOW_TYPE_2B"}
	if diff := cmp.Diff(want, DeviceCapFlagNames(0x01223c76)); diff != "" {
		t.Errorf("names of 0x01223c76 (-devinfo +rdiag):\n%s", diff)
	}
	if got := DeviceCapFlagNames(1<<15 | 1); !cmp.Equal(got, []string{"RESIZE_MAX_WR", "Unknown flags: 0x8000"}) {
		t.Errorf("unnamed bit: %q", got)
	}
	// devinfo prints unnamed bits in upper case, and device_cap_flags_ex's
	// low half is device_cap_flags, named above, not under it.
	if got := DeviceCapFlagNames(0xc8480000); !cmp.Equal(got, []string{"Unknown flags: 0xC8480000"}) {
		t.Errorf("mlx5's unnamed bits: %q", got)
	}
	if got := deviceCapFlagsExNames(1<<32 | 1<<36 | 1<<40 | 0x1223c76); !cmp.Equal(got, []string{"RAW_SCATTER_FCS", "PCI_WRITE_END_PADDING", "Unknown flags: 0x10000000000"}) {
		t.Errorf("device_cap_flags_ex: %q", got)
	}
	if got := odpTransportNames(0); !cmp.Equal(got, []string{"NO SUPPORT"}) {
		t.Errorf("no ODP: %q", got)
	}
	if got := odpTransportNames(1 | 1<<5 | 1<<7); !cmp.Equal(got, []string{"SUPPORT_SEND", "SUPPORT_SRQ", "Unknown flags: 0x80"}) {
		t.Errorf("ODP: %q", got)
	}
	if got := odpGeneralNames(0); got != nil {
		t.Errorf("no general ODP: %q", got)
	}
	qps := []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUD, verbsio.QPTypeRawPacket, verbsio.QPTypeUC}
	if got := supportedQPNames(qps); !cmp.Equal(got, []string{"SUPPORT_RAW_PACKET", "SUPPORT_UD", "SUPPORT_RC", "SUPPORT_UC"}) {
		t.Errorf("supported_qp: %q", got)
	}
	if got := rawPacketCapLines(verbsio.RawCapCVLANStripping | verbsio.RawCapDelayDrop | 1<<7); !cmp.Equal(got, []string{"C-VLAN stripping offload", "Delay drop"}) {
		t.Errorf("raw packet caps: %q", got)
	}
	if got := RawPacketCapNames(verbsio.RawCapDelayDrop | 1<<7); !cmp.Equal(got, []string{"DELAY_DROP", "0x80"}) {
		t.Errorf("raw packet cap names: %q", got)
	}
}

func TestRateFromCodes(t *testing.T) {
	cases := []struct {
		width uint8
		speed uint32
		want  string
	}{
		{1, 1, "2.5 Gb/sec (1X SDR)"},
		{2, 32, "100 Gb/sec (4X EDR)"},
		{2, 64, "200 Gb/sec (4X HDR)"},
		{16, 128, "200 Gb/sec (2X NDR)"},
		{0, 0, "-"},
		{1, 3, "-"},
	}
	for _, c := range cases {
		got := "-"
		if r, ok := RateFromCodes(c.width, c.speed); ok {
			got = fmt.Sprintf("%g Gb/sec (%dX %s)", r.Gbps, r.Width, r.Speed)
		}
		if got != c.want {
			t.Errorf("RateFromCodes(%d, %d) = %s, want %s", c.width, c.speed, got, c.want)
		}
	}
}

func TestStateTexts(t *testing.T) {
	tests := []struct {
		code              int
		wantPort, wantPhy string
	}{
		{0, "invalid state (0)", "invalid physical state (0)"},
		{1, "PORT_DOWN (1)", "SLEEP (1)"},
		{2, "PORT_INIT (2)", "POLLING (2)"},
		{3, "PORT_ARMED (3)", "DISABLED (3)"},
		{4, "PORT_ACTIVE (4)", "PORT_CONFIGURATION TRAINNING (4)"},
		{5, "invalid state (5)", "LINK_UP (5)"},
		{6, "invalid state (6)", "LINK_ERROR_RECOVERY (6)"},
		{7, "invalid state (7)", "PHY TEST (7)"},
		{8, "invalid state (8)", "invalid physical state (8)"},
	}
	for _, tt := range tests {
		if got := PortStateText(tt.code); got != tt.wantPort {
			t.Errorf("PortStateText(%d) = %q, want %q", tt.code, got, tt.wantPort)
		}
		if got := PhysStateText(tt.code); got != tt.wantPhy {
			t.Errorf("PhysStateText(%d) = %q, want %q", tt.code, got, tt.wantPhy)
		}
	}
}

func TestTransportText(t *testing.T) {
	tests := []struct {
		node int
		want string
	}{
		{1, "InfiniBand (0)"},
		{2, "InfiniBand (0)"},
		{3, "InfiniBand (0)"},
		{4, "iWARP (1)"},
		{5, "usNIC (2)"},
		{6, "usNIC UDP (3)"},
		{7, "unspecified (4)"}, // rdma-core 44 names IBV_TRANSPORT_UNSPECIFIED
		{99, "invalid transport (-1)"},
	}
	for _, tt := range tests {
		_, name := sysfs.NodeType{Code: tt.node}.Transport()
		if got := TransportText(name); got != tt.want {
			t.Errorf("node type %d: TransportText(%q) = %q, want %q", tt.node, name, got, tt.want)
		}
	}
	if got := TransportText("engine"); got != "engine" {
		t.Errorf("TransportText(engine) = %q", got)
	}
}

func TestRateTexts(t *testing.T) {
	tests := []struct {
		rate               string
		wantWidth, wantSpd string
		wantLane           string
	}{
		{"2.5 Gb/sec (1X SDR)", "1X (1)", "2.5 Gbps (1)", "SDR (2.5 Gbps)"},
		{"5 Gb/sec (1X DDR)", "1X (1)", "5.0 Gbps (2)", "DDR (5.0 Gbps)"},
		{"40 Gb/sec (4X QDR)", "4X (2)", "10.0 Gbps (4)", "QDR (10.0 Gbps)"},
		{"40 Gb/sec (4X FDR10)", "4X (2)", "10.0 Gbps (8)", "FDR10 (10.0 Gbps)"},
		{"56 Gb/sec (4X FDR)", "4X (2)", "14.0 Gbps (16)", "FDR (14.0 Gbps)"},
		{"100 Gb/sec (4X EDR)", "4X (2)", "25.0 Gbps (32)", "EDR (25.0 Gbps)"},
		{"200 Gb/sec (4X HDR)", "4X (2)", "50.0 Gbps (64)", "HDR (50.0 Gbps)"},
		{"400 Gb/sec (4X NDR)", "4X (2)", "100.0 Gbps (128)", "NDR (100.0 Gbps)"},
		{"1600 Gb/sec (8X XDR)", "8X (4)", "200.0 Gbps (256)", "XDR (200.0 Gbps)"},
		{"600 Gb/sec (12X EDR)", "12X (8)", "25.0 Gbps (32)", "EDR (25.0 Gbps)"},
		{"50 Gb/sec (2X EDR)", "2X (16)", "25.0 Gbps (32)", "EDR (25.0 Gbps)"},
		{"75 Gb/sec (3X EDR)", "invalid widthX (0)", "25.0 Gbps (32)", "EDR (25.0 Gbps)"},
		{"10 Gb/sec (1X ZZZ)", "1X (1)", "invalid speed (0)", "ZZZ (invalid speed)"},
	}
	for _, tt := range tests {
		t.Run(tt.rate, func(t *testing.T) {
			r, err := sysfs.ParseRate(tt.rate)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := r.ActiveWidth()
			s, _ := r.ActiveSpeed()
			if got := WidthText(w); got != tt.wantWidth {
				t.Errorf("WidthText = %q, want %q", got, tt.wantWidth)
			}
			if got := SpeedText(s); got != tt.wantSpd {
				t.Errorf("SpeedText = %q, want %q", got, tt.wantSpd)
			}
			if got := LaneSpeedText(rateOf(r)); got != tt.wantLane {
				t.Errorf("LaneSpeedText = %q, want %q", got, tt.wantLane)
			}
		})
	}
}

func TestMiscTexts(t *testing.T) {
	tests := []struct{ got, want string }{
		{LinkLayerText("Ethernet"), "Ethernet"},
		{LinkLayerText("InfiniBand"), "InfiniBand"},
		{LinkLayerText("Unspecified"), "Unspecified"},
		{LinkLayerText(""), "Unknown"},
		{LinkLayerText("FooNet"), "Unknown"},
		{libibverbsFWVer(""), "0.0.0"},
		{libibverbsFWVer("16.35.2000"), "16.35.2000"},
		{GUIDText(0x505400fffe770001), "5054:00ff:fe77:0001"},
		{MTUText(verbsio.MTU1024), "1024 (3)"},
		{MTUText(9), "invalid MTU (9)"},
		{VLText(4), "8 (4)"},
		{VLText(9), "invalid value (9)"},
		{AtomicCapText(verbsio.AtomicHCA), "ATOMIC_HCA (1)"},
		{AtomicCapText(7), "invalid atomic capability (7)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestGIDText(t *testing.T) {
	tests := []struct {
		name      string
		gid       string
		typ       sysfs.GIDType
		linkLayer string
		want      string
		wantOK    bool
	}{
		{"rxe GID 0", "fe80::5054:ff:fe77:1", sysfs.GIDTypeRoCEv2, sysfs.LinkLayerEthernet, "fe80::5054:ff:fe77:1, RoCE v2", true},
		{"rxe GID 1", "::ffff:10.77.0.1", sysfs.GIDTypeRoCEv2, sysfs.LinkLayerEthernet, "::ffff:10.77.0.1, RoCE v2", true},
		{"RoCE v1 is raw hex", "::ffff:10.77.0.1", sysfs.GIDTypeRoCEv1, sysfs.LinkLayerEthernet, "0000:0000:0000:0000:0000:ffff:0a4d:0001, RoCE v1", true},
		{"IB has no suffix", "fe80::c42:a103:12:3456", sysfs.GIDTypeIB, sysfs.LinkLayerInfiniBand, "fe80:0000:0000:0000:0c42:a103:0012:3456", true},
		{"unknown type prints nothing", "::ffff:10.0.0.7", sysfs.GIDTypeUnknown, sysfs.LinkLayerEthernet, "", false},
		{"zero interface id prints nothing", "fe80::", sysfs.GIDTypeRoCEv2, sysfs.LinkLayerEthernet, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := verbsio.ParseGID(tt.gid)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := GIDText(sysfs.GID{Raw: raw, Type: tt.typ}, tt.linkLayer)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("GIDText() = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
