package rperfcmd

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

func testOf(t *testing.T, command string) session.Test {
	t.Helper()
	for _, x := range session.Tests {
		if x.Command() == command {
			return x
		}
	}
	t.Fatalf("no command %q", command)
	return 0
}

// parse parses args as the command's flags and validates them.
func parse(t *testing.T, command string, args ...string) (*options, error) {
	t.Helper()
	o := &options{test: testOf(t, command)}
	fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	o.register(fs)
	o.registerStamps(fs) // as newTestCommand
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, o.validate(fs.Args())
}

// shm0 is the built-in device's attributes, as far as the checks use them.
var (
	shmAttr = verbsio.DeviceAttr{MaxMsgSize: 1 << 30, MaxInlineData: 1024, MaxQPWR: 1 << 15, MaxQP: 4096,
		MaxQPRdAtom: 128, MaxCQE: 1 << 17, AtomicCap: verbsio.AtomicGlob}
	shmPort = verbsio.PortAttr{ActiveMTU: verbsio.MTU4096, MaxMsgSize: 1 << 30}
)

func TestDefaultsPerTest(t *testing.T) {
	cases := []struct {
		command          string
		args             []string
		size, iters, tx  int
		inline, cqModFor int // cqModFor: the bandwidth CQ moderation at size
	}{
		{"write-lat", nil, 2, 1000, 1, 220, 0},
		{"send-lat", nil, 2, 1000, 1, 236, 0},
		{"send-lat", []string{"-c", "UD"}, 2, 1000, 1, 188, 0},
		{"send-lat", []string{"-c", "ud", "-I", "100"}, 2, 1000, 1, 100, 0},
		{"read-lat", nil, 2, 1000, 1, 0, 0},
		{"atomic-lat", nil, 8, 1000, 1, 0, 0},
		{"write-bw", nil, 65536, 5000, 128, 0, 1},
		{"send-bw", nil, 65536, 1000, 128, 0, 1},
		{"read-bw", []string{"-s", "4K"}, 4096, 1000, 128, 0, 100},
		{"atomic-bw", nil, 8, 1000, 128, 0, 100},
		{"write-bw", []string{"-s", "64", "-t", "16"}, 64, 5000, 16, 0, 16},
		{"write-bw", []string{"-s", "64", "-l", "8"}, 64, 5000, 128, 0, 8},
		{"write-bw", []string{"-s", "1M", "-Q", "10"}, 1 << 20, 5000, 128, 0, 10},
		{"send-bw", []string{"-n", "40", "-s", "64"}, 64, 40, 128, 0, 40},
	}
	for _, c := range cases {
		t.Run(c.command+" "+strings.Join(c.args, " "), func(t *testing.T) {
			o, err := parse(t, c.command, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			sizes, err := o.sizesFor(shmAttr, shmPort, "shm0")
			if err != nil {
				t.Fatal(err)
			}
			if len(sizes) != 1 || sizes[0] != c.size || o.iters != c.iters || o.txDepth != c.tx || o.inline != c.inline {
				t.Errorf("sizes %v iters %d tx %d inline %d; want %d %d %d %d", sizes, o.iters, o.txDepth, o.inline, c.size, c.iters, c.tx, c.inline)
			}
			if o.lat() {
				cfg := o.latencyConfig(sizes)
				if err := cfg.Check(); err != nil {
					t.Errorf("latency config: %v", err)
				}
				if cfg.Test.Command() != c.command || cfg.Iterations != c.iters || cfg.Inline != c.inline {
					t.Errorf("latency config %+v", cfg)
				}
			} else {
				cfg := o.bwConfig(sizes)
				if err := cfg.Check(); err != nil {
					t.Errorf("bandwidth config: %v", err)
				}
				if got := cfg.CQModFor(c.size); got != c.cqModFor {
					t.Errorf("CQ moderation %d, want %d", got, c.cqModFor)
				}
			}
		})
	}
}

func TestSizes(t *testing.T) {
	pow := func(lo, hi int) []int {
		var s []int
		for n := lo; n <= hi; n *= 2 {
			s = append(s, n)
		}
		return s
	}
	cases := []struct {
		command string
		args    []string
		want    []int
	}{
		{"write-lat", []string{"-a"}, pow(2, 1<<23)},
		{"write-bw", []string{"-a", "--max-size", "4K"}, pow(2, 4096)},
		{"send-lat", []string{"-a", "-c", "UD"}, pow(2, 4096)},
		{"send-bw", []string{"-a", "-c", "UD", "-m", "1024"}, pow(2, 1024)},
		{"write-lat", []string{"-a", "--max-size", "100"}, pow(2, 64)},
		{"write-lat", []string{"-s", "1g"}, []int{1 << 30}},
		{"write-lat", []string{"-s", "3"}, []int{3}},
		// Over UD without -s, perftest's size is the path MTU.
		{"send-bw", []string{"-c", "UD"}, []int{4096}},
		{"send-bw", []string{"-c", "UD", "-m", "1024"}, []int{1024}},
	}
	for _, c := range cases {
		t.Run(c.command+" "+strings.Join(c.args, " "), func(t *testing.T) {
			o, err := parse(t, c.command, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.sizesFor(shmAttr, shmPort, "shm0")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("sizes %v, want %v", got, c.want)
			}
		})
	}
}

func TestModes(t *testing.T) {
	o, err := parse(t, "write-lat", "-D", "5")
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.latencyConfig([]int{2})
	if cfg.Duration != 5*time.Second || cfg.Margin != 1*time.Second {
		t.Errorf("duration %v margin %v, want 5s 1s (perftest's -f default: a quarter of -D, in whole seconds)", cfg.Duration, cfg.Margin)
	}
	o, err = parse(t, "send-bw", "-D", "3", "-f", "1", "-q", "2", "-b", "--report_gbits", "-N")
	if err != nil {
		t.Fatal(err)
	}
	b := o.bwConfig([]int{64})
	if b.Duration != 3*time.Second || b.Margin != time.Second || b.QPs != 2 || !b.Bidirectional || !b.ReportGbits || !b.NoPeak {
		t.Errorf("bandwidth config %+v", b)
	}
}

// TestParams checks what the peers compare: symmetric flags with their
// values, spelled as on the command line.
func TestParams(t *testing.T) {
	o, err := parse(t, "write-bw", "-a", "--max-size", "64", "-q", "3", "-b", "-t", "16")
	if err != nil {
		t.Fatal(err)
	}
	sizes, _ := o.sizesFor(shmAttr, shmPort, "shm0")
	p := o.params(sizes)
	want := []oob.Field{
		{Flag: "-a", Symmetric: true}, {Flag: "--max-size", Value: "64", Symmetric: true},
		{Flag: "-n", Value: "5000", Symmetric: true}, {Flag: "-c", Value: "RC", Symmetric: true},
		{Flag: "-q", Value: "3", Symmetric: true}, {Flag: "-b", Symmetric: true},
		{Flag: "-t", Value: "16"},
	}
	if p.Test != "write-bw" || !slices.Equal(p.Fields, want) {
		t.Errorf("params %+v\nwant %+v", p, want)
	}
	o, _ = parse(t, "atomic-lat", "-A", "CMP_AND_SWAP", "-D", "3", "-f", "1", "--percentiles", "50")
	p = o.params([]int{8})
	if !slices.Contains(p.Fields, oob.Field{Flag: "-A", Value: "ATOMIC_CMP_AND_SWP", Symmetric: true}) ||
		!slices.Contains(p.Fields, oob.Field{Flag: "-D", Value: "3", Symmetric: true}) ||
		slices.ContainsFunc(p.Fields, func(f oob.Field) bool { return f.Flag == "-n" || f.Flag == "--percentiles" }) {
		t.Errorf("atomic-lat params %+v", p.Fields)
	}
}

// TestBadFlags covers conflicts and ranges; every error is a usage error
// whose text names the flag.
func TestBadFlags(t *testing.T) {
	cases := []struct {
		command string
		args    []string
		want    string
	}{
		{"write-lat", []string{"-q", "2"}, "-q 2 applies to bandwidth tests only"},
		{"write-lat", []string{"-l", "2"}, "-l 2 applies to bandwidth tests only"},
		{"write-lat", []string{"-Q", "2"}, "-Q 2 applies to bandwidth tests only"},
		{"write-lat", []string{"-N"}, "-N applies to bandwidth tests only"},
		{"write-lat", []string{"--report_gbits"}, "--report_gbits applies to bandwidth tests only"},
		{"write-lat", []string{"-r", "8"}, "-r 8 applies to the send tests only"},
		{"read-bw", []string{"-I", "8"}, "-I 8 applies to send and write tests only"},
		{"send-lat", []string{"-o", "8"}, "-o 8 applies to read and atomic tests only"},
		{"write-bw", []string{"-A", "FETCH_AND_ADD"}, "-A FETCH_AND_ADD applies to atomic tests only"},
		{"write-bw", []string{"--percentiles", "50"}, "--percentiles 50 applies to latency tests only"},
		{"atomic-bw", []string{"-s", "8"}, "atomic operations always move 8 bytes"},
		{"atomic-lat", []string{"--max-size", "8"}, "atomic operations always move 8 bytes"},
		{"write-bw", []string{"-c", "UD"}, "write-bw runs over RC or UC only"},
		{"atomic-lat", []string{"-c", "UC"}, "atomic-lat runs over RC only"},
		{"send-lat", []string{"-c", "DC"}, "DC is not supported"},
		{"write-lat", []string{"-s", "1x"}, "not a size"},
		{"write-lat", []string{"-s", "-5"}, "not a size"},
		{"write-lat", []string{"-s", "9999999999G"}, `-s 9999999999G: "9999999999G" is too large: a size is at most `},
		{"write-lat", []string{"-s", "99999999999999999999"}, "is too large: a size is at most"},
		{"write-lat", []string{"-a", "--max-size", "9999999999G"}, "--max-size 9999999999G: \"9999999999G\" is too large"},
		{"write-lat", []string{"-a", "-s", "8"}, "-a and -s conflict"},
		{"write-lat", []string{"-a", "--max-size", "1"}, "give 2 or more"},
		{"write-lat", []string{"-n", "0"}, "at least 5 iterations"},
		{"write-lat", []string{"-D", "0"}, "at least 1 second"},
		{"write-lat", []string{"-D", "2", "-f", "1"}, "longer than twice the margin"},
		{"write-lat", []string{"-D", "5", "-f", "-1"}, "margin cannot be negative"},
		{"write-lat", []string{"-n", "10", "-D", "5"}, "-n and -D conflict"},
		{"write-lat", []string{"-f", "1"}, "add -D"},
		{"write-lat", []string{"--warmup", "-1"}, "cannot be negative"},
		{"write-bw", []string{"-D", "5", "--warmup", "10"}, "--warmup and -D conflict"},
		{"write-bw", []string{"-t", "0"}, "tx depth must be between 1 and 15000"},
		{"send-bw", []string{"-r", "0"}, "rx depth must be between 1 and 15000"},
		{"write-bw", []string{"-l", "0"}, "at least 1"},
		{"write-bw", []string{"-l", "16", "-t", "8"}, "cannot be longer than the tx depth"},
		{"write-bw", []string{"-l", "16", "-n", "10"}, "or the iterations (-n 10)"},
		{"write-bw", []string{"-l", "4", "-Q", "4"}, "-Q and -l conflict"},
		{"write-bw", []string{"-Q", "1025"}, "between 1 and 1024"},
		{"write-lat", []string{"-I", "1025"}, "between 0 and 1024"},
		{"write-bw", []string{"-q", "16385"}, "between 1 and 16384"},
		{"read-lat", []string{"-o", "0"}, "at least 1"},
		{"write-lat", []string{"-u", "32"}, "between 0 and 31"},
		{"write-lat", []string{"-i", "0"}, "ports count from 1"},
		{"write-lat", []string{"-p", "70000"}, "not a TCP port"},
		{"write-lat", []string{"host", "-p", "0"}, "a client needs the server's port"},
		{"write-lat", []string{"--timeout", "-1s"}, "must be positive"},
		{"write-lat", []string{"-m", "300"}, "256, 512, 1024, 2048 or 4096"},
		{"atomic-bw", []string{"-A", "SWAP"}, "use CMP_AND_SWAP or FETCH_AND_ADD"},
		{"write-lat", []string{"--percentiles", "0"}, "not a percentile"},
		{"write-lat", []string{"--json", "-", "--hgrm", "-"}, "both want stdout"},
		{"write-lat", []string{"--loopback", "host"}, "--loopback runs the server itself"},
		{"write-lat", []string{"h1", "h2"}, "too many arguments"},
		{"write-lat", []string{"--rate_limit", "1"}, "--rate_limit applies to bandwidth tests only"},
		{"send-bw", []string{"--rate_limit", "-1"}, "give a positive rate"},
		{"send-bw", []string{"--rate_units", "M"}, "give --rate_limit too"},
		{"send-bw", []string{"--rate_limit", "1", "--rate_limit_type", "SW"}, "through the QP's packet pacing only; use PP"},
		{"send-bw", []string{"--rate_limit", "1", "--rate_limit_type", "XX"}, "use PP"},
		{"send-bw", []string{"--rate_limit", "1", "--rate_units", "k"}, "use M (MiB/s), g (Gb/s) or p (messages per second)"},
		{"send-bw", []string{"--rate_limit", "1", "--rate_units", "p", "-a"}, "with -a, give the rate in M (MiB/s) or g (Gb/s)"},
		{"send-bw", []string{"--rate_limit", "0.00005", "--rate_units", "M"}, "--rate_limit 5e-05 --rate_units M is 0 kbit/s: packet pacing takes 1 to"},
	}
	for _, c := range cases {
		t.Run(c.command+" "+strings.Join(c.args, " "), func(t *testing.T) {
			_, err := parse(t, c.command, c.args...)
			var ue *cli.UsageError
			if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want a usage error containing %q", err, c.want)
			}
		})
	}
}

// TestDeviceLimits checks flags against a device's limits, with the limit
// and the device named in the error.
func TestDeviceLimits(t *testing.T) {
	small := verbsio.DeviceAttr{MaxMsgSize: 1 << 20, MaxInlineData: 64, MaxQPWR: 256, MaxQP: 8, MaxQPRdAtom: 4, MaxCQE: 1024, AtomicCap: verbsio.AtomicNone}
	port := verbsio.PortAttr{ActiveMTU: verbsio.MTU1024}
	cases := []struct {
		command string
		args    []string
		want    string
		env     bool
	}{
		{"write-lat", []string{"-s", "0"}, "-s 0: message size must be between 1 and 1048576 (dev's max_msg_sz)", false},
		{"write-lat", []string{"-s", "2M"}, "-s 2M: message size must be between 1 and 1048576 (dev's max_msg_sz); use -s 1048576 or less", false},
		// Sizes past 4 GiB are sizes too, above the device's limit.
		{"write-lat", []string{"-s", "8G"}, "-s 8G: message size must be between 1 and 1048576 (dev's max_msg_sz); use -s 1048576 or less", false},
		{"write-bw", []string{"-s", "1024G"}, "-s 1024G: message size must be between 1 and 1048576 (dev's max_msg_sz); use -s 1048576 or less", false},
		{"write-lat", []string{"-s", "8589934592"}, "between 1 and 1048576 (dev's max_msg_sz); use -s 1048576 or less", false},
		{"send-lat", []string{"-c", "UD", "-s", "2048"}, "must fit in the path MTU (1024 bytes)", false},
		{"write-lat", []string{"-I", "128"}, "-I 128: inline size must be at most 64 (dev's max_inline_data)", false},
		{"write-bw", []string{"-I", "128"}, "at most 64 (dev's max_inline_data)", false},
		{"write-bw", []string{"-t", "256"}, "-t 256: tx depth must be below 256 (dev's max_qp_wr)", false},
		{"send-bw", []string{"-t", "8", "-r", "300"}, "-r 300: rx depth must be at most 256", false},
		{"write-bw", []string{"-q", "9", "-t", "8"}, "-q 9: dev offers at most 8 QPs", false},
		{"read-bw", []string{"-o", "8", "-t", "8"}, "-o 8: outstanding reads must be at most 4", false},
		{"write-bw", []string{"-q", "8", "-t", "200"}, "needs a CQ of 1624 entries, more than dev's 1024", false},
		{"atomic-lat", nil, "dev does not support atomic operations", true},
		{"send-bw", []string{"--rate_limit", "1"}, "--rate_limit: dev has no packet pacing", true},
	}
	for _, c := range cases {
		t.Run(c.command+" "+strings.Join(c.args, " "), func(t *testing.T) {
			o, err := parse(t, c.command, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			_, err = o.sizesFor(small, port, "dev")
			if err == nil {
				err = o.checkDevice(small, "dev")
			}
			var ue *cli.UsageError
			var ee *cli.EnvironmentError
			kindOK := errors.As(err, &ue) && !c.env || errors.As(err, &ee) && c.env
			if err == nil || !kindOK || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v (%T), want one containing %q", err, err, c.want)
			}
		})
	}
	// Within the limits: no error. send-lat's default inline (236) is
	// perftest's choice and is capped by the device, not an error.
	o, _ := parse(t, "send-lat")
	if _, err := o.sizesFor(small, port, "dev"); err != nil {
		t.Error(err)
	}
	if err := o.checkDevice(small, "dev"); err != nil {
		t.Errorf("default inline on a small device: %v", err)
	}
	// -a up to a --max-size past 4 GiB: capped at the device's max_msg_sz.
	o, err := parse(t, "write-bw", "-a", "--max-size", "8G")
	if err != nil {
		t.Fatal(err)
	}
	if sizes, err := o.sizesFor(small, port, "dev"); err != nil || sizes[len(sizes)-1] != 1<<20 {
		t.Errorf("-a --max-size 8G: sizes %v, %v; want up to 1048576", sizes, err)
	}
}

// TestRateLimit checks --rate_limit's units and the device's pacing
// range and QP types.
func TestRateLimit(t *testing.T) {
	pc := verbsio.PacingCaps{RateLimitMinKbps: 100, RateLimitMaxKbps: 1_000_000, SupportedQP: []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC}}
	cases := []struct {
		args []string
		kbps uint32
		want string // an error containing it; "" none
	}{
		{nil, 0, ""},
		{[]string{"--rate_limit", "50", "--rate_units", "M"}, 419_430, ""}, // 50 MiB/s: 50 × 2^20 × 8 / 1000 = 419430.4 kbit/s
		{[]string{"--rate_limit", "0.5"}, 500_000, ""},
		{[]string{"--rate_limit", "0.1", "--rate_units", "g"}, 100_000, ""},
		{[]string{"--rate_limit", "1000", "--rate_units", "p", "-s", "1000"}, 8_000, ""},
		{[]string{"--rate_limit", "2"}, 2_000_000, "outside dev's pacing range, 100 to 1000000 kbit/s"},
		{[]string{"--rate_limit", "50", "--rate_units", "M", "-c", "UD"}, 419_430, "dev paces [RC UC] QPs, not UD"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			o, err := parse(t, "send-bw", c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if o.rateKbps != c.kbps {
				t.Errorf("rate %d kbit/s, want %d", o.rateKbps, c.kbps)
			}
			if cfg := o.bwConfig(o.sizes); cfg.RateLimitKbps != c.kbps {
				t.Errorf("bw.Config.RateLimitKbps %d, want %d", cfg.RateLimitKbps, c.kbps)
			}
			err = o.checkRate(pc, "dev")
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("checkRate: %v, want %q", err, c.want)
			}
		})
	}
}

// TestRateMbps: --rate_units as perftest reads them, in Mb/s (10^6
// bits per second), hand-computed: M is MiB/s (2^20 bytes per second),
// g Gb/s (fractions too), p messages of -s bytes per second.
func TestRateMbps(t *testing.T) {
	for _, c := range []struct {
		limit float64
		units string
		size  int
		mbps  float64
		err   string
	}{
		{10, "M", 1024, 83.88608, ""},    // 10 × 1048576 × 8 / 10^6
		{10240, "p", 1024, 83.88608, ""}, // the same rate: 10 MiB/s of 1024-byte messages is 10240 per second
		{1, "M", 64, 8.388608, ""},
		{100, "M", 1514, 838.8608, ""},
		{0.1, "g", 64, 100, ""},
		{0.01, "g", 64, 10, ""},
		{2, "g", 64, 2000, ""},
		{1000, "p", 125, 1, ""},
		{1, "m", 64, 0, "--rate_units m: use M (MiB/s), g (Gb/s) or p (frames per second), as perftest's"},
		{1, "G", 64, 0, "--rate_units G: use M"},
	} {
		got, err := rateMbps(c.limit, c.units, c.size, "frames")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%g %s: %v, want an error with %q", c.limit, c.units, err, c.err)
			}
			continue
		}
		if err != nil || got != c.mbps {
			t.Errorf("%g %s at %d bytes: %v Mb/s (%v), want %v", c.limit, c.units, c.size, got, err, c.mbps)
		}
	}
	if got, want := rateText(83.88608, 10, "M"), "83.88608 Mb/s (--rate_limit 10 --rate_units M: MiB/s)"; got != want {
		t.Errorf("rateText %q, want %q", got, want)
	}
}

func TestServerFlags(t *testing.T) {
	o, err := parse(t, "write-bw", "--loopback", "-s", "4K", "-b", "--json", "x.json", "-n", "50")
	if err != nil {
		t.Fatal(err)
	}
	got := serverFlags(o.fs)
	want := []string{"--bidirectional=true", "--iters=50", "--size=4K"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("server flags %q, want %q", got, want)
	}
}
