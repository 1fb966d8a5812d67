package rperfcmd

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/pacing"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/verbsio"
)

// shmPaths is shm0's attributes as the send-path checks use them.
var shmPaths = func() verbsio.DeviceAttr {
	a := shmAttr
	a.SendPaths = []string{"generic", "burst", "inline", "dm", "dv"}
	a.MaxDMSize = 256 << 10
	return a
}()

func TestPathFlag(t *testing.T) {
	cases := []struct {
		command string
		args    []string
		want    sendpath.Path
		err     string
	}{
		{"write-lat", nil, sendpath.Generic, ""},
		{"send-bw", []string{"--path", "burst"}, sendpath.Burst, ""},
		{"send-bw", []string{"--path", "BURST", "-c", "UC"}, sendpath.Burst, ""},
		{"write-lat", []string{"--path", "dm"}, sendpath.DM, ""},
		{"read-bw", []string{"--path", "dm"}, sendpath.DM, ""},
		{"write-bw", []string{"--path", "tso"}, sendpath.TSO, ""},
		{"send-lat", []string{"--path", "dv"}, sendpath.DV, ""},
		{"write-lat", []string{"--path", "burst"}, 0, "--path burst does not apply to write-lat: the qp_burst family posts SENDs only"},
		{"send-bw", []string{"--path", "burst", "-c", "UD"}, 0, "binds to RC and UC QPs, not UD"},
		{"send-bw", []string{"--path", "burst", "-q", "2"}, 0, "--path burst runs one QP"},
		{"send-lat", []string{"--path", "tso"}, 0, "use it with send-bw or write-bw"},
		{"read-lat", []string{"--path", "inline"}, 0, "only SENDs and RDMA WRITEs carry inline data"},
		{"atomic-bw", []string{"--path", "dv"}, 0, "rperf writes SEND and RDMA WRITE WQEs"},
		{"send-lat", []string{"--path", "dv", "-c", "UD"}, 0, "address handle"},
		{"write-lat", []string{"--path", "dm", "-I", "64"}, 0, "--path dm and -I 64 conflict"},
		{"write-lat", []string{"--path", "inline", "-I", "64"}, 0, "--path inline sends every message inline, whatever -I says"},
		{"write-bw", []string{"--path", "dm", "--validate"}, 0, "--path dm and --validate conflict"},
		{"send-bw", []string{"--path", "burst", "--validate"}, 0, "RecvBurst does not set"},
		{"write-lat", []string{"--path", "fast"}, 0, `"fast" is not a send path`},
	}
	for _, c := range cases {
		t.Run(c.command+" "+strings.Join(c.args, " "), func(t *testing.T) {
			o, err := parse(t, c.command, c.args...)
			if c.err != "" {
				var ue *cli.UsageError
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.As(err, &ue) {
					t.Fatalf("error %v, want a usage error saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.path != c.want {
				t.Fatalf("path %s, want %s", o.path, c.want)
			}
			var path sendpath.Path
			if o.lat() {
				path = o.latencyConfig([]int{2}).Path
			} else {
				path = o.bwConfig([]int{64}).Path
			}
			if path != c.want {
				t.Errorf("config path %s", path)
			}
			// A path other than generic is a symmetric parameter; generic
			// adds none, so older peers still match.
			p := o.params([]int{64})
			has := slices.Contains(p.Fields, oob.Field{Flag: "--path", Value: c.want.String(), Symmetric: true})
			if has != (c.want != sendpath.Generic) {
				t.Errorf("params %+v", p.Fields)
			}
		})
	}
}

func TestPathDevice(t *testing.T) {
	o, _ := parse(t, "send-bw", "--path", "tso")
	err := o.checkPathDevice(shmPaths, []int{65536})
	var ee *cli.EnvironmentError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "shm0 does not support the tso send path; it supports generic, burst, inline, dm, dv") {
		t.Errorf("tso on shm0: %v", err)
	}
	o, _ = parse(t, "send-bw", "--path", "inline", "-s", "2048")
	if err := o.checkPathDevice(shmPaths, []int{2048}); err == nil || !strings.Contains(err.Error(), "max_inline_data 1024; use -s 1024 or less") {
		t.Errorf("inline 2048: %v", err)
	}
	if err := o.checkPathDevice(shmPaths, []int{1024}); err != nil {
		t.Errorf("inline 1024: %v", err)
	}
	// A device that lists no paths offers generic only.
	o, _ = parse(t, "write-lat", "--path", "dv")
	if err := o.checkPathDevice(verbsio.DeviceAttr{}, []int{2}); err == nil || !strings.Contains(err.Error(), "it supports generic") {
		t.Errorf("dv on a device without paths: %v", err)
	}
	dev, err := verbsio.Open("shm0")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	x := map[string]string{}
	o.pathExtra(x, dev)
	if len(x) != 0 {
		t.Errorf("shm extra %v", x)
	}
}

// parseCompare parses args as rperf paths' or dm-lat's flags and validates
// them.
func parseCompare(t *testing.T, name string, args ...string) (*pathsCmd, error) {
	t.Helper()
	c, cmd := pathsCommand()
	if name == "dm-lat" {
		c, cmd = dmLatCommand()
	}
	cmd.Flags().SetOutput(&strings.Builder{})
	if err := cmd.Flags().Parse(args); err != nil {
		return nil, err
	}
	return c, c.validate(cmd.Flags().Args())
}

func TestCompareDefaults(t *testing.T) {
	c, err := parseCompare(t, "paths")
	if err != nil {
		t.Fatal(err)
	}
	o := c.o
	if o.test.Command() != "send-bw" || !slices.Equal(o.sizes, []int{64}) || o.iters != 1000000 || o.inline != 0 || o.postList != 16 || c.reps != 5 {
		t.Errorf("paths defaults: %s sizes %v iters %d inline %d post list %d reps %d", o.test.Command(), o.sizes, o.iters, o.inline, o.postList, c.reps)
	}
	// The default paths: what shm0 offers and applies; tso is noted.
	if err := c.choosePaths(shmPaths, []int{64}); err != nil {
		t.Fatal(err)
	}
	if sendpath.Names(c.paths) != "generic, burst, inline, dm, dv" || len(c.skipped) != 1 || !strings.HasPrefix(c.skipped[0], "tso: shm0 does not support") {
		t.Errorf("paths %v skipped %q", sendpath.Names(c.paths), c.skipped)
	}
	p := c.params([]int{64})
	if p.Test != "paths send-bw" || !slices.Contains(p.Fields, oob.Field{Flag: "--paths", Value: "generic,burst,inline,dm,dv", Symmetric: true}) ||
		!slices.Contains(p.Fields, oob.Field{Flag: "--reps", Value: "5", Symmetric: true}) {
		t.Errorf("params %+v", p)
	}

	// A latency test; sizes that inline cannot carry leave it out.
	c, err = parseCompare(t, "paths", "--test", "write-lat", "-s", "2K", "-q", "1")
	if err == nil {
		t.Fatalf("-q on a latency test accepted")
	}
	c, err = parseCompare(t, "paths", "--test", "write-lat", "-s", "2K")
	if err != nil {
		t.Fatal(err)
	}
	if c.o.iters != 10000 || c.o.inline != 0 || !slices.Equal(c.o.sizes, []int{2048}) {
		t.Errorf("write-lat: iters %d inline %d sizes %v", c.o.iters, c.o.inline, c.o.sizes)
	}
	c.choosePaths(shmPaths, []int{2048})
	if sendpath.Names(c.paths) != "generic, dm, dv" || !slices.ContainsFunc(c.skipped, func(s string) bool { return strings.Contains(s, "max_inline_data") }) {
		t.Errorf("2 KiB write-lat paths %v skipped %q", sendpath.Names(c.paths), c.skipped)
	}
	// Explicit paths, and explicit flags kept.
	c, err = parseCompare(t, "paths", "--paths", "generic,dv", "-s", "1K", "-n", "50", "-l", "4", "--reps", "3")
	if err != nil {
		t.Fatal(err)
	}
	if sendpath.Names(c.paths) != "generic, dv" || c.o.postList != 4 || c.o.iters != 50 || c.reps != 3 {
		t.Errorf("explicit: paths %v post list %d iters %d reps %d", sendpath.Names(c.paths), c.o.postList, c.o.iters, c.reps)
	}
	if err := c.choosePaths(shmPaths, []int{1024}); err != nil {
		t.Error(err)
	}
	c, _ = parseCompare(t, "paths", "--paths", "generic,dm", "-s", "200K")
	if err := c.choosePaths(shmPaths, []int{200 << 10}); err == nil || !strings.Contains(err.Error(), "need 409600 bytes of device memory, more than shm0's 262144") {
		t.Errorf("200 KiB dm: %v", err)
	}
}

// helpDefault is the default --help shows for a flag, "" for none.
func helpDefault(t *testing.T, fs *pflag.FlagSet, name string) string {
	t.Helper()
	for _, line := range strings.Split(fs.FlagUsages(), "\n") {
		if !strings.Contains(line, "--"+name+" ") {
			continue
		}
		_, def, ok := strings.Cut(line, "(default ")
		if !ok {
			return ""
		}
		return strings.Trim(strings.TrimSuffix(def, ")"), `"`)
	}
	t.Fatalf("--help has no --%s", name)
	return ""
}

// TestCompareHelpDefaults checks that the defaults --help shows are the
// ones a run without the flags uses.
func TestCompareHelpDefaults(t *testing.T) {
	_, cmd := pathsCommand()
	fs := cmd.Flags()
	c, err := parseCompare(t, "paths")
	if err != nil {
		t.Fatal(err)
	}
	lat, err := parseCompare(t, "paths", "--test", "write-lat")
	if err != nil {
		t.Fatal(err)
	}
	o := c.o
	for _, f := range []struct{ name, want string }{
		{"size", strconv.Itoa(o.sizes[0])},
		{"iters", fmt.Sprintf("%d; latency tests %d", o.iters, lat.o.iters)},
		{"post_list", strconv.Itoa(o.postList)},
		{"inline_size", ""}, // 0, shown as none
		{"test", o.test.Command()},
	} {
		if got := helpDefault(t, fs, f.name); got != f.want {
			t.Errorf("paths --help: --%s default %q, the run uses %q", f.name, got, f.want)
		}
	}
	if !strings.Contains(cmd.Long, fmt.Sprintf("-s %d, -n %d", o.sizes[0], o.iters)) {
		t.Errorf("paths' description does not say -s %d, -n %d", o.sizes[0], o.iters)
	}

	_, cmd = dmLatCommand()
	fs = cmd.Flags()
	c, err = parseCompare(t, "dm-lat")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ name, want string }{
		{"size", ""}, // -a
		{"max-size", c.o.maxSize},
		{"iters", strconv.Itoa(c.o.iters)},
		{"inline_size", ""},
	} {
		if got := helpDefault(t, fs, f.name); got != f.want {
			t.Errorf("dm-lat --help: --%s default %q, the run uses %q", f.name, got, f.want)
		}
	}
	if !c.o.all || c.o.inline != 0 {
		t.Errorf("dm-lat runs all %v inline %d", c.o.all, c.o.inline)
	}
}

func TestCompareBadFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"paths", []string{"--paths", "dv"}, "include generic"},
		{"paths", []string{"--paths", "generic,dv,dv"}, "dv appears twice"},
		{"paths", []string{"--paths", "generic,fast"}, `"fast" is not a send path`},
		{"paths", []string{"--paths", "generic,burst", "-q", "2"}, "the burst path runs one QP"},
		{"paths", []string{"--test", "read-bw", "--paths", "generic,inline"}, "--paths: inline does not apply to read-bw"},
		{"paths", []string{"--path", "dv"}, "--path picks one path"},
		{"paths", []string{"--reps", "0"}, "--reps 0"},
		{"paths", []string{"-D", "5"}, "fixed number of iterations"},
		{"dm-lat", []string{"--test", "write-bw"}, "not a test dm-lat runs"},
		{"dm-lat", []string{"--path", "dm"}, "compares several (generic and dm)"},
	}
	for _, c := range cases {
		if _, err := parseCompare(t, c.name, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want %q", c.name, c.args, err, c.want)
		}
	}
}

func TestDMLatDefaults(t *testing.T) {
	c, err := parseCompare(t, "dm-lat")
	if err != nil {
		t.Fatal(err)
	}
	o := c.o
	sizes, err := o.sizesFor(shmPaths, shmPort, "shm0")
	if err != nil {
		t.Fatal(err)
	}
	if o.test.Command() != "write-lat" || !o.all || sizes[len(sizes)-1] != 4096 || sendpath.Names(c.paths) != "generic, dm" || o.inline != 0 {
		t.Errorf("dm-lat defaults: %s all %v sizes %v paths %v inline %d", o.test.Command(), o.all, sizes, sendpath.Names(c.paths), o.inline)
	}
	// -a up to 8M: capped where two page-rounded regions no longer fit
	// 256 KiB of device memory (128 KiB messages).
	c, _ = parseCompare(t, "dm-lat", "-a")
	sizes, _ = c.o.sizesFor(shmPaths, shmPort, "shm0")
	fit := c.dmSizes(shmPaths, sizes)
	if fit[len(fit)-1] != 128<<10 {
		t.Errorf("dm-lat -a: largest %d, want 131072", fit[len(fit)-1])
	}
}

// parsePacing parses args as rperf pacing's flags and validates them.
func parsePacing(t *testing.T, args ...string) (*pacingCmd, error) {
	t.Helper()
	c := newPacingCmd()
	fs := pflag.NewFlagSet("pacing", pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, c.validate(fs.Args())
}

func TestPacingFlags(t *testing.T) {
	c, err := parsePacing(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.Size != 4096 || c.cfg.Rates != nil || c.cfg.RateDuration != time.Second || c.cfg.Tolerance != 5 || c.cfg.Burst != 0 {
		t.Errorf("defaults %+v", c.cfg)
	}
	p := c.params()
	if !slices.Contains(p.Fields, oob.Field{Flag: "--rates", Value: "sweep", Symmetric: true}) ||
		!slices.Contains(p.Fields, oob.Field{Flag: "--rate-duration", Value: "1s", Symmetric: true}) {
		t.Errorf("params %+v", p.Fields)
	}
	c, err = parsePacing(t, "--rates", "1, 10,2.5", "-s", "1K", "--rate-bytes", "64K", "--burst", "16K", "--percentiles", "50,99", "host")
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.cfg
	if !slices.Equal(cfg.Rates, []float64{1, 10, 2.5}) || cfg.Size != 1024 || cfg.RateBytes != 65536 || cfg.Burst != 16384 ||
		!slices.Equal(cfg.Percentiles, []float64{50, 99}) || c.o.host != "host" {
		t.Errorf("parsed %+v host %q", cfg, c.o.host)
	}
	if !slices.Contains(c.params().Fields, oob.Field{Flag: "--rates", Value: "1,10,2.5", Symmetric: true}) {
		t.Errorf("params %+v: the rates as numbers, whatever the spacing", c.params().Fields)
	}
	if p := cfg.PlanRate(10); p.Excluded != 16 || p.Measured != 64 {
		t.Errorf("plan %+v", p)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--rates", "10,x"}, `"x" is not a rate`},
		{[]string{"--rates", "-5"}, `"-5" is not a rate`},
		{[]string{"--rate-bytes", "1M", "--rate-duration", "2s"}, "conflict"},
		{[]string{"--rate-duration", "0s"}, "must be positive"},
		{[]string{"--tolerance", "100"}, "[0, 100)"},
		{[]string{"--rates", "5", "--tolerance", "1"}, "--tolerance sets when the default sweep stops"},
		{[]string{"-s", "0"}, "-s 0"},
		{[]string{"--validate"}, "timing only"},
		{[]string{"--loopback", "host"}, "--loopback runs the server itself"},
		{[]string{"-m", "1000"}, "-m 1000"},
		{[]string{"--percentiles", "0"}, "not a percentile"},
	} {
		if _, err := parsePacing(t, bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want %q", bad.args, err, bad.want)
		}
	}
	// Flags of the test commands that pacing does not take are unknown.
	if _, err := parsePacing(t, "-q", "2"); err == nil {
		t.Error("-q accepted")
	}
	if pacing.DefaultSize != 4096 {
		t.Error("the help text says 4096")
	}
}
