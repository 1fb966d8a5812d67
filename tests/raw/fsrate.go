package raw

import (
	"context"
	"fmt"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// FSRateResult is a flow-steering insertion run (perftest's
// raw_ethernet_fs_rate): the time of every rule's creation as a latency
// record (one-sided: rtt_factor 1), the rules created per second over the
// whole run, and the destruction rate of the same rules.
type FSRateResult struct {
	Create           reports.Result
	CreatePerSecond  float64
	DestroyPerSecond float64
}

// FSRate creates Iterations flow rules on one RAW_PACKET QP of dev, each
// steering this side's MAC and its own UDP (TCP with Frame.TCP)
// destination port (Frame.SrcPort + i), timing each creation, then
// destroys them all, timed as a whole; Warmup rules are created and
// destroyed first, unmeasured. No frame is sent: the peer is not needed.
func FSRate(ctx context.Context, dev *verbsio.Context, c *Config) (FSRateResult, error) {
	var out FSRateResult
	n := c.Iterations
	if n < session.MinIterations || int(c.Frame.SrcPort)+n > 0x10000 || c.Frame.SrcPort == 0 {
		return out, fmt.Errorf("fs_rate: %d rules from port %d: give at least %d rules, and ports that stay within 65535", n, c.Frame.SrcPort, session.MinIterations)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return out, err
	}
	defer pd.Dealloc()
	cq, err := dev.CreateCQ(2)
	if err != nil {
		return out, err
	}
	defer cq.Destroy()
	qp, err := pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRawPacket, SendCQ: cq, RecvCQ: cq,
		Cap: verbsio.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return out, err
	}
	defer qp.Destroy()
	if err := qp.Connect(verbsio.Endpoint{}, verbsio.Endpoint{}, verbsio.ConnectOptions{}); err != nil {
		return out, err
	}
	attrs := make([]verbsio.FlowAttr, n)
	all := verbsio.MAC{255, 255, 255, 255, 255, 255}
	for i := range attrs {
		port := verbsio.PortFilter{Dst: c.Frame.SrcPort + uint16(i)}
		mask := verbsio.PortFilter{Dst: 0xffff}
		var l4 verbsio.FlowSpec = verbsio.FlowUDP{Val: port, Mask: mask}
		if c.Frame.TCP {
			l4 = verbsio.FlowTCP{Val: port, Mask: mask}
		}
		attrs[i] = verbsio.FlowAttr{Port: 1, Specs: []verbsio.FlowSpec{
			verbsio.FlowETH{Val: verbsio.ETHFilter{Dst: verbsio.MAC(c.Frame.SrcMAC)}, Mask: verbsio.ETHFilter{Dst: all}}, l4}}
	}
	flows := make([]*verbsio.Flow, n)
	destroy := func(k int) error {
		for i := range flows[:k] {
			if flows[i] != nil {
				if err := flows[i].Destroy(); err != nil {
					return fmt.Errorf("fs_rate: destroy rule %d: %w", i, err)
				}
				flows[i] = nil
			}
		}
		return nil
	}
	defer destroy(n)
	for i := range min(c.Warmup, n) {
		if flows[i], err = qp.CreateFlow(attrs[i]); err != nil {
			return out, fmt.Errorf("fs_rate: warm-up rule %d: %w", i, err)
		}
	}
	if err := destroy(n); err != nil {
		return out, err
	}
	rec, err := reports.NewRecorder(reports.RecorderOptions{Expected: n})
	if err != nil {
		return out, err
	}
	start := clock.Now()
	for i := range attrs {
		t0 := clock.Now()
		if flows[i], err = qp.CreateFlow(attrs[i]); err != nil {
			return out, fmt.Errorf("fs_rate: rule %d of %d: %w", i, n, err)
		}
		rec.Record(clock.Now() - t0)
		if i&1023 == 1023 {
			if err := ctx.Err(); err != nil {
				return out, err
			}
		}
	}
	created := clock.Now() - start
	t0 := clock.Now()
	if err := destroy(n); err != nil {
		return out, err
	}
	destroyed := clock.Now() - t0
	res, err := reports.NewLatencyResult(reports.LatencySpec{Test: session.FSRate.Name(), Bytes: 0, Iterations: int64(n),
		Mode: reports.ModeIterations, RTTFactor: reports.RTTFactorOneSided, Percentiles: c.Percentiles}, rec)
	if err != nil {
		return out, err
	}
	res.Path = "generic"
	out.Create = res
	out.CreatePerSecond = float64(n) * 1e9 / float64(max(created, 1))
	out.DestroyPerSecond = float64(n) * 1e9 / float64(max(destroyed, 1))
	return out, nil
}
