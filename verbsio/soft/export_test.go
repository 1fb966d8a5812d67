package soft

import (
	"fmt"
	"time"
)

// DebugQPs describes the udp transport state of every QP (tests only).
func (c *Context) DebugQPs() string {
	f, ok := c.fab.(*udpFabric)
	if !ok {
		return ""
	}
	s := ""
	for i := range c.qps {
		q := c.qps[i].Load()
		if q == nil {
			continue
		}
		u := q.t.(*udpQP)
		s += fmt.Sprintf("qp %#x state %s sqPI %d sqExec %d sqDone %d sendPos %d sendOff %d sqPSN %d una %d deadline %d ackOut %v reqAck %d recovering %v cwnd %d rnrUntil %d paceAt %d active %v nakActed %v/%d ePSN %d retryLeft %d\n",
			q.qpn, q.state, q.sqPI, q.sqExec, q.sqDone, u.sendPos, u.sendOff, u.sqPSN, u.unaPSN(), u.deadline, u.ackOut, u.reqAck, u.recovering, u.cwnd, u.rnrUntil, u.paceAt, u.active, u.nakActed, u.nakPSN, u.ePSN, u.retryLeft)
		for pos := q.sqExec; pos != q.sqPI; pos++ {
			r := u.slot(pos)
			s += fmt.Sprintf("  wqe %d started %v done %v first %d end %d rdNext %d\n", pos, r.started, r.done, r.first, r.end, r.rdNext)
		}
		s += fmt.Sprintf("  acked %d high %d rdN %d\n", u.acked, u.highPSN, u.rdN)
	}
	s += fmt.Sprintf("active list %d\n", len(f.active))
	return s
}

// ReadSockets is how many of a udp-fabric context's sockets its progress
// reads, and how many it has bound (tests only).
func (c *Context) ReadSockets() (read, bound int) {
	f := c.fab.(*udpFabric)
	used := f.inUse.Load()
	for i, conn := range f.conns {
		if conn != nil {
			bound++
			if used&gidBit(i) != 0 {
				read++
			}
		}
	}
	return read, bound
}

// Freeze stops the context's background progress (which must run: see
// StartProgress) until thaw is called, as a process off the CPU would:
// what arrives meanwhile waits in the sockets.
func (c *Context) Freeze() (thaw func()) {
	if !c.bg.on {
		panic("Freeze: no background progress")
	}
	c.bg.mu.Lock()
	return c.bg.mu.Unlock
}

// RawPaceCatchUp is how much lateness a held raw QP catches up (tests only).
const RawPaceCatchUp = time.Duration(rawPaceCatchUp)
