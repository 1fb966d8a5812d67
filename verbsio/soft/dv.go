package soft

import (
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"golang.org/x/sys/unix"
)

var errDoorbell = &verbsio.Error{Op: "dv_doorbell", Errno: unix.EINVAL,
	Detail: "doorbell past the ring: more new WQEs than free slots (poll completions before reusing slots)"}

// DVQP implements dv.Provider: the QP's send ring and doorbell record.
func (q *qp) DVQP() (dv.QPRing, error) {
	if q.ctx.qps[q.idx].Load() != q {
		return dv.QPRing{}, verbsio.Errorf("dv_init_obj", unix.EINVAL, "queue pair destroyed")
	}
	depth := q.sq.Depth()
	q.ctx.lock()
	if q.dbrec.Load() != q.sqPI {
		q.dbrec.Store(q.sqPI) // posted to through verbsio since
	}
	q.ctx.unlock()
	return dv.QPRing{
		Buf: q.sqMem, Stride: q.sq.Stride(), Depth: depth, MaxSGE: q.cap.MaxSendSGE, MaxInline: q.cap.MaxInlineData, QPN: q.qpn,
		DBRec:    q.dbrec,
		RingDB:   q.dvRing,
		Doorbell: q.dvDoorbell,
		Producer: q.dvProducer,
		Free: func() uint32 {
			q.ctx.lock() // background progress retires WQEs (udp)
			n := depth - (q.sqPI - q.sqExec)
			q.ctx.unlock()
			return n
		},
	}, nil
}

func (q *qp) dvProducer() uint32 {
	q.ctx.lock()
	pi := q.sqPI
	q.ctx.unlock()
	return pi
}

// dvPostable reports whether the QP takes work requests.
func (q *qp) dvPostable() bool {
	switch q.state {
	case verbsio.QPStateRTS, verbsio.QPStateSQD, verbsio.QPStateErr:
		return true
	}
	return false
}

// pastRing reports whether producer index pi claims more new WQEs than the
// ring has free slots (or lies behind the producer index).
func (q *qp) pastRing(pi uint32) bool {
	return pi-q.sqPI > q.sq.Depth()-(q.sqPI-q.sqExec)
}

// dvDoorbell is the checked doorbell: it refuses an index past the ring,
// changing nothing, else records pi and executes the WQEs before it.
func (q *qp) dvDoorbell(pi uint32) error {
	c := q.ctx
	c.lock()
	defer c.unlock()
	if !q.dvPostable() {
		return errPostState
	}
	if q.pastRing(pi) {
		return errDoorbell
	}
	q.dbrec.Store(pi)
	q.dvExecute(pi)
	return nil
}

// dvRing is the doorbell: it executes the WQEs before the doorbell record.
func (q *qp) dvRing() error {
	c := q.ctx
	c.lock()
	defer c.unlock()
	if !q.dvPostable() {
		return errPostState
	}
	pi := q.dbrec.Load()
	if q.pastRing(pi) {
		q.dvOverrun()
		return dv.ErrDoorbell
	}
	q.dvExecute(pi)
	return nil
}

func (q *qp) dvExecute(pi uint32) {
	// Completions the application read from the send CQ's ring free their
	// slots first, so the new ones find room.
	q.sendCQ.reap()
	q.sqPI = pi
	q.execute()
}

// dvOverrun handles a doorbell record past the ring: the application has
// overwritten slots the engine still owned, so the QP goes to ERR. The
// WQEs accepted before complete with WR_FLUSH_ERR, the first one the
// doorbell claimed with LOC_QP_OP_ERR (VendorErrDoorbell); the rest are
// dropped (their count is whatever the record said).
func (q *qp) dvOverrun() {
	q.sendCQ.reap()
	q.toErr()
	if q.sqExec != q.sqPI {
		q.execute() // already in ERR: flushes
	}
	pos := q.sqPI
	w := q.sq.WQE(pos)
	e := ring.CQE{WRID: w.WRID, Status: uint8(verbsio.StatusLocQPOpErr), Opcode: uint8(verbsio.WCOpcodeOf(verbsio.Opcode(w.Opcode))),
		QPN: q.qpn, SQIdx: pos, VendorErr: dv.VendorErrDoorbell}
	q.sendCQ.ring.Push(&e, q.ctx.pid)
	q.sqPI++
	q.sqExec = q.sqPI
	q.t.flush()
	q.dbrec.Store(q.sqPI)
}

// DVCQ implements dv.CQProvider.
func (q *cq) DVCQ() (dv.CQRing, error) {
	if q.cons == nil {
		return dv.CQRing{}, errCQDestroyed
	}
	var e ring.CQE
	return dv.CQRing{
		Buf: q.mem[:ring.CQSize(q.depth)], Depth: uint32(q.depth), CQESize: ring.CQESize,
		DBRec:  &q.ring.Header().DBRec,
		Update: q.dvUpdate,
		Poll: func(wc *verbsio.WC) bool {
			if q.cons == nil {
				return false
			}
			c := q.ctx
			c.lock()
			defer c.unlock()
			q.reap()
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

// dvUpdate is the CQ doorbell: it frees the slots before the doorbell
// record, runs the engine's progress and reports the ring's errors.
func (q *cq) dvUpdate() error {
	if q.cons == nil {
		return errCQDestroyed
	}
	c := q.ctx
	c.lock()
	defer c.unlock()
	q.reap()
	q.drive()
	if st, pid := q.cons.Peek(); st == ring.Claimed {
		q.checkClaimed(pid)
	}
	return q.ringError()
}
