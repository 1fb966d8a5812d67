package rperfcmd

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/table"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// --completion-timestamps on the connected latency tests: the test's CQs
// stamp every completion in the device's clock, and each size is also
// timed from those stamps (tests/latency's stamps.go says how), printed
// under the software clock's figures and kept in the JSON document with
// "clock": "completion".

const stampsFlag = "completion-timestamps"

// stampOptions are the completion-timestamp flag and what the device
// said of its clock.
type stampOptions struct {
	stamps   bool
	clockKHz uint64 // the device's hca_core_clock, once checked
}

// registerStamps adds --completion-timestamps: the test commands only
// (the comparisons report one figure per path).
func (o *options) registerStamps(fs *pflag.FlagSet) {
	fs.BoolVar(&o.stamps, stampsFlag, false, specs[stampsFlag].usage)
	if !latOnly(o.test) {
		fs.MarkHidden(stampsFlag)
	}
}

// checkStampsDevice checks that the device stamps completions when asked
// to, and keeps its clock rate for the report.
func (o *options) checkStampsDevice(attr verbsio.DeviceAttr, dev string) error {
	if !o.stamps {
		return nil
	}
	if err := session.CheckTimestamps(attr, dev); err != nil {
		return &cli.EnvironmentError{Err: fmt.Errorf("--%s: %v", stampsFlag, err)}
	}
	o.clockKHz = attr.Ext.HCACoreClock
	return nil
}

// stampsExtra records the completion clock in the document's env.extra.
func (o *options) stampsExtra(x map[string]string) {
	if o.stamps {
		x["completion_clock_khz"] = strconv.FormatUint(o.clockKHz, 10)
	}
}

// stampsWhat says, for test t, which completions the device's figures
// come from.
func stampsWhat(t session.Test) string {
	switch t.Verb() {
	case session.Send:
		return "the peer's SENDs' receive completions"
	case session.Write:
		return "our RDMA WRITEs' completions"
	case session.Read:
		return "our RDMA READs' completions"
	}
	return "our atomics' completions"
}

// stampsRowLabel is the line above a size's completion-timestamp row.
func (o *options) stampsRowLabel() string {
	return fmt.Sprintf(" from completion timestamps (%s, one to the next, device clock):\n", stampsWhat(o.test))
}

// splitClocks separates the software clock's results from those of the
// completion timestamps.
func splitClocks(results []reports.Result) (sw, ts []reports.Result) {
	for _, r := range results {
		if r.Clock == reports.ClockCompletion {
			ts = append(ts, r)
		} else {
			sw = append(sw, r)
		}
	}
	return sw, ts
}

// writeTrueLatencyClocks writes the true statistics of the software
// clock's results, then, if there are any, those of the completion
// timestamps under their own title and the device's clock line.
func (o *options) writeTrueLatencyClocks(p *errPrinter, results []reports.Result, clk clock.Info) error {
	sw, ts := splitClocks(results)
	if err := table.WriteTrueLatency(p.w, sw, clk); err != nil {
		return err
	}
	if len(ts) == 0 {
		return nil
	}
	p.printf(" The same cycles from completion timestamps (%s, one to the next):\n", stampsWhat(o.test))
	if p.err != nil {
		return p.err
	}
	return table.WriteTrueLatency(p.w, ts, deviceClock(o.clockKHz))
}

// deviceClock describes the device's completion clock for a clock line:
// its rate, and its tick as the resolution.
func deviceClock(khz uint64) clock.Info {
	c := clock.Info{Name: fmt.Sprintf("the device's completion clock, %d kHz (stamped by the device, no read on the measured path)", khz)}
	if khz > 0 {
		c.ResolutionNs = int64(max(1, 1e9/(khz*1000)))
	}
	return c
}
