package rdiagcmd

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/verbsio"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in      string
		want    uint64
		wantErr string
	}{
		{"4096", 4096, ""},
		{"64MiB", 64 << 20, ""},
		{"64M", 64 << 20, ""},
		{"64 mb", 64 << 20, ""},
		{"1.5G", 3 << 29, ""},
		{"2KiB", 2048, ""},
		{"1T", 1 << 40, ""},
		{"unlimited", math.MaxUint64, ""},
		{"", 0, "want a number"},
		{"MiB", 0, "want a number"},
		{"10 furlongs", 0, `unknown unit "furlongs"`},
		{"1.2.3M", 0, "bad number"},
		{"99999999999T", 0, "too large"},
	}
	for _, c := range cases {
		got, err := parseSize(c.in)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("parseSize(%q) error = %v, want %q", c.in, err, c.wantErr)
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("parseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestTabsTo(t *testing.T) {
	// Columns of ibv_devinfo's output (the rxe capture): device values
	// at column 40, port values at 48.
	cases := []struct {
		indent int
		label  string
		target int
		want   string
	}{
		{1, "transport", 40, "\t\t\t"},
		{1, "fw_ver", 40, "\t\t\t\t"},
		{1, "max_qp", 40, "\t\t\t\t"},
		{1, "device_cap_flags", 40, "\t\t"},
		{1, "max_total_mcast_qp_attach", 40, "\t"},
		{1, "max_rwq_indirection_table_size", 40, "\t"},
		{3, "state", 48, "\t\t\t"},
		{3, "max_mtu", 48, "\t\t"},
		{3, "port_cap_flags2", 48, "\t"},
		{3, "GID[  0]", 48, "\t\t"},
	}
	for _, c := range cases {
		if got := tabsTo(c.indent*8+len(c.label)+1, c.target); got != c.want {
			t.Errorf("tabsTo(%s) = %d tabs, want %d", c.label, len(got), len(c.want))
		}
	}
}

func TestDeviceCapFlagNames(t *testing.T) {
	// rxe's device_cap_flags and the names ibv_devinfo -v printed for them.
	want := []string{"BAD_PKEY_CNTR", "BAD_QKEY_CNTR", "AUTO_PATH_MIG", "CHANGE_PHY_PORT", "UD_AV_PORT_ENFORCE",
		"PORT_ACTIVE_EVENT", "SYS_IMAGE_GUID", "RC_RNR_NAK_GEN", "SRQ_RESIZE", "MEM_WINDOW", "MEM_MGT_EXTENSIONS",
		"MEM_WINDOW_TYPE_2B"}
	if diff := cmp.Diff(want, deviceCapFlagNames(0x01223c76)); diff != "" {
		t.Errorf("names of 0x01223c76 (-devinfo +rdiag):\n%s", diff)
	}
	if got := deviceCapFlagNames(1<<15 | 1); !cmp.Equal(got, []string{"RESIZE_MAX_WR", "Unknown flags: 0x8000"}) {
		t.Errorf("unnamed bit: %q", got)
	}
	if got := rawPacketCapNames(verbsio.RawCapDelayDrop | 1<<7); !cmp.Equal(got, []string{"DELAY_DROP", "0x80"}) {
		t.Errorf("raw packet caps: %q", got)
	}
}

func TestRateFromCodes(t *testing.T) {
	cases := []struct {
		width, speed uint8
		want         string
	}{
		{1, 1, "2.5 Gb/sec (1X SDR)"},
		{2, 32, "100 Gb/sec (4X EDR)"},
		{2, 64, "200 Gb/sec (4X HDR)"},
		{16, 128, "200 Gb/sec (2X NDR)"},
		{0, 0, "-"},
		{1, 3, "-"},
	}
	for _, c := range cases {
		if got := rateText(rateFromCodes(c.width, c.speed)); got != c.want {
			t.Errorf("rateFromCodes(%d, %d) = %s, want %s", c.width, c.speed, got, c.want)
		}
	}
}
