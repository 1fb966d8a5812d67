package soft

import (
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"golang.org/x/sys/unix"
)

var errDoorbell = &verbsio.Error{Op: "dv_doorbell", Errno: unix.EINVAL,
	Detail: "doorbell past the ring: more new WQEs than free slots (poll completions before reusing slots)"}

// DVQP implements dv.Provider: the QP's send ring.
func (q *qp) DVQP() (dv.QPRing, error) {
	if q.ctx.qps[q.idx].Load() != q {
		return dv.QPRing{}, verbsio.Errorf("dv_init_obj", unix.EINVAL, "queue pair destroyed")
	}
	depth := q.sq.Depth()
	return dv.QPRing{
		Buf: q.sqMem, Stride: q.sq.Stride(), Depth: depth, MaxSGE: q.cap.MaxSendSGE, MaxInline: q.cap.MaxInlineData, QPN: q.qpn,
		Doorbell: q.dvDoorbell,
		Producer: func() uint32 { return q.sqPI },
		Free:     func() uint32 { return depth - (q.sqPI - q.sqExec) },
	}, nil
}

// dvDoorbell executes the WQEs an application wrote up to pi.
func (q *qp) dvDoorbell(pi uint32) error {
	c := q.ctx
	c.lock()
	defer c.unlock()
	switch q.state {
	case verbsio.QPStateRTS, verbsio.QPStateSQD, verbsio.QPStateErr:
	default:
		return errPostState
	}
	if pi-q.sqPI > q.sq.Depth()-(q.sqPI-q.sqExec) {
		return errDoorbell
	}
	q.sqPI = pi
	q.execute()
	return nil
}

// DVCQ implements dv.CQProvider.
func (q *cq) DVCQ() (dv.CQRing, error) {
	if q.cons == nil {
		return dv.CQRing{}, errCQDestroyed
	}
	var e ring.CQE
	return dv.CQRing{
		Buf: q.reg.seg.Bytes()[:ring.CQSize(q.depth)], Depth: uint32(q.depth), CQESize: ring.CQESize,
		Poll: func(wc *verbsio.WC) bool {
			c := q.ctx
			c.lock()
			defer c.unlock()
			// The engine's progress runs when the ring is empty, once
			// per batch of completions as for CQ.Poll, not once per
			// completion (on udp a progress pass is a receive).
			st, _ := q.cons.Poll(&e)
			if st != ring.Ready {
				q.drive()
				if st, _ = q.cons.Poll(&e); st != ring.Ready {
					return false
				}
			}
			q.deliver(&e, wc)
			return true
		},
	}, nil
}
