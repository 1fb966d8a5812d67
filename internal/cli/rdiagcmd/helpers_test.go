package rdiagcmd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/diag"
	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/internal/testsupport/golden"
	"github.com/rperf/rperf/verbsio"
)

// fixtureRoot is the sysfs fixture tree of one machine.
func fixtureRoot(name string) string {
	return filepath.Join("..", "..", "sysfs", "testdata", "sys", name)
}

// Fixture machines, one per case rdiag handles: the real Soft-RoCE
// capture, an InfiniBand port, a RoCE device with several netdevs and
// GIDs, a port that is down, and devices with missing or broken files.
var fixtures = []string{"rxe", "ib", "roce", "portdown", "missing"}

// fakeDevice is a device of the fake engine or of a fake ibverbs
// provider: what it lists and what its queries answer.
type fakeDevice struct {
	info  verbsio.DeviceInfo
	attr  verbsio.DeviceAttr
	port  verbsio.PortAttr
	gids  []verbsio.GIDEntry
	open  error // Open fails with this
	query error // QueryDevice fails with this
}

type fakeQuerier struct{ d *fakeDevice }

func (q fakeQuerier) QueryDevice() (verbsio.DeviceAttr, error) {
	if q.d.query != nil {
		return verbsio.DeviceAttr{}, q.d.query
	}
	return q.d.attr, nil
}

func (q fakeQuerier) QueryPort(port uint8) (verbsio.PortAttr, error) {
	if int(port) < 1 || int(port) > q.d.info.Ports {
		return verbsio.PortAttr{}, verbsio.Errorf("query_port", unix.EINVAL, "port %d does not exist", port)
	}
	return q.d.port, nil
}

func (q fakeQuerier) QueryGIDTable(port uint8) ([]verbsio.GIDEntry, error) {
	if int(port) < 1 || int(port) > q.d.info.Ports {
		return nil, verbsio.Errorf("query_gid", unix.EINVAL, "port %d does not exist", port)
	}
	return q.d.gids, nil
}

func (fakeQuerier) Close() error { return nil }

// engineAttr is a fixed snapshot of what the built-in engine's devices
// report, so that golden files do not change with the host name (node
// GUID), the page size or the engine's later growth.
func engineAttr() verbsio.DeviceAttr {
	return verbsio.DeviceAttr{
		FWVer: "rperf-engine 1.0", NodeGUID: 0x02aabbfffe000001, SysImageGUID: 0x02aabbfffe000001,
		MaxMRSize: 1 << 40, PageSizeCap: 4096, MaxQP: 4096, MaxQPWR: 1 << 15,
		DeviceCapFlags: 1<<10 | 1<<11 | 1<<12 | 1<<13,
		MaxSGE:         32, MaxSGERD: 32, MaxCQ: 4096, MaxCQE: 1 << 17, MaxMR: 16384, MaxPD: 4096,
		MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, MaxResRdAtom: 128 * 4096, AtomicCap: verbsio.AtomicGlob,
		MaxSRQ: 1024, MaxSRQWR: 1 << 15, MaxSRQSGE: 32, MaxAH: 16384, MaxPkeys: 1, PhysPortCnt: 1,
		MaxInlineData: 1024, MaxMsgSize: 1 << 30, SendPaths: []string{"generic", "inline"},
		// Completions stamped in nanoseconds: a 64-bit clock at 1 GHz.
		Ext: &verbsio.DeviceAttrEx{CompletionTimestampMask: ^uint64(0), HCACoreClock: 1_000_000, NumCompVectors: 1},
	}
}

// rawDevice is a raw_<netdev> engine device over veth0: RAW_PACKET QPs,
// IP checksum offload, TSO and pacing on raw QPs, and flow steering.
func rawDevice() *fakeDevice {
	a := engineAttr()
	a.NodeGUID, a.SysImageGUID = 0x02aabbfffe000003, 0x02aabbfffe000003
	a.MaxMsgSize = 256 << 10
	a.DeviceCapFlags |= 1<<18 | 1<<29 // RAW_IP_CSUM, MANAGED_FLOW_STEERING
	a.Ext.MaxRawEthyQP = 4096
	a.RawPacketCaps = verbsio.RawCapIPCsum
	raw := []verbsio.QPType{verbsio.QPTypeRawPacket}
	a.TSO = verbsio.TSOCaps{MaxTSO: 256 << 10, SupportedQP: raw}
	a.PacketPacing = verbsio.PacingCaps{RateLimitMinKbps: 1000, RateLimitMaxKbps: 100_000_000, SupportedQP: raw}
	a.FlowSteering = verbsio.FlowCaps{Features: verbsio.FlowCanETH | verbsio.FlowCanIPv4 | verbsio.FlowCanIPv4Ext |
		verbsio.FlowCanIPv6 | verbsio.FlowCanTCP | verbsio.FlowCanUDP | verbsio.FlowCanVXLAN | verbsio.FlowCanInner |
		verbsio.FlowCanTag | verbsio.FlowCanDrop | verbsio.FlowCanSniffer, MaxPriority: 0xffff, MaxTag: 1<<24 - 1, Ports: 1}
	a.SendPaths = []string{"generic", "burst", "inline", "tso"}
	return &fakeDevice{
		info: verbsio.DeviceInfo{Name: "raw_veth0", Provider: "soft", Fabric: "raw", Transport: "engine",
			NodeGUID: 0x02aabbfffe000003, Netdev: "veth0", Ports: 1},
		attr: a,
		port: verbsio.PortAttr{State: verbsio.PortActive, MaxMTU: verbsio.MTU4096, ActiveMTU: verbsio.MTU1024,
			GIDTblLen: 1, PortCapFlags: 1 << 16, MaxMsgSize: 256 << 10, PkeyTblLen: 1, MaxVLNum: 1, PhysState: 5,
			LinkLayer: verbsio.LinkLayerEthernet, Netdev: "veth0"},
		gids: []verbsio.GIDEntry{{Index: 0, GID: mustGID("fe80::aa:bbff:fe00:3"), Type: verbsio.GIDTypeRoCEv2, Netdev: "veth0"}},
	}
}

func shmDevice() *fakeDevice {
	return &fakeDevice{
		info: verbsio.DeviceInfo{Name: "shm0", Provider: "soft", Fabric: "shm", Transport: "engine", NodeGUID: 0x02aabbfffe000001, Ports: 1},
		attr: engineAttr(),
		port: verbsio.PortAttr{State: verbsio.PortActive, MaxMTU: verbsio.MTU4096, ActiveMTU: verbsio.MTU4096,
			GIDTblLen: 1, MaxMsgSize: 1 << 30, PkeyTblLen: 1, MaxVLNum: 1, PhysState: 5},
		gids: []verbsio.GIDEntry{{Index: 0, GID: verbsio.GID{0xfd, 0x72, 0x70, 0x66, 0, 0, 0x10, 0, 0, 0, 0, 3, 0, 0, 0, 7}, Type: verbsio.GIDTypeIB}},
	}
}

func udpDevice() *fakeDevice {
	a := engineAttr()
	a.NodeGUID, a.SysImageGUID = 0x02aabbfffe000002, 0x02aabbfffe000002
	a.MaxMsgSize = 1 << 31
	// The udp fabric's provider cannot tell the interface families yet.
	a.Unknown = []string{"Interfaces"}
	// The kernel cuts packets (UDP GSO), as on any Linux since 4.18.
	a.TSO = verbsio.TSOCaps{MaxTSO: 61440, SupportedQP: []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD}}
	a.SendPaths = append(append([]string(nil), a.SendPaths...), "tso")
	return &fakeDevice{
		info: verbsio.DeviceInfo{Name: "udp_eth0", Provider: "soft", Fabric: "udp", Transport: "InfiniBand",
			NodeGUID: 0x02aabbfffe000002, Netdev: "eth0", Ports: 1},
		attr: a,
		port: verbsio.PortAttr{State: verbsio.PortActive, MaxMTU: verbsio.MTU4096, ActiveMTU: verbsio.MTU1024,
			GIDTblLen: 2, PortCapFlags: 0x00010000, MaxMsgSize: 1 << 31, PkeyTblLen: 1, MaxVLNum: 1, PhysState: 5,
			LinkLayer: verbsio.LinkLayerEthernet, Netdev: "eth0"},
		gids: []verbsio.GIDEntry{
			{Index: 0, GID: mustGID("fe80::aa:bbff:fe00:2"), Type: verbsio.GIDTypeRoCEv2, Netdev: "eth0"},
			{Index: 1, GID: mustGID("192.0.2.7"), Type: verbsio.GIDTypeRoCEv2, Netdev: "eth0"},
		},
	}
}

func mustGID(s string) verbsio.GID {
	g, err := verbsio.ParseGID(s)
	if err != nil {
		panic(err)
	}
	return g
}

// fakeEnv returns an Env whose providers list devs; Gather reads sysfs
// from the tree it is given and fixes everything else, so check output
// is deterministic.
func fakeEnv(devs ...*fakeDevice) Env {
	return Env{
		Devices: func() ([]verbsio.DeviceInfo, error) {
			var out []verbsio.DeviceInfo
			for _, d := range devs {
				out = append(out, d.info)
			}
			return out, nil
		},
		Open: func(name string) (Querier, error) {
			for _, d := range devs {
				if d.info.Name == name {
					if d.open != nil {
						return nil, d.open
					}
					return fakeQuerier{d}, nil
				}
			}
			return nil, verbsio.Errorf("open_device", unix.ENODEV, "no device %q", name)
		},
		Gather:     fixedGather,
		LocalSysfs: func(string) bool { return false },
	}
}

const charDev = os.ModeDevice | os.ModeCharDevice | 0o666

// fixedGather is diag.Gather with every input but sysfs fixed.
func fixedGather(env diag.Env) (diag.Inputs, error) {
	in := diag.Inputs{
		Engine: env.Engine, IPv6: env.IPv6, MemlockNeed: env.MemlockNeed, ShmNeed: env.ShmNeed,
		NoFileNeed: env.NoFileNeed, UDPPort: env.UDPPort,
		Memlock: diag.Limit{Soft: 64 << 20, Hard: diag.Unlimited},
		NoFile:  diag.Limit{Soft: 1024, Hard: 524288},
		DevInfiniband: diag.DevDir{Nodes: []diag.DevNode{
			{Name: "uverbs0", Mode: charDev}, {Name: "uverbs1", Mode: charDev},
			{Name: "uverbs2", Mode: charDev}, {Name: "rdma_cm", Mode: charDev}}},
		Creds:       diag.Creds{UID: 1000, GIDs: []uint32{1000}},
		Shm:         diag.ShmStat{Total: 1 << 30, Free: 1 << 30},
		PtraceScope: 1,
	}
	fsys, err := sysfs.NewFS(env.SysRoot)
	if err != nil {
		return in, err
	}
	in.Sysfs = fsys.Report()
	return in, nil
}

// result is one rdiag run.
type result struct {
	stdout, stderr string
	code           int
}

// run runs rdiag with args in env, as cli.Main does.
func run(t *testing.T, env Env, args ...string) result {
	t.Helper()
	root := NewRoot(env)
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	code := cli.Main(root, args, &errb)
	return result{out.String(), errb.String(), code}
}

// checkGolden compares got with testdata/golden/name, or rewrites it with
// -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name), []byte(got))
}

// goldenName turns args into a file name.
func goldenName(fixture string, args []string, ext string) string {
	name := fixture + "_" + strings.Join(args, "_")
	name = strings.NewReplacer("--", "", "-", "", " ", "_", "/", "_").Replace(name)
	return name + ext
}

var errFake = errors.New("fake failure")
