package soft

import (
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
	"golang.org/x/sys/unix"
)

// Flow steering on the raw fabric (verbsio.FlowSteerer): a rule goes into
// the port's table (netpkt.Table), which the receive side matches every
// frame against; the socket filter is widened before CreateFlow returns,
// so the rule's frames flow at once, and narrowed to the table's union at
// the next progress round. Destroy removes the rule from the table: no
// frame is delivered through it once Destroy returned.

var _ verbsio.FlowSteerer = (*qp)(nil)

// FlowCaps implements verbsio.FlowSteerer: what the raw fabric's table
// steers, for RAW_PACKET QPs; none for other QPs (verbsio answers
// EOPNOTSUPP for them).
func (q *qp) FlowCaps() verbsio.FlowCaps {
	if _, ok := q.t.(*rawQP); ok {
		return netpkt.Caps
	}
	return verbsio.FlowCaps{}
}

// CreateFlow implements verbsio.FlowSteerer (verbsio validated attr
// against FlowCaps).
func (q *qp) CreateFlow(attr *verbsio.FlowAttr) (verbsio.FlowImpl, error) {
	r, ok := q.t.(*rawQP)
	if !ok {
		return nil, verbsio.Errorf("create_flow", unix.EOPNOTSUPP, "%s QPs on %s steer no flows", q.typ, q.ctx.info.Name)
	}
	f := r.f
	if f.queryOnly {
		return nil, verbsio.Errorf("create_flow", unix.EPERM, "%s was opened for queries only (OpenOptions.QueryOnly)", q.ctx.info.Name)
	}
	f.flowMu.Lock()
	defer f.flowMu.Unlock()
	if q.ctx.qps[q.idx].Load() != q {
		return nil, verbsio.Errorf("create_flow", unix.EINVAL, "the QP was destroyed")
	}
	rule, err := f.table.Add(attr, q.qpn)
	if err != nil {
		return nil, err
	}
	if err := f.widen(); err != nil {
		f.table.Remove(rule)
		return nil, err
	}
	fl := &rawFlow{r: r, rule: rule}
	r.flows = append(r.flows, fl)
	return fl, nil
}

// rawFlow is an installed rule.
type rawFlow struct {
	r    *rawQP
	rule *netpkt.Rule
}

// Destroy implements verbsio.FlowImpl: the rule leaves the table, so no
// Match that starts afterwards delivers through it.
func (fl *rawFlow) Destroy() error {
	f := fl.r.f
	f.flowMu.Lock()
	defer f.flowMu.Unlock()
	if !fl.remove() {
		return verbsio.Errorf("destroy_flow", unix.EINVAL, "the flow's QP or context is gone")
	}
	fl.r.flows = remove(fl.r.flows, fl)
	return nil
}

// remove takes the rule out of the table (f.flowMu is held).
func (fl *rawFlow) remove() bool {
	if fl.rule == nil {
		return false
	}
	fl.r.f.table.Remove(fl.rule)
	fl.rule = nil
	fl.r.f.narrowed()
	return true
}

// removeFlows takes every rule of r out of the table (the context is
// closing and destroys its QPs).
func (f *rawFabric) removeFlows(r *rawQP) {
	f.flowMu.Lock()
	defer f.flowMu.Unlock()
	for _, fl := range r.flows {
		fl.remove()
	}
	r.flows = nil
}
