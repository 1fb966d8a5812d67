package sysfs

import "testing"

func TestDevinfoStates(t *testing.T) {
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
		if got := (PortState{Code: tt.code}).Devinfo(); got != tt.wantPort {
			t.Errorf("PortState{%d}.Devinfo() = %q, want %q", tt.code, got, tt.wantPort)
		}
		if got := (PhysState{Code: tt.code}).Devinfo(); got != tt.wantPhy {
			t.Errorf("PhysState{%d}.Devinfo() = %q, want %q", tt.code, got, tt.wantPhy)
		}
	}
}

func TestDevinfoTransport(t *testing.T) {
	tests := []struct {
		code int
		want string
	}{
		{1, "InfiniBand (0)"},
		{2, "InfiniBand (0)"},
		{3, "InfiniBand (0)"},
		{4, "iWARP (1)"},
		{5, "usNIC (2)"},
		{6, "usNIC UDP (3)"},
		{7, "invalid transport (4)"},
		{99, "invalid transport (-1)"},
	}
	for _, tt := range tests {
		if got := (NodeType{Code: tt.code}).DevinfoTransport(); got != tt.want {
			t.Errorf("NodeType{%d}.DevinfoTransport() = %q, want %q", tt.code, got, tt.want)
		}
	}
}

func TestDevinfoRate(t *testing.T) {
	tests := []struct {
		rate                string
		wantWidth, wantSpd  string
		wantWidthOK, wantOK bool
	}{
		{"2.5 Gb/sec (1X SDR)", "1X (1)", "2.5 Gbps (1)", true, true},
		{"5 Gb/sec (1X DDR)", "1X (1)", "5.0 Gbps (2)", true, true},
		{"40 Gb/sec (4X QDR)", "4X (2)", "10.0 Gbps (4)", true, true},
		{"40 Gb/sec (4X FDR10)", "4X (2)", "10.0 Gbps (8)", true, true},
		{"56 Gb/sec (4X FDR)", "4X (2)", "14.0 Gbps (16)", true, true},
		{"100 Gb/sec (4X EDR)", "4X (2)", "25.0 Gbps (32)", true, true},
		{"200 Gb/sec (4X HDR)", "4X (2)", "50.0 Gbps (64)", true, true},
		{"400 Gb/sec (4X NDR)", "4X (2)", "100.0 Gbps (128)", true, true},
		{"1600 Gb/sec (8X XDR)", "8X (4)", "200.0 Gbps (256)", true, true},
		{"600 Gb/sec (12X EDR)", "12X (8)", "25.0 Gbps (32)", true, true},
		{"50 Gb/sec (2X EDR)", "2X (16)", "25.0 Gbps (32)", true, true},
		{"75 Gb/sec (3X EDR)", "invalid widthX (0)", "25.0 Gbps (32)", false, true},
		{"10 Gb/sec (1X ZZZ)", "1X (1)", "invalid speed (0)", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.rate, func(t *testing.T) {
			r, err := ParseRate(tt.rate)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := r.ActiveWidth(); ok != tt.wantWidthOK {
				t.Errorf("ActiveWidth() ok = %v", ok)
			}
			if _, ok := r.ActiveSpeed(); ok != tt.wantOK {
				t.Errorf("ActiveSpeed() ok = %v", ok)
			}
			if got := r.DevinfoActiveWidth(); got != tt.wantWidth {
				t.Errorf("DevinfoActiveWidth() = %q, want %q", got, tt.wantWidth)
			}
			if got := r.DevinfoActiveSpeed(); got != tt.wantSpd {
				t.Errorf("DevinfoActiveSpeed() = %q, want %q", got, tt.wantSpd)
			}
		})
	}
}

func TestDevinfoMisc(t *testing.T) {
	tests := []struct{ got, want string }{
		{DevinfoLinkLayer("Ethernet"), "Ethernet"},
		{DevinfoLinkLayer("InfiniBand"), "InfiniBand"},
		{DevinfoLinkLayer(""), "Unknown"},
		{DevinfoFWVer(""), "0.0.0"},
		{DevinfoFWVer("16.35.2000"), "16.35.2000"},
		{DevinfoLMC(0), "0x00"},
		{DevinfoLMC(3), "0x03"},
		{DevinfoCapMask(0x10000), "0x00010000"},
		{GUID(0x505400fffe770001).String(), "5054:00ff:fe77:0001"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestGIDDevinfo(t *testing.T) {
	tests := []struct {
		name      string
		gid       string
		typ       GIDType
		linkLayer string
		want      string
		wantOK    bool
	}{
		{"rxe GID 0", "fe80::5054:ff:fe77:1", GIDTypeRoCEv2, LinkLayerEthernet, "fe80::5054:ff:fe77:1, RoCE v2", true},
		{"rxe GID 1", "::ffff:10.77.0.1", GIDTypeRoCEv2, LinkLayerEthernet, "::ffff:10.77.0.1, RoCE v2", true},
		{"RoCE v1 is raw hex", "::ffff:10.77.0.1", GIDTypeRoCEv1, LinkLayerEthernet, "0000:0000:0000:0000:0000:ffff:0a4d:0001, RoCE v1", true},
		{"IB has no suffix", "fe80::c42:a103:12:3456", GIDTypeIB, LinkLayerInfiniBand, "fe80:0000:0000:0000:0c42:a103:0012:3456", true},
		{"unknown type prints nothing", "::ffff:10.0.0.7", GIDTypeUnknown, LinkLayerEthernet, "", false},
		{"zero interface id prints nothing", "fe80::", GIDTypeRoCEv2, LinkLayerEthernet, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := GID{Raw: mustGID(t, tt.gid), Type: tt.typ}
			got, ok := g.Devinfo(tt.linkLayer)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Devinfo() = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestMTU(t *testing.T) {
	for m := MTU256; m <= MTU4096; m++ {
		back, ok := MTUFromBytes(m.Bytes())
		if !ok || back != m {
			t.Errorf("MTUFromBytes(%d) = %v, %v", m.Bytes(), back, ok)
		}
	}
	if _, ok := MTUFromBytes(1500); ok {
		t.Error("MTUFromBytes(1500) ok, want false")
	}
	if got := MTU(0).Bytes(); got != 0 {
		t.Errorf("MTU(0).Bytes() = %d", got)
	}
	if got := MTU1024.Devinfo(); got != "1024 (3)" {
		t.Errorf("MTU1024.Devinfo() = %q", got)
	}
	if got := MTU(9).Devinfo(); got != "invalid MTU (9)" {
		t.Errorf("MTU(9).Devinfo() = %q", got)
	}
}

func TestRoCEMTU(t *testing.T) {
	tests := []struct {
		netdev, overhead int
		want             MTU
	}{
		{1500, RXEHeaderOverhead, MTU1024}, // the rxe capture
		{1500, RoCEHeaderOverhead, MTU1024},
		{9000, RoCEHeaderOverhead, MTU4096},
		{4200, RoCEHeaderOverhead, MTU4096},
		{4191, RoCEHeaderOverhead, MTU2048}, // 4096 needs 4192
		{4192, RoCEHeaderOverhead, MTU4096},
		{2144, RoCEHeaderOverhead, MTU2048},
		{2143, RoCEHeaderOverhead, MTU1024},
		{1110, RXEHeaderOverhead, MTU1024}, // rxe's smaller allowance keeps 1024 ...
		{1110, RoCEHeaderOverhead, MTU512}, // ... where iboe_get_mtu drops to 512
		{352, RoCEHeaderOverhead, MTU256},
		{351, RoCEHeaderOverhead, 0},
		{0, RoCEHeaderOverhead, 0},
	}
	for _, tt := range tests {
		if got := RoCEMTU(tt.netdev, tt.overhead); got != tt.want {
			t.Errorf("RoCEMTU(%d, %d) = %v, want %v", tt.netdev, tt.overhead, got, tt.want)
		}
	}
}

func TestRoCEOverheadFor(t *testing.T) {
	tests := []struct {
		machine string
		want    int
	}{
		{"rxe", RXEHeaderOverhead},
		{"roce", RoCEHeaderOverhead},
		{"ib", RoCEHeaderOverhead},
	}
	for _, tt := range tests {
		d := mustFS(t, tt.machine).Report().Devices[0]
		if got := RoCEOverheadFor(d); got != tt.want {
			t.Errorf("RoCEOverheadFor(%s) = %d, want %d", tt.machine, got, tt.want)
		}
	}
	// siw has a parent but is an RNIC, not soft RoCE.
	siw := mustFS(t, "missing").Report().Devices[2]
	if IsSoftRoCE(siw) {
		t.Errorf("IsSoftRoCE(%s) = true", siw.Name)
	}
}
