package rdiagcmd

import (
	"encoding/json"
	"testing"
)

// TestGoldenFixtures runs every inspection command, as a table and as
// JSON, against every fixture machine, with a deterministic built-in
// engine (shm0 and udp_eth0) beside the fixture's kernel devices.
func TestGoldenFixtures(t *testing.T) {
	type cmdCase struct {
		args []string
		code int
	}
	perFixture := map[string][]cmdCase{
		"rxe": {{[]string{"info", "-v", "rxe0"}, 0}, {[]string{"info", "rxe0"}, 0},
			{[]string{"check"}, 0}, {[]string{"check", "--engine", "builtin", "--memlock-need", "1GiB"}, 0}},
		"ib":       {{[]string{"info", "-v", "mlx5_0"}, 0}},
		"roce":     {{[]string{"info", "-v", "mlx5_2"}, 0}, {[]string{"gids", "--ipv6"}, 0}},
		"portdown": {{[]string{"info", "-v", "mlx5_1"}, 0}},
		"missing":  {{[]string{"info", "-v"}, 0}},
	}
	common := []cmdCase{
		{[]string{"devices"}, 0},
		{[]string{"ports"}, 0},
		{[]string{"gids"}, 0},
	}
	// check --engine kernel: the exit status each machine earns.
	checkCode := map[string]int{"rxe": 0, "ib": 0, "roce": 0, "portdown": 3, "missing": 0}
	for _, fx := range fixtures {
		cases := append(append([]cmdCase{}, common...), perFixture[fx]...)
		cases = append(cases, cmdCase{[]string{"check", "--engine", "kernel"}, checkCode[fx]})
		for _, c := range cases {
			for _, asJSON := range []bool{false, true} {
				args := append([]string{"--sysfs", fixtureRoot(fx)}, c.args...)
				ext := ".txt"
				if asJSON {
					args = append(args, "--json")
					ext = ".json"
				}
				name := goldenName(fx, c.args, ext)
				t.Run(name, func(t *testing.T) {
					r := run(t, fakeEnv(shmDevice(), udpDevice()), args...)
					if r.code != c.code {
						t.Fatalf("exit %d, want %d; stderr %q", r.code, c.code, r.stderr)
					}
					if asJSON && !json.Valid([]byte(r.stdout)) {
						t.Fatalf("--json output is not JSON:\n%s", r.stdout)
					}
					checkGolden(t, name, r.stdout+stderrSection(r))
				})
			}
		}
	}
}

// stderrSection appends stderr and the exit status to a golden file when
// there is something to say.
func stderrSection(r result) string {
	if r.stderr == "" && r.code == 0 {
		return ""
	}
	return "--- stderr ---\n" + r.stderr + "--- exit " + itoa(r.code) + " ---\n"
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestGoldenEngine shows the built-in engine's devices on their own, a
// raw_<netdev> device (raw caps, steering, the completion clock) among
// them.
func TestGoldenEngine(t *testing.T) {
	for _, args := range [][]string{
		{"info", "shm0"},
		{"info", "-v", "udp_eth0"},
		{"info", "--json", "udp_eth0"},
		{"devices", "--json"},
		{"info", "-v", "raw_veth0"},
		{"info", "--json", "raw_veth0"},
	} {
		name := goldenName("engine", args, ".txt")
		t.Run(name, func(t *testing.T) {
			r := run(t, fakeEnv(shmDevice(), udpDevice(), rawDevice()), append([]string{"--sysfs", fixtureRoot("rxe")}, args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			checkGolden(t, name, r.stdout)
		})
	}
}
