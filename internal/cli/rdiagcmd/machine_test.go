package rdiagcmd

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/diag"
	"github.com/rperf/rperf/verbsio/hw"
	_ "github.com/rperf/rperf/verbsio/soft" // the built-in engine, as in cmd/rdiag
)

// These tests run rdiag against this machine: the real verbsio registry
// (the built-in engine and the ibverbs provider of this build), the real
// /sys and the real pre-flight gatherer.

func machineEnv() Env { return Default(hw.Built) }

// haveKernelRDMA reports whether this machine has kernel RDMA devices.
func haveKernelRDMA() bool {
	ents, err := os.ReadDir("/sys/class/infiniband")
	return err == nil && len(ents) > 0
}

// TestMachineDevices: shm0 is always there (provider soft, fabric shm);
// kernel devices are listed exactly when /sys has them.
func TestMachineDevices(t *testing.T) {
	r := run(t, machineEnv(), "devices", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var devs []deviceJSON
	if err := json.Unmarshal([]byte(r.stdout), &devs); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	var shm *deviceJSON
	kernel := 0
	for i, d := range devs {
		if d.Name == "shm0" {
			shm = &devs[i]
		}
		if d.Kernel {
			kernel++
		}
		if d.Provider == "soft" && d.Fabric == "" {
			t.Errorf("built-in device %s has no fabric", d.Name)
		}
	}
	if shm == nil {
		t.Fatalf("shm0 missing: %s", r.stdout)
	}
	if shm.Provider != "soft" || shm.Fabric != "shm" || shm.Ports != 1 || shm.Kernel || !shm.Openable ||
		len(shm.PortStates) != 1 || shm.PortStates[0] != "ACTIVE" || shm.NodeGUID == nil {
		t.Errorf("shm0 = %+v", *shm)
	}
	if !haveKernelRDMA() && kernel != 0 {
		t.Errorf("this machine has no /sys/class/infiniband, but %d kernel devices were listed", kernel)
	}
	if haveKernelRDMA() && kernel == 0 {
		t.Errorf("/sys/class/infiniband has devices, but none was listed")
	}

	r = run(t, machineEnv(), "devices")
	if r.code != 0 || !strings.Contains(r.stdout, "shm0") {
		t.Errorf("devices table: exit %d\n%s", r.code, r.stdout)
	}
	if !haveKernelRDMA() && !strings.Contains(r.stdout, "note: no kernel RDMA devices") {
		t.Errorf("devices table does not say why there are no kernel devices:\n%s", r.stdout)
	}
}

// TestMachineInfoShm0 opens the real built-in engine: every capability
// has an answer, and what the engine does not offer says so.
func TestMachineInfoShm0(t *testing.T) {
	r := run(t, machineEnv(), "info", "--json", "shm0")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var j infoJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatal(err)
	}
	c := j.Capabilities
	if j.Source != srcQueryDevice || j.Provider != "soft" || j.Fabric != "shm" {
		t.Errorf("source %q provider %q fabric %q", j.Source, j.Provider, j.Fabric)
	}
	for name, p := range map[string]*int{"max_qp": c.MaxQP, "max_qp_wr": c.MaxQPWR, "max_sge": c.MaxSGE, "max_cqe": c.MaxCQE, "max_mr": c.MaxMR} {
		if p == nil || *p <= 0 {
			t.Errorf("%s = %v, want a positive limit", name, p)
		}
	}
	if c.MaxInlineData == nil && j.Unknown["max_inline_data"] == "" {
		t.Errorf("max_inline_data is null without a reason")
	}
	if c.TSO == nil || c.PacketPacing == nil || c.MaxDMSize == nil || c.RawPacketCaps == nil || c.SendPaths == nil || c.Interfaces == nil {
		t.Fatalf("shm0 capabilities incomplete: %s", r.stdout)
	}
	if len(c.MTU) != 1 || c.MTU[0].Active == nil || c.MTU[0].Max == nil {
		t.Errorf("mtu = %+v", c.MTU)
	}
	if len(j.Ports) != 1 || len(j.Ports[0].GIDs) == 0 {
		t.Errorf("ports = %+v", j.Ports)
	}

	r = run(t, machineEnv(), "info", "-v", "shm0")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"hca_id:\tshm0\n", "\tfw_ver:", "\tmax_qp:", "\t\tport:\t1\n", "capabilities of shm0", "tso ", "packet_pacing ", "max_dm_size ", "send_paths ", "interfaces "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("info -v shm0 lacks %q", want)
		}
	}
	if c.TSO.Supported == false && !strings.Contains(r.stdout, "not supported (max_tso 0)") {
		t.Errorf("TSO is not supported, but the table does not say so:\n%s", r.stdout)
	}
}

// TestMachinePortsAndGIDs lists the real ports and GID tables.
func TestMachinePortsAndGIDs(t *testing.T) {
	for _, cmd := range []string{"ports", "gids"} {
		r := run(t, machineEnv(), cmd, "--json")
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", cmd, r.code, r.stderr)
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, row := range rows {
			found = found || row["device"] == "shm0"
		}
		if !found {
			t.Errorf("%s --json has no shm0 row:\n%s", cmd, r.stdout)
		}
	}
}

// TestMachineCheck runs the real pre-flight checks: every check reports,
// and the exit status follows the worst finding.
func TestMachineCheck(t *testing.T) {
	for _, engine := range []string{"auto", "builtin", "kernel"} {
		t.Run(engine, func(t *testing.T) {
			r := run(t, machineEnv(), "check", "--json", "--engine", engine)
			var out checkJSON
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatalf("%v\n%s%s", err, r.stdout, r.stderr)
			}
			seen := map[string]bool{}
			for _, f := range out.Findings {
				seen[f.Check] = true
				if f.Severity == "FAIL" && f.Fix == "" {
					t.Errorf("FAIL without a fix: %+v", f)
				}
			}
			for _, name := range diag.CheckNames {
				if !seen[name] {
					t.Errorf("check %s did not report", name)
				}
			}
			wantCode := 0
			if out.Counts["FAIL"] > 0 {
				wantCode = diag.ExitFail
			}
			if r.code != wantCode || out.ExitCode != wantCode {
				t.Errorf("exit %d (json exit_code %d) with %d FAIL findings; want %d", r.code, out.ExitCode, out.Counts["FAIL"], wantCode)
			}
			if engine == "kernel" && !haveKernelRDMA() && r.code != diag.ExitFail {
				t.Errorf("no kernel RDMA devices, yet --engine kernel passed")
			}
		})
	}
	r := run(t, machineEnv(), "check")
	if !strings.Contains(r.stdout, "result: ") || !strings.Contains(r.stdout, "RESULT  CHECK") {
		t.Errorf("check table:\n%s", r.stdout)
	}
}
