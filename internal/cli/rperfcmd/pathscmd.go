package rperfcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/dm"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/paths"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// rperf paths and rperf dm-lat: one test across send paths in one run
// (packages tests/paths and tests/dm). They take the test's perftest flags (--test
// picks the test) and add --reps and, for paths, --paths.

// Defaults of the comparisons, where they differ from the tests'.
const (
	pathsBWSize     = 64                // a message-rate test
	pathsBWIters    = 1000000           // messages per run: about 150 ms at shm0's rate
	pathsLatIters   = 10000             // iterations per run
	pathsPostList   = 16                // the batch of a post call, a flush, a doorbell
	dmLatMaxDefault = dm.DefaultMaxSize // dm-lat: -a up to this without --max-size
)

// pathsCmd is a comparison command.
type pathsCmd struct {
	name     string // "paths" or "dm-lat"
	o        *options
	testName string
	reps     int
	pathList string
	raw      rawPathsOptions // raw devices' flags (paths)
	// Set by validate.
	paths   []sendpath.Path
	skipped []string // default paths left out, with the reason
}

func newPathsCommand() *cobra.Command {
	_, cmd := pathsCommand()
	return cmd
}

func newDMLatCommand() *cobra.Command {
	_, cmd := dmLatCommand()
	return cmd
}

func pathsCommand() (*pathsCmd, *cobra.Command) {
	return newCompareCommand(&pathsCmd{name: "paths"}, session.SendBW,
		"one test across every send path the device supports, with ratios to generic",
		`Runs one test on every send path the device supports (DeviceAttr.SendPaths)
and that applies to the test, in one run, and prints the paths side by
side with their ratio to generic: message rate for bandwidth tests, median
latency for latency tests.

Each path runs --reps times; the runs are interleaved (every repetition
runs every path once, each repetition starting one path later), so that
every path sees the same machine, and each path's row is its median
repetition. Each run sets up its own QPs and buffers, on a connection of
its own. The paths:

  generic  PostSend with a chain of -l work requests, CQ.Poll
  burst    qp_burst SendPending ×-l then one SendFlush; RecvBurst; cq_poll PollCount (SEND tests, one QP)
  inline   every message inline (-s up to the device's max_inline_data)
  dm       the buffers in device memory
  tso      the kernel cuts packets (UDP GSO); every other path has the engine cut them (send-bw, write-bw on udp)
  dv       WQEs written into the send ring, one doorbell per -l (SEND and WRITE tests)

Defaults differ from the test's: send-bw, -s 64, -n 1000000 (latency
tests: 10000), -l 16 (the batch every path posts, flushes or rings at
once), -I 0 (only the inline path inlines).

Examples:
  rperf paths --loopback                          send-bw 64 B on every path
  rperf paths --loopback --test write-lat         latency on every path that applies
  rperf paths --loopback --paths generic,dv -s 1K
  rperf paths                                     server; then: rperf paths server-host

On a raw device (-d raw_<netdev>, or -Z/-P) it runs raw-bw instead: the
client sends -n frames of -s bytes on generic, burst, inline and tso
(one TSO send per -l frames, cut back into the same frames) and from a
plain AF_PACKET socket (the reference, afpacket), interleaved over
--reps, and prints each path's frame rate and its ratio to the
reference; the server, started first, counts every frame. As raw-bw,
both sides get the addresses on the command line: -E the peer's MAC (-B
this side's), and, as in perftest, -j/-k the client's IP and port and
-J/-K the server's on both sides (or --local_*/--remote_*), --tcp:
  rperf paths -d raw_eth0 -Z -E <client MAC> -J <server IP> -j <client IP>
  rperf paths -d raw_eth0 -P -E <server MAC> -J <server IP> -j <client IP>`)
}

func dmLatCommand() (*pathsCmd, *cobra.Command) {
	return newCompareCommand(&pathsCmd{name: "dm-lat"}, session.WriteLat,
		"latency with the buffers in device memory against host memory",
		`Runs a latency test with the ping buffers in device memory (the dm send
path: AllocDM, RegDMMR; the marker byte written and polled through 4-byte
copies) and in host memory (generic), in one run, interleaved, and prints
both side by side with their ratio, for each message size. Neither inlines
(-I 0), so the buffers' place is the only difference.

Defaults: write-lat (--test picks send-lat, read-lat or atomic-lat), every
size from 2 to 4096 bytes (-a with --max-size 4096; -s for one size; sizes
are capped so that the buffers fit the device memory), -n 10000, --reps 5.

Examples:
  rperf dm-lat --loopback
  rperf dm-lat --loopback --test read-lat -s 64 --json dm.json`)
}

func newCompareCommand(c *pathsCmd, def session.Test, short, long string) (*pathsCmd, *cobra.Command) {
	c.o = &options{test: def}
	cmd := &cobra.Command{
		Use:   c.name + " [host]",
		Short: short,
		Long:  long,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if c.raw.ro != nil && c.raw.active(c.o.device) {
				if err := c.validateRaw(args); err != nil {
					return err
				}
				return oneLine(c.runRaw(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
			}
			if err := c.validate(args); err != nil {
				return err
			}
			return oneLine(c.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	fs := cmd.Flags()
	c.o.register(fs)
	for _, name := range []string{rdmaCMFlag, peerUDPPortFlag, sourceIPFlag} {
		fs.MarkHidden(name) // the comparisons connect over TCP
	}
	c.helpDefaults(fs)
	fs.StringVar(&c.testName, "test", def.Command(), "the test to run: "+c.testChoices())
	fs.IntVar(&c.reps, "reps", paths.DefaultRepetitions, "runs per path, interleaved; each path's row is its median run")
	if c.name == "paths" {
		c.raw.registerRaw(fs)
		fs.StringVar(&c.pathList, "paths", "", "the paths to compare, comma-separated, generic among them (default: every path the device supports that applies)")
	}
	fs.MarkHidden(pathFlag)
	return c, cmd
}

// helpDefaults makes --help show the comparison's defaults, which validate
// applies, instead of the test command's.
func (c *pathsCmd) helpDefaults(fs *pflag.FlagSet) {
	fs.Lookup("inline_size").DefValue = "0"
	if c.name == "dm-lat" {
		fs.Lookup("size").DefValue = "" // -a up to --max-size
		fs.Lookup("max-size").Usage = "the largest size of -a"
		fs.Lookup("max-size").DefValue = strconv.Itoa(dmLatMaxDefault)
		fs.Lookup("iters").DefValue = strconv.Itoa(pathsLatIters)
		return
	}
	fs.Lookup("size").DefValue = strconv.Itoa(pathsBWSize)
	fs.Lookup("iters").DefValue = fmt.Sprintf("%d; latency tests %d", pathsBWIters, pathsLatIters)
	fs.Lookup("post_list").DefValue = strconv.Itoa(pathsPostList)
}

// tests are the tests the comparison runs: dm-lat the latency tests,
// paths every test.
func (c *pathsCmd) tests() []session.Test {
	if c.name != "dm-lat" {
		return session.Tests
	}
	return slices.DeleteFunc(slices.Clone(session.Tests), func(t session.Test) bool { return t.Family() != session.Latency })
}

func (c *pathsCmd) testChoices() string {
	var names []string
	for _, t := range c.tests() {
		names = append(names, t.Command())
	}
	return strings.Join(names, ", ")
}

// validate picks the test, checks its flags as the test command would,
// and applies the comparison's defaults.
func (c *pathsCmd) validate(args []string) error {
	o := c.o
	i := slices.IndexFunc(c.tests(), func(t session.Test) bool { return t.Command() == c.testName })
	if i < 0 {
		return cli.Usagef("--test %s: not a test %s runs; use one of %s", c.testName, c.name, c.testChoices())
	}
	o.test = c.tests()[i]
	if o.changed(pathFlag) {
		return cli.Usagef("--path picks one path; %s compares several (%s)", c.name, map[bool]string{true: "--paths", false: "generic and dm"}[c.name == "paths"])
	}
	if c.reps < 1 {
		return cli.Usagef("--reps %d: at least one run per path", c.reps)
	}
	if c.name == "dm-lat" && !o.changed("size") && !o.all {
		o.all = true
		if !o.changed("max-size") {
			o.maxSize = strconv.Itoa(dmLatMaxDefault)
			o.fs.Lookup("max-size").Changed = true
		}
	}
	if o.changed("duration") {
		return cli.Usagef("-D: %s compares runs of a fixed number of iterations; use -n", c.name)
	}
	if o.rdmaCM {
		return cli.Usagef("-R: %s connects each run over TCP; rdma_cm (-R) is for the eight test commands", c.name)
	}
	if err := o.validate(args); err != nil {
		return err
	}
	// The comparison's defaults.
	if !o.changed("size") && !o.all && !o.lat() && o.verb() != session.Atomic {
		o.sizes = []int{pathsBWSize}
	}
	if !o.changed("iters") {
		o.iters = pathsLatIters
		if !o.lat() {
			o.iters = pathsBWIters
		}
	}
	if !o.changed("inline_size") {
		o.inline = 0
	}
	if !o.lat() && !o.changed("post_list") && !o.changed("cq-mod") {
		o.postList = min(pathsPostList, o.txDepth, o.iters)
	}
	if c.name == "dm-lat" {
		c.paths = []sendpath.Path{sendpath.Generic, sendpath.DM}
		return nil
	}
	if c.pathList != "" {
		for _, f := range strings.Split(c.pathList, ",") {
			p, err := sendpath.Parse(f)
			if err != nil {
				return cli.Usagef("--paths %s: %v", c.pathList, err)
			}
			if slices.Contains(c.paths, p) {
				return cli.Usagef("--paths %s: %s appears twice", c.pathList, p)
			}
			if err := c.applies(p); err != nil {
				return cli.Usagef("--paths: %s does not apply to %s: %v", p, o.test.Command(), err)
			}
			c.paths = append(c.paths, p)
		}
		if !slices.Contains(c.paths, sendpath.Generic) {
			return cli.Usagef("--paths %s: include generic, the reference of the ratios", c.pathList)
		}
	}
	return nil
}

// applies checks path p against the test and its flags: whether it
// applies to the test (sendpath.Applies), and then the test's Check on
// path p, whose problems with the path are spelled with the path, e.g.
// "the burst path runs one QP". An -I the dm path would ignore is refused
// here, where a comparison inlines nothing unless asked.
func (c *pathsCmd) applies(p sendpath.Path) error {
	o := c.o
	if err := sendpath.Applies(p, o.test.PathTest(o.qpType)); err != nil {
		return err
	}
	if p == sendpath.DM && o.inline > 0 {
		return errors.New("device memory is never sent inline (-I)")
	}
	var err error
	if o.lat() {
		cfg := o.latencyConfig(o.sizes)
		cfg.Path = p
		err = cfg.Check()
	} else {
		cfg := o.bwConfig(o.sizes)
		cfg.Path = p
		err = cfg.Check()
	}
	var ps session.Problems
	errors.As(err, &ps)
	for _, fe := range ps {
		if fe.Field == "Path" {
			return errors.New(o.text(fe, func(field string, withValue bool) string {
				if field == "Path" && withValue {
					return "the " + p.String() + " path"
				}
				return ""
			}))
		}
	}
	return nil
}

// fitsDevice checks that the device offers p and that the test's buffers
// fit it.
func (c *pathsCmd) fitsDevice(p sendpath.Path, attr verbsio.DeviceAttr, sizes []int) error {
	o := c.o
	if err := sendpath.CheckDevice(p, attr, o.device); err != nil {
		return err
	}
	largest := sizes[len(sizes)-1]
	switch {
	case p == sendpath.Inline && largest > attr.MaxInlineData:
		return fmt.Errorf("%d-byte messages do not fit %s's max_inline_data %d", largest, o.device, attr.MaxInlineData)
	case p == sendpath.DM && uint64(o.qps*dm.BufferBytes(largest, o.qpType)) > attr.MaxDMSize:
		return fmt.Errorf("the buffers of %d-byte messages need %d bytes of device memory, more than %s's %d", largest, o.qps*dm.BufferBytes(largest, o.qpType), o.device, attr.MaxDMSize)
	}
	return nil
}

// choosePaths settles the paths once the device is open: the listed ones
// must fit the device; by default every path the device offers that fits.
func (c *pathsCmd) choosePaths(attr verbsio.DeviceAttr, sizes []int) error {
	if c.name == "dm-lat" || c.pathList != "" {
		for _, p := range c.paths {
			if err := c.fitsDevice(p, attr, sizes); err != nil {
				return &cli.EnvironmentError{Err: fmt.Errorf("%s: %v", c.flagFor(p), err)}
			}
		}
		return nil
	}
	for _, p := range sendpath.All {
		if err := c.applies(p); err != nil {
			if sendpath.Applies(p, c.o.test.PathTest(c.o.qpType)) == nil {
				c.skipped = append(c.skipped, p.String()+": "+err.Error())
			}
			continue
		}
		if err := c.fitsDevice(p, attr, sizes); err != nil {
			c.skipped = append(c.skipped, p.String()+": "+err.Error())
			continue
		}
		c.paths = append(c.paths, p)
	}
	return nil
}

func (c *pathsCmd) flagFor(p sendpath.Path) string {
	if c.name == "dm-lat" {
		return "dm-lat"
	}
	return "--paths " + p.String()
}

// dmSizes caps dm-lat's -a sizes at what device memory holds.
func (c *pathsCmd) dmSizes(attr verbsio.DeviceAttr, sizes []int) []int {
	if c.name != "dm-lat" || !c.o.all {
		return sizes
	}
	return dm.Fit(sizes, c.o.qpType, attr)
}

func (c *pathsCmd) run(ctx context.Context, stdout, stderr io.Writer) error {
	o := c.o
	p, err := prepare(o, o.finalCheck)
	if err != nil {
		return err
	}
	defer p.close()
	attr, err := p.dev.QueryDevice()
	if err != nil {
		return fmt.Errorf("query device %s: %w", o.device, err)
	}
	if p.sizes = c.dmSizes(attr, p.sizes); len(p.sizes) == 0 {
		return cli.Usagef("-a: no size fits %s's device memory (%d bytes)", o.device, attr.MaxDMSize)
	}
	if err := c.choosePaths(attr, p.sizes); err != nil {
		return err
	}
	if o.loopback {
		return loopbackWith(o, []string{c.name}, func(client *options) error {
			cc := *c
			cc.o = client
			return cc.side(ctx, p, stdout, stderr, nil)
		})
	}
	var listening func(int)
	if o.loopbackServer {
		listening = func(port int) { reportPort(port, 0) }
	}
	return c.side(ctx, p, stdout, stderr, listening)
}

// params are the test's parameters and the comparison's.
func (c *pathsCmd) params(sizes []int) oob.Params {
	p := c.o.params(sizes)
	p.Test = c.name + " " + p.Test
	names := make([]string, len(c.paths))
	for i, x := range c.paths {
		names[i] = x.String()
	}
	p.Fields = append(p.Fields,
		oob.Field{Flag: "--paths", Value: strings.Join(names, ","), Symmetric: true},
		oob.Field{Flag: "--reps", Value: strconv.Itoa(c.reps), Symmetric: true})
	return p
}

// side runs one side of the comparison.
func (c *pathsCmd) side(ctx context.Context, p *prepared, stdout, stderr io.Writer, listening func(int)) error {
	o := c.o
	out := stdout
	if o.jsonPath == "-" {
		out = stderr
	}
	connect, closeLn, err := connector(ctx, o, out, listening)
	if err != nil {
		return err
	}
	defer closeLn()
	env := p.env
	env.SendPath = "paths"
	env.Extra = map[string]string{"role": roleOf(o.host == "")}
	prog := newProgress(stderr, o, true)
	defer prog.stop()
	headerErr := error(nil)
	cfg := paths.Config{Paths: c.paths, Repetitions: c.reps,
		OnConnected: func(in session.Info) {
			env.MTU = in.MTU
			fillExtra(env.Extra, o, in)
			prog.clear()
			headerErr = c.header(out, in, env.Clock)
		},
		OnStep: func(s paths.Step) {
			if prog.enabled {
				prog.show(fmt.Sprintf(" [%d/%d] %s, repetition %d of %d ...", s.Index+1, s.Count, s.Path, s.Repetition+1, s.Repetitions))
			}
		},
	}
	var results []reports.Result
	switch {
	case c.name == "dm-lat":
		l := o.latencyConfig(p.sizes)
		l.Params = c.params(p.sizes)
		results, err = dm.Run(ctx, p.dev, connect, dm.Config{Latency: l, Repetitions: c.reps, OnStep: cfg.OnStep, OnConnected: cfg.OnConnected})
	case o.lat():
		l := o.latencyConfig(p.sizes)
		l.Params = c.params(p.sizes)
		cfg.Latency = &l
		results, err = paths.Run(ctx, p.dev, connect, cfg)
	default:
		b := o.bwConfig(p.sizes)
		b.Params = c.params(p.sizes)
		cfg.Bandwidth = &b
		results, err = paths.Run(ctx, p.dev, connect, cfg)
	}
	prog.stop()
	if err != nil {
		return runError(err)
	}
	if headerErr != nil {
		return fmt.Errorf("write the report: %w", headerErr)
	}
	if err := c.report(out, results, env.Clock); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	env.Extra["repetitions"] = strconv.Itoa(c.reps)
	env.Extra["paths"] = sendpath.Names(c.paths)
	if len(c.skipped) > 0 {
		env.Extra["paths_skipped"] = strings.Join(c.skipped, "; ")
	}
	attr, _ := p.dev.QueryDevice()
	for _, x := range c.paths {
		if seg := sendpath.SegmenterName(paths.Segmenter(x), p.dev.Device, attr); seg != "" {
			env.Extra["segmenter_"+x.String()] = seg
		}
	}
	if err := writeReport(o, p, env, results, out, stdout); err != nil {
		return err
	}
	p.ok = true
	return nil
}
