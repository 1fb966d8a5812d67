package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rdiagBin is the binary built once for the end-to-end tests.
var rdiagBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rdiag-e2e")
	if err != nil {
		panic(err)
	}
	rdiagBin = filepath.Join(dir, "rdiag")
	build := exec.Command("go", "build", "-o", rdiagBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("go build ./cmd/rdiag: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// rdiag runs the built binary.
func rdiag(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(rdiagBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run rdiag %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

const (
	rxeTree = "../../internal/sysfs/testdata/sys/rxe"
	rxePcap = "../../internal/pcap/testdata/rxe-rc.pcap"
)

func noKernelRDMA() bool {
	ents, err := os.ReadDir("/sys/class/infiniband")
	return err != nil || len(ents) == 0
}

// TestE2EDevices: the binary lists the built-in engine's shm0, and on a
// machine without kernel RDMA no kernel device.
func TestE2EDevices(t *testing.T) {
	out, errOut, code := rdiag(t, "devices", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var devs []map[string]any
	if err := json.Unmarshal([]byte(out), &devs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	shm := false
	for _, d := range devs {
		for _, k := range []string{"name", "provider", "fabric", "netdev", "ports"} {
			if _, ok := d[k]; !ok {
				t.Errorf("device %v lacks %q", d["name"], k)
			}
		}
		if d["name"] == "shm0" {
			shm = d["provider"] == "soft" && d["fabric"] == "shm"
		}
		if noKernelRDMA() && d["kernel"] == true {
			t.Errorf("kernel device %v listed on a machine without /sys/class/infiniband", d["name"])
		}
	}
	if !shm {
		t.Errorf("no shm0 with provider soft and fabric shm:\n%s", out)
	}
}

// TestE2ERXE: the real Soft-RoCE capture's fixture through the binary.
func TestE2ERXE(t *testing.T) {
	out, errOut, code := rdiag(t, "--sysfs", rxeTree, "info", "-v", "rxe0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"hca_id:\trxe0", "active_mtu:\t\t1024 (3)", "GID[  1]:\t\t::ffff:10.77.0.1, RoCE v2",
		"max_qp:\t\t\t\tunknown: needs the ibverbs build (make build-ibverbs)"} {
		if !strings.Contains(out, want) {
			t.Errorf("info -v rxe0 lacks %q", want)
		}
	}
	out, _, code = rdiag(t, "--sysfs", rxeTree, "gids", "rxe0")
	if code != 0 || !strings.Contains(out, "::ffff:10.77.0.1") || !strings.Contains(out, "*") {
		t.Errorf("gids rxe0: exit %d\n%s", code, out)
	}
}

// TestE2ECheck runs the real checks; FAIL exits 3, anything else 0.
func TestE2ECheck(t *testing.T) {
	out, errOut, code := rdiag(t, "check")
	if code != 0 && code != 3 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if (code == 3) != strings.Contains(out, "\nFAIL ") {
		t.Errorf("exit %d does not match the findings:\n%s", code, out)
	}
	if noKernelRDMA() {
		_, errOut, code = rdiag(t, "check", "--engine", "kernel")
		if code != 3 || !strings.HasPrefix(errOut, "rdiag: check: ") {
			t.Errorf("--engine kernel without kernel RDMA: exit %d, stderr %q", code, errOut)
		}
	}
}

// TestE2EPcap summarises the rxe capture.
func TestE2EPcap(t *testing.T) {
	out, errOut, code := rdiag(t, "pcap", "--json", rxePcap)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var s struct {
		Packets    int   `json:"packets"`
		ICRCErrors int   `json:"icrc_errors"`
		Flows      []any `json:"flows"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Packets != 74 || s.ICRCErrors != 0 || len(s.Flows) != 8 {
		t.Errorf("packets %d, icrc_errors %d, flows %d; want 74, 0, 8", s.Packets, s.ICRCErrors, len(s.Flows))
	}
	out, _, code = rdiag(t, "pcap", rxePcap)
	if code != 0 || !strings.Contains(out, "74 RoCEv2 packets") || !strings.Contains(out, "RC_RDMA_READ_REQUEST=8") {
		t.Errorf("pcap table: exit %d\n%s", code, out)
	}
}

// TestE2EErrors: one line on stderr and the documented exit status.
func TestE2EErrors(t *testing.T) {
	cases := []struct {
		args   []string
		code   int
		prefix string
	}{
		{[]string{"info", "nosuch0"}, 4, `rdiag: no RDMA device named "nosuch0"; devices here: shm0`},
		{[]string{"--sysfs", "/nonexistent", "devices"}, 2, "rdiag: --sysfs /nonexistent: no such directory\n"},
		{[]string{"pcap", "/nonexistent.pcap"}, 1, "rdiag: open /nonexistent.pcap: no such file or directory\n"},
		{[]string{"pcap", "main.go"}, 1, "rdiag: main.go: pcap: "},
	}
	for _, c := range cases {
		out, errOut, code := rdiag(t, c.args...)
		if code != c.code || !strings.HasPrefix(errOut, c.prefix) || out != "" {
			t.Errorf("rdiag %v: exit %d, stderr %q, stdout %q; want exit %d, stderr %q...", c.args, code, errOut, out, c.code, c.prefix)
		}
	}
}
