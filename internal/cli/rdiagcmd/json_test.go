package rdiagcmd

import (
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The documented JSON field names of each command (docs/rdiag.md). They
// are a compatibility surface: scripts select devices and read results by
// them, so a change here is a change of the interface.
var (
	deviceFields = []string{"errors", "fabric", "kernel", "name", "netdev", "netdevs", "node_guid",
		"openable", "port_states", "ports", "provider", "transport", "uverbs"}
	infoFields         = []string{"capabilities", "devinfo", "fabric", "name", "netdev", "notes", "ports", "provider", "source", "unknown"}
	infoPortFields     = []string{"devinfo", "gids", "port"}
	capabilitiesFields = []string{"atomic_cap", "device_cap_flags", "flow_steering", "hca_core_clock", "interfaces",
		"max_cq", "max_cqe", "max_dm_size", "max_inline_data", "max_mr", "max_mr_size", "max_msg_size", "max_pd", "max_qp",
		"max_qp_wr", "max_raw_ethy_qp", "max_sge", "max_sge_rd", "max_srq", "mtu", "packet_pacing", "raw_packet_caps",
		"send_paths", "tso"}
	mtuFields      = []string{"active", "active_source", "max", "max_source", "port"}
	tsoFields      = []string{"max_tso", "qp_types", "supported"}
	pacingFields   = []string{"max_kbps", "min_kbps", "qp_types", "supported"}
	steeringFields = []string{"features", "max_priority", "max_tag", "supported"}
	clockFields    = []string{"clock_khz", "completion_timestamp_mask", "supported"}
	portJSONFields = []string{"active_mtu", "active_mtu_source", "device", "lid", "link_layer", "max_mtu", "max_mtu_source",
		"netdev", "netdev_mtu", "phys_state", "phys_state_code", "port", "provider", "rate_gbps", "sm_lid", "speed",
		"state", "state_code", "width"}
	gidFields     = []string{"device", "gid", "index", "netdev", "perftest_pick", "port", "raw", "type"}
	checkFields   = []string{"counts", "engine", "exit_code", "findings", "result"}
	findingFields = []string{"check", "fix", "severity", "what"}
	pcapFields    = []string{"cm_mads", "cm_mads_omitted", "error", "file", "first_timestamp", "flow_count", "flows", "format", "frames", "icrc_errors",
		"last_timestamp", "malformed_frames", "malformed_reasons", "non_roce_frames", "packets", "payload_bytes",
		"truncated_frames"}
	flowFields = []string{"acks", "becn", "cnps", "dest_qp", "dst", "fecn", "first_timestamp", "icrc_errors",
		"last_timestamp", "naks", "opcodes", "packets", "payload_bytes", "psn_first", "psn_gaps", "psn_last",
		"psn_missing", "requests", "responses", "retransmissions", "rnr_naks", "src", "udp_src_port"}
)

func keys(t *testing.T, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("want a JSON object, got %T", v)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func assertKeys(t *testing.T, what string, v any, want []string) {
	t.Helper()
	if diff := cmp.Diff(want, keys(t, v)); diff != "" {
		t.Errorf("%s fields (-documented +got):\n%s", what, diff)
	}
}

func decode(t *testing.T, r result) any {
	t.Helper()
	if r.code != 0 && r.code != 3 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var v any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, r.stdout)
	}
	return v
}

// TestJSONFieldNames parses every command's --json output back and checks
// its field names against the documented lists.
func TestJSONFieldNames(t *testing.T) {
	env := func() Env { return fakeEnv(shmDevice(), udpDevice()) }
	roce := fixtureRoot("roce")

	t.Run("devices", func(t *testing.T) {
		v := decode(t, run(t, env(), "--sysfs", roce, "devices", "--json"))
		devs := v.([]any)
		if len(devs) != 3 {
			t.Fatalf("got %d devices, want shm0, udp_eth0, mlx5_2", len(devs))
		}
		for _, d := range devs {
			assertKeys(t, "devices", d, deviceFields)
		}
		// Scripts pick devices by these fields.
		byName := map[string]map[string]any{}
		for _, d := range devs {
			m := d.(map[string]any)
			byName[m["name"].(string)] = m
		}
		for name, want := range map[string]map[string]any{
			"shm0":     {"provider": "soft", "fabric": "shm", "netdev": "", "ports": 1.0, "kernel": false},
			"udp_eth0": {"provider": "soft", "fabric": "udp", "netdev": "eth0", "ports": 1.0, "kernel": false},
			"mlx5_2":   {"provider": "sysfs", "fabric": "", "netdev": "ens2f0np0", "ports": 1.0, "kernel": true},
		} {
			for k, w := range want {
				if got := byName[name][k]; got != w {
					t.Errorf("%s.%s = %v, want %v", name, k, got, w)
				}
			}
		}
		if nds := byName["mlx5_2"]["netdevs"].([]any); len(nds) != 2 || nds[1] != "ens2f0np0.100" {
			t.Errorf("mlx5_2 netdevs = %v, want ens2f0np0 and its VLAN", nds)
		}
	})

	t.Run("info", func(t *testing.T) {
		for _, dev := range []string{"mlx5_2", "udp_eth0"} {
			v := decode(t, run(t, env(), "--sysfs", roce, "info", "--json", dev))
			assertKeys(t, "info", v, infoFields)
			m := v.(map[string]any)
			assertKeys(t, "info.capabilities", m["capabilities"], capabilitiesFields)
			for _, p := range m["ports"].([]any) {
				assertKeys(t, "info.ports[]", p, infoPortFields)
				for _, g := range p.(map[string]any)["gids"].([]any) {
					assertKeys(t, "info.ports[].gids[]", g, gidFields)
				}
			}
			caps := m["capabilities"].(map[string]any)
			for _, mt := range caps["mtu"].([]any) {
				assertKeys(t, "capabilities.mtu[]", mt, mtuFields)
			}
			if dev == "udp_eth0" {
				assertKeys(t, "capabilities.tso", caps["tso"], tsoFields)
				assertKeys(t, "capabilities.packet_pacing", caps["packet_pacing"], pacingFields)
				assertKeys(t, "capabilities.flow_steering", caps["flow_steering"], steeringFields)
				assertKeys(t, "capabilities.hca_core_clock", caps["hca_core_clock"], clockFields)
			}
		}
		v := decode(t, run(t, env(), "--sysfs", roce, "info", "--json"))
		if n := len(v.([]any)); n != 3 {
			t.Errorf("info --json without DEV: %d devices, want 3", n)
		}
	})

	t.Run("ports", func(t *testing.T) {
		for _, p := range decode(t, run(t, env(), "--sysfs", roce, "ports", "--json")).([]any) {
			assertKeys(t, "ports[]", p, portJSONFields)
		}
	})

	t.Run("gids", func(t *testing.T) {
		picks := 0
		for _, g := range decode(t, run(t, env(), "--sysfs", roce, "gids", "--json", "mlx5_2")).([]any) {
			assertKeys(t, "gids[]", g, gidFields)
			if m := g.(map[string]any); m["perftest_pick"] == true {
				picks++
				if m["index"] != 3.0 {
					t.Errorf("perftest pick is GID %v, want 3 (reference: GID auto-selection)", m["index"])
				}
			}
		}
		if picks != 1 {
			t.Errorf("%d GIDs marked as perftest's pick, want 1", picks)
		}
	})

	t.Run("check", func(t *testing.T) {
		v := decode(t, run(t, env(), "--sysfs", roce, "check", "--json"))
		assertKeys(t, "check", v, checkFields)
		for _, f := range v.(map[string]any)["findings"].([]any) {
			assertKeys(t, "check.findings[]", f, findingFields)
		}
	})

	t.Run("pcap", func(t *testing.T) {
		v := decode(t, run(t, env(), "pcap", "--json", pcapFile("rxe-rc.pcap")))
		assertKeys(t, "pcap", v, pcapFields)
		for _, f := range v.(map[string]any)["flows"].([]any) {
			assertKeys(t, "pcap.flows[]", f, flowFields)
		}
	})
}

// TestJSONFieldsDocumented checks that docs/rdiag.md names every JSON
// field, so the manual cannot fall behind the code.
func TestJSONFieldsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/rdiag.md")
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, l := range [][]string{deviceFields, infoFields, infoPortFields, capabilitiesFields, mtuFields, tsoFields,
		pacingFields, steeringFields, clockFields, portJSONFields, gidFields, checkFields, findingFields, pcapFields, flowFields} {
		all = append(all, l...)
	}
	slices.Sort(all)
	for _, f := range slices.Compact(all) {
		if !strings.Contains(string(doc), "`"+f+"`") {
			t.Errorf("docs/rdiag.md does not document the JSON field `%s`", f)
		}
	}
}
