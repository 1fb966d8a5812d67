package rdiagcmd

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/rperf/rperf/verbsio"
)

// mlx5Device is the roce fixture's mlx5_2 as the ibverbs build would
// answer for it: limits, TSO, pacing, device memory and raw packet caps,
// with MaxInlineData unknown (verbs reports inline per QP).
func mlx5Device() *fakeDevice {
	return &fakeDevice{
		info: verbsio.DeviceInfo{Name: "mlx5_2", Provider: providerIBVerbs, Transport: "InfiniBand",
			NodeGUID: 0xb8cef6030012abcd, Netdev: "ens2f0np0", Ports: 1},
		attr: verbsio.DeviceAttr{
			FWVer: "26.36.1010", NodeGUID: 0xb8cef6030012abcd, SysImageGUID: 0xb8cef6030012abcd,
			VendorID: 0x02c9, VendorPartID: 4127, HWVer: 0, MaxMRSize: ^uint64(0), PageSizeCap: 0xfffffffffffff000,
			MaxQP: 131072, MaxQPWR: 32768, DeviceCapFlags: 0xe97e1c36, MaxSGE: 30, MaxSGERD: 30,
			MaxCQ: 16777216, MaxCQE: 4194303, MaxMR: 16777216, MaxPD: 8388608, MaxQPRdAtom: 16,
			MaxQPInitRdAtom: 16, MaxResRdAtom: 2097152, AtomicCap: verbsio.AtomicHCA, MaxSRQ: 8388608,
			MaxSRQWR: 32767, MaxSRQSGE: 31, MaxAH: 2147483647, MaxPkeys: 128, LocalCAAckDelay: 16, PhysPortCnt: 1,
			MaxMsgSize: 1 << 30,
			TSO:        verbsio.TSOCaps{MaxTSO: 262144, SupportedQP: []verbsio.QPType{verbsio.QPTypeUD, verbsio.QPTypeRawPacket}},
			PacketPacing: verbsio.PacingCaps{RateLimitMinKbps: 1, RateLimitMaxKbps: 25000000,
				SupportedQP: []verbsio.QPType{verbsio.QPTypeRawPacket}},
			MaxDMSize:     131072,
			RawPacketCaps: verbsio.RawCapCVLANStripping | verbsio.RawCapScatterFCS | verbsio.RawCapIPCsum,
			SendPaths:     []string{"generic", "inline"},
			Unknown:       []string{"MaxInlineData"},
		},
		port: verbsio.PortAttr{State: verbsio.PortActive, MaxMTU: verbsio.MTU4096, ActiveMTU: verbsio.MTU1024,
			GIDTblLen: 255, PortCapFlags: 0x04010000, MaxMsgSize: 1 << 30, PkeyTblLen: 1, MaxVLNum: 4,
			ActiveWidth: 1, ActiveSpeed: 32, PhysState: 5, LinkLayer: verbsio.LinkLayerEthernet, Netdev: "ens2f0np0"},
		gids: []verbsio.GIDEntry{
			{Index: 0, GID: mustGID("fe80::bace:f6ff:fe12:abcd"), Type: verbsio.GIDTypeRoCEv1, Netdev: "ens2f0np0"},
			{Index: 1, GID: mustGID("fe80::bace:f6ff:fe12:abcd"), Type: verbsio.GIDTypeRoCEv2, Netdev: "ens2f0np0"},
			{Index: 2, GID: mustGID("192.168.10.5"), Type: verbsio.GIDTypeRoCEv1, Netdev: "ens2f0np0"},
			{Index: 3, GID: mustGID("192.168.10.5"), Type: verbsio.GIDTypeRoCEv2, Netdev: "ens2f0np0"},
		},
	}
}

// kernelEnv is a machine whose /sys is the roce fixture, with the ibverbs
// provider listing mlx5_2, built (or not) to open it.
func kernelEnv(built bool, dev *fakeDevice) Env {
	env := fakeEnv(shmDevice(), dev)
	env.IBVerbsBuilt = built
	env.LocalSysfs = func(string) bool { return true }
	return env
}

// TestKernelDeviceThroughVerbs: with the ibverbs build on the machine
// itself, a kernel device's verbs-only fields come from QueryDevice and
// QueryPort, and the capability report has every answer.
func TestKernelDeviceThroughVerbs(t *testing.T) {
	roce := fixtureRoot("roce")
	env := kernelEnv(true, mlx5Device())
	r := run(t, env, "--sysfs", roce, "info", "-v", "mlx5_2")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	checkGolden(t, "kernelverbs_info_v_mlx5_2.txt", r.stdout)
	for _, want := range []string{
		"vendor_id:\t\t\t0x02c9", "max_qp:\t\t\t\t131072", "board_id:\t\t\tMT_0000000531",
		"active_mtu:\t\t1024 (3)", "max_vl_num:\t\t8 (4)", "active_speed:\t\t25.0 Gbps (32)",
		"max_mw:\t\t\t\tunknown: not reported by rperf's ibverbs provider",
		"tso               yes: up to 262144 bytes (256 KiB) per send; QP types UD, RAW_PACKET",
		"packet_pacing     yes: 1 to 25000000 kbps; QP types RAW_PACKET",
		"max_dm_size       131072 bytes (128 KiB)",
		"raw_packet_caps   CVLAN_STRIPPING, SCATTER_FCS, IP_CSUM",
		"max_inline_data   unknown ",
		"maximum available device memory:\t131072Bytes",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("info -v lacks %q", want)
		}
	}
	if strings.Contains(r.stdout, "needs the ibverbs build") {
		t.Errorf("the ibverbs build still says it is needed:\n%s", r.stdout)
	}

	r = run(t, env, "--sysfs", roce, "info", "--json", "mlx5_2")
	var j infoJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatal(err)
	}
	c := j.Capabilities
	if j.Source != srcQueryDevice || j.Provider != providerIBVerbs || c.MaxQP == nil || *c.MaxQP != 131072 ||
		c.MaxInlineData != nil || j.Unknown["max_inline_data"] == "" || c.TSO == nil || !c.TSO.Supported ||
		c.MaxDMSize == nil || *c.MaxDMSize != 131072 || len(c.MTU) != 1 || *c.MTU[0].Active != 1024 {
		t.Errorf("info --json: %s", r.stdout)
	}

	r = run(t, env, "--sysfs", roce, "devices", "--json")
	var devs []deviceJSON
	if err := json.Unmarshal([]byte(r.stdout), &devs); err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[1].Name != "mlx5_2" || devs[1].Provider != providerIBVerbs || !devs[1].Openable || !devs[1].Kernel {
		t.Errorf("devices --json: %+v", devs)
	}

	// The verbs query's active MTU (1024) is below what the netdev's 9000
	// allows (4096): the mtu check now sees it.
	r = run(t, env, "--sysfs", roce, "check", "--engine", "kernel")
	if !strings.Contains(r.stdout, "fits IB MTU 4096, but the port's active_mtu is only 1024") {
		t.Errorf("check does not use the verbs port MTU:\n%s", r.stdout)
	}
}

// TestKernelDeviceWithoutVerbs: the same machine without the ibverbs
// build, and with a build whose open fails, falls back to sysfs and says
// why each verbs-only field is unknown.
func TestKernelDeviceWithoutVerbs(t *testing.T) {
	roce := fixtureRoot("roce")
	failing := mlx5Device()
	failing.open = verbsio.Errorf("open_device", 13, "/dev/infiniband/uverbs2: permission denied")
	cases := []struct {
		name     string
		env      Env
		why      string
		openable bool
	}{
		{"stub build", kernelEnv(false, mlx5Device()), "unknown: needs the ibverbs build (make build-ibverbs)", false},
		{"open fails", kernelEnv(true, failing), "unknown: cannot open mlx5_2: open_device: /dev/infiniband/uverbs2: permission denied (EACCES)", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.env, "--sysfs", roce, "info", "-v", "mlx5_2")
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			for _, want := range []string{"max_qp:\t\t\t\t" + c.why, "fw_ver:\t\t\t\t26.36.1010", "active_mtu:\t\t4096 (5)", "(from sysfs only)"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("info -v lacks %q:\n%s", want, r.stdout)
				}
			}
			// The capability report's raw rows say why too, not vanish.
			r = run(t, c.env, "--sysfs", roce, "info", "mlx5_2")
			for _, key := range []string{"tso", "raw_packet_caps", "max_raw_ethy_qp", "flow_steering", "hca_core_clock"} {
				if !regexp.MustCompile(`(?m)^` + key + `\s+` + regexp.QuoteMeta(c.why) + `\s`).MatchString(r.stdout) {
					t.Errorf("info lacks the row %s %q:\n%s", key, c.why, r.stdout)
				}
			}
			r = run(t, c.env, "--sysfs", roce, "devices", "--json")
			var devs []deviceJSON
			if err := json.Unmarshal([]byte(r.stdout), &devs); err != nil {
				t.Fatal(err)
			}
			if d := devs[len(devs)-1]; d.Provider != providerIBVerbs || d.Openable != c.openable {
				t.Errorf("devices: %+v", d)
			}
		})
	}
}

// TestOtherMachineTree: a --sysfs tree that is not this machine's is only
// described, even by the ibverbs build, and the provider's own devices
// (this machine's) are not mixed in.
func TestOtherMachineTree(t *testing.T) {
	env := fakeEnv(shmDevice(), mlx5Device())
	env.IBVerbsBuilt = true
	r := run(t, env, "--sysfs", fixtureRoot("rxe"), "devices")
	if strings.Contains(r.stdout, "mlx5_2") || !regexp.MustCompile(`(?m)^rxe0\s+sysfs\s`).MatchString(r.stdout) {
		t.Errorf("devices of another machine's tree:\n%s", r.stdout)
	}
	r = run(t, env, "--sysfs", fixtureRoot("rxe"), "info", "-v", "rxe0")
	if !strings.Contains(r.stdout, "max_qp:\t\t\t\t"+whyOtherMachine) {
		t.Errorf("info -v rxe0:\n%s", r.stdout)
	}
}
