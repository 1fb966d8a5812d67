package rperfcmd

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/stats"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/table"
	"github.com/rperf/rperf/tests/raw"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// rperf paths on a raw device: raw-bw's client on each raw send path
// (generic, burst, inline, tso) against a plain AF_PACKET sender of the
// same frames (raw.Reference), interleaved in one run, as the
// comparison does for the connected tests. As raw-bw, it has no
// out-of-band connection: the server (-Z) and the client (-P) are given
// each other's addresses on the command line, and the server, started
// first, counts every frame of the run.

// Defaults of the raw comparison.
const (
	rawPathsIters  = 100000 // frames per run: about 0.1 s at a raw device's rate
	rawPathsRxDeep = 8192   // the server's receives
)

// rawPathsOptions are the raw flags rperf paths takes.
type rawPathsOptions struct {
	ro *rawOptions
}

// registerRaw adds raw-bw's addressing flags to the comparison's.
func (r *rawPathsOptions) registerRaw(fs *pflag.FlagSet) {
	r.ro = &rawOptions{test: session.RawBW, fs: fs, pathName: "generic", hopLimit: 64}
	o := r.ro
	fs.BoolVarP(&o.server, "server", "Z", false, "raw devices: the server side, which counts the frames of every run (start it first)")
	fs.BoolVarP(&o.client, "client", "P", false, "raw devices: the client side, which sends on each path and on a plain packet socket")
	fs.StringVarP(&o.srcMAC, "source_mac", "B", "", "raw devices: this side's MAC address (default: the netdev's)")
	fs.StringVarP(&o.dstMAC, "dest_mac", "E", "", "raw devices: the peer's MAC address")
	registerIPPortFlags(fs, o, "raw devices: ")
	fs.BoolVar(&o.tcp, "tcp", false, "raw devices: TCP headers instead of UDP")
}

// active reports whether the comparison runs on a raw device: a side's
// role was given, or the device is the engine's raw_<netdev>.
func (r *rawPathsOptions) active(device string) bool {
	return r.ro.server || r.ro.client || strings.HasPrefix(device, "raw_")
}

// rawPathRun is one path of the raw comparison.
type rawPathRun struct {
	name string        // the path's name, or raw.PathAFPacket
	path sendpath.Path // the send path (the reference: none)
	ref  bool
}

// validateRaw checks the comparison's flags for a raw device and fills
// the raw options from the shared ones.
func (c *pathsCmd) validateRaw(args []string) error {
	o, ro := c.o, c.raw.ro
	switch {
	case len(args) > 0:
		return cli.Usagef("rperf paths on a raw device takes no host: give the peer's MAC with -E, the client's and server's IPs with -j and -J, and the side with -Z or -P")
	case o.loopback || o.loopbackServer:
		return cli.Usagef("--loopback: rperf paths on a raw device runs two sides over a link; start the server (-Z) and the client (-P) in their namespaces")
	case o.changed("test") || c.testName != session.SendBW.Command():
		return cli.Usagef("--test %s: on a raw device rperf paths runs raw-bw; drop --test", c.testName)
	case o.changed(pathFlag):
		return cli.Usagef("--path picks one path; rperf paths compares several (--paths)")
	case c.reps < 1:
		return cli.Usagef("--reps %d: at least one run per path", c.reps)
	case o.changed("duration"):
		return cli.Usagef("-D: rperf paths compares runs of a fixed number of frames; use -n")
	case o.device == "":
		return cli.Usagef("-d: give the raw device, e.g. -d raw_eth0")
	}
	for _, name := range []string{"all", "qp", "bidirectional", "connection", "inline_size", "mtu", "hgrm"} {
		if f := o.fs.Lookup(name); f != nil && f.Changed {
			return cli.Usagef("%s does not apply to rperf paths on a raw device: drop it", flagLead(f))
		}
	}
	ro.device, ro.timeout, ro.jsonPath = o.device, o.timeout, o.jsonPath
	ro.size = pathsBWSize
	if o.changed("size") {
		n, err := parseSize(o.size)
		if err != nil {
			return cli.Usagef("-s %s: not a size", o.size)
		}
		ro.size = n
	}
	ro.iters, ro.warmup = rawPathsIters, max(o.warmup, 0)
	if o.changed("iters") {
		ro.iters = o.iters
	}
	ro.txDepth, ro.rxDepth = session.RawBW.DefaultTxDepth(), rawPathsRxDeep
	if o.changed("tx-depth") {
		ro.txDepth = o.txDepth
	}
	if o.changed("rx-depth") {
		ro.rxDepth = o.rxDepth
	}
	ro.flows, ro.flowsBurst, ro.rateType, ro.rateUnits = 1, 1, "PP", "g"
	ro.cqMod = o.cqMod
	if err := ro.validate(); err != nil {
		return err
	}
	if !o.changed("post_list") {
		o.postList = pathsPostList
	}
	tso := c.pathList == "" || slices.Contains(strings.Split(c.pathList, ","), "tso")
	if o.postList < 1 || tso && (ro.iters%o.postList != 0 || ro.warmup%o.postList != 0) {
		return cli.Usagef("-l %d with -n %d and --warmup %d: the tso path sends -l frames per TSO send; give -n and --warmup that -l divides", o.postList, ro.iters, ro.warmup)
	}
	return nil
}

// choosePathsRaw settles the paths on this side's device: the reference
// first, then every raw path the device offers (--paths: those listed).
func (c *pathsCmd) choosePathsRaw(attr verbsio.DeviceAttr, h int) ([]rawPathRun, error) {
	ro := c.raw.ro
	want := []sendpath.Path{sendpath.Generic, sendpath.Burst, sendpath.Inline, sendpath.TSO}
	listed := c.pathList != ""
	if listed {
		want = nil
		for _, f := range strings.Split(c.pathList, ",") {
			p, err := sendpath.Parse(f)
			if err != nil {
				return nil, cli.Usagef("--paths %s: %v", c.pathList, err)
			}
			if !slices.Contains([]sendpath.Path{sendpath.Generic, sendpath.Burst, sendpath.Inline, sendpath.TSO}, p) {
				return nil, cli.Usagef("--paths %s: %s is not a raw send path; use generic, burst, inline and tso", c.pathList, p)
			}
			if slices.Contains(want, p) {
				return nil, cli.Usagef("--paths %s: %s appears twice", c.pathList, p)
			}
			want = append(want, p)
		}
	}
	runs := []rawPathRun{{name: raw.PathAFPacket, ref: true}}
	for _, p := range want {
		why := ""
		switch {
		case sendpath.CheckDevice(p, attr, ro.device) != nil:
			why = sendpath.CheckDevice(p, attr, ro.device).Error()
		case p == sendpath.Inline && ro.size > attr.MaxInlineData:
			why = fmt.Sprintf("%d-byte frames do not fit %s's max_inline_data %d", ro.size, ro.device, attr.MaxInlineData)
		case p == sendpath.TSO && (attr.TSO.MaxTSO == 0 || !slices.Contains(attr.TSO.SupportedQP, verbsio.QPTypeRawPacket)):
			why = fmt.Sprintf("%s offers no TSO on raw QPs", ro.device)
		case p == sendpath.TSO && ro.size <= h:
			why = fmt.Sprintf("%d-byte frames carry no payload to segment", ro.size)
		}
		if why != "" {
			if listed {
				return nil, &cli.EnvironmentError{Err: fmt.Errorf("--paths %s: %s", p, why)}
			}
			c.skipped = append(c.skipped, p.String()+": "+why)
			continue
		}
		runs = append(runs, rawPathRun{name: p.String(), path: p})
	}
	return runs, nil
}

// runRaw runs this side of the raw comparison.
func (c *pathsCmd) runRaw(ctx context.Context, stdout, stderr io.Writer) error {
	o, ro := c.o, c.raw.ro
	side, cfg, err := ro.openConfigured()
	defer side.close()
	if err != nil {
		return err
	}
	dev, port := side.dev, side.port
	if mtu := rawMTU(port); mtu > 0 {
		if ro.size > mtu {
			return cli.Usagef("-s %d: the frame exceeds %s's MTU (%d bytes of frame, headers included); use -s %d or less", ro.size, ro.device, mtu, mtu)
		}
		cfg.RecvSize = mtu + 4
	}
	if err := ro.usage(cfg.Check()); err != nil {
		return err
	}
	attr, err := dev.QueryDevice()
	if err != nil {
		return fmt.Errorf("query device %s: %w", ro.device, err)
	}
	h := cfg.Frame.HeaderLen()
	runs, err := c.choosePathsRaw(attr, h)
	if err != nil {
		return err
	}
	out := stdout
	if ro.jsonPath == "-" {
		out = stderr
	}
	env := reports.GatherEnv(reports.System{})
	env.Provider, env.Fabric, env.Device, env.SendPath = dev.Device.Provider, fabricOf(dev.Device, port), dev.Device.Name, "paths"
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = r.name
	}
	env.Extra = map[string]string{"role": roleOf(ro.server), "repetitions": strconv.Itoa(c.reps), "paths": strings.Join(names, ", "),
		"post_list": strconv.Itoa(o.postList)}
	if len(c.skipped) > 0 {
		env.Extra["paths_skipped"] = strings.Join(c.skipped, "; ")
	}
	p := &errPrinter{w: out}
	p.banner("Raw Ethernet send paths (rperf paths)")
	p.pair("Device", ro.device, "Role", roleOf(ro.server))
	p.pair("Frame size", strconv.Itoa(ro.size), "Frames per run", strconv.Itoa(ro.iters))
	p.one("Paths", strings.Join(names, ", ")+fmt.Sprintf("; %d runs each, interleaved", c.reps))
	for _, s := range c.skipped {
		p.one("Skipped", s)
	}
	p.one("Reference", "afpacket: the same frames from a plain AF_PACKET socket, one write(2) each")
	if !ro.server {
		cq := rawCQModText(&cfg)
		p.one("CQ Moderation", cq+" (a send completion per that many sends; tso: per TSO send)")
		env.Extra["cq_mod"] = cq
	}
	if slices.ContainsFunc(runs, func(r rawPathRun) bool { return r.path == sendpath.TSO }) {
		p.one("TSO", fmt.Sprintf("one TSO send per %d frames (-l), MSS %d: segments of %d bytes", o.postList, ro.size-h, ro.size))
	}
	frames := c.reps * len(runs) * (ro.warmup + ro.iters)
	var results []reports.Result
	if ro.server {
		p.printf(" Counting the %d frames of %d runs (%d paths x %d) ...\n", frames, c.reps*len(runs), len(runs), c.reps)
		if p.err != nil {
			return p.err
		}
		sc := cfg
		sc.Iterations, sc.Warmup = frames, 0
		res, err := raw.Run(ctx, dev, &sc, nil)
		if err != nil {
			return runError(err)
		}
		results = res
		for _, r := range res {
			p.printf(" received %d of the run's %d frames of %d bytes, %d lost\n", r.Iterations, frames, r.Bytes, r.Bandwidth.LostMessages)
		}
	} else {
		if results, err = c.rawClientRuns(ctx, dev, port.Netdev, cfg, runs, h, o.postList); err != nil {
			return err
		}
		if err := writeRawPathsTable(p, runs, results, o.postList); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
	}
	if counters := dev.Counters(); counters != nil {
		env.EngineCounters = counters
		if err := writeRawCounters(out, ro.device, counters); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
	}
	if p.err != nil {
		return fmt.Errorf("write the report: %w", p.err)
	}
	return side.writeDoc(ro, env, results, stdout)
}

// rawClientRuns runs every path reps times, interleaved (repetition i
// starts at path i), and returns the runs' results in the order run.
func (c *pathsCmd) rawClientRuns(ctx context.Context, dev *verbsio.Context, netdev string, cfg raw.Config, runs []rawPathRun, h, batch int) ([]reports.Result, error) {
	var results []reports.Result
	for rep := 0; rep < c.reps; rep++ {
		for j := range runs {
			r := runs[(j+rep)%len(runs)]
			var res reports.Result
			if r.ref {
				var err error
				if res, err = raw.Reference(ctx, netdev, &cfg, cfg.Sizes[0]); err != nil {
					return nil, runError(err)
				}
			} else {
				rc := cfg
				rc.Path = r.path
				if r.path == sendpath.TSO {
					// The same frames on the wire: each TSO send is batch
					// of them, its payload cut at their payload's size.
					rc.MSS = cfg.Sizes[0] - h
					rc.Sizes = []int{h + batch*rc.MSS}
					rc.Iterations, rc.Warmup = cfg.Iterations/batch, cfg.Warmup/batch
				}
				out, err := raw.Run(ctx, dev, &rc, nil)
				if err != nil {
					return nil, runError(fmt.Errorf("the %s path: %w", r.name, err))
				}
				res = out[0]
			}
			res.Path = r.name
			results = append(results, res)
		}
	}
	return results, nil
}

// writeRawPathsTable prints each path's median frame rate over its runs
// and its ratio to the reference: the median, and the range, of the
// ratios within each repetition, where the path and the reference ran
// next to each other, so that a stretch of load on the machine that
// slows both cancels. results are in the order run, a repetition after
// another.
func writeRawPathsTable(p *errPrinter, runs []rawPathRun, results []reports.Result, batch int) error {
	rate := func(r reports.Result) float64 {
		if r.Path == sendpath.TSO.String() {
			return r.MsgRateMpps * float64(batch) // sends to frames
		}
		return r.MsgRateMpps
	}
	p.printf("%s\n", table.ResultLine)
	p.printf(" %-10s %14s %14s %12s %16s\n", "path", "frames[Mpps]", "MB/s[10^6]", "x-afpacket", "x range")
	size := results[0].Bytes
	for _, run := range runs {
		var rates, ratios []float64
		for i := 0; i+len(runs) <= len(results); i += len(runs) {
			rep := results[i : i+len(runs)]
			var ref, own float64
			for _, r := range rep {
				if r.Path == raw.PathAFPacket {
					ref = rate(r)
				}
				if r.Path == run.name {
					own = rate(r)
				}
			}
			rates = append(rates, own)
			if ref > 0 {
				ratios = append(ratios, own/ref)
			}
		}
		// An even number of repetitions has two middle values: their
		// mean, not the upper one (with --reps 2 that was the higher run).
		m, x := stats.Median(rates), stats.Median(ratios)
		p.printf(" %-10s %14.4f %14.2f %12.2f %16s\n", run.name, m, m*float64(size), x, fmt.Sprintf("%.2f-%.2f", slices.Min(ratios), slices.Max(ratios)))
	}
	p.printf("%s\n", table.ResultLine)
	p.printf(" frames[Mpps]: the median of the path's runs (tso: the frames cut from its sends); x-afpacket: the median of its\n"+
		" rate over the reference's in each repetition, x range their lowest and highest; frames of %d bytes without the FCS\n", size)
	return p.err
}
