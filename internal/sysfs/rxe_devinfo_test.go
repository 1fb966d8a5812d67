package sysfs

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/testsupport/devinfotest"

	"github.com/google/go-cmp/cmp"
)

// parseDevinfo reads an ibv_devinfo -v capture (see package devinfotest).
func parseDevinfo(t *testing.T, name string) devinfotest.Fields {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := devinfotest.Parse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRXEMatchesDevinfo checks every ibv_devinfo -v field that sysfs can
// know against the devinfo capture of the same device. The expected
// values are read from the capture, not retyped.
//
// Derived rather than read:
//   - transport: from node_type, as libibverbs itself does.
//   - fw_ver: sysfs has "" for rxe; devinfo's "0.0.0" is libibverbs
//     formatting rxe's raw firmware version 0 (DevinfoFWVer).
//   - phys_port_cnt: the number of ports/N directories.
//   - active_mtu: eth0's MTU 1500 minus rxe's 80-byte header allowance,
//     rounded down to an IB MTU (RoCEMTU), 1024.
//   - max_mtu: not in sysfs; rxe's driver constant (SoftRoCEMaxMTU).
//   - gid_tbl_len, pkey_tbl_len: the number of gids/N and pkeys/N files.
func TestRXEMatchesDevinfo(t *testing.T) {
	want := parseDevinfo(t, "testdata/src/rxe/ibv_devinfo-v.txt")
	r := mustFS(t, "rxe").Report()
	if len(r.Devices) != 1 {
		t.Fatalf("got %d devices, want 1", len(r.Devices))
	}
	d := r.Devices[0]
	eth := r.NetDev(*d.Parent)
	if eth == nil || eth.MTU == nil {
		t.Fatalf("netdev %s or its MTU missing", *d.Parent)
	}

	gotDevice := map[string]string{
		"hca_id":         d.Name,
		"transport":      d.NodeType.DevinfoTransport(),
		"fw_ver":         DevinfoFWVer(*d.FWVer),
		"node_guid":      d.NodeGUID.String(),
		"sys_image_guid": d.SysImageGUID.String(),
		"phys_port_cnt":  strconv.Itoa(len(d.Ports)),
	}
	wantDevice := map[string]string{}
	for k := range gotDevice {
		wantDevice[k] = want.Device[k]
	}
	if diff := cmp.Diff(wantDevice, gotDevice); diff != "" {
		t.Errorf("device fields mismatch (-devinfo +sysfs):\n%s", diff)
	}
	if *d.FWVer != "" {
		t.Errorf("sysfs fw_ver = %q, want empty for rxe", *d.FWVer)
	}
	assertAccountedFor(t, "device", want.Device, gotDevice, VerbsOnlyDeviceFields)

	for _, p := range d.Ports {
		wp, ok := want.Ports[p.Number]
		if !ok {
			t.Fatalf("devinfo has no port %d", p.Number)
		}
		got := map[string]string{
			"state":          p.State.Devinfo(),
			"phys_state":     p.PhysState.Devinfo(),
			"max_mtu":        SoftRoCEMaxMTU.Devinfo(),
			"active_mtu":     RoCEMTU(*eth.MTU, RoCEOverheadFor(d)).Devinfo(),
			"sm_lid":         strconv.FormatUint(uint64(*p.SMLID), 10),
			"port_lid":       strconv.FormatUint(uint64(*p.LID), 10),
			"port_lmc":       DevinfoLMC(*p.LMC),
			"link_layer":     DevinfoLinkLayer(*p.LinkLayer),
			"port_cap_flags": DevinfoCapMask(*p.CapMask),
			"sm_sl":          strconv.Itoa(int(*p.SMSL)),
			"gid_tbl_len":    strconv.Itoa(p.GIDTableLen),
			"pkey_tbl_len":   strconv.Itoa(p.PKeyTableLen),
			"active_width":   p.Rate.DevinfoActiveWidth(),
			"active_speed":   p.Rate.DevinfoActiveSpeed(),
		}
		for _, g := range p.GIDs {
			if line, ok := g.Devinfo(*p.LinkLayer); ok {
				got["GID["+strconv.Itoa(g.Index)+"]"] = line
			}
		}
		wantPort := map[string]string{}
		for k := range got {
			wantPort[k] = wp[k]
		}
		// Every GID devinfo shows must be one sysfs shows.
		for k, v := range wp {
			if strings.HasPrefix(k, "GID[") {
				wantPort[k] = v
			}
		}
		if diff := cmp.Diff(wantPort, got); diff != "" {
			t.Errorf("port %d mismatch (-devinfo +sysfs):\n%s", p.Number, diff)
		}
		if _, ok := wantPort["GID[0]"]; !ok {
			t.Errorf("capture parse found no GID[0]")
		}
		assertAccountedFor(t, "port", wp, got, VerbsOnlyPortFields)
	}
}

// assertAccountedFor fails for a devinfo field that was neither compared
// nor declared verbs-only, so a field sysfs could know cannot be skipped
// silently.
func assertAccountedFor(t *testing.T, what string, capture, compared map[string]string, verbsOnly []string) {
	t.Helper()
	for label := range capture {
		if _, ok := compared[label]; ok || slices.Contains(verbsOnly, label) {
			continue
		}
		t.Errorf("%s field %q in ibv_devinfo -v is neither compared with sysfs nor listed as verbs-only", what, label)
	}
}
