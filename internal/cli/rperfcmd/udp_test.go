package rperfcmd

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/session"
)

func TestUDPFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string // "" for no error
	}{
		{[]string{"-d", "udp_lo", "--udp-port", "5000"}, ""},
		{[]string{"-d", "udp_lo", "--udp-port", "0"}, ""},
		{[]string{"-d", "udp_lo", "--udp-port", "70000"}, "--udp-port 70000: not a UDP port"},
		{[]string{"-d", "udp_lo", "--udp-port", "-1"}, "--udp-port -1: not a UDP port"},
		{[]string{"--udp-port", "5000"}, "--udp-port applies to the udp fabric's devices (-d udp_<netdev>); -d shm0 does not use UDP"},
		{[]string{"-d", "udp_lo", "-x", "1"}, ""},
		{[]string{"-d", "udp_lo", "-x", "-2"}, "-x -2: GID indexes count from 0"},
		{[]string{"-d", "udp_lo", "-x", "1", "--ipv6"}, "-x and --ipv6 conflict"},
		{[]string{"--validate"}, ""},
		{[]string{"--data_validation"}, ""},
	}
	for _, c := range cases {
		o, err := parse(t, "write-lat", c.args...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		case c.want != "":
			var ue *cli.UsageError
			if !errors.As(err, &ue) {
				t.Errorf("%v: %v is not a usage error", c.args, err)
			}
		}
		if c.want == "" && o.gidIndex != session.AutoGID && !o.changed("gid-index") {
			t.Errorf("%v: -x defaults to %d, want automatic", c.args, o.gidIndex)
		}
	}
}

func TestUDPOpenOptions(t *testing.T) {
	cases := []struct {
		args []string
		port int
	}{
		{nil, 0}, // shm0: no UDP
		{[]string{"-d", "udp_lo"}, 4791},
		{[]string{"-d", "udp_lo", "--udp-port", "5000"}, 5000},
		{[]string{"-d", "udp_lo", "--udp-port", "0"}, -1},
		// --loopback's client takes a free port: its server is on this host.
		{[]string{"-d", "udp_lo", "--loopback"}, -1},
		{[]string{"-d", "udp_lo", "--loopback", "--udp-port", "5000"}, -1},
	}
	for _, c := range cases {
		o, err := parse(t, "send-bw", c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.openOptions().UDPPort; got != c.port {
			t.Errorf("%v: UDPPort %d, want %d", c.args, got, c.port)
		}
	}
	// The server process gets --udp-port (and -x, --validate) as set.
	o, err := parse(t, "write-bw", "--loopback", "-d", "udp_lo", "--udp-port", "5000", "-x", "1", "--validate")
	if err != nil {
		t.Fatal(err)
	}
	got := serverFlags(o.fs)
	slices.Sort(got)
	want := []string{"--gid-index=1", "--ib-dev=udp_lo", "--udp-port=5000", "--validate=true"}
	if !slices.Equal(got, want) {
		t.Errorf("server flags %q, want %q", got, want)
	}
}

func TestValidateParam(t *testing.T) {
	for _, c := range []string{"write-lat", "read-bw"} {
		o, err := parse(t, c, "--validate")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range o.params([]int{64}).Fields {
			found = found || f.Flag == "--validate" && f.Symmetric
		}
		if !found {
			t.Errorf("%s: --validate is not a symmetric parameter", c)
		}
		if o.lat() && !o.latencyConfig([]int{64}).Validate || !o.lat() && !o.bwConfig([]int{64}).Validate {
			t.Errorf("%s: the config does not validate", c)
		}
	}
}

// TestFitValidation: --validate lowers default depths until the buffers
// fit, keeps depths the user set, and refuses what cannot fit.
func TestFitValidation(t *testing.T) {
	o, err := parse(t, "send-bw", "--validate", "-s", "8M")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.fitValidation([]int{8 << 20}); err != nil {
		t.Fatal(err)
	}
	cfg := o.bwConfig([]int{8 << 20})
	if b := cfg.ValidationBytes(); b > bw.ValidateBudget || o.txDepth >= 128 || o.rxDepth >= 512 {
		t.Errorf("tx %d rx %d: %d bytes", o.txDepth, o.rxDepth, b)
	}
	o, err = parse(t, "write-bw", "--validate", "-s", "8M", "-t", "128")
	if err != nil {
		t.Fatal(err)
	}
	err = o.fitValidation([]int{8 << 20})
	if err == nil || !strings.Contains(err.Error(), "--validate keeps a buffer for every outstanding message: 1040 MiB with -t 128 -q 1 and 8388608-byte messages") {
		t.Errorf("fit with -t 128: %v", err)
	}
	o, err = parse(t, "write-bw", "-s", "8M")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.fitValidation([]int{8 << 20}); err != nil || o.txDepth != 128 {
		t.Errorf("without --validate: %v, tx %d", err, o.txDepth)
	}
}
