package soft

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
)

// sgesAsRing views verbsio SGEs as ring SGEs (the same layout).
func sgesAsRing(s []verbsio.SGE) []ring.SGE {
	return unsafe.Slice((*ring.SGE)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

func init() {
	if unsafe.Sizeof(verbsio.SGE{}) != unsafe.Sizeof(ring.SGE{}) {
		panic("soft: SGE layouts differ")
	}
}

// opcodeOK says which opcodes each QP type accepts.
func opcodeOK(t verbsio.QPType, op verbsio.Opcode) bool {
	switch t {
	case verbsio.QPTypeRC:
		return op.Valid()
	case verbsio.QPTypeUC:
		return op == verbsio.OpSend || op == verbsio.OpSendImm || op == verbsio.OpRDMAWrite || op == verbsio.OpRDMAWriteImm
	case verbsio.QPTypeUD:
		return op == verbsio.OpSend || op == verbsio.OpSendImm
	}
	return false
}

// PostSend implements verbsio.QPImpl: it writes the requests into the send
// ring and rings the doorbell, which executes them.
func (q *qp) PostSend(wrs []verbsio.SendWR) (int, error) {
	switch q.state {
	case verbsio.QPStateRTS, verbsio.QPStateSQD, verbsio.QPStateErr:
	default:
		return 0, errPostState
	}
	var err error
	n := 0
	c := q.ctx
	c.lock()
	for i := range wrs {
		if err = q.encode(&wrs[i]); err != nil {
			break
		}
		n++
	}
	if n > 0 {
		q.execute()
	}
	c.unlock()
	return n, err
}

// encode validates wr and writes it at the send ring's producer position.
func (q *qp) encode(wr *verbsio.SendWR) error {
	if !opcodeOK(q.typ, wr.Opcode) {
		return errOpcode
	}
	if q.sqPI-q.sqDone >= uint32(q.cap.MaxSendWR) {
		return errSQFull
	}
	pos := q.sqPI
	w := q.sq.WQE(pos)
	var ahNum uint32
	if q.typ == verbsio.QPTypeUD {
		if wr.UD.AH == nil {
			return errNoAH
		}
		a, ok := wr.UD.AH.Impl().(*ah)
		if !ok || a.ctx != q.ctx {
			return errNoAH
		}
		ahNum = a.idx + 1
	}
	if wr.Flags&verbsio.SendInline != 0 && !wr.Opcode.IsAtomic() && wr.Opcode != verbsio.OpRDMARead {
		total := 0
		for i := range wr.SGL {
			total += int(wr.SGL[i].Length)
		}
		if total > q.cap.MaxInlineData {
			return errInlineLen
		}
		dst := q.sq.Inline(pos, total)
		off := 0
		for i := range wr.SGL {
			s := &wr.SGL[i]
			b, ok := q.ctx.knownBytes(s.Addr, s.Length)
			if !ok {
				return errInlineAddr
			}
			off += copy(dst[off:], b)
		}
		w.InlineLen = uint32(total)
		w.NumSGE = 0
	} else {
		if len(wr.SGL) > q.cap.MaxSendSGE {
			return errNumSGE
		}
		copy(q.sq.SGEs(pos, len(wr.SGL)), sgesAsRing(wr.SGL))
		w.NumSGE = uint16(len(wr.SGL))
		w.InlineLen = 0
	}
	w.WRID = wr.ID
	w.Opcode = uint8(wr.Opcode)
	w.Flags = uint8(wr.Flags)
	w.Imm = wr.Imm
	w.RKey = wr.Remote.RKey
	w.RAddr = wr.Remote.Addr
	w.CompareAdd = wr.Atomic.CompareAdd
	w.Swap = wr.Atomic.Swap
	w.UDQPN = wr.UD.RemoteQPN
	w.UDQKey = wr.UD.RemoteQKey
	w.AH = ahNum
	q.sqPI++
	return nil
}

// Head-of-line wait kinds.
const (
	waitNone uint8 = iota
	waitRNR
	waitResponse
	waitPace
)

// execute runs the send ring from sqExec to sqPI: the engine's doorbell.
func (q *qp) execute() {
	if q.u != nil {
		q.udpExecute()
		return
	}
	for q.sqExec != q.sqPI {
		if q.state == verbsio.QPStateErr {
			q.flushSQ()
			return
		}
		pos := q.sqExec
		if q.pace != nil && !q.takePace(uint64(q.byteLen(pos)), now(), &q.paceDue) {
			q.block(waitPace)
			return
		}
		st, wait := q.run(pos)
		if wait != waitNone {
			fail := q.block(wait)
			if fail == verbsio.StatusSuccess {
				return
			}
			st = fail
		}
		q.unblock()
		w := q.sq.WQE(pos)
		if st != verbsio.StatusSuccess {
			q.complete(pos, st, 0)
			q.sqExec++
			q.toErr()
			return
		}
		if q.sqSigAll || verbsio.SendFlags(w.Flags)&verbsio.SendSignaled != 0 {
			q.complete(pos, verbsio.StatusSuccess, q.byteLen(pos))
		}
		q.sqExec++
	}
}

// takePace spends n bytes of the QP's pacing tokens at t. A packet the
// pacer held back until *due (non-zero) is backlogged, not idle: the
// lateness of its sender counts (pace.TakeDue), once.
func (q *qp) takePace(n uint64, t int64, due *int64) bool {
	if *due != 0 {
		d := *due
		*due = 0
		if q.pace.TakeDue(n, t, d) {
			return true
		}
	}
	return q.pace.Take(n, t)
}

func (q *qp) byteLen(pos uint32) uint32 {
	w := q.sq.WQE(pos)
	if inl := w.InlineLen; inl != 0 {
		return inl
	}
	op := verbsio.Opcode(w.Opcode)
	if op.IsAtomic() {
		return 8
	}
	n := uint32(0)
	if nsge := int(w.NumSGE); nsge <= q.cap.MaxSendSGE { // read once (gather)
		for _, s := range q.sq.SGEs(pos, nsge) {
			n += s.Length
		}
	}
	return n
}

// complete pushes the send completion of the WQE at pos.
func (q *qp) complete(pos uint32, st verbsio.Status, n uint32) {
	w := q.sq.WQE(pos)
	e := ring.CQE{WRID: w.WRID, Status: uint8(st), Opcode: uint8(verbsio.WCOpcodeOf(verbsio.Opcode(w.Opcode))),
		ByteLen: n, QPN: q.qpn, SQIdx: pos}
	q.sendCQ.ring.Push(&e, q.ctx.pid)
}

// block records that the head request must wait, and returns the error
// status when it has waited too long.
func (q *qp) block(kind uint8) verbsio.Status {
	t := now()
	if !q.blocked || q.blockKind != kind {
		if !q.blocked {
			q.sendCQ.nblocked++
		}
		q.blocked, q.blockKind, q.blockStart = true, kind, t
		q.rnrLeft = int(q.attr.RNRRetry)
	}
	switch kind {
	case waitRNR:
		if q.attr.RNRRetry != 7 {
			if q.rnrLeft == 0 {
				return verbsio.StatusRNRRetryExcErr
			}
			q.rnrLeft--
		}
		q.retryAt = t + verbsio.RNRTimerDuration(uint8(q.remote.minRNR.Load()))
	case waitPace:
		q.retryAt = t + max(q.pace.Wait(uint64(q.byteLen(q.sqExec)), t), 1)
		q.paceDue = q.retryAt
	case waitResponse:
		to := verbsio.TimeoutDuration(q.attr.Timeout)
		if to > 0 && t-q.blockStart >= to*int64(q.attr.RetryCnt+1) {
			return verbsio.StatusRetryExcErr
		}
		step := int64(200_000)
		if to > 0 && to < step {
			step = to
		}
		q.retryAt = t + step
	}
	return verbsio.StatusSuccess
}

func (q *qp) unblock() {
	if q.blocked {
		q.blocked = false
		q.sendCQ.nblocked--
	}
}

// peerGone reports whether the connected peer's process exited or its
// context closed.
func (q *qp) peerGone() bool { return q.peer != nil && q.peer.gone() }

// run executes one WQE. It returns the completion status, or a wait kind
// when the request cannot complete yet.
func (q *qp) run(pos uint32) (verbsio.Status, uint8) {
	w := q.sq.WQE(pos)
	op := verbsio.Opcode(w.Opcode)
	if !opcodeOK(q.typ, op) {
		return verbsio.StatusLocQPOpErr, waitNone
	}
	if q.typ == verbsio.QPTypeUD {
		return q.runUD(pos, w)
	}
	reliable := q.typ == verbsio.QPTypeRC
	p := q.peer
	if p == nil || p.gone() {
		if reliable {
			return verbsio.StatusRetryExcErr, waitNone
		}
		return verbsio.StatusSuccess, waitNone
	}
	rec := q.remote
	if rec.qpn.Load() != q.destQPN || rec.destQPN.Load() != q.qpn || rec.destNonce.Load() != q.ctx.nonce ||
		!receiving(rec.state.Load()) {
		if reliable {
			return verbsio.StatusSuccess, waitResponse
		}
		return verbsio.StatusSuccess, waitNone
	}
	switch op {
	case verbsio.OpRDMAWrite, verbsio.OpRDMAWriteImm:
		return q.runWrite(pos, w, p, rec, reliable)
	case verbsio.OpSend, verbsio.OpSendImm:
		if !q.recvOK {
			if q.recv, q.recvOK = p.resolveRecv(rec); !q.recvOK {
				return verbsio.StatusRemOpErr, waitNone
			}
		}
		return q.deliver(pos, w, p, q.recv, reliable, false)
	case verbsio.OpRDMARead:
		return q.runRead(pos, w, p, rec), waitNone
	default:
		return q.runAtomic(pos, w, p, rec), waitNone
	}
}

func receiving(state uint32) bool {
	s := verbsio.QPState(state)
	return s == verbsio.QPStateRTR || s == verbsio.QPStateRTS || s == verbsio.QPStateSQD
}

// gather resolves the WQE's local source buffers into q.src.
func (q *qp) gather(pos uint32, w *ring.SendWQE) (total uint64, n int, st verbsio.Status) {
	// Each field is read once: with direct verbs the application writes
	// this memory, and a second read could see another value than the
	// one checked.
	if inl := int(w.InlineLen); inl != 0 {
		if inl > q.cap.MaxInlineData {
			return 0, 0, verbsio.StatusLocLenErr
		}
		q.src[0] = q.sq.Inline(pos, inl)
		return uint64(inl), 1, verbsio.StatusSuccess
	}
	nsge := int(w.NumSGE)
	if nsge > q.cap.MaxSendSGE {
		return 0, 0, verbsio.StatusLocLenErr
	}
	for i, s := range q.sq.SGEs(pos, nsge) {
		m := q.ctx.lookupLocal(s.LKey)
		if m == nil || m.pd != q.pd {
			return 0, 0, verbsio.StatusLocProtErr
		}
		b, ok := m.slice(s.Addr, s.Length)
		if !ok {
			return 0, 0, verbsio.StatusLocProtErr
		}
		q.src[i] = b
		total += uint64(s.Length)
	}
	if total > shmMaxMsgSize {
		return 0, 0, verbsio.StatusLocLenErr
	}
	return total, nsge, verbsio.StatusSuccess
}

// scatterLocal resolves the WQE's local destination buffers (READ and
// atomic results), which need LOCAL_WRITE.
func (q *qp) scatterLocal(pos uint32, w *ring.SendWQE) (total uint64, n int, st verbsio.Status) {
	nsge := int(w.NumSGE) // read once, as in gather
	if nsge > q.cap.MaxSendSGE {
		return 0, 0, verbsio.StatusLocLenErr
	}
	for i, s := range q.sq.SGEs(pos, nsge) {
		m := q.ctx.lookupLocal(s.LKey)
		if m == nil || m.pd != q.pd || m.access&verbsio.AccessLocalWrite == 0 {
			return 0, 0, verbsio.StatusLocProtErr
		}
		b, ok := m.slice(s.Addr, s.Length)
		if !ok {
			return 0, 0, verbsio.StatusLocProtErr
		}
		q.src[i] = b
		total += uint64(s.Length)
	}
	if total > shmMaxMsgSize {
		return 0, 0, verbsio.StatusLocLenErr
	}
	return total, nsge, verbsio.StatusSuccess
}

// remoteAccess checks the target QP's own access flags (RC/UC) and
// acquires the remote range.
func (q *qp) remoteAccess(p *peer, rec *qpRecord, w *ring.SendWQE, n uint64, need verbsio.Access, r *remoteRef) bool {
	if verbsio.Access(rec.access.Load())&need != need {
		return false
	}
	return p.acquire(w.RKey, w.RAddr, n, need, rec.pd.Load(), r)
}

func (q *qp) runWrite(pos uint32, w *ring.SendWQE, p *peer, rec *qpRecord, reliable bool) (verbsio.Status, uint8) {
	total, n, st := q.gather(pos, w)
	if st != verbsio.StatusSuccess {
		return st, waitNone
	}
	imm := verbsio.Opcode(w.Opcode) == verbsio.OpRDMAWriteImm
	if imm && !q.recvOK {
		if q.recv, q.recvOK = p.resolveRecv(rec); !q.recvOK {
			return verbsio.StatusRemOpErr, waitNone
		}
	}
	r := &q.refs[0]
	if total > 0 {
		if !q.remoteAccess(p, rec, w, total, verbsio.AccessRemoteWrite, r) {
			if reliable {
				return verbsio.StatusRemAccessErr, waitNone
			}
			return verbsio.StatusSuccess, waitNone
		}
	}
	var recvID uint64
	if imm {
		id, _, ok := q.recv.rq.Claim(q.rsges)
		if !ok {
			r.release()
			if reliable {
				return verbsio.StatusSuccess, waitRNR
			}
			return verbsio.StatusSuccess, waitNone
		}
		recvID = id
	}
	if total > 0 {
		if dst := r.bytes(); dst != nil {
			off := 0
			for i := 0; i < n-1; i++ {
				off += copy(dst[off:], q.src[i])
			}
			orderedCopy(dst[off:], q.src[n-1])
		} else {
			addr := r.addr
			for i := 0; i < n; i++ {
				if err := p.proc.WriteAt(addr, q.src[i], q.iov, q.riov); err != nil {
					r.release()
					return verbsio.StatusRemAccessErr, waitNone
				}
				addr += uint64(len(q.src[i]))
			}
		}
		r.release()
	}
	if imm {
		e := ring.CQE{WRID: recvID, Opcode: uint8(verbsio.WCRecvRDMAWithImm), ByteLen: uint32(total), Imm: w.Imm,
			QPN: q.destQPN, SrcQP: q.qpn, Flags: uint8(verbsio.WCWithImm)}
		q.recv.cq.Push(&e, q.ctx.pid)
	}
	return verbsio.StatusSuccess, waitNone
}

// deliver performs a SEND into the receive target t: it claims a receive
// WQE, checks its buffers as the receiver's HCA would, copies and produces
// the receive completion. UD sends (ud) put a GRH in the first 40 bytes.
func (q *qp) deliver(pos uint32, w *ring.SendWQE, p *peer, t recvTarget, reliable, ud bool) (verbsio.Status, uint8) {
	total, n, st := q.gather(pos, w)
	if st != verbsio.StatusSuccess {
		return st, waitNone
	}
	id, nr, ok := t.rq.Claim(q.rsges)
	if !ok {
		if reliable {
			return verbsio.StatusSuccess, waitRNR
		}
		return verbsio.StatusSuccess, waitNone // unreliable: dropped
	}
	dstQPN := q.destQPN
	if ud {
		dstQPN = w.UDQPN
	}
	e := ring.CQE{WRID: id, Opcode: uint8(verbsio.WCRecv), QPN: dstQPN, SrcQP: q.qpn}
	if verbsio.Opcode(w.Opcode) == verbsio.OpSendImm {
		e.Imm = w.Imm
		e.Flags = uint8(verbsio.WCWithImm)
	}
	need := total
	if ud {
		need += grhSize
		e.Flags |= uint8(verbsio.WCWithGRH)
	}
	fail := func(recvSt, sendSt verbsio.Status) (verbsio.Status, uint8) {
		e.Status = uint8(recvSt)
		t.cq.Push(&e, q.ctx.pid)
		if reliable {
			return sendSt, waitNone
		}
		return verbsio.StatusSuccess, waitNone
	}
	if nr < 0 {
		return fail(verbsio.StatusLocQPOpErr, verbsio.StatusRemOpErr)
	}
	// Resolve the receive buffers under the receiver's keys and PD.
	var capTotal uint64
	nrefs := 0
	for i := 0; i < nr && capTotal < need; i++ {
		s := &q.rsges[i]
		if s.Length == 0 {
			continue
		}
		if !p.acquire(s.LKey, s.Addr, uint64(s.Length), verbsio.AccessLocalWrite, t.pd, &q.refs[nrefs]) {
			releaseAll(q.refs[:nrefs])
			return fail(verbsio.StatusLocProtErr, verbsio.StatusRemOpErr)
		}
		nrefs++
		capTotal += uint64(s.Length)
	}
	if capTotal < need {
		releaseAll(q.refs[:nrefs])
		return fail(verbsio.StatusLocLenErr, verbsio.StatusRemInvReqErr)
	}
	srcs := q.src[:n]
	if ud {
		q.fillGRH(&q.grh, p, total)
	}
	if !q.copyOut(p, q.refs[:nrefs], q.grh[:], ud, srcs) {
		releaseAll(q.refs[:nrefs])
		return fail(verbsio.StatusLocProtErr, verbsio.StatusRemOpErr)
	}
	releaseAll(q.refs[:nrefs])
	e.ByteLen = uint32(need)
	t.cq.Push(&e, q.ctx.pid)
	return verbsio.StatusSuccess, waitNone
}

func releaseAll(refs []remoteRef) {
	for i := range refs {
		refs[i].release()
	}
}

// copyOut streams the sources (after an optional GRH) into the
// destination ranges, in order.
func (q *qp) copyOut(p *peer, dsts []remoteRef, grh []byte, withGRH bool, srcs [][]byte) bool {
	di, doff := 0, uint64(0)
	put := func(b []byte) bool {
		for len(b) > 0 {
			if di >= len(dsts) {
				return false
			}
			d := &dsts[di]
			k := min(uint64(len(b)), d.n-doff)
			if bb := d.bytes(); bb != nil {
				copy(bb[doff:doff+k], b[:k])
			} else if err := p.proc.WriteAt(d.addr+doff, b[:k], q.iov, q.riov); err != nil {
				return false
			}
			b = b[k:]
			doff += k
			if doff == d.n {
				di++
				doff = 0
			}
		}
		return true
	}
	if withGRH && !put(grh) {
		return false
	}
	for _, s := range srcs {
		if !put(s) {
			return false
		}
	}
	return true
}

const grhSize = 40

// fillGRH writes the GRH a UD receiver finds before the payload: IPv6-style
// version 6, payload length, next header 0x1b, hop limit, source and
// destination GIDs.
func (q *qp) fillGRH(g *[grhSize]byte, p *peer, payload uint64) {
	g[0] = 6 << 4
	binary.BigEndian.PutUint16(g[4:], uint16(payload))
	g[6] = 0x1b
	g[7] = 64
	copy(g[8:24], q.ctx.gid[:])
	copy(g[24:40], p.gid[:])
}

func (q *qp) runRead(pos uint32, w *ring.SendWQE, p *peer, rec *qpRecord) verbsio.Status {
	total, n, st := q.scatterLocal(pos, w)
	if st != verbsio.StatusSuccess {
		return st
	}
	if total == 0 {
		return verbsio.StatusSuccess
	}
	r := &q.refs[0]
	if !q.remoteAccess(p, rec, w, total, verbsio.AccessRemoteRead, r) {
		return verbsio.StatusRemAccessErr
	}
	defer r.release()
	if src := r.bytes(); src != nil {
		off := 0
		for i := 0; i < n; i++ {
			off += copy(q.src[i], src[off:])
		}
		return verbsio.StatusSuccess
	}
	addr := r.addr
	for i := 0; i < n; i++ {
		if err := p.proc.ReadAt(q.src[i], addr, q.iov, q.riov); err != nil {
			return verbsio.StatusRemAccessErr
		}
		addr += uint64(len(q.src[i]))
	}
	return verbsio.StatusSuccess
}

func (q *qp) runAtomic(pos uint32, w *ring.SendWQE, p *peer, rec *qpRecord) verbsio.Status {
	total, n, st := q.scatterLocal(pos, w)
	if st != verbsio.StatusSuccess {
		return st
	}
	if n != 1 || total != 8 {
		return verbsio.StatusLocLenErr
	}
	if w.RAddr%8 != 0 {
		return verbsio.StatusRemInvReqErr
	}
	r := &q.refs[0]
	if !q.remoteAccess(p, rec, w, 8, verbsio.AccessRemoteAtomic, r) {
		return verbsio.StatusRemAccessErr
	}
	defer r.release()
	mem := r.mem
	if mem == nil || uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return verbsio.StatusRemOpErr
	}
	ptr := (*uint64)(unsafe.Pointer(&mem[0]))
	var old uint64
	if verbsio.Opcode(w.Opcode) == verbsio.OpAtomicCmpSwp {
		for {
			cur := atomic.LoadUint64(ptr)
			if cur != w.CompareAdd {
				old = cur
				break
			}
			if atomic.CompareAndSwapUint64(ptr, cur, w.Swap) {
				old = cur
				break
			}
		}
	} else {
		old = atomic.AddUint64(ptr, w.CompareAdd) - w.CompareAdd
	}
	binary.LittleEndian.PutUint64(q.src[0], old)
	return verbsio.StatusSuccess
}

// runUD executes a UD send: resolve the address handle, the destination QP
// and its receive target on every request.
func (q *qp) runUD(pos uint32, w *ring.SendWQE) (verbsio.Status, uint8) {
	if w.AH == 0 || w.AH > maxAH {
		return verbsio.StatusLocQPOpErr, waitNone
	}
	a := q.ctx.ahs[w.AH-1].Load()
	if a == nil {
		return verbsio.StatusLocQPOpErr, waitNone
	}
	if q.byteLen(pos) > 4096 {
		return verbsio.StatusLocLenErr, waitNone
	}
	p := a.peer
	if p.gone() {
		return verbsio.StatusSuccess, waitNone
	}
	rec, ok := p.remoteQP(w.UDQPN)
	if !ok || verbsio.QPType(rec.typ.Load()) != verbsio.QPTypeUD || !receiving(rec.state.Load()) {
		return verbsio.StatusSuccess, waitNone
	}
	qkey := w.UDQKey
	if qkey&0x80000000 != 0 {
		qkey = q.attr.QKey
	}
	if rec.qkey.Load() != qkey {
		return verbsio.StatusSuccess, waitNone
	}
	t, ok := p.resolveRecv(rec)
	if !ok {
		return verbsio.StatusSuccess, waitNone
	}
	return q.deliver(pos, w, p, t, false, true)
}
