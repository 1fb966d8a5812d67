package soft

import (
	"net/netip"
	"sync/atomic"
	"unsafe"

	"github.com/rperf/rperf/internal/psn"
	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
)

// The responder side of the udp fabric: requests arrive in PSN order (RC
// drops and NAKs what is out of order), write into this context's own
// registered memory after the same checks as the shm fabric, consume
// receive WQEs, and are acknowledged (coalesced per received batch, and on
// AckReq). Duplicates are answered without being applied twice: SEND and
// WRITE are re-acknowledged, READ is executed again, atomics are answered
// from a cache of recent results.

// udpOnRequest handles a request packet for q.
func (q *qp) udpOnRequest(p *roce.Packet, from netip.AddrPort) {
	u := q.u
	if !receiving(uint32(q.state)) {
		return
	}
	switch q.typ {
	case verbsio.QPTypeUD:
		q.udRecv(p, from)
		return
	case verbsio.QPTypeRC, verbsio.QPTypeUC:
		if !fromPeer(from, u.path.to) {
			u.f.c.wrongPeer.Add(1)
			return
		}
	}
	if p.BTH.Opcode.Transport() != roce.Transport(transportBase(q.typ)) {
		u.f.c.malformed.Add(1)
		return
	}
	if q.typ == verbsio.QPTypeUC {
		q.ucRecv(p)
		return
	}
	q.rcRecv(p)
}

func transportBase(t verbsio.QPType) roce.Opcode {
	switch t {
	case verbsio.QPTypeUC:
		return 0x20
	case verbsio.QPTypeUD:
		return 0x60
	}
	return 0
}

// rcRecv is the RC responder.
func (q *qp) rcRecv(p *roce.Packet) {
	u := q.u
	ps := p.BTH.PSN
	op := p.BTH.Opcode &^ 0xe0
	if ps != u.ePSN {
		if psn.Diff(u.ePSN, ps) < 0 {
			q.duplicate(p, op)
			return
		}
		u.f.c.outOfSeq.Add(1)
		if !u.nakSent {
			u.nakSent = true
			u.f.c.nakSent.Add(1)
			q.sendAck(roce.NAKSyndrome(roce.NAKPSNSequenceError), u.ePSN)
		}
		return
	}
	switch op {
	case roce.RCSendFirst, roce.RCSendOnly, roce.RCSendOnlyImm, roce.RCSendMiddle, roce.RCSendLast, roce.RCSendLastImm:
		first := op == roce.RCSendFirst || op == roce.RCSendOnly || op == roce.RCSendOnlyImm
		last := op != roce.RCSendFirst && op != roce.RCSendMiddle
		if first {
			if u.rcv.active {
				q.nak(roce.NAKInvalidRequest)
				return
			}
			if !q.claimRecv() {
				u.f.c.rnrNakSent.Add(1)
				q.sendAck(roce.RNRNAKSyndrome(q.attr.MinRNRTimer), ps)
				return
			}
		} else if !u.rcv.active {
			q.nak(roce.NAKInvalidRequest)
			return
		}
		if st := q.placeRecv(p.Payload); st != verbsio.StatusSuccess {
			q.recvError(st)
			if st == verbsio.StatusLocLenErr {
				q.nak(roce.NAKInvalidRequest)
			} else {
				q.nak(roce.NAKRemoteOperationalErr)
			}
			return
		}
		if last {
			q.finishRecv(p, verbsio.WCRecv)
		}
	case roce.RCWriteFirst, roce.RCWriteOnly, roce.RCWriteOnlyImm:
		if !q.startWrite(&p.RETH) {
			q.nak(roce.NAKRemoteAccessError)
			return
		}
		if op == roce.RCWriteOnlyImm && !u.rcv.active && !q.claimRecv() {
			u.f.c.rnrNakSent.Add(1)
			q.sendAck(roce.RNRNAKSyndrome(q.attr.MinRNRTimer), ps)
			return
		}
		if !q.placeWrite(p.Payload) {
			q.nak(roce.NAKInvalidRequest)
			return
		}
		if op != roce.RCWriteFirst {
			q.endWrite(p, op == roce.RCWriteOnlyImm)
		}
	case roce.RCWriteMiddle, roce.RCWriteLast, roce.RCWriteLastImm:
		if !u.wr.active {
			q.nak(roce.NAKInvalidRequest)
			return
		}
		if op == roce.RCWriteLastImm && !u.rcv.active && !q.claimRecv() {
			u.f.c.rnrNakSent.Add(1)
			q.sendAck(roce.RNRNAKSyndrome(q.attr.MinRNRTimer), ps)
			return
		}
		if !q.placeWrite(p.Payload) {
			q.nak(roce.NAKInvalidRequest)
			return
		}
		if op != roce.RCWriteMiddle {
			q.endWrite(p, op == roce.RCWriteLastImm)
		}
	case roce.RCReadRequest:
		if !q.startRead(ps, &p.RETH) {
			return
		}
		u.msn++
		u.ePSN = u.ePSN.Add(npackets(uint64(p.RETH.DMALen), u.mtu))
		u.nakSent = false
		return
	case roce.RCCompareSwap, roce.RCFetchAdd:
		orig, st := q.doAtomic(op, &p.AtomicETH)
		if st != 0 {
			q.nak(st)
			return
		}
		q.rememberAtomic(ps, orig)
		u.msn++
		u.ePSN = u.ePSN.Next()
		u.nakSent = false
		q.sendAtomicAck(ps, orig)
		return
	default:
		q.nak(roce.NAKInvalidRequest)
		return
	}
	u.ePSN = u.ePSN.Next()
	u.nakSent = false
	if p.BTH.AckReq {
		q.owe()
	}
}

// duplicate answers a request the responder has already executed.
func (q *qp) duplicate(p *roce.Packet, op roce.Opcode) {
	u := q.u
	u.f.c.duplicates.Add(1)
	switch op {
	case roce.RCReadRequest:
		q.startRead(p.BTH.PSN, &p.RETH) // READs are executed again
	case roce.RCCompareSwap, roce.RCFetchAdd:
		for _, a := range u.atoms {
			if a.valid && a.psn == p.BTH.PSN {
				q.sendAtomicAck(a.psn, a.orig)
				return
			}
		}
		// Too old to be in the cache: it completed long ago.
	default:
		if p.BTH.AckReq {
			q.sendAck(roce.ACKSyndrome(0x1f), u.ePSN.Add(-1))
		}
	}
}

// owe schedules a coalesced acknowledgement after the current batch.
func (q *qp) owe() {
	u := q.u
	if !u.ackDue {
		u.ackDue = true
		u.f.ackQ = append(u.f.ackQ, q)
	}
}

// nak sends a NAK for the expected PSN.
func (q *qp) nak(code roce.NAKCode) {
	q.u.f.c.nakSent.Add(1)
	q.sendAck(roce.NAKSyndrome(code), q.u.ePSN)
}

// sendAck sends an ACKNOWLEDGE with syndrome syn for PSN p.
func (q *qp) sendAck(syn roce.Syndrome, p psn.PSN) {
	u := q.u
	t := q.header(roce.RCAck, p, false, q.destQPN)
	t.AETH = roce.AETH{Syndrome: syn, MSN: u.msn & 0xffffff}
	q.sendControl(&u.path)
	u.f.c.acksSent.Add(1)
}

func (q *qp) sendAtomicAck(p psn.PSN, orig uint64) {
	u := q.u
	t := q.header(roce.RCAtomicAck, p, false, q.destQPN)
	t.AETH = roce.AETH{Syndrome: roce.ACKSyndrome(0x1f), MSN: u.msn & 0xffffff}
	t.AtomicAckETH = roce.AtomicAckETH{OrigData: orig}
	q.sendControl(&u.path)
}

// claimRecv takes the next receive WQE (own RQ or SRQ) for a message.
func (q *qp) claimRecv() bool {
	u := q.u
	rq := q.rq
	if q.srq != nil {
		rq = q.srq.rq
	}
	id, n, ok := rq.Claim(u.rcv.sges[:])
	if !ok {
		return false
	}
	u.rcv.active, u.rcv.id, u.rcv.n, u.rcv.off = true, id, n, 0
	return true
}

// placeRecv scatters payload into the current receive WQE's buffers,
// checking each buffer's key, bounds, LOCAL_WRITE and PD.
func (q *qp) placeRecv(b []byte) verbsio.Status {
	u := q.u
	if u.rcv.n < 0 {
		return verbsio.StatusLocQPOpErr
	}
	off := u.rcv.off
	u.rcv.off += uint64(len(b))
	for i := 0; i < u.rcv.n && len(b) > 0; i++ {
		s := &u.rcv.sges[i]
		if off >= uint64(s.Length) {
			off -= uint64(s.Length)
			continue
		}
		m := q.ctx.lookupLocal(s.LKey)
		if m == nil || m.pd != q.pd || m.access&verbsio.AccessLocalWrite == 0 {
			return verbsio.StatusLocProtErr
		}
		dst, ok := m.slice(s.Addr, s.Length)
		if !ok {
			return verbsio.StatusLocProtErr
		}
		k := copy(dst[off:], b)
		b = b[k:]
		off = 0
	}
	if len(b) > 0 {
		return verbsio.StatusLocLenErr
	}
	return verbsio.StatusSuccess
}

// finishRecv completes the current receive WQE.
func (q *qp) finishRecv(p *roce.Packet, op verbsio.WCOpcode) {
	u := q.u
	e := ring.CQE{WRID: u.rcv.id, Opcode: uint8(op), ByteLen: uint32(u.rcv.off), QPN: q.qpn, SrcQP: q.destQPN}
	if p.BTH.Opcode.HasImm() {
		e.Imm = p.ImmDt.Data
		e.Flags = uint8(verbsio.WCWithImm)
	}
	q.recvCQ.ring.Push(&e, q.ctx.pid)
	u.rcv.active = false
	u.msn++
}

// recvError completes the current receive WQE with st.
func (q *qp) recvError(st verbsio.Status) {
	u := q.u
	e := ring.CQE{WRID: u.rcv.id, Status: uint8(st), Opcode: uint8(verbsio.WCRecv), QPN: q.qpn, SrcQP: q.destQPN}
	q.recvCQ.ring.Push(&e, q.ctx.pid)
	u.rcv.active = false
}

// startWrite checks an incoming RDMA WRITE's RETH and remembers where it
// goes.
func (q *qp) startWrite(h *roce.RETH) bool {
	u := q.u
	u.wr.active = false
	if h.DMALen == 0 {
		u.wr.active, u.wr.mem, u.wr.off = true, nil, 0
		return true
	}
	mem, ok := q.localTarget(h.RKey, h.VA, uint64(h.DMALen), verbsio.AccessRemoteWrite)
	if !ok {
		return false
	}
	u.wr.active, u.wr.mem, u.wr.off = true, mem, 0
	return true
}

// localTarget resolves a peer's access to this context's memory: the QP's
// access flags, then the region's key, rights, PD and bounds.
func (q *qp) localTarget(key uint32, va, n uint64, need verbsio.Access) ([]byte, bool) {
	if q.attr.AccessFlags&need != need {
		return nil, false
	}
	m := q.ctx.lookupLocal(key)
	if m == nil || m.pd != q.pd || m.access&need != need || n > 1<<32 {
		return nil, false
	}
	return m.slice(va, uint32(n))
}

func (q *qp) placeWrite(b []byte) bool {
	u := q.u
	if u.wr.off+len(b) > len(u.wr.mem) {
		return false
	}
	u.wr.off += copy(u.wr.mem[u.wr.off:], b)
	return true
}

// endWrite finishes an RDMA WRITE; with immediate data it completes a
// receive WQE.
func (q *qp) endWrite(p *roce.Packet, imm bool) {
	u := q.u
	n := u.wr.off
	u.wr.active = false
	u.msn++
	if imm {
		e := ring.CQE{WRID: u.rcv.id, Opcode: uint8(verbsio.WCRecvRDMAWithImm), ByteLen: uint32(n), Imm: p.ImmDt.Data,
			QPN: q.qpn, SrcQP: q.destQPN, Flags: uint8(verbsio.WCWithImm)}
		q.recvCQ.ring.Push(&e, q.ctx.pid)
		u.rcv.active = false
	}
}

// startRead queues a READ for response (also for a duplicate request).
func (q *qp) startRead(first psn.PSN, h *roce.RETH) bool {
	u := q.u
	var mem []byte
	if h.DMALen > 0 {
		var ok bool
		if mem, ok = q.localTarget(h.RKey, h.VA, uint64(h.DMALen), verbsio.AccessRemoteRead); !ok {
			q.nak(roce.NAKRemoteAccessError)
			return false
		}
	}
	if u.rdN == len(u.rdq) || u.rdN >= max(int(q.attr.MaxDestRdAtomic), 1)*4 {
		q.nak(roce.NAKInvalidRequest)
		return false
	}
	j := &u.rdq[(u.rdHd+u.rdN)%len(u.rdq)]
	*j = readJob{first: first, data: mem, npkt: npackets(uint64(h.DMALen), u.mtu)}
	u.rdN++
	u.f.activate(q)
	q.sendReadResponses()
	return true
}

// sendReadResponses transmits queued READ responses, a bounded number per
// call so one large READ does not starve the rest.
func (q *qp) sendReadResponses() {
	u := q.u
	budget := 256
	for u.rdN > 0 && budget > 0 {
		j := &u.rdq[u.rdHd]
		for j.next < j.npkt && budget > 0 {
			i := j.next
			off := i * u.mtu
			n := min(u.mtu, len(j.data)-min(len(j.data), off))
			var op roce.Opcode
			switch {
			case j.npkt == 1:
				op = roce.RCReadResponseOnly
			case i == 0:
				op = roce.RCReadResponseFirst
			case i == j.npkt-1:
				op = roce.RCReadResponseLast
			default:
				op = roce.RCReadResponseMiddle
			}
			t := q.header(op, j.first.Add(i), false, q.destQPN)
			if op.Layout().Has(roce.ExtAETH) {
				t.AETH = roce.AETH{Syndrome: roce.ACKSyndrome(0x1f), MSN: u.msn & 0xffffff}
			}
			q.u.rdSrc[0] = j.data
			q.sendPacket(&u.path, q.u.rdSrc[:], uint64(off), n, true)
			j.next++
			budget--
		}
		if j.next == j.npkt {
			j.data = nil
			u.rdHd = (u.rdHd + 1) % len(u.rdq)
			u.rdN--
		}
	}
}

// doAtomic executes an atomic on this context's memory.
func (q *qp) doAtomic(op roce.Opcode, h *roce.AtomicETH) (uint64, roce.NAKCode) {
	if h.VA%8 != 0 {
		return 0, roce.NAKInvalidRequest
	}
	mem, ok := q.localTarget(h.RKey, h.VA, 8, verbsio.AccessRemoteAtomic)
	if !ok {
		return 0, roce.NAKRemoteAccessError
	}
	if uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return 0, roce.NAKRemoteOperationalErr
	}
	ptr := (*uint64)(unsafe.Pointer(&mem[0]))
	if op == roce.RCFetchAdd {
		return atomic.AddUint64(ptr, h.SwapAdd) - h.SwapAdd, 0
	}
	for {
		cur := atomic.LoadUint64(ptr)
		if cur != h.Compare || atomic.CompareAndSwapUint64(ptr, cur, h.SwapAdd) {
			return cur, 0
		}
	}
}

func (q *qp) rememberAtomic(p psn.PSN, orig uint64) {
	u := q.u
	u.atoms[u.atomI] = atomEntry{psn: p, valid: true, orig: orig}
	u.atomI = (u.atomI + 1) % len(u.atoms)
}

// ucRecv is the UC responder: no acknowledgements; a PSN gap drops the
// message in progress.
func (q *qp) ucRecv(p *roce.Packet) {
	u := q.u
	ps := p.BTH.PSN
	op := p.BTH.Opcode &^ 0xe0
	if ps != u.ePSN {
		u.f.c.outOfSeq.Add(1)
		u.wr.active = false
		if u.rcv.active {
			u.rcv.off = 0 // the WQE is reused by the next message
		}
	}
	u.ePSN = ps.Next()
	switch op {
	case roce.RCSendFirst, roce.RCSendOnly, roce.RCSendOnlyImm:
		if !u.rcv.active && !q.claimRecv() {
			return // dropped
		}
		u.rcv.off = 0
		fallthrough
	case roce.RCSendMiddle, roce.RCSendLast, roce.RCSendLastImm:
		if !u.rcv.active {
			return
		}
		if st := q.placeRecv(p.Payload); st != verbsio.StatusSuccess {
			q.recvError(st)
			return
		}
		if op != roce.RCSendFirst && op != roce.RCSendMiddle {
			q.finishRecv(p, verbsio.WCRecv)
		}
	case roce.RCWriteFirst, roce.RCWriteOnly, roce.RCWriteOnlyImm:
		if !q.startWrite(&p.RETH) {
			return
		}
		fallthrough
	case roce.RCWriteMiddle, roce.RCWriteLast, roce.RCWriteLastImm:
		if !u.wr.active || !q.placeWrite(p.Payload) {
			u.wr.active = false
			return
		}
		imm := op == roce.RCWriteOnlyImm || op == roce.RCWriteLastImm
		if op == roce.RCWriteFirst || op == roce.RCWriteMiddle {
			return
		}
		if imm && !u.rcv.active && !q.claimRecv() {
			u.wr.active = false
			return
		}
		q.endWrite(p, imm)
	}
}

// udRecv is the UD responder: a Q_Key check, a receive WQE, a GRH.
func (q *qp) udRecv(p *roce.Packet, from netip.AddrPort) {
	u := q.u
	if p.BTH.Opcode.Transport() != roce.Transport(0x60) || p.DETH.QKey != q.attr.QKey {
		u.f.c.malformed.Add(1)
		return
	}
	if !q.claimRecv() {
		return // dropped: no receive posted
	}
	var grh [grhSize]byte
	grh[0] = 6 << 4
	grh[4], grh[5] = byte(len(p.Payload)>>8), byte(len(p.Payload))
	grh[6], grh[7] = 0x1b, 64
	src := verbsio.GIDFromAddr(from.Addr())
	copy(grh[8:24], src[:])
	dst := verbsio.GIDFromAddr(u.path.conn.LocalAddr().Addr())
	copy(grh[24:40], dst[:])
	st := q.placeRecv(grh[:])
	if st == verbsio.StatusSuccess {
		st = q.placeRecv(p.Payload)
	}
	if st != verbsio.StatusSuccess {
		q.recvError(st)
		return
	}
	e := ring.CQE{WRID: u.rcv.id, Opcode: uint8(verbsio.WCRecv), ByteLen: uint32(u.rcv.off), QPN: q.qpn,
		SrcQP: p.DETH.SrcQP, Flags: uint8(verbsio.WCWithGRH)}
	if p.BTH.Opcode.HasImm() {
		e.Imm = p.ImmDt.Data
		e.Flags |= uint8(verbsio.WCWithImm)
	}
	q.recvCQ.ring.Push(&e, q.ctx.pid)
	u.rcv.active = false
}
