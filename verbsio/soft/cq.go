package soft

import (
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"golang.org/x/sys/unix"
)

// cq is a completion queue: a completion ring in a shared segment that
// this process consumes and peers produce into (on the udp fabric, in a
// buffer of the application's allocator when one is installed; reg is
// nil then).
type cq struct {
	ctx   *Context
	idx   uint32
	tag   uint32
	reg   *region
	ext   *extBuf
	mem   []byte // the ring's memory
	ring  ring.CQ
	cons  *ring.Consumer
	depth int

	// Owned by the polling goroutine.
	qps         []*qp // QPs whose send or receive queue completes here
	claimedPID  uint32
	claimedAt   int64
	overrunSeen bool
	lostSeen    uint32
	users       int
	undriven    int   // polls in a row that took completions without driving
	shm         shmCQ // the shm fabric's retry bookkeeping
}

// maxUndriven bounds the polls in a row that return completions without
// running the engine (see Poll): a consumer that always finds one (its own
// UD sends complete when posted) still reads the network every 16th poll.
const maxUndriven = 16

var _ verbsio.CQImpl = (*cq)(nil)

// Errors Poll returns; preallocated so the fast path does not allocate.
var (
	errCQOverrun = &verbsio.Error{Op: "poll_cq", Errno: unix.EOVERFLOW,
		Detail: "completion queue overrun: completions were dropped because the CQ was full; create a deeper CQ (-t/-r/-Q) or poll more often"}
	errCQLost = &verbsio.Error{Op: "poll_cq", Errno: unix.EIO,
		Detail: "a peer process died while delivering a completion; that completion is lost"}
	errCQDestroyed = &verbsio.Error{Op: "poll_cq", Errno: unix.EBADF, Detail: "completion queue destroyed"}
)

// CreateCQ implements verbsio.ContextImpl.
func (c *Context) CreateCQ(attr verbsio.CQInitAttr) (verbsio.CQImpl, error) {
	if attr.CQE <= 0 || attr.CQE > maxCQE {
		return nil, verbsio.Errorf("create_cq", unix.EINVAL, "cqe %d is outside 1..%d", attr.CQE, maxCQE)
	}
	if f := attr.WCFlags &^ cqWCFlagsOK; f != 0 {
		return nil, verbsio.Errorf("create_cq_ex", unix.EOPNOTSUPP, "the built-in engine does not deliver %s in completions", f)
	}
	depth := pow2(attr.CQE)
	ext, err := c.allocQueue("create_cq", dv.ResCQ, ring.CQSize(depth))
	if err != nil {
		return nil, err
	}
	q, err := c.createCQ(depth, ext)
	if err != nil {
		ext.free()
		return nil, err
	}
	if attr.WCFlags.Timestamped() {
		// Every producer, in this process or a peer's, stamps the
		// entries it pushes (ring.CQ.Push).
		q.ring.Header().Flags.Store(ring.FlagTimestamp)
	}
	return q, nil
}

// cqWCFlagsOK are the completion fields the engine delivers: the
// standard ones, the completion timestamp (its clock is CLOCK_REALTIME in
// nanoseconds, so the device clock and the wall clock are one) and the
// flow tag.
const cqWCFlagsOK = verbsio.WCExStandard | verbsio.WCExCompletionTimestamp |
	verbsio.WCExCompletionTimestampWallclock | verbsio.WCExFlowTag

func (c *Context) createCQ(depth int, ext *extBuf) (*cq, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkOpen("create_cq"); err != nil {
		return nil, err
	}
	idx := -1
	for i, q := range c.cqs {
		if q == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, verbsio.Errorf("create_cq", unix.ENOMEM, "more than %d completion queues", maxCQ)
	}
	var reg *region
	var mem []byte
	if ext != nil {
		mem = ext.mem
	} else {
		var err error
		if reg, err = c.newRegion("rperf-cq", ring.CQSize(depth), false); err != nil {
			return nil, err
		}
		mem = reg.seg.Bytes()[:ring.CQSize(depth)]
	}
	r, err := ring.InitCQ(mem, depth)
	if err != nil {
		if reg != nil {
			c.dropRegion(reg)
		}
		return nil, verbsio.Errorf("create_cq", unix.EINVAL, "%v", err)
	}
	c.cqTag[idx]++
	if c.cqTag[idx] == 0 {
		c.cqTag[idx] = 1
	}
	q := &cq{ctx: c, idx: uint32(idx), tag: c.cqTag[idx], reg: reg, ext: ext, mem: mem, ring: r, cons: ring.NewConsumer(r), depth: depth}
	rec := c.ctrl.cq(q.idx)
	if reg != nil {
		rec.region.Store(reg.idx + 1)
	} else {
		rec.region.Store(0) // not in a shared segment: peers cannot map it (udp fabric)
	}
	rec.depth.Store(uint32(depth))
	rec.tag.Store(q.tag)
	c.cqs[idx] = q
	return q, nil
}

func pow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// Depth implements verbsio.CQImpl.
func (q *cq) Depth() int { return q.depth }

// Destroy implements verbsio.CQImpl.
func (q *cq) Destroy() error {
	ext, err := q.destroy()
	ext.free() // the application's allocator, without the context's lock
	return err
}

func (q *cq) destroy() (*extBuf, error) {
	c := q.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if q.cons == nil {
		return nil, verbsio.Errorf("destroy_cq", unix.EINVAL, "completion queue already destroyed")
	}
	if q.users > 0 {
		return nil, verbsio.Errorf("destroy_cq", unix.EBUSY, "%d queue pairs still use the completion queue; destroy them first", q.users)
	}
	c.ctrl.cq(q.idx).tag.Store(0)
	if !c.closed {
		c.cqs[q.idx] = nil
		if q.reg != nil {
			c.dropRegion(q.reg)
		}
	}
	q.cons = nil
	ext := q.ext
	q.ext = nil
	return ext, nil
}

// Poll implements verbsio.CQImpl.
func (q *cq) Poll(wcs []verbsio.WC) (int, error) {
	if q.cons == nil {
		return 0, errCQDestroyed
	}
	c := q.ctx
	c.lock()
	defer c.unlock()
	q.reap()
	// Completions already in the ring are returned without running the
	// engine first, as a NIC's CQ is read without waiting for the NIC:
	// progress (on udp a receive system call, and the send of the
	// acknowledgements owed) runs when the ring has nothing to give. What
	// it owes then leaves with the next doorbell or the next poll that
	// finds the ring empty. Every maxUndriven-th poll in a row drives
	// anyway, so that the engine never starves.
	n := 0
	if q.undriven < maxUndriven {
		n = q.take(wcs)
	}
	if n == 0 {
		q.undriven = 0
		q.drive()
		n = q.take(wcs)
	} else {
		q.undriven++
	}
	return n, q.ringError()
}

// take moves ready entries from the ring into wcs.
func (q *cq) take(wcs []verbsio.WC) int {
	var e ring.CQE
	n := 0
	for n < len(wcs) {
		st, pid := q.cons.Poll(&e)
		if st == ring.Empty {
			break
		}
		if st == ring.Claimed {
			q.checkClaimed(pid)
			break
		}
		q.claimedPID = 0
		q.deliver(&e, &wcs[n])
		n++
	}
	return n
}

// drive runs the engine's progress that polling owes the fabric (on udp
// the receive side and timers; on shm retries and peer checks).
func (q *cq) drive() { q.ctx.fab.progress(q) }

// ringError reports overruns and lost completions (sticky for overruns: a
// CQ that overran has lost completions for good).
func (q *cq) ringError() error {
	h := q.ring.Header()
	if h.Overrun.Load() != 0 {
		if !q.overrunSeen {
			q.ctx.async.post(verbsio.AsyncEvent{Type: verbsio.EventCQErr, CQ: q})
		}
		q.overrunSeen = true
	}
	if q.overrunSeen {
		return errCQOverrun
	}
	if l := h.Lost.Load(); l != q.lostSeen {
		q.lostSeen = l
		return errCQLost
	}
	return nil
}

// deliver turns a ring entry into a work completion and applies its side
// effects.
func (q *cq) deliver(e *ring.CQE, wc *verbsio.WC) {
	*wc = verbsio.WC{
		ID:        e.WRID,
		Status:    verbsio.Status(e.Status),
		Opcode:    verbsio.WCOpcode(e.Opcode),
		VendorErr: e.VendorErr,
		ByteLen:   e.ByteLen,
		Imm:       e.Imm,
		QPN:       e.QPN,
		SrcQP:     e.SrcQP,
		Flags:     verbsio.WCFlags(e.Flags),
		FlowTag:   e.FlowTag,
		Timestamp: e.Timestamp,
	}
	q.apply(e)
}

// apply applies the side effects of consuming e on the owning QP: a send
// completion frees send queue slots; an error completion moves the QP to
// ERR.
func (q *cq) apply(e *ring.CQE) {
	qp := q.ctx.qps[qpIndex(e.QPN)].Load()
	if qp == nil || qp.qpn != e.QPN {
		return
	}
	if !verbsio.WCOpcode(e.Opcode).IsRecv() {
		qp.retire(e.SQIdx)
	}
	if st := verbsio.Status(e.Status); st != verbsio.StatusSuccess && st != verbsio.StatusWRFlushErr {
		qp.toErr()
	}
}

// reap frees the slots an application read straight from the ring (direct
// verbs), those before the ring's doorbell record, applying their entries'
// side effects as if they had been polled. It stops at a slot that is not
// ready: a record past what was produced frees nothing more.
func (q *cq) reap() {
	ci := q.ring.Header().DBRec.Load()
	if int32(ci-q.cons.Pos()) <= 0 {
		return
	}
	var e ring.CQE
	for int32(ci-q.cons.Pos()) > 0 {
		if st, _ := q.cons.Poll(&e); st != ring.Ready {
			return
		}
		q.apply(&e)
	}
}

// checkClaimed handles a slot a producer claimed but has not published: a
// live producer is given time; a dead one's slot is skipped.
func (q *cq) checkClaimed(pid uint32) {
	t := now()
	if q.claimedPID != pid || q.claimedAt == 0 {
		q.claimedPID, q.claimedAt = pid, t
		return
	}
	if t-q.claimedAt < int64(10*time.Millisecond) {
		return
	}
	if pid != q.ctx.pid && unix.Kill(int(pid), 0) == unix.ESRCH {
		q.cons.SkipClaimed(pid)
	}
	q.claimedAt = t
}

// Wait implements verbsio.CQImpl: the fabric polls, spins or sleeps until
// the CQ holds a completion.
func (q *cq) Wait(timeout time.Duration) error {
	if q.cons == nil {
		return errCQDestroyed
	}
	return q.ctx.fab.wait(q, now()+int64(timeout))
}

// ready reports whether Poll would return something (an entry or an error).
func (q *cq) ready() bool {
	q.reap()
	h := q.ring.Header()
	if st, pid := q.cons.Peek(); st == ring.Ready {
		return true
	} else if st == ring.Claimed {
		q.checkClaimed(pid)
	}
	return h.Overrun.Load() != 0 || h.Lost.Load() != q.lostSeen
}
