package devinfotest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func capture(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", dir, name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRXECapture: on the real rxe0 in the VM, rdiag info -v and info
// printed ibv_devinfo -v's and ibv_devinfo's lines, rdiag ports agrees
// with ibv_devinfo and rdma link, rdiag gids with ibv_devinfo's GIDs, and
// rdiag info with rdma dev; every command exited 0, and the ibverbs
// provider's device tests passed there.
func TestRXECapture(t *testing.T) {
	c := func(name string) string { return capture(t, "rxe0", name) }
	for name, diffs := range map[string][]Diff{
		"info -v": CompareDevinfo(c("ibv_devinfo-v"), c("rdiag-info-v")),
		"info":    CompareDevinfo(c("ibv_devinfo"), c("rdiag-info")),
		"ports":   ComparePorts(c("ibv_devinfo-v"), c("rdma-link"), c("rdiag-ports")),
		"gids":    CompareGIDs(c("ibv_devinfo-v"), c("rdiag-gids")),
		"dev":     CompareRdmaDev(c("rdma-dev"), c("rdiag-info-v")),
	} {
		for _, d := range diffs {
			t.Errorf("%s: %s", name, d)
		}
	}
	// The comparison saw the whole device: a parse that found little
	// would agree vacuously.
	b, err := parseBlocks(c("ibv_devinfo-v"))
	if err != nil || len(b) != 1 || len(b[0].device) != 61 || len(b[0].ports) != 1 || len(b[0].ports[0].entries) != 23 {
		t.Fatalf("capture parsed into %d devices (%v)", len(b), err)
	}
	if rows := parseTable(c("rdiag-ports")); !slices.ContainsFunc(rows, func(r map[string]string) bool { return r["DEVICE"] == "rxe0" }) {
		t.Errorf("no rxe0 row in rdiag ports")
	}
	for _, name := range []string{"ibv_devinfo-v", "ibv_devinfo", "rdiag-info-v", "rdiag-info", "rdiag-ports", "rdiag-gids",
		"rdma-link", "rdma-dev", "rdiag-info-json", "rdiag-ports-json", "rdiag-gids-json", "hw-test"} {
		b, err := os.ReadFile(filepath.Join("testdata", "rxe0", name+".rc"))
		if err != nil || strings.TrimSpace(string(b)) != "0" {
			t.Errorf("%s exited %q (%v)", name, b, err)
		}
	}
	if hw := c("hw-test"); !strings.Contains(hw, "--- PASS: TestDeviceQuery") || !strings.HasSuffix(strings.TrimSpace(hw), "PASS") {
		t.Errorf("the device tests did not pass on rxe0:\n%s", hw)
	}
}

// TestCompareFindsTheOldGaps: before this comparison existed, rdiag on
// rxe0 printed "unknown: not reported by rperf's ibverbs provider" for the
// fields below, lacked devinfo's ODP, timestamp, clock, RSS and tag
// matching lines, and had max_tso's tabs wrong. CompareDevinfo reports
// each of them.
func TestCompareFindsTheOldGaps(t *testing.T) {
	diffs := CompareDevinfo(capture(t, "rxe0-before", "ibv_devinfo-v"), capture(t, "rxe0-before", "rdiag-info-v"))
	got := map[DiffKind][]string{}
	for _, d := range diffs {
		if d.Device != "rxe0" {
			t.Errorf("diff of device %q", d.Device)
		}
		got[d.Kind] = append(got[d.Kind], d.Where+"/"+d.Field)
	}
	want := map[DiffKind][]string{
		Unknown: {"device/max_ee_rd_atom", "device/max_ee_init_rd_atom", "device/max_ee", "device/max_rdd",
			"device/max_mw", "device/max_raw_ipv6_qp", "device/max_raw_ethy_qp", "device/max_mcast_grp",
			"device/max_mcast_qp_attach", "device/max_total_mcast_qp_attach", "device/max_fmr",
			"device/device_cap_flags_ex", "device/max_wq_type_rq", "device/num_comp_vectors",
			"port 1/port_cap_flags2", "port 1/bad_pkey_cntr", "port 1/qkey_viol_cntr", "port 1/subnet_timeout",
			"port 1/init_type_reply"},
		Missing: {"device/general_odp_caps", "device/rc_odp_caps", "device/uc_odp_caps", "device/ud_odp_caps",
			"device/xrc_odp_caps", "device/completion_timestamp_mask not supported", "device/core clock not supported",
			"device/rss_caps", "device/rss_caps/max_rwq_indirection_tables", "device/rss_caps/max_rwq_indirection_table_size",
			"device/rss_caps/rx_hash_function", "device/rss_caps/rx_hash_fields_mask", "device/tag matching not supported"},
		Layout: {"device/tso_caps/max_tso"},
		Extra: {"device/max_map_per_fmr", "device/completion timestamp_mask", "device/hca_core_clock",
			"device/max_rwq_indirection_tables", "device/max_rwq_indirection_table_size", "device/rx_hash_function",
			"device/rx_hash_fields_mask"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("diffs of the old output (-want +got):\n%s", d)
	}
}

// TestCompareDevinfoKinds changes one thing at a time in the rxe capture
// and checks that exactly that difference is reported.
func TestCompareDevinfoKinds(t *testing.T) {
	ref := capture(t, "rxe0", "ibv_devinfo-v")
	edit := func(old, new string) string {
		if !strings.Contains(ref, old) {
			t.Fatalf("capture lacks %q", old)
		}
		return strings.Replace(ref, old, new, 1)
	}
	cases := []struct {
		name  string
		rdiag string
		want  []Diff
	}{
		{"same", ref, nil},
		{"same, then rdiag's report", ref + "capabilities of rxe0 (provider ibverbs answered QueryDevice):\nCAPABILITY  VALUE\n", nil},
		{"value", edit("\tmax_qp:\t\t\t\t1048560\n", "\tmax_qp:\t\t\t\t1048561\n"),
			[]Diff{{Device: "rxe0", Where: "device", Field: "max_qp", Kind: Value, Want: "1048560", Got: "1048561"}}},
		{"unknown", edit("\tmax_mw:\t\t\t\t524287\n", "\tmax_mw:\t\t\t\tunknown: not reported\n"),
			[]Diff{{Device: "rxe0", Where: "device", Field: "max_mw", Kind: Unknown, Want: "524287", Got: "unknown: not reported"}}},
		{"missing", edit("\tmax_ah:\t\t\t\t32767\n", ""),
			[]Diff{{Device: "rxe0", Where: "device", Field: "max_ah", Kind: Missing, Want: "32767"}}},
		{"extra", edit("\tmax_ah:\t\t\t\t32767\n", "\tmax_ah:\t\t\t\t32767\n\tmax_inline:\t\t\t512\n"),
			[]Diff{{Device: "rxe0", Where: "device", Field: "max_inline", Kind: Extra, Got: "512"}}},
		{"tabs", edit("\tmax_ah:\t\t\t\t32767\n", "\tmax_ah:\t\t\t32767\n"),
			[]Diff{{Device: "rxe0", Where: "device", Field: "max_ah", Kind: Layout, Want: "\tmax_ah:\t\t\t\t32767", Got: "\tmax_ah:\t\t\t32767"}}},
		{"flag", edit("\t\t\t\t\tMEM_WINDOW\n", "\t\t\t\t\tMEM_WINDOWS\n"),
			[]Diff{{Device: "rxe0", Where: "device", Field: "device_cap_flags", Kind: Value,
				Want: "BAD_PKEY_CNTR, BAD_QKEY_CNTR, AUTO_PATH_MIG, CHANGE_PHY_PORT, UD_AV_PORT_ENFORCE, PORT_ACTIVE_EVENT, SYS_IMAGE_GUID, RC_RNR_NAK_GEN, SRQ_RESIZE, MEM_WINDOW, MEM_MGT_EXTENSIONS, MEM_WINDOW_TYPE_2B",
				Got:  "BAD_PKEY_CNTR, BAD_QKEY_CNTR, AUTO_PATH_MIG, CHANGE_PHY_PORT, UD_AV_PORT_ENFORCE, PORT_ACTIVE_EVENT, SYS_IMAGE_GUID, RC_RNR_NAK_GEN, SRQ_RESIZE, MEM_WINDOWS, MEM_MGT_EXTENSIONS, MEM_WINDOW_TYPE_2B"}}},
		{"section", edit("\ttso_caps:\n\t\tmax_tso:\t\t\t0\n", "\ttso_caps:\n\t\tmax_tso:\t\t\t1\n"),
			[]Diff{{Device: "rxe0", Where: "device", Field: "tso_caps/max_tso", Kind: Value, Want: "0", Got: "1"}}},
		{"statement", edit("\tcore clock not supported\n", ""),
			[]Diff{{Device: "rxe0", Where: "device", Field: "core clock not supported", Kind: Missing}}},
		{"port value", edit("\t\t\tactive_mtu:\t\t1024 (3)\n", "\t\t\tactive_mtu:\t\t4096 (5)\n"),
			[]Diff{{Device: "rxe0", Where: "port 1", Field: "active_mtu", Kind: Value, Want: "1024 (3)", Got: "4096 (5)"}}},
		{"gid", edit("::ffff:10.77.0.1, RoCE v2", "::ffff:10.77.0.2, RoCE v2"),
			[]Diff{{Device: "rxe0", Where: "port 1", Field: "GID[1]", Kind: Value, Want: "::ffff:10.77.0.1, RoCE v2", Got: "::ffff:10.77.0.2, RoCE v2"}}},
		{"order", edit("\tmax_sge:\t\t\t32\n\tmax_sge_rd:\t\t\t32\n", "\tmax_sge_rd:\t\t\t32\n\tmax_sge:\t\t\t32\n"),
			[]Diff{{Device: "rxe0", Where: "device", Field: "max_sge", Kind: Layout, Want: "field 14 in order", Got: "max_sge_rd in its place"}}},
		{"no port", ref[:strings.Index(ref, "\t\tport:")],
			[]Diff{{Device: "rxe0", Where: "port 1", Field: "port", Kind: Missing, Want: "1"}}},
		{"no device", strings.Replace(ref, "hca_id:\trxe0", "hca_id:\trxe1", 1),
			[]Diff{{Device: "rxe0", Where: "device", Field: "hca_id", Kind: Missing, Want: "rxe0"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d := cmp.Diff(c.want, CompareDevinfo(ref, c.rdiag)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestComparePortsAndGIDs(t *testing.T) {
	c := func(name string) string { return capture(t, "rxe0", name) }
	ports, link, gids := c("rdiag-ports"), c("rdma-link"), c("rdiag-gids")
	cases := []struct {
		name string
		got  []Diff
		want []Diff
	}{
		{"port state", ComparePorts(c("ibv_devinfo-v"), link, strings.Replace(ports, "rxe0      1     ACTIVE  LINK_UP", "rxe0      1     DOWN    LINK_UP", 1)),
			[]Diff{{Device: "rxe0", Where: "ports", Field: "port 1 state", Kind: Value, Want: "ACTIVE", Got: "DOWN"},
				{Device: "rxe0", Where: "ports", Field: "port 1 state (rdma link)", Kind: Value, Want: "ACTIVE", Got: "DOWN"}}},
		{"netdev", ComparePorts(c("ibv_devinfo-v"), strings.Replace(link, "netdev eth0", "netdev eth1", 1), ports),
			[]Diff{{Device: "rxe0", Where: "ports", Field: "port 1 netdev (rdma link)", Kind: Value, Want: "eth1", Got: "eth0"}}},
		{"speed", ComparePorts(c("ibv_devinfo-v"), link, strings.Replace(ports, "SDR (2.5 Gbps)", "DDR (5.0 Gbps)", 1)),
			[]Diff{{Device: "rxe0", Where: "ports", Field: "port 1 active_speed", Kind: Value, Want: "2.5 Gbps", Got: "5.0 Gbps"}}},
		{"no row", ComparePorts(c("ibv_devinfo-v"), "", strings.Replace(ports, "rxe0 ", "rxe9 ", 1)),
			[]Diff{{Device: "rxe0", Where: "ports", Field: "port 1", Kind: Missing, Want: "a row"}}},
		{"gid type", CompareGIDs(c("ibv_devinfo-v"), strings.Replace(gids, "RoCE v2  eth0    *\n* the GID", "RoCE v1  eth0    *\n* the GID", 1)),
			[]Diff{{Device: "rxe0", Where: "gids", Field: "port 1 GID[1]", Kind: Value, Want: "::ffff:10.77.0.1, RoCE v2", Got: "::ffff:10.77.0.1, RoCE v1"}}},
		{"gid missing", CompareGIDs(c("ibv_devinfo-v"), strings.Replace(gids, "rxe0      1     0 ", "rxe0      2     0 ", 1)),
			[]Diff{{Device: "rxe0", Where: "gids", Field: "port 1 GID[0]", Kind: Missing, Want: "fe80::5054:ff:fe77:1, RoCE v2"}}},
		{"gid extra", CompareGIDs(c("ibv_devinfo-v"), gids+"rxe0      1     5      ::ffff:10.77.0.5               RoCE v2  eth0\n"),
			[]Diff{{Device: "rxe0", Where: "gids", Field: "port 1 GID[5]", Kind: Extra, Got: "::ffff:10.77.0.5, RoCE v2"}}},
		{"guid", CompareRdmaDev(strings.Replace(c("rdma-dev"), "node_guid 5054:00ff:fe77:0001", "node_guid 5054:00ff:fe77:0002", 1), c("rdiag-info-v")),
			[]Diff{{Device: "rxe0", Where: "device", Field: "node_guid (rdma dev)", Kind: Value, Want: "5054:00ff:fe77:0002", Got: "5054:00ff:fe77:0001"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d := cmp.Diff(c.want, c.got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
