package soft

import (
	"sync/atomic"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/soft/internal/pace"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"golang.org/x/sys/unix"
)

// qp is a queue pair. Its receive ring and send ring share one segment:
// the receive ring first (peers map it), then the send ring and its
// doorbell record. Either may instead come from the application's
// allocator (dv.SetAllocator); reg is nil when both do.
type qp struct {
	ctx      *Context
	pd       *pd
	typ      verbsio.QPType
	idx      uint32
	qpn      uint32
	rec      *qpRecord
	reg      *region
	sq       ring.SQ
	sqMem    []byte         // the send ring's memory (direct verbs)
	dbrec    *atomic.Uint32 // the send doorbell record, after the ring (direct verbs)
	sqExt    *extBuf        // the application's buffer holding the send ring, or nil
	rqExt    *extBuf        // the application's buffer holding the receive ring, or nil
	rq       ring.RQ        // invalid when the QP receives through an SRQ
	srq      *srq
	cap      verbsio.QPCap
	sqSigAll bool
	sendCQ   *cq
	recvCQ   *cq

	state verbsio.QPState
	attr  verbsio.QPAttr

	sqPI   uint32 // next send WQE position
	sqExec uint32 // next send WQE to execute
	sqDone uint32 // send WQEs before this are retired (their completion polled)
	rqPI   uint32

	destQPN uint32 // RC/UC: the connected QP

	t qpTransport // the QP's side on the context's fabric

	pace   *pace.Bucket // packet pacing; nil when not rate limited
	seg    verbsio.Segmenter
	maxMsg uint64 // the device's max_msg_sz: longer requests are LOC_LEN_ERR

	// Scratch for the fast path, sized at creation.
	src   [][]byte
	rsges []ring.SGE
}

var _ verbsio.QPImpl = (*qp)(nil)

// Fast-path errors, preallocated.
var (
	errPostState   = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "QP is not in RTS (modify it to RTS after connecting)"}
	errRecvState   = &verbsio.Error{Op: "post_recv", Errno: unix.EINVAL, Detail: "QP is in RESET (modify it to INIT first)"}
	errSQFull      = &verbsio.Error{Op: "post_send", Errno: unix.ENOMEM, Detail: "send queue full: poll completions (signal at least one request per queue depth)"}
	errRQFull      = &verbsio.Error{Op: "post_recv", Errno: unix.ENOMEM, Detail: "receive queue full"}
	errOpcode      = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "opcode not valid for this QP type"}
	errNumSGE      = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "more SGEs than the QP's max_send_sge"}
	errRecvNumSGE  = &verbsio.Error{Op: "post_recv", Errno: unix.EINVAL, Detail: "more SGEs than the QP's max_recv_sge"}
	errInlineLen   = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "inline payload longer than the QP's max_inline_data"}
	errInlineAddr  = &verbsio.Error{Op: "post_send", Errno: unix.EFAULT, Detail: "inline payload is not inside memory this context allocated or registered"}
	errNoAH        = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "UD send without an address handle of this context"}
	errRecvOnSRQQP = &verbsio.Error{Op: "post_recv", Errno: unix.EINVAL, Detail: "QP receives through an SRQ; post receives to the SRQ"}
)

// errNoRawPacket refuses a RAW_PACKET QP on a fabric of RDMA transports.
func errNoRawPacket(c *Context) error {
	return verbsio.Errorf("create_qp", unix.EOPNOTSUPP, "RAW_PACKET QPs need a raw-fabric device (bound to a netdev), not %s", c.info.Name)
}

// qpSpec is a QP request checked and sized (pd.qpSpec), with the queue
// buffers the application's allocator supplied (allocQueues); createQP
// builds the QP from it.
type qpSpec struct {
	attr           verbsio.QPInitAttr
	cap            verbsio.QPCap // depths rounded up to powers of two, at least one SGE each way
	srq            *srq
	sendCQ, recvCQ *cq
	rqDepth        int     // receive ring slots (1 on an SRQ, which has no ring)
	rqBytes        int     // receive ring bytes, 0 on an SRQ
	sqBytes        int     // send ring bytes, before its doorbell record
	rqExt, sqExt   *extBuf // rings in the application's buffers, or nil
}

// CreateQP implements verbsio.PDImpl.
func (p *pd) CreateQP(attr verbsio.QPInitAttr) (verbsio.QPImpl, error) {
	sp, err := p.qpSpec(attr)
	if err != nil {
		return nil, err
	}
	// Buffers from the application's allocator are taken, and on failure
	// given back, without c.mu held.
	if err := sp.allocQueues(p.ctx); err != nil {
		return nil, err
	}
	q, err := p.createQP(&sp)
	if err != nil {
		sp.sqExt.free()
		sp.rqExt.free()
		return nil, err
	}
	if a, ok := q.t.(attacher); ok {
		if err := a.attach(); err != nil {
			q.Destroy()
			return nil, err
		}
	}
	return q, nil
}

// attacher is a transport that takes something outside the engine for a
// new QP, which may fail (the raw fabric's mana profile: the port).
type attacher interface{ attach() error }

// destroyChecker is a transport that can refuse its QP's destruction (the
// raw fabric: flows still steer to it, EBUSY).
type destroyChecker interface{ destroyCheck() error }

// qpSpec checks a create_qp request against the device's limits and the
// fabric, and sizes its rings.
func (p *pd) qpSpec(attr verbsio.QPInitAttr) (qpSpec, error) {
	c := p.ctx
	sp := qpSpec{attr: attr}
	switch attr.Type {
	case verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD, verbsio.QPTypeRawPacket:
	default:
		return sp, verbsio.Errorf("create_qp", unix.EINVAL, "unknown QP type %s", attr.Type)
	}
	if err := c.fab.checkQP(&attr); err != nil {
		return sp, err
	}
	var ok1, ok2 bool
	sp.sendCQ, ok1 = cqOf(attr.SendCQ, c)
	sp.recvCQ, ok2 = cqOf(attr.RecvCQ, c)
	if !ok1 || !ok2 {
		return sp, verbsio.Errorf("create_qp", unix.EINVAL, "completion queues must belong to the same context")
	}
	if attr.SRQ != nil {
		s, ok := attr.SRQ.Impl().(*srq)
		if !ok || s.ctx != c {
			return sp, verbsio.Errorf("create_qp", unix.EINVAL, "SRQ must belong to the same context")
		}
		sp.srq = s
	}
	cp := attr.Cap
	if cp.MaxSendWR <= 0 || cp.MaxSendWR > maxQPWR {
		return sp, verbsio.Errorf("create_qp", unix.EINVAL, "max_send_wr %d is outside 1..%d", cp.MaxSendWR, maxQPWR)
	}
	if sp.srq == nil && (cp.MaxRecvWR <= 0 || cp.MaxRecvWR > maxQPWR) {
		return sp, verbsio.Errorf("create_qp", unix.EINVAL, "max_recv_wr %d is outside 1..%d", cp.MaxRecvWR, maxQPWR)
	}
	if cp.MaxSendSGE > maxSGEs || cp.MaxRecvSGE > maxSGEs || cp.MaxSendSGE < 0 || cp.MaxRecvSGE < 0 {
		return sp, verbsio.Errorf("create_qp", unix.EINVAL, "max SGE per request is %d", maxSGEs)
	}
	if cp.MaxInlineData < 0 || cp.MaxInlineData > maxInline {
		return sp, verbsio.Errorf("create_qp", unix.EINVAL, "max_inline_data %d is above the device's %d", cp.MaxInlineData, maxInline)
	}
	if attr.Segmenter > verbsio.SegmentEngine {
		return sp, verbsio.Errorf("create_qp", unix.EINVAL, "unknown segmenter %d", attr.Segmenter)
	}
	cp.MaxSendSGE = max(cp.MaxSendSGE, 1)
	cp.MaxRecvSGE = max(cp.MaxRecvSGE, 1)
	cp.MaxSendWR = pow2(cp.MaxSendWR)
	sp.rqDepth = 1
	if sp.srq == nil {
		cp.MaxRecvWR = pow2(cp.MaxRecvWR)
		sp.rqDepth = cp.MaxRecvWR
		sp.rqBytes = (ring.RQSize(sp.rqDepth, cp.MaxRecvSGE) + 63) &^ 63
	} else {
		cp.MaxRecvWR = 0
	}
	sp.sqBytes = ring.SQSize(cp.MaxSendWR, cp.MaxSendSGE, cp.MaxInlineData)
	sp.cap = cp
	return sp, nil
}

// allocQueues takes the rings the application's allocator supplies on
// this fabric (called without c.mu held); on failure it has freed them.
func (sp *qpSpec) allocQueues(c *Context) error {
	var err error
	if sp.sqExt, err = c.allocQueue("create_qp", dv.ResSendQueue, sp.sqBytes+dv.DBRecSize); err != nil {
		return err
	}
	if sp.rqBytes > 0 {
		if sp.rqExt, err = c.allocQueue("create_qp", dv.ResRecvQueue, sp.rqBytes); err != nil {
			sp.sqExt.free()
			sp.sqExt = nil
			return err
		}
	}
	return nil
}

// createQP builds the QP of sp under c.mu.
func (p *pd) createQP(sp *qpSpec) (*qp, error) {
	c := p.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkOpen("create_qp"); err != nil {
		return nil, err
	}
	// The application's allocator ran without the lock and may have
	// destroyed what the request names: check again under it.
	attr, cp, s, sendCQ, recvCQ := &sp.attr, sp.cap, sp.srq, sp.sendCQ, sp.recvCQ
	switch {
	case sendCQ.cons == nil || recvCQ.cons == nil:
		return nil, verbsio.Errorf("create_qp", unix.EINVAL, "a completion queue of the request was destroyed (by the queue allocator?)")
	case c.pds[p.id] != p:
		return nil, verbsio.Errorf("create_qp", unix.EINVAL, "the protection domain was deallocated (by the queue allocator?)")
	case s != nil && c.srqs[s.idx] != s:
		return nil, verbsio.Errorf("create_qp", unix.EINVAL, "the SRQ was destroyed (by the queue allocator?)")
	}
	idx := -1
	for i := range c.qps {
		if c.qps[i].Load() == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, verbsio.Errorf("create_qp", unix.ENOMEM, "more than %d queue pairs", maxQP)
	}
	// The shared segment holds what the allocator did not supply.
	rqExt, sqExt, rqBytes, sqBytes := sp.rqExt, sp.sqExt, sp.rqBytes, sp.sqBytes
	var reg *region
	var rqMem, sqMem []byte
	if rqExt != nil {
		rqMem = rqExt.mem
	}
	if sqExt != nil {
		sqMem = sqExt.mem
	}
	seg := 0
	if rqExt == nil {
		seg += rqBytes
	}
	if sqExt == nil {
		seg += sqBytes + dv.DBRecSize
	}
	if seg > 0 {
		var err error
		if reg, err = c.newRegion("rperf-qp", seg, false); err != nil {
			return nil, err
		}
		mem := reg.seg.Bytes()
		if rqExt == nil {
			rqMem = mem[:rqBytes:rqBytes]
			mem = mem[rqBytes:]
		}
		if sqExt == nil {
			sqMem = mem[: sqBytes+dv.DBRecSize : sqBytes+dv.DBRecSize]
		}
	}
	q := &qp{ctx: c, pd: p, typ: attr.Type, idx: uint32(idx), reg: reg, srq: s, cap: cp, sqSigAll: attr.SQSigAll,
		sendCQ: sendCQ, recvCQ: recvCQ, state: verbsio.QPStateReset, seg: attr.Segmenter, sqExt: sqExt, rqExt: rqExt}
	q.sqMem = sqMem[:sqBytes:sqBytes]
	q.dbrec = (*atomic.Uint32)(unsafe.Pointer(&sqMem[sqBytes]))
	q.sq, _ = ring.ViewSQ(q.sqMem, cp.MaxSendWR, cp.MaxSendSGE, cp.MaxInlineData)
	if s == nil {
		q.rq, _ = ring.ViewRQ(rqMem, sp.rqDepth, cp.MaxRecvSGE)
	}
	c.qpTag[idx]++
	if c.qpTag[idx] >= 1<<(24-qpIndexBits) || c.qpTag[idx] == 0 {
		c.qpTag[idx] = 1
	}
	q.qpn = c.qpTag[idx]<<qpIndexBits | uint32(idx)
	q.src = make([][]byte, max(cp.MaxSendSGE, 1))
	q.rsges = make([]ring.SGE, maxSGEs)
	q.attr.Cap = cp
	q.maxMsg = c.fab.deviceAttr().MaxMsgSize
	q.t = c.fab.newQP(q)

	rec := c.ctrl.qp(q.idx)
	q.rec = rec
	rec.state.Store(uint32(verbsio.QPStateReset))
	rec.typ.Store(uint32(attr.Type))
	rec.pd.Store(p.id)
	rec.destQPN.Store(0)
	rec.destNonce.Store(0)
	rec.qkey.Store(0)
	rec.access.Store(0)
	if reg != nil && rqExt == nil && s == nil {
		rec.ringRegion.Store(reg.idx + 1)
	} else {
		rec.ringRegion.Store(0) // no receive ring in a shared segment (SRQ, or the udp fabric's allocator)
	}
	rec.rqDepth.Store(uint32(sp.rqDepth))
	rec.rqMaxSGE.Store(uint32(cp.MaxRecvSGE))
	if s != nil {
		rec.srq.Store(s.idx + 1)
		rec.srqTag.Store(s.tag)
		s.users++
	} else {
		rec.srq.Store(0)
	}
	rec.recvCQ.Store(recvCQ.idx + 1)
	rec.recvCQTag.Store(recvCQ.tag)
	rec.qpn.Store(q.qpn)

	sendCQ.qps = append(sendCQ.qps, q)
	sendCQ.users++
	if recvCQ != sendCQ {
		recvCQ.qps = append(recvCQ.qps, q)
	}
	recvCQ.users++
	p.users++
	c.qps[idx].Store(q)
	return q, nil
}

func cqOf(c *verbsio.CQ, ctx *Context) (*cq, bool) {
	if c == nil {
		return nil, false
	}
	q, ok := c.Impl().(*cq)
	return q, ok && q.ctx == ctx && q.cons != nil
}

// QPN implements verbsio.QPImpl.
func (q *qp) QPN() uint32 { return q.qpn }

// Cap implements verbsio.QPImpl.
func (q *qp) Cap() verbsio.QPCap { return q.cap }

// Query implements verbsio.QPImpl.
func (q *qp) Query() (verbsio.QPAttr, error) {
	a := q.attr
	a.State = q.state
	a.CurState = q.state
	a.Cap = q.cap
	return a, nil
}

// Modify implements verbsio.QPImpl.
func (q *qp) Modify(attr *verbsio.QPAttr, mask verbsio.QPAttrMask) error {
	if attr == nil {
		return verbsio.Errorf("modify_qp", unix.EINVAL, "nil attributes")
	}
	q.ctx.lock()
	defer q.ctx.unlock()
	next, err := verbsio.CheckModify(q.typ, q.state, attr, mask)
	if err != nil {
		return err
	}
	if mask&verbsio.QPAttrPkeyIndex != 0 && attr.PkeyIndex != 0 {
		return verbsio.Errorf("modify_qp", unix.EINVAL, "pkey_index %d: the P_Key table has one entry", attr.PkeyIndex)
	}
	if mask&verbsio.QPAttrMaxDestRdAtomic != 0 && attr.MaxDestRdAtomic > maxRdAtomic {
		return verbsio.Errorf("modify_qp", unix.EINVAL, "max_dest_rd_atomic %d is above the device's %d", attr.MaxDestRdAtomic, maxRdAtomic)
	}
	if mask&verbsio.QPAttrMaxQPRdAtomic != 0 && attr.MaxRdAtomic > maxRdAtomic {
		return verbsio.Errorf("modify_qp", unix.EINVAL, "max_rd_atomic %d is above the device's %d", attr.MaxRdAtomic, maxRdAtomic)
	}
	if mask&verbsio.QPAttrAV != 0 {
		if err := q.ctx.checkSGID("modify_qp", attr.AH.SGIDIndex); err != nil {
			return err
		}
	}
	if mask&verbsio.QPAttrRateLimit != 0 && attr.RateLimit != 0 && (attr.RateLimit < paceMinKbps || attr.RateLimit > paceMaxKbps) {
		return verbsio.Errorf("modify_qp", unix.EINVAL, "rate_limit %d kbit/s is outside %d..%d (rdiag info shows packet_pacing)", attr.RateLimit, paceMinKbps, paceMaxKbps)
	}
	if err := q.t.modify(next, attr, mask); err != nil {
		return err
	}
	if next == verbsio.QPStateRTR && q.state != verbsio.QPStateRTR && (q.typ == verbsio.QPTypeRC || q.typ == verbsio.QPTypeUC) {
		q.destQPN = attr.DestQPN
	}
	q.storeAttr(attr, mask)
	switch next {
	case verbsio.QPStateReset:
		q.reset()
	case verbsio.QPStateErr:
		q.toErr()
		return nil
	}
	q.state = next
	q.rec.state.Store(uint32(next))
	return nil
}

func (q *qp) storeAttr(a *verbsio.QPAttr, mask verbsio.QPAttrMask) {
	t := &q.attr
	if mask&verbsio.QPAttrAccessFlags != 0 {
		t.AccessFlags = a.AccessFlags
		q.rec.access.Store(uint32(a.AccessFlags))
	}
	if mask&verbsio.QPAttrQKey != 0 {
		t.QKey = a.QKey
		q.rec.qkey.Store(a.QKey)
	}
	if mask&verbsio.QPAttrPkeyIndex != 0 {
		t.PkeyIndex = a.PkeyIndex
	}
	if mask&verbsio.QPAttrPort != 0 {
		t.PortNum = a.PortNum
	}
	if mask&verbsio.QPAttrAV != 0 {
		t.AH = a.AH
	}
	if mask&verbsio.QPAttrPathMTU != 0 {
		t.PathMTU = a.PathMTU
		q.rec.mtu.Store(uint32(a.PathMTU.Bytes()))
	}
	if mask&verbsio.QPAttrDestQPN != 0 {
		t.DestQPN = a.DestQPN
	}
	if mask&verbsio.QPAttrRQPSN != 0 {
		t.RQPSN = a.RQPSN
	}
	if mask&verbsio.QPAttrSQPSN != 0 {
		t.SQPSN = a.SQPSN
	}
	if mask&verbsio.QPAttrMinRNRTimer != 0 {
		t.MinRNRTimer = a.MinRNRTimer
		q.rec.minRNR.Store(uint32(a.MinRNRTimer))
	}
	if mask&verbsio.QPAttrTimeout != 0 {
		t.Timeout = a.Timeout
	}
	if mask&verbsio.QPAttrRetryCnt != 0 {
		t.RetryCnt = a.RetryCnt
	}
	if mask&verbsio.QPAttrRNRRetry != 0 {
		t.RNRRetry = a.RNRRetry
	}
	if mask&verbsio.QPAttrMaxQPRdAtomic != 0 {
		t.MaxRdAtomic = a.MaxRdAtomic
	}
	if mask&verbsio.QPAttrMaxDestRdAtomic != 0 {
		t.MaxDestRdAtomic = a.MaxDestRdAtomic
	}
	if mask&verbsio.QPAttrRateLimit != 0 {
		t.RateLimit, t.MaxBurstSize, t.TypicalPktSize = a.RateLimit, a.MaxBurstSize, a.TypicalPktSize
		q.pace = nil
		if a.RateLimit != 0 {
			burst := max(uint64(a.MaxBurstSize), uint64(a.TypicalPktSize), paceMinBurst)
			q.pace = pace.New(uint64(a.RateLimit)*1000, burst)
		}
		q.t.paceChanged() // a hold of the old rate is no credit under the new one
	}
}

// Packet pacing range and smallest burst (one MTU-sized packet).
const (
	paceMinKbps  = 1000        // 1 Mb/s
	paceMaxKbps  = 100_000_000 // 100 Gb/s
	paceMinBurst = 4096
)

// reset returns the QP to its state after creation: empty queues, no
// connection, default attributes.
func (q *qp) reset() {
	q.t.reset()
	q.sqPI, q.sqExec, q.sqDone = 0, 0, 0
	q.dbrec.Store(0)
	if q.rq.Valid() {
		h := q.rq.Header()
		h.PI.Store(0)
		h.CI.Store(0)
		q.rqPI = 0
	}
	q.attr = verbsio.QPAttr{Cap: q.cap}
	q.pace = nil // the rate limit is an attribute: RESET clears it
	q.rec.destQPN.Store(0)
	q.rec.destNonce.Store(0)
	q.rec.access.Store(0)
}

// toErr moves the QP to ERR and flushes its queues: every send request not
// yet executed and every receive not yet consumed completes with
// WR_FLUSH_ERR.
func (q *qp) toErr() {
	if q.state == verbsio.QPStateErr {
		return
	}
	q.state = verbsio.QPStateErr
	q.rec.state.Store(uint32(verbsio.QPStateErr))
	q.flushSQ()
	q.flushRQ()
	q.t.flush()
}

func (q *qp) flushSQ() {
	for q.sqExec != q.sqPI {
		q.complete(q.sqExec, verbsio.StatusWRFlushErr, 0)
		q.sqExec++
	}
}

func (q *qp) flushRQ() {
	if !q.rq.Valid() {
		return
	}
	for {
		id, _, ok := q.rq.Claim(q.rsges)
		if !ok {
			return
		}
		e := ring.CQE{WRID: id, Status: uint8(verbsio.StatusWRFlushErr), Opcode: uint8(verbsio.WCRecv), QPN: q.qpn}
		q.recvCQ.ring.Push(&e, q.ctx.pid)
	}
}

// retire frees send queue slots up to and including pos, whose completion
// was just polled.
func (q *qp) retire(pos uint32) {
	if pos-q.sqDone < q.sqExec-q.sqDone {
		q.sqDone = pos + 1
	}
}

// PostRecv implements verbsio.QPImpl.
func (q *qp) PostRecv(wrs []verbsio.RecvWR) (int, error) {
	if q.srq != nil {
		return 0, errRecvOnSRQQP
	}
	q.ctx.lock() // background progress may move the QP to ERR: read its state under the lock
	if q.state == verbsio.QPStateReset {
		q.ctx.unlock()
		return 0, errRecvState
	}
	n, err := postRecv(q.rq, &q.rqPI, q.cap.MaxRecvSGE, wrs)
	if q.state == verbsio.QPStateErr {
		q.flushRQ()
	}
	q.ctx.unlock()
	return n, err
}

// postRecv writes receive WQEs into rq and publishes them.
func postRecv(rq ring.RQ, pi *uint32, maxSGE int, wrs []verbsio.RecvWR) (int, error) {
	var err error
	n := 0
	ci := rq.Header().CI.Load()
	for i := range wrs {
		wr := &wrs[i]
		if len(wr.SGL) > maxSGE {
			err = errRecvNumSGE
			break
		}
		if *pi-ci >= rq.Depth() {
			ci = rq.Header().CI.Load()
			if *pi-ci >= rq.Depth() {
				err = errRQFull
				break
			}
		}
		rq.Write(*pi, wr.ID, sgesAsRing(wr.SGL))
		*pi++
		n++
	}
	if n > 0 {
		rq.Publish(*pi)
	}
	return n, err
}

// Destroy implements verbsio.QPImpl.
func (q *qp) Destroy() error {
	if q.ctx.qps[q.idx].Load() != q {
		return verbsio.Errorf("destroy_qp", unix.EINVAL, "queue pair already destroyed")
	}
	if d, ok := q.t.(destroyChecker); ok {
		if err := d.destroyCheck(); err != nil {
			return err
		}
	}
	q.ctx.lock()
	ext := q.destroy(false)
	q.ctx.unlock()
	freeAll(ext) // the application's allocator, without the engine's locks
	return nil
}

// destroy releases the QP and returns the buffers of the application's
// allocator it held, for the caller to free once it holds no lock.
func (q *qp) destroy(closing bool) []*extBuf {
	q.t.release()
	c := q.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	q.rec.state.Store(uint32(verbsio.QPStateReset))
	q.rec.qpn.Store(0)
	q.sendCQ.qps = remove(q.sendCQ.qps, q)
	q.sendCQ.users--
	if q.recvCQ != q.sendCQ {
		q.recvCQ.qps = remove(q.recvCQ.qps, q)
	}
	q.recvCQ.users--
	if q.srq != nil {
		q.srq.users--
	}
	q.pd.users--
	c.qps[q.idx].Store(nil)
	if q.reg != nil {
		c.dropRegion(q.reg)
	}
	q.state = verbsio.QPStateReset
	ext := []*extBuf{q.sqExt, q.rqExt}
	q.sqExt, q.rqExt = nil, nil
	return ext
}

// remove deletes the first x from list, in place.
func remove[T comparable](list []T, x T) []T {
	for i, y := range list {
		if y == x {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}
