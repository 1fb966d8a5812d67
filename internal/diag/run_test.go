package diag

import (
	"encoding/binary"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// healthyRXE is the rxe capture's machine as the inputs would describe
// it: one Soft-RoCE device, usable device nodes, generous limits, and
// rdma_rxe holding UDP 4791.
func healthyRXE(t *testing.T) Inputs {
	socks, err := ParseProcNetUDP(procNetUDP, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	return Inputs{
		Sysfs:         fixture(t, "rxe"),
		Memlock:       Limit{Soft: Unlimited, Hard: Unlimited},
		DevInfiniband: captureDir(),
		Creds:         Creds{UID: 1000, GIDs: []uint32{1000}},
		UDPSockets:    socks,
		Shm:           ShmStat{Total: 1 << 30, Free: 1 << 30},
		PtraceErr:     fs.ErrNotExist,
		NoFile:        Limit{Soft: 1 << 20, Hard: 1 << 20},
	}
}

// checksOf returns the distinct check names of fs in order of first
// appearance.
func checksOf(fs []Finding) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range fs {
		if !seen[f.Check] {
			seen[f.Check] = true
			out = append(out, f.Check)
		}
	}
	return out
}

func TestEvaluate(t *testing.T) {
	tests := []struct {
		name      string
		engine    Engine
		wantWorst Severity
		wantExit  int
	}{
		// rxe holds UDP 4791: fatal only for the built-in engine.
		{"kernel", EngineKernel, Info, 0},
		{"builtin", EngineBuiltin, Fail, ExitFail},
		{"auto", EngineAuto, Warn, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := healthyRXE(t)
			in.Engine = tt.engine
			got := Evaluate(in)
			if diff := cmp.Diff(CheckNames, checksOf(got)); diff != "" {
				t.Errorf("checks (-want +got):\n%s", diff)
			}
			if w := Worst(got); w != tt.wantWorst {
				t.Errorf("Worst() = %v, want %v; findings:\n%v", w, tt.wantWorst, got)
			}
			if c := ExitCode(got); c != tt.wantExit {
				t.Errorf("ExitCode() = %d, want %d", c, tt.wantExit)
			}
		})
	}
}

func TestEvaluateNoRDMA(t *testing.T) {
	// This machine's shape: no RDMA at all, everything else fine.
	in := Inputs{
		Memlock:       Limit{Soft: 8 << 20, Hard: 8 << 20},
		CapIPCLock:    true,
		DevInfiniband: DevDir{Err: fs.ErrNotExist},
		Shm:           ShmStat{Total: 1 << 30, Free: 1 << 30},
		PtraceErr:     fs.ErrNotExist,
		NoFile:        Limit{Soft: 20000, Hard: 20000},
	}
	for _, tt := range []struct {
		engine Engine
		exit   int
	}{{EngineKernel, ExitFail}, {EngineBuiltin, 0}, {EngineAuto, 0}} {
		in.Engine = tt.engine
		got := Evaluate(in)
		if c := ExitCode(got); c != tt.exit {
			t.Errorf("%v: ExitCode() = %d, want %d; findings:\n%v", tt.engine, c, tt.exit, got)
		}
		if diff := cmp.Diff(CheckNames, checksOf(got)); diff != "" {
			t.Errorf("%v: checks (-want +got):\n%s", tt.engine, diff)
		}
	}
}

func TestEvaluateDefaults(t *testing.T) {
	in := healthyRXE(t)
	in.Memlock = Limit{Soft: DefaultMemlockNeed - 1, Hard: DefaultMemlockNeed - 1}
	in.UDPSockets = nil
	in.Engine = EngineKernel
	var memlock Finding
	for _, f := range Evaluate(in) {
		if f.Check == CheckMemlock {
			memlock = f
		}
	}
	if memlock.Severity != Fail {
		t.Errorf("memlock just below the default need: %v, want FAIL", memlock)
	}
	got := Env{}.withDefaults()
	want := Env{SysRoot: "/sys", ProcRoot: "/proc", DevRoot: "/dev", MemlockNeed: DefaultMemlockNeed, ShmNeed: DefaultShmNeed, NoFileNeed: DefaultNoFileNeed, UDPPort: RoCEv2Port}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Env defaults (-want +got):\n%s", diff)
	}
}
