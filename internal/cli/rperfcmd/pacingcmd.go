package rperfcmd

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/pacing"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// rperf pacing (package tests/pacing): a sweep of requested rates on a
// paced QP. It shares the device, connection, output and udp-fabric flags
// of the test commands (the options type) and has its own.

type pacingCmd struct {
	o            *options
	rates        string
	rateDuration time.Duration
	rateBytes    string
	burst        string
	tolerance    float64
	cfg          pacing.Config // built by validate
}

// pacingFlags are the flags of the test commands that pacing takes, with
// their meaning here where it differs.
var pacingFlags = map[string]string{
	"ib-dev":      specs["ib-dev"].usage,
	"ib-port":     specs["ib-port"].usage,
	"size":        "message size in bytes (K, M, G multiply by 2^10, 2^20, 2^30); the pacer's typical packet size",
	"tx-depth":    "paced SENDs kept outstanding by the sender",
	"rx-depth":    "receives kept posted by the receiver",
	"qp-timeout":  specs["qp-timeout"].usage,
	"port":        specs["port"].usage,
	"mtu":         specs["mtu"].usage,
	"json":        specs["json"].usage,
	"percentiles": "percentiles of the gap distribution (default 50,90,99,99.9,99.99)",
	"loopback":    specs["loopback"].usage,
	"timeout":     specs["timeout"].usage,
}

// pacingFields maps pacing.Config's fields to the command's flags, for
// the problems its Check reports.
var pacingFields = map[string]string{
	"Size": "size", "Rates": "rates", "RateDuration": "rate-duration", "RateBytes": "rate-bytes", "Burst": "burst",
	"Tolerance": "tolerance", "TxDepth": "tx-depth", "RxDepth": "rx-depth", "Percentiles": "percentiles",
}

// newPacingCmd returns the command's state. Its session is send-bw's
// shape (one RC QP streaming SENDs), which prepare checks the device for.
func newPacingCmd() *pacingCmd { return &pacingCmd{o: &options{test: session.SendBW}} }

func newPacingCommand() *cobra.Command {
	c := newPacingCmd()
	cmd := &cobra.Command{
		Use:   "pacing [host]",
		Short: "packet pacing accuracy: a sweep of requested rates, achieved rate, error and gap distribution",
		Long: `Sets a rate limit on a QP (ibv_modify_qp_rate_limit: rate, burst size,
typical packet size) and streams SENDs through it at each requested rate,
from 1 Mb/s up to what the fabric sustains: 1, 10, 100 and 1000 Mb/s, then
2, 5, 10, 20, 50 and 100 Gb/s within the device's pacing range, stopping
after the first rate whose achieved rate falls more than --tolerance below
the request. --rates runs an explicit list instead (every rate).

The server sends; the client receives and measures, at the receiver: each
message is stamped when its completion is polled, the token bucket's
initial burst (it starts full) is not measured, and the achieved rate is
the bytes that arrived after the first measured message over the time they
took. For each rate the client prints the achieved rate, its error against
the request, and the gaps between consecutive arrivals (HdrHistogram
percentiles) beside the gap the rate implies; the server prints the
client's figures without the gaps. Each rate sends for about
--rate-duration (or --rate-bytes) and never longer than twice that plus a
second.

The engine paces when it runs: the sender polls without pause, and a
bucket one message deep (the default --burst) keeps no credit for a sender
that was descheduled, so on a machine whose CPUs are busy with other work
the achieved rate falls short. A larger --burst absorbs such delays, and
the gaps then show the catch-up bursts.

Examples:
  rperf pacing --loopback
  rperf pacing --loopback --rates 10,100,1000 --rate-duration 500ms --json p.json
  rperf pacing                          server (sends); then: rperf pacing server-host`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.validate(args); err != nil {
				return err
			}
			return oneLine(c.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	c.register(cmd.Flags())
	return cmd
}

func (c *pacingCmd) register(fs *pflag.FlagSet) {
	o := c.o
	o.fs, o.fields = fs, pacingFields
	fs.SortFlags = false
	fs.StringVarP(&o.device, "ib-dev", "d", DefaultDevice, pacingFlags["ib-dev"])
	fs.IntVarP(&o.ibPort, "ib-port", "i", 1, pacingFlags["ib-port"])
	fs.StringVarP(&o.size, "size", "s", strconv.Itoa(pacing.DefaultSize), pacingFlags["size"])
	fs.StringVar(&c.rates, "rates", "", "requested rates in Mb/s, comma-separated, each run in turn (default: the sweep described above)")
	fs.DurationVar(&c.rateDuration, "rate-duration", pacing.DefaultRateDuration, "about how long each rate is measured")
	fs.StringVar(&c.rateBytes, "rate-bytes", "", "bytes each rate measures instead of --rate-duration (K, M, G suffixes)")
	fs.StringVar(&c.burst, "burst", "0", "the bucket depth asked for in bytes (max_burst_sz; at least one message and 4K)")
	fs.Float64Var(&c.tolerance, "tolerance", pacing.DefaultTolerance, "the sweep stops after a rate achieved more than this many percent below the request")
	fs.IntVarP(&o.txDepth, "tx-depth", "t", pacing.DefaultTxDepth, pacingFlags["tx-depth"])
	fs.IntVarP(&o.rxDepth, "rx-depth", "r", pacing.DefaultRxDepth, pacingFlags["rx-depth"])
	fs.IntVarP(&o.qpTimeout, "qp-timeout", "u", 14, pacingFlags["qp-timeout"])
	fs.IntVarP(&o.port, "port", "p", oob.DefaultPort, pacingFlags["port"])
	fs.IntVarP(&o.mtu, "mtu", "m", 0, pacingFlags["mtu"])
	fs.StringVar(&o.jsonPath, "json", "", pacingFlags["json"])
	fs.StringVar(&o.percentiles, "percentiles", "", pacingFlags["percentiles"])
	fs.BoolVar(&o.loopback, "loopback", false, pacingFlags["loopback"])
	fs.DurationVar(&o.timeout, "timeout", DefaultTimeout, pacingFlags["timeout"])
	o.registerUDP(fs)
	fs.MarkHidden(validateFlag)
	fs.BoolVar(&o.loopbackServer, loopbackServerFlag, false, "internal: the server process of --loopback")
	fs.MarkHidden(loopbackServerFlag)
}

// validate checks the flags by themselves, before any device is open,
// and then the sweep they make (pacing.Config.Check).
func (c *pacingCmd) validate(args []string) error {
	o := c.o
	if err := o.validateArgs(args); err != nil {
		return err
	}
	if o.checkData {
		return cli.Usagef("--validate applies to the test commands; pacing measures timing only")
	}
	size, err := parseSize(o.size)
	if err != nil {
		return cli.Usagef("-s %s: %v", o.size, err)
	}
	cfg := pacing.Default()
	cfg.Size, cfg.RateDuration, cfg.Tolerance = size, c.rateDuration, c.tolerance
	cfg.TxDepth, cfg.RxDepth = o.txDepth, o.rxDepth
	if c.rates != "" {
		for _, f := range strings.Split(c.rates, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(r > 0) || math.IsInf(r, 0) {
				return cli.Usagef("--rates %s: %q is not a rate in Mb/s; give a list like 10,100,1000", c.rates, f)
			}
			cfg.Rates = append(cfg.Rates, r)
		}
	}
	if o.changed("rate-bytes") {
		if o.changed("rate-duration") {
			return cli.Usagef("--rate-bytes and --rate-duration conflict: each rate is measured by bytes or by time; drop one of them")
		}
		n, err := parseSize(c.rateBytes)
		if err != nil || n < 1 {
			return cli.Usagef("--rate-bytes %s: give a byte count (K, M, G suffixes)", c.rateBytes)
		}
		cfg.RateBytes = int64(n)
	}
	if cfg.Burst, err = parseSize(c.burst); err != nil {
		return cli.Usagef("--burst %s: %v", c.burst, err)
	}
	if o.changed("tolerance") && cfg.Rates != nil {
		return cli.Usagef("--tolerance sets when the default sweep stops; --rates runs every rate given; drop one of them")
	}
	if o.percentiles != "" {
		if cfg.Percentiles, err = parsePercentiles(o.percentiles); err != nil {
			return err
		}
	}
	// What prepare and the connection need of the shared options.
	o.qpType, o.sizes, o.iters, o.postList, o.qps = verbsio.QPTypeRC, []int{size}, session.MinIterations, 1, 1
	if err := o.validateUDP(); err != nil {
		return err
	}
	if err := o.usage(cfg.Check()); err != nil {
		return err
	}
	c.cfg = cfg
	return nil
}

func (c *pacingCmd) run(ctx context.Context, stdout, stderr io.Writer) error {
	o := c.o
	p, err := prepare(o, nil)
	if err != nil {
		return err
	}
	defer p.close()
	attr, err := p.dev.QueryDevice()
	if err != nil {
		return fmt.Errorf("query device %s: %w", o.device, err)
	}
	pc := attr.PacketPacing
	if pc.RateLimitMaxKbps == 0 {
		return &cli.EnvironmentError{Err: fmt.Errorf("-d %s: the device has no packet pacing (rdiag info shows packet_pacing); run pacing on another device", o.device)}
	}
	if err := c.cfg.CheckDevice(pc, o.device); err != nil {
		return cli.Usagef("--rates: %v", err)
	}
	if o.loopback {
		return loopbackWith(o, []string{"pacing"}, func(client *options) error {
			cc := *c
			cc.o = client
			return cc.side(ctx, p, pc, stdout, stderr, nil)
		})
	}
	var listening func(int)
	if o.loopbackServer {
		listening = func(port int) { reportPort(port, 0) }
	}
	return c.side(ctx, p, pc, stdout, stderr, listening)
}

// params describe the sweep for the peer's check.
func (c *pacingCmd) params() oob.Params {
	cfg := &c.cfg
	p := oob.Params{Test: "pacing"}
	add := func(flag, value string, sym bool) {
		p.Fields = append(p.Fields, oob.Field{Flag: flag, Value: value, Symmetric: sym})
	}
	add("-s", strconv.Itoa(cfg.Size), true)
	rates := "sweep"
	if cfg.Rates != nil {
		rs := make([]string, len(cfg.Rates))
		for i, r := range cfg.Rates {
			rs[i] = strconv.FormatFloat(r, 'f', -1, 64)
		}
		rates = strings.Join(rs, ",")
	} else {
		add("--tolerance", strconv.FormatFloat(cfg.Tolerance, 'g', -1, 64), true)
	}
	add("--rates", rates, true)
	if cfg.RateBytes > 0 {
		add("--rate-bytes", strconv.FormatInt(cfg.RateBytes, 10), true)
	} else {
		add("--rate-duration", cfg.RateDuration.String(), true)
	}
	add("--burst", strconv.Itoa(cfg.Burst), true)
	add("-t", strconv.Itoa(cfg.TxDepth), false)
	add("-r", strconv.Itoa(cfg.RxDepth), false)
	return p
}

// side runs one side: the server sends, the client measures.
func (c *pacingCmd) side(ctx context.Context, p *prepared, pc verbsio.PacingCaps, stdout, stderr io.Writer, listening func(int)) error {
	o := c.o
	out := stdout
	if o.jsonPath == "-" {
		out = stderr
	}
	conn, err := connect(ctx, o, out, listening)
	if err != nil {
		return err
	}
	env := p.env
	env.Extra = map[string]string{"role": roleOf(conn.IsServer()), "peer": conn.RemoteAddr().String()}
	prog := newProgress(stderr, o, true)
	defer prog.stop()
	cfg := c.cfg
	cfg.Link = o.link(c.params())
	sweep := cfg.Sweep(pc)
	var headerErr error
	cfg.OnConnected = func(in session.Info) {
		env.MTU = in.MTU
		x := env.Extra
		x["connection"] = "RC"
		x["tx_depth"] = strconv.Itoa(in.TxDepth)
		x["rx_depth"] = strconv.Itoa(in.RxDepth)
		x["burst_bytes"] = strconv.Itoa(pacing.EffectiveBurst(cfg.Burst, cfg.Size))
		x["peer_version"] = in.PeerVersion
		x["gid_index"] = strconv.Itoa(in.GID.Index)
		if cfg.RateBytes > 0 {
			x["rate_bytes"] = strconv.FormatInt(cfg.RateBytes, 10)
		} else {
			x["rate_duration"] = cfg.RateDuration.String()
		}
		if in.Device.Segments() {
			x["segmenter"] = verbsio.SegmentEngine.String()
		}
		prog.clear()
		headerErr = c.header(out, in, env.Clock, sweep, conn.IsServer())
	}
	cfg.OnRate = func(i int, mbps float64) {
		if prog.enabled {
			prog.show(fmt.Sprintf(" [%d/%d] %s Mb/s ...", i+1, len(sweep), strconv.FormatFloat(mbps, 'f', -1, 64)))
		}
	}
	results, err := pacing.Run(ctx, p.dev, conn, cfg)
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
	if err := writeReport(o, p, env, results, out, stdout); err != nil {
		return err
	}
	p.ok = true
	return nil
}
