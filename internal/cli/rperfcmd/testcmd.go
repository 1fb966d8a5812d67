package rperfcmd

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// The eight test commands: one per test of package session's table,
// run by its family.

func newTestCommand(t session.Test) *cobra.Command {
	o := &options{test: t}
	cmd := &cobra.Command{
		Use:   t.Command() + " [host]",
		Short: short(t),
		Long: fmt.Sprintf(`%s.

Without a host, serve; with a host, connect to the server there. Flags are
perftest's, spelled as perftest spells them; rperf adds --json, --hgrm,
--percentiles, --warmup, --loopback, --max-size and --timeout.

Examples:
  rperf %[2]s --loopback               both sides on this host
  rperf %[2]s                          server
  rperf %[2]s server-host --json r.json client, results also as JSON`, short(t), t.Command()),
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(args); err != nil {
				return err
			}
			return oneLine(run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	o.register(cmd.Flags())
	o.registerStamps(cmd.Flags())
	return cmd
}

// short describes test t for help text, e.g. "RDMA WRITE latency
// (perftest's ib_write_lat)".
func short(t session.Test) string {
	op := map[session.Verb]string{session.Send: "SEND", session.Write: "RDMA WRITE", session.Read: "RDMA READ", session.Atomic: "atomic"}[t.Verb()]
	return op + " " + t.Family().String() + " (perftest's ib_" + t.Name() + ")"
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	p, err := prepare(o, o.finalCheck)
	if err != nil {
		return err
	}
	defer p.close()
	if err := p.createHGRM(o); err != nil {
		return err
	}
	if o.loopback {
		return runLoopback(ctx, o, p, stdout, stderr)
	}
	var listening func(int)
	if o.loopbackServer {
		listening = func(port int) { reportPort(port, p.dev.UDPPort()) }
	}
	return runSide(ctx, o, p, stdout, stderr, listening)
}

// runSide runs one side: the server when o.host is empty, else the client.
// listening, if set, learns the server's port once it listens.
func runSide(ctx context.Context, o *options, p *prepared, stdout, stderr io.Writer, listening func(port int)) error {
	out := stdout
	if o.jsonPath == "-" || o.hgrmPath == "-" {
		out = stderr // stdout carries the document
	}
	env := p.env
	var conn *oob.Conn
	var err error
	if o.rdmaCM {
		conn, err = connectCM(ctx, o, p.dev, out, listening)
	} else {
		conn, err = connect(ctx, o, out, listening)
	}
	if err != nil {
		return err
	}
	env.Extra = map[string]string{"role": roleOf(conn.IsServer()), "peer": conn.RemoteAddr().String()}

	pr := newPrinter(out, o, env.Clock, newProgress(stderr, o, false))
	defer pr.prog.stop()
	results, err := o.runTest(ctx, p.dev, conn, p.sizes, func(c *session.Config) {
		c.OnConnected = func(in session.Info) {
			env.MTU = in.MTU
			fillExtra(env.Extra, o, in)
			o.pathExtra(env.Extra, p.dev)
			pr.connected(in)
		}
		c.OnProgress, c.OnResult = pr.prog.start, pr.row
	})
	pr.prog.stop()
	if err != nil {
		// What the engine saw (retransmissions, timeouts) tells why
		// a peer stopped answering.
		writeCounters(out, o.device, p.dev.UDPPort(), p.dev.Counters())
		return runError(err)
	}
	if err := pr.finish(results); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if err := writeReport(o, p, env, results, out, stdout); err != nil {
		return err
	}
	// The histograms of the software clock: those of the completion
	// timestamps have the same sizes and are in the JSON document.
	sw, _ := splitClocks(results)
	if err := writeHGRM(o.hgrmPath, p.hgrm, sw, stdout, out); err != nil {
		return err
	}
	p.ok = true
	return nil
}

// runTest runs the command's test with sizes over conn, by its family;
// set completes the configuration's shared part (its callbacks).
func (o *options) runTest(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, sizes []int, set func(*session.Config)) ([]reports.Result, error) {
	if o.lat() {
		cfg := o.latencyConfig(sizes)
		set(&cfg.Config)
		return latency.Run(ctx, dev, conn, cfg)
	}
	cfg := o.bwConfig(sizes)
	set(&cfg.Config)
	return bw.Run(ctx, dev, conn, cfg)
}

// roleOf names a side for env.extra.
func roleOf(server bool) string {
	if server {
		return "server"
	}
	return "client"
}

// fillExtra records the test's settings in the document's env.extra.
func fillExtra(x map[string]string, o *options, in session.Info) {
	v := o.verb()
	x["connection"] = o.qpType.String()
	x["tx_depth"] = strconv.Itoa(in.TxDepth)
	x["inline_size"] = strconv.Itoa(in.Inline)
	if v == session.Send {
		x["rx_depth"] = strconv.Itoa(in.RxDepth)
	}
	if v == session.Read || v == session.Atomic {
		x["out_reads"] = strconv.Itoa(in.OutReads)
	}
	if !o.lat() {
		x["qps"] = strconv.Itoa(o.qps)
		x["post_list"] = strconv.Itoa(o.postList)
		x["bidirectional"] = strconv.FormatBool(o.bidir)
		if o.changed("cq-mod") {
			x["cq_mod"] = strconv.Itoa(o.cqMod)
		}
	}
	if v == session.Atomic {
		x["atomic_type"] = o.atomicOp.String()
	}
	if o.warmup > 0 {
		x["warmup"] = strconv.Itoa(o.warmup)
	}
	x["peer_version"] = in.PeerVersion
	x["gid_index"] = strconv.Itoa(in.GID.Index)
	x["gid"] = in.GID.GID.String()
	if o.checkData {
		x["validate"] = "true"
	}
	o.stampsExtra(x)
}
