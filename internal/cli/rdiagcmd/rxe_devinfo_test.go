package rdiagcmd

import (
	"encoding/json"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/internal/diag/devinfo"
	"github.com/rperf/rperf/internal/testsupport/devinfotest"
	"github.com/rperf/rperf/verbsio"
)

var gidLabelRE = regexp.MustCompile(`^GID\[\s*(\d+)\]$`)

// parseDevinfoText parses one device's ibv_devinfo-style text (see package
// devinfotest).
func parseDevinfoText(t *testing.T, text string) devinfotest.Fields {
	t.Helper()
	f, err := devinfotest.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const rxeDevinfoCapture = "../../sysfs/testdata/src/rxe/ibv_devinfo-v.txt"

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRXEInfoMatchesDevinfo runs `rdiag --sysfs <rxe fixture> info -v rxe0`
// and compares it with `ibv_devinfo -v` of the same real Soft-RoCE device,
// field by field: every field both show must have the same value, every
// field the capture has must appear in rdiag's output (with its value or
// as "unknown: ..."), and rdiag must not invent fields devinfo lacks.
func TestRXEInfoMatchesDevinfo(t *testing.T) {
	want := parseDevinfoText(t, readFile(t, rxeDevinfoCapture))
	r := run(t, fakeEnv(), "--sysfs", fixtureRoot("rxe"), "info", "-v", "rxe0")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := parseDevinfoText(t, r.stdout)

	verbsDevice, verbsPort := devinfo.VerbsOnly()
	var agreed []string
	compare := func(what string, want, got map[string]string) {
		t.Helper()
		for label, w := range want {
			g, ok := got[label]
			switch {
			case !ok:
				t.Errorf("%s field %q (devinfo: %q) is missing from rdiag info -v", what, label, w)
			case strings.HasPrefix(g, "unknown"):
				// rdiag says it cannot know; the field must be one only a
				// verbs query answers.
				if !slices.Contains(verbsDevice, label) && !slices.Contains(verbsPort, label) {
					t.Errorf("%s field %q: rdiag says %q, but sysfs can know it (devinfo: %q)", what, label, g, w)
				}
			case g != w:
				t.Errorf("%s field %q: rdiag %q, ibv_devinfo %q", what, label, g, w)
			default:
				agreed = append(agreed, label)
			}
		}
		for label, g := range got {
			if _, ok := want[label]; !ok && !strings.HasPrefix(g, "unknown") && label != "board_id" {
				t.Errorf("%s field %q = %q is not in ibv_devinfo -v's output", what, label, g)
			}
		}
	}
	compare("device", want.Device, got.Device)
	if len(got.Ports) != len(want.Ports) {
		t.Fatalf("rdiag shows %d ports, devinfo %d", len(got.Ports), len(want.Ports))
	}
	for num, wp := range want.Ports {
		compare("port "+strconv.Itoa(num), wp, got.Ports[num])
	}
	// Every field sysfs can know about this device: the values above were
	// compared with the capture, and these are the ones that agreed.
	slices.Sort(agreed)
	wantAgreed := []string{"GID[0]", "GID[1]", "active_mtu", "active_speed", "active_width", "fw_ver",
		"gid_tbl_len", "hca_id", "link_layer", "max_mtu", "node_guid", "phys_port_cnt", "phys_state",
		"pkey_tbl_len", "port_cap_flags", "port_lid", "port_lmc", "sm_lid", "sm_sl", "state",
		"sys_image_guid", "transport"}
	if diff := cmp.Diff(wantAgreed, agreed); diff != "" {
		t.Errorf("fields that agreed with ibv_devinfo -v (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(r.stdout, "hca_id:\trxe0\n") {
		t.Errorf("output does not start with devinfo's hca_id line:\n%s", r.stdout)
	}
}

// TestRXEGIDsMatchDevinfo checks `rdiag gids` (table and JSON) against
// the GID lines of ibv_devinfo -v: same indexes, addresses and types.
func TestRXEGIDsMatchDevinfo(t *testing.T) {
	want := map[int][2]string{} // index -> address, type
	for label, v := range parseDevinfoText(t, readFile(t, rxeDevinfoCapture)).Ports[1] {
		m := gidLabelRE.FindStringSubmatch(label)
		if m == nil {
			continue
		}
		i, _ := strconv.Atoi(m[1])
		addr, typ, _ := strings.Cut(v, ", ")
		want[i] = [2]string{addr, typ}
	}
	if len(want) == 0 {
		t.Fatal("no GID lines in the devinfo capture")
	}

	r := run(t, fakeEnv(), "--sysfs", fixtureRoot("rxe"), "gids", "--json", "rxe0")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var gids []gidJSON
	if err := json.Unmarshal([]byte(r.stdout), &gids); err != nil {
		t.Fatal(err)
	}
	gotJSON := map[int][2]string{}
	for _, g := range gids {
		gotJSON[g.Index] = [2]string{g.GID, g.Type}
		if netip.MustParseAddr(g.GID) != netip.MustParseAddr(g.Raw) {
			t.Errorf("GID[%d]: gid %s and raw %s differ", g.Index, g.GID, g.Raw)
		}
	}
	if diff := cmp.Diff(want, gotJSON); diff != "" {
		t.Errorf("rdiag gids --json vs ibv_devinfo -v (-devinfo +rdiag):\n%s", diff)
	}

	r = run(t, fakeEnv(), "--sysfs", fixtureRoot("rxe"), "gids", "rxe0")
	gotTable := map[int][2]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != "rxe0" {
			continue
		}
		i, _ := strconv.Atoi(f[2])
		gotTable[i] = [2]string{f[3], f[4] + " " + f[5]}
	}
	if diff := cmp.Diff(want, gotTable); diff != "" {
		t.Errorf("rdiag gids vs ibv_devinfo -v (-devinfo +rdiag):\n%s", diff)
	}
}

// rxeVerbsDevice is rxe0 of the rxe VM as the ibverbs provider answers for
// it.
func rxeVerbsDevice() *fakeDevice {
	attr, port, gids := devinfotest.RXE0()
	return &fakeDevice{
		info: verbsio.DeviceInfo{Name: "rxe0", Provider: providerIBVerbs, Transport: "InfiniBand",
			NodeGUID: attr.NodeGUID, Netdev: "eth0", Ports: 1},
		attr: attr, port: port, gids: gids,
	}
}

const vmCapture = "../../testsupport/devinfotest/testdata/rxe0/"

// TestRXEVerbsMatchesDevinfo renders rxe0 through the ibverbs path (the
// provider's answers as the VM's rxe0 gave them, on that machine's sysfs)
// and compares every command with what ibv_devinfo and rdma printed there:
// rdiag info -v and info must print their lines exactly, ports and gids
// agree. (devinfotest.TestRXECapture compares the output rdiag printed in
// the VM itself.)
func TestRXEVerbsMatchesDevinfo(t *testing.T) {
	env := fakeEnv(shmDevice(), rxeVerbsDevice())
	env.IBVerbsBuilt = true
	env.LocalSysfs = func(string) bool { return true }
	rxe := fixtureRoot("rxe")
	out := func(args ...string) string {
		t.Helper()
		r := run(t, env, append([]string{"--sysfs", rxe}, args...)...)
		if r.code != 0 {
			t.Fatalf("rdiag %v: exit %d: %s", args, r.code, r.stderr)
		}
		return r.stdout
	}
	capture := func(name string) string { return readFile(t, vmCapture+name+".txt") }
	for name, diffs := range map[string][]devinfotest.Diff{
		"info -v": devinfotest.CompareDevinfo(capture("ibv_devinfo-v"), out("info", "-v", "rxe0")),
		"info":    devinfotest.CompareDevinfo(capture("ibv_devinfo"), out("info", "rxe0")),
		"ports":   devinfotest.ComparePorts(capture("ibv_devinfo-v"), capture("rdma-link"), out("ports")),
		"gids":    devinfotest.CompareGIDs(capture("ibv_devinfo-v"), out("gids")),
		"dev":     devinfotest.CompareRdmaDev(capture("rdma-dev"), out("info", "rxe0")),
	} {
		for _, d := range diffs {
			t.Errorf("%s: %s", name, d)
		}
	}
	if !strings.Contains(out("info", "rxe0"), "max_inline_data   512 bytes") {
		t.Errorf("the capability report lacks the probed inline size")
	}
}
