package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/testsupport/netns"
)

// TestE2ENamespace runs rdiag inside a network namespace: it lists the
// namespace's udp-fabric device for its veth, and shows that device's
// GID table with the IPv4-mapped GID marked as perftest's pick.
func TestE2ENamespace(t *testing.T) {
	pair := netns.Setup(t, netns.Options{})
	run := func(args ...string) string {
		t.Helper()
		cmd := netns.Command(pair.A.NS, rdiagBin, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("rdiag %v in %s: %v; stderr: %s", args, pair.A.NS, err, errb.String())
		}
		return out.String()
	}
	dev := "udp_" + pair.A.Link

	var devs []struct {
		Name, Provider, Fabric, Netdev string
	}
	out := run("devices", "--json")
	if err := json.Unmarshal([]byte(out), &devs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	found := false
	for _, d := range devs {
		if d.Name == dev {
			found = true
			if d.Provider != "soft" || d.Fabric != "udp" || d.Netdev != pair.A.Link {
				t.Errorf("%s: %+v", dev, d)
			}
		}
		if d.Name == "udp_eth0" {
			t.Errorf("the host's udp_eth0 is listed inside the namespace: %+v", d)
		}
	}
	if !found {
		t.Fatalf("no %s in the namespace's devices:\n%s", dev, out)
	}

	var gids []struct {
		Device       string `json:"device"`
		Index        int    `json:"index"`
		GID          string `json:"gid"`
		Type         string `json:"type"`
		PerftestPick bool   `json:"perftest_pick"`
	}
	out = run("gids", dev, "--json")
	if err := json.Unmarshal([]byte(out), &gids); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	v4 := "::ffff:" + pair.A.Addr4.Addr().String()
	picks := 0
	seen := map[string]bool{}
	for _, g := range gids {
		seen[g.GID] = true
		if g.Device != dev || g.Type != "RoCE v2" {
			t.Errorf("GID %+v", g)
		}
		if g.PerftestPick {
			picks++
			if g.GID != v4 {
				t.Errorf("perftest's pick is %s, want the IPv4-mapped %s", g.GID, v4)
			}
		}
	}
	if picks != 1 || !seen[v4] || !seen[pair.A.Addr6.Addr().String()] {
		t.Errorf("%d picks; GIDs %v, want %s and %s among them", picks, gids, v4, pair.A.Addr6.Addr())
	}
	// The table marks the pick too.
	table := run("gids", dev)
	marked := false
	for _, l := range strings.Split(table, "\n") {
		marked = marked || strings.Contains(l, " "+v4+" ") && strings.HasSuffix(strings.TrimSpace(l), "*")
	}
	if !marked {
		t.Errorf("the table does not mark %s:\n%s", v4, table)
	}
}
