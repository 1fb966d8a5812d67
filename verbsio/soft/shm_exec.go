package soft

import (
	"encoding/binary"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
)

// Head-of-line wait kinds.
const (
	waitNone uint8 = iota
	waitRNR
	waitResponse
	waitPace
)

// The shm fabric's requester: a doorbell executes each WQE against the
// peer's memory and rings at once, as a NIC would; a request that must
// wait (RNR, the target not ready, pacing) stays at the head of the send
// queue and is retried from polling (shmFabric.retry).

// execute runs the send ring from sqExec to sqPI: the engine's doorbell.
func (s *shmQP) execute() {
	q := s.q
	for q.sqExec != q.sqPI {
		if q.state == verbsio.QPStateErr {
			q.flushSQ()
			return
		}
		pos := q.sqExec
		if q.pace != nil && !q.takePace(uint64(q.byteLen(pos)), now(), &s.paceDue) {
			s.block(waitPace)
			return
		}
		st, wait := s.run(pos)
		if wait != waitNone {
			fail := s.block(wait)
			if fail == verbsio.StatusSuccess {
				return
			}
			st = fail
		}
		s.unblock()
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

// block records that the head request must wait, and returns the error
// status when it has waited too long.
func (s *shmQP) block(kind uint8) verbsio.Status {
	q := s.q
	t := now()
	if !s.blocked || s.blockKind != kind {
		if !s.blocked {
			q.sendCQ.shm.nblocked++
		}
		s.blocked, s.blockKind, s.blockStart = true, kind, t
		s.rnrLeft = int(q.attr.RNRRetry)
	}
	switch kind {
	case waitRNR:
		if q.attr.RNRRetry != 7 {
			if s.rnrLeft == 0 {
				return verbsio.StatusRNRRetryExcErr
			}
			s.rnrLeft--
		}
		s.retryAt = t + verbsio.RNRTimerDuration(uint8(s.remote.minRNR.Load()))
	case waitPace:
		s.retryAt = t + max(q.pace.Wait(uint64(q.byteLen(q.sqExec)), t), 1)
		s.paceDue = s.retryAt
	case waitResponse:
		to := verbsio.TimeoutDuration(q.attr.Timeout)
		if to > 0 && t-s.blockStart >= to*int64(q.attr.RetryCnt+1) {
			return verbsio.StatusRetryExcErr
		}
		step := int64(200_000)
		if to > 0 && to < step {
			step = to
		}
		s.retryAt = t + step
	}
	return verbsio.StatusSuccess
}

func (s *shmQP) unblock() {
	if s.blocked {
		s.blocked = false
		s.q.sendCQ.shm.nblocked--
	}
}

// peerGone reports whether the connected peer's process exited or its
// context closed.
func (s *shmQP) peerGone() bool { return s.peer != nil && s.peer.gone() }

// run executes one WQE. It returns the completion status, or a wait kind
// when the request cannot complete yet.
func (s *shmQP) run(pos uint32) (verbsio.Status, uint8) {
	q := s.q
	w := q.sq.WQE(pos)
	op := verbsio.Opcode(w.Opcode)
	if !opcodeOK(q.typ, op) {
		return verbsio.StatusLocQPOpErr, waitNone
	}
	if q.typ == verbsio.QPTypeUD {
		return s.runUD(pos, w)
	}
	reliable := q.typ == verbsio.QPTypeRC
	p := s.peer
	if p == nil || p.gone() {
		if reliable {
			return verbsio.StatusRetryExcErr, waitNone
		}
		return verbsio.StatusSuccess, waitNone
	}
	rec := s.remote
	if rec.qpn.Load() != q.destQPN || rec.destQPN.Load() != q.qpn || rec.destNonce.Load() != q.ctx.nonce ||
		!receiving(rec.state.Load()) {
		if reliable {
			return verbsio.StatusSuccess, waitResponse
		}
		return verbsio.StatusSuccess, waitNone
	}
	switch op {
	case verbsio.OpRDMAWrite, verbsio.OpRDMAWriteImm:
		return s.runWrite(pos, w, p, rec, reliable)
	case verbsio.OpSend, verbsio.OpSendImm:
		if !s.recvOK {
			if s.recv, s.recvOK = p.resolveRecv(rec); !s.recvOK {
				return verbsio.StatusRemOpErr, waitNone
			}
		}
		return s.deliver(pos, w, p, s.recv, reliable, false)
	case verbsio.OpRDMARead:
		return s.runRead(pos, w, p, rec), waitNone
	default:
		return s.runAtomic(pos, w, p, rec), waitNone
	}
}

// remoteAccess checks the target QP's own access flags (RC/UC) and
// acquires the remote range.
func remoteAccess(p *peer, rec *qpRecord, w *ring.SendWQE, n uint64, need verbsio.Access, r *remoteRef) bool {
	if verbsio.Access(rec.access.Load())&need != need {
		return false
	}
	return p.acquire(w.RKey, w.RAddr, n, need, rec.pd.Load(), r)
}

func (s *shmQP) runWrite(pos uint32, w *ring.SendWQE, p *peer, rec *qpRecord, reliable bool) (verbsio.Status, uint8) {
	q := s.q
	total, n, st := q.gather(pos, w)
	if st != verbsio.StatusSuccess {
		return st, waitNone
	}
	imm := verbsio.Opcode(w.Opcode) == verbsio.OpRDMAWriteImm
	if imm && !s.recvOK {
		if s.recv, s.recvOK = p.resolveRecv(rec); !s.recvOK {
			return verbsio.StatusRemOpErr, waitNone
		}
	}
	r := &s.refs[0]
	if total > 0 {
		if !remoteAccess(p, rec, w, total, verbsio.AccessRemoteWrite, r) {
			if reliable {
				return verbsio.StatusRemAccessErr, waitNone
			}
			return verbsio.StatusSuccess, waitNone
		}
	}
	var recvID uint64
	if imm {
		id, _, ok := s.recv.rq.Claim(q.rsges)
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
				if err := p.proc.WriteAt(addr, q.src[i], s.iov, s.riov); err != nil {
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
		s.recv.cq.Push(&e, q.ctx.pid)
	}
	return verbsio.StatusSuccess, waitNone
}

// deliver performs a SEND into the receive target t: it claims a receive
// WQE, checks its buffers as the receiver's HCA would, copies and produces
// the receive completion. UD sends (ud) put a GRH in the first 40 bytes.
func (s *shmQP) deliver(pos uint32, w *ring.SendWQE, p *peer, t recvTarget, reliable, ud bool) (verbsio.Status, uint8) {
	q := s.q
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
		sg := &q.rsges[i]
		if sg.Length == 0 {
			continue
		}
		if !p.acquire(sg.LKey, sg.Addr, uint64(sg.Length), verbsio.AccessLocalWrite, t.pd, &s.refs[nrefs]) {
			releaseAll(s.refs[:nrefs])
			return fail(verbsio.StatusLocProtErr, verbsio.StatusRemOpErr)
		}
		nrefs++
		capTotal += uint64(sg.Length)
	}
	if capTotal < need {
		releaseAll(s.refs[:nrefs])
		return fail(verbsio.StatusLocLenErr, verbsio.StatusRemInvReqErr)
	}
	srcs := q.src[:n]
	if ud {
		s.fillGRH(&s.grh, p, total)
	}
	if !s.copyOut(p, s.refs[:nrefs], s.grh[:], ud, srcs) {
		releaseAll(s.refs[:nrefs])
		return fail(verbsio.StatusLocProtErr, verbsio.StatusRemOpErr)
	}
	releaseAll(s.refs[:nrefs])
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
func (s *shmQP) copyOut(p *peer, dsts []remoteRef, grh []byte, withGRH bool, srcs [][]byte) bool {
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
			} else if err := p.proc.WriteAt(d.addr+doff, b[:k], s.iov, s.riov); err != nil {
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
	for _, src := range srcs {
		if !put(src) {
			return false
		}
	}
	return true
}

// fillGRH writes the GRH a UD receiver finds before the payload: IPv6-style
// version 6, payload length, next header 0x1b, hop limit, source and
// destination GIDs.
func (s *shmQP) fillGRH(g *[grhSize]byte, p *peer, payload uint64) {
	q := s.q
	g[0] = 6 << 4
	binary.BigEndian.PutUint16(g[4:], uint16(payload))
	g[6] = 0x1b
	g[7] = 64
	copy(g[8:24], q.ctx.gid[:])
	copy(g[24:40], p.gid[:])
}

func (s *shmQP) runRead(pos uint32, w *ring.SendWQE, p *peer, rec *qpRecord) verbsio.Status {
	q := s.q
	total, n, st := q.scatterLocal(pos, w)
	if st != verbsio.StatusSuccess {
		return st
	}
	if total == 0 {
		return verbsio.StatusSuccess
	}
	r := &s.refs[0]
	if !remoteAccess(p, rec, w, total, verbsio.AccessRemoteRead, r) {
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
		if err := p.proc.ReadAt(q.src[i], addr, s.iov, s.riov); err != nil {
			return verbsio.StatusRemAccessErr
		}
		addr += uint64(len(q.src[i]))
	}
	return verbsio.StatusSuccess
}

func (s *shmQP) runAtomic(pos uint32, w *ring.SendWQE, p *peer, rec *qpRecord) verbsio.Status {
	q := s.q
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
	r := &s.refs[0]
	if !remoteAccess(p, rec, w, 8, verbsio.AccessRemoteAtomic, r) {
		return verbsio.StatusRemAccessErr
	}
	defer r.release()
	mem := r.mem
	if mem == nil || uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return verbsio.StatusRemOpErr
	}
	var old uint64
	if verbsio.Opcode(w.Opcode) == verbsio.OpAtomicCmpSwp {
		old = compareSwap(mem, w.CompareAdd, w.Swap)
	} else {
		old = fetchAdd(mem, w.CompareAdd)
	}
	binary.LittleEndian.PutUint64(q.src[0], old)
	return verbsio.StatusSuccess
}

// runUD executes a UD send: resolve the address handle, the destination QP
// and its receive target on every request.
func (s *shmQP) runUD(pos uint32, w *ring.SendWQE) (verbsio.Status, uint8) {
	q := s.q
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
	return s.deliver(pos, w, p, t, false, true)
}
