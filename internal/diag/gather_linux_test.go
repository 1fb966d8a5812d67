package diag

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRunOnThisMachine runs the real gatherer. What it finds depends on
// the machine (here: no RDMA at all), so it only asserts that Run works
// and reports every check.
func TestRunOnThisMachine(t *testing.T) {
	for _, e := range []Engine{EngineAuto, EngineKernel, EngineBuiltin} {
		t.Run(e.String(), func(t *testing.T) {
			got, err := Run(Env{Engine: e})
			if err != nil {
				t.Fatalf("Run() error = %v", err)
			}
			if diff := cmp.Diff(CheckNames, checksOf(got)); diff != "" {
				t.Errorf("checks (-want +got):\n%s", diff)
			}
			for _, f := range got {
				if f.What == "" {
					t.Errorf("empty finding: %+v", f)
				}
				t.Log(f)
			}
			t.Logf("exit code %d", ExitCode(got))
		})
	}
}

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGatherFromRoots points every root at a fabricated tree: sysfs at
// the roce fixture, a proc with rxe's UDP socket, CAP_SYS_PTRACE and
// ptrace_scope 2, and a dev whose uverbs node is a plain file.
func TestGatherFromRoots(t *testing.T) {
	proc, dev := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(proc, "net", "udp"), procNetUDP)
	writeFile(t, filepath.Join(proc, "self", "status"), "Name:\trdiag\nCapEff:\t0000000000080000\n")
	writeFile(t, filepath.Join(proc, PtraceScopePath), "2\n")
	writeFile(t, filepath.Join(dev, "infiniband", "uverbs2"), "")
	if err := os.Mkdir(filepath.Join(dev, "shm"), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := Gather(Env{
		Engine:   EngineBuiltin,
		SysRoot:  filepath.Join("..", "sysfs", "testdata", "sys", "roce"),
		ProcRoot: proc,
		DevRoot:  dev,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Sysfs.Devices) != 1 || in.Sysfs.Devices[0].Name != "mlx5_2" {
		t.Errorf("Sysfs.Devices = %+v, want mlx5_2", in.Sysfs.Devices)
	}
	if in.UDPErr != nil || len(in.UDPSockets) != 2 || in.UDPSockets[0].Local.Port() != RoCEv2Port {
		t.Errorf("UDPSockets = %v, %v", in.UDPSockets, in.UDPErr)
	}
	if !in.CapSysPtrace || in.CapIPCLock || in.CapNetRaw {
		t.Errorf("CapSysPtrace = %v, CapIPCLock = %v, CapNetRaw = %v; want true, false, false", in.CapSysPtrace, in.CapIPCLock, in.CapNetRaw)
	}
	if in.PtraceScope != 2 || in.PtraceErr != nil {
		t.Errorf("PtraceScope = %d, %v", in.PtraceScope, in.PtraceErr)
	}
	if in.DevInfiniband.Err != nil || len(in.DevInfiniband.Nodes) != 1 || !in.DevInfiniband.Nodes[0].Mode.IsRegular() {
		t.Errorf("DevInfiniband = %+v", in.DevInfiniband)
	}
	if in.Shm.Err != nil || in.Shm.Total == 0 {
		t.Errorf("Shm = %+v", in.Shm)
	}
	if in.MemfdErr != nil {
		t.Errorf("MemfdErr = %v", in.MemfdErr)
	}
	if in.Engine != EngineBuiltin || in.UDPPort != RoCEv2Port || in.MemlockNeed != DefaultMemlockNeed {
		t.Errorf("env not carried over: %+v", in)
	}

	got := map[string][]Severity{}
	for _, f := range Evaluate(in) {
		got[f.Check] = append(got[f.Check], f.Severity)
	}
	want := map[string][]Severity{
		CheckRDMADevices:   {Pass},       // mlx5_2 with uverbs2
		CheckDevInfiniband: {Info, Info}, // FAIL (not a char device) and WARN (no rdma_cm), capped
		CheckPortState:     {Pass},
		CheckMTU:           {Pass},
		CheckRoCEGID:       {Pass},
		CheckMemlock:       {in0(Memlock(in.Memlock, false, DefaultMemlockNeed).Severity)},
		CheckUDPPort:       {Fail}, // 4791 taken
		CheckShm:           {Pass},
		CheckMemfd:         {Pass},
		CheckPtraceScope:   {Pass}, // scope 2, but CAP_SYS_PTRACE
		CheckNoFile:        {Pass},
		CheckNetRaw:        {Info}, // CapEff has CAP_SYS_PTRACE only
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("severities (-want +got):\n%s", diff)
	}
}

// in0 caps a severity at INFO, as ForEngine does for kernel checks under
// the built-in engine.
func in0(s Severity) Severity { return min(s, Info) }

func TestGatherMissingRoots(t *testing.T) {
	empty := t.TempDir()
	in, err := Gather(Env{SysRoot: filepath.Join(empty, "nosys"), ProcRoot: empty, DevRoot: empty})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Sysfs.Errs) == 0 || !errors.Is(in.Sysfs.Errs[0], fs.ErrNotExist) {
		t.Errorf("Sysfs.Errs = %v, want fs.ErrNotExist", in.Sysfs.Errs)
	}
	if !errors.Is(in.DevInfiniband.Err, fs.ErrNotExist) {
		t.Errorf("DevInfiniband.Err = %v", in.DevInfiniband.Err)
	}
	if !errors.Is(in.Shm.Err, fs.ErrNotExist) {
		t.Errorf("Shm.Err = %v", in.Shm.Err)
	}
	if in.UDPErr == nil {
		t.Error("UDPErr = nil without /proc/net/udp")
	}
	if !errors.Is(in.PtraceErr, fs.ErrNotExist) {
		t.Errorf("PtraceErr = %v", in.PtraceErr)
	}
	if diff := cmp.Diff(CheckNames, checksOf(Evaluate(in))); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
}

// TestReadUDPSeesOwnSocket checks the /proc/net/udp parser against the
// running kernel, byte order included.
func TestReadUDPSeesOwnSocket(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		addr := "127.0.0.1:0"
		if network == "udp6" {
			addr = "[::1]:0"
		}
		conn, err := net.ListenPacket(network, addr)
		if err != nil {
			t.Logf("%s: %v (skipped)", network, err)
			continue
		}
		defer conn.Close()
		local := conn.LocalAddr().(*net.UDPAddr).AddrPort()
		socks, err := readUDP("/proc")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range socks {
			if s.Local.Port() == local.Port() && s.Local.Addr().Unmap() == local.Addr().Unmap() && s.UID == uint32(os.Geteuid()) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s socket %s not found in /proc/net/udp*: %v", network, local, socks)
		}
		if f := UDPPort(socks, local.Port(), nil); f.Severity != Fail {
			t.Errorf("UDPPort(own port) = %v, want FAIL", f)
		}
	}
}
