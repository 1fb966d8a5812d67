package rdiagcmd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/diag"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/hw"
)

// TestExitCodePolicy pins the exit status of a FAIL finding: rdiag check
// and internal/diag agree on cli.ExitRegression.
func TestExitCodePolicy(t *testing.T) {
	if diag.ExitFail != cli.ExitRegression {
		t.Errorf("diag.ExitFail = %d, cli.ExitRegression = %d: rdiag check must exit with the CLI's code", diag.ExitFail, cli.ExitRegression)
	}
	if providerIBVerbs != hw.ProviderName {
		t.Errorf("providerIBVerbs = %q, verbsio/hw registers %q", providerIBVerbs, hw.ProviderName)
	}
}

// TestErrors covers what users get wrong: each error is one line naming
// the problem, with the documented exit status.
func TestErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	roce := fixtureRoot("roce")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string // the first line of stderr
	}{
		{"unknown device", []string{"--sysfs", roce, "info", "nosuch"}, cli.ExitEnvironment,
			`rdiag: no RDMA device named "nosuch"; devices here: shm0, udp_eth0, mlx5_2`},
		{"unknown device ports", []string{"--sysfs", roce, "ports", "mlx5_9"}, cli.ExitEnvironment,
			`rdiag: no RDMA device named "mlx5_9"; devices here: shm0, udp_eth0, mlx5_2`},
		{"unknown device gids", []string{"--sysfs", roce, "gids", "rxe0"}, cli.ExitEnvironment,
			`rdiag: no RDMA device named "rxe0"; devices here: shm0, udp_eth0, mlx5_2`},
		{"sysfs nowhere", []string{"--sysfs", "/nonexistent/sys", "devices"}, cli.ExitUsage,
			"rdiag: --sysfs /nonexistent/sys: no such directory"},
		{"sysfs nowhere info", []string{"--sysfs", "/nonexistent/sys", "info", "-v", "shm0"}, cli.ExitUsage,
			"rdiag: --sysfs /nonexistent/sys: no such directory"},
		{"sysfs nowhere check", []string{"--sysfs", "/nonexistent/sys", "check"}, cli.ExitUsage,
			"rdiag: --sysfs /nonexistent/sys: no such directory"},
		{"sysfs is a file", []string{"--sysfs", file, "gids"}, cli.ExitUsage,
			"rdiag: --sysfs " + file + ": not a directory"},
		{"bad engine", []string{"check", "--engine", "fast"}, cli.ExitUsage,
			`rdiag: --engine "fast": want auto, kernel or builtin`},
		{"bad memlock", []string{"check", "--memlock-need", "lots"}, cli.ExitUsage,
			`rdiag: --memlock-need: size "lots": want a number with an optional unit (KiB, MiB, GiB)`},
		{"bad unit", []string{"check", "--shm-need", "3furlongs"}, cli.ExitUsage,
			`rdiag: --shm-need: size "3furlongs": unknown unit "furlongs" (want KiB, MiB, GiB or TiB)`},
		{"udp port 0", []string{"check", "--udp-port", "0"}, cli.ExitUsage,
			"rdiag: --udp-port 0: want a port number from 1 to 65535"},
		{"unknown command", []string{"lsdev"}, cli.ExitUsage, `rdiag: unknown command "lsdev" for "rdiag"`},
		{"unknown flag", []string{"devices", "--all"}, cli.ExitUsage, "rdiag: unknown flag: --all"},
		{"extra argument", []string{"devices", "mlx5_0"}, cli.ExitUsage, `rdiag: unknown command "mlx5_0" for "rdiag devices"`},
		{"two devices", []string{"info", "a", "b"}, cli.ExitUsage, "rdiag: accepts at most 1 arg(s), received 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, fakeEnv(shmDevice(), udpDevice()), c.args...)
			if r.code != c.code {
				t.Errorf("exit %d, want %d", r.code, c.code)
			}
			first, rest, _ := strings.Cut(r.stderr, "\n")
			if first != c.stderr {
				t.Errorf("stderr line 1 = %q, want %q", first, c.stderr)
			}
			// Usage errors add one pointer to --help; nothing else follows.
			if rest != "" && !(c.code == cli.ExitUsage && strings.HasPrefix(rest, "Run 'rdiag") && strings.Count(rest, "\n") == 1) {
				t.Errorf("stderr has more than the error line: %q", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing on error", r.stdout)
			}
		})
	}
}

// TestEmptySysfs: a tree without class/infiniband has no kernel devices,
// which is said, not an error.
func TestEmptySysfs(t *testing.T) {
	root := t.TempDir()
	r := run(t, fakeEnv(shmDevice()), "--sysfs", root, "devices")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"shm0", "no kernel RDMA devices: " + root + " has no class/infiniband", "warning: sysfs: list class/net"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run(t, fakeEnv(), "--sysfs", root, "info")
	if r.code != 0 || !strings.Contains(r.stdout, "no RDMA devices") {
		t.Errorf("info with no devices: exit %d, stdout %q", r.code, r.stdout)
	}
	r = run(t, fakeEnv(), "--sysfs", root, "info", "x")
	if r.code != cli.ExitEnvironment || !strings.Contains(r.stderr, `no RDMA device named "x"; there are no RDMA devices`) {
		t.Errorf("info x with no devices: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestEngineTrouble: an engine device that cannot be opened, and a
// provider that fails to list, degrade that device, not the report.
func TestEngineTrouble(t *testing.T) {
	broken := shmDevice()
	broken.open = verbsio.Errorf("open_device", 24, "too many open files")
	env := fakeEnv(broken, udpDevice())
	inner := env.Devices
	env.Devices = func() ([]verbsio.DeviceInfo, error) {
		devs, _ := inner()
		return devs, errors.New("list devices: raw: AF_PACKET needs CAP_NET_RAW")
	}
	r := run(t, env, "--sysfs", fixtureRoot("rxe"), "devices")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"shm0", "udp_eth0", "rxe0", "warning: list devices: raw: AF_PACKET needs CAP_NET_RAW"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("devices lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run(t, env, "--sysfs", fixtureRoot("rxe"), "info", "shm0")
	if r.code != 0 {
		t.Fatalf("info: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"fw_ver:\t\t\t\tunknown: cannot open shm0: open_device: too many open files", "max_qp            unknown: cannot open shm0", "note: open: open_device: too many open files"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("info lacks %q:\n%s", want, r.stdout)
		}
	}

	failing := udpDevice()
	failing.query = verbsio.Errorf("query_device", 5, "engine gone")
	r = run(t, fakeEnv(failing), "--sysfs", fixtureRoot("rxe"), "info", "--json", "udp_eth0")
	if r.code != 0 || !strings.Contains(r.stdout, `"max_qp": null`) || !strings.Contains(r.stdout, "query_device failed") {
		t.Errorf("info of a device whose query fails: exit %d\n%s", r.code, r.stdout)
	}
}
