package soft

import (
	"net/netip"
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

// onRequest handles a request packet for the QP.
func (u *udpQP) onRequest(p *roce.Packet, from netip.AddrPort) {
	q := u.q
	if !receiving(uint32(q.state)) {
		return
	}
	switch q.typ {
	case verbsio.QPTypeUD:
		u.udRecv(p, from)
		return
	case verbsio.QPTypeRC, verbsio.QPTypeUC:
		if !fromPeer(from, u.path.to) {
			u.f.cnt.wrongPeer.Add(1)
			return
		}
		if u.commEst {
			u.established()
		}
	}
	if p.BTH.Opcode.Transport() != roce.Transport(transportBase(q.typ)) {
		u.f.cnt.malformed.Add(1)
		return
	}
	if q.typ == verbsio.QPTypeUC {
		u.ucRecv(p)
		return
	}
	u.rcRecv(p)
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
func (u *udpQP) rcRecv(p *roce.Packet) {
	q := u.q
	ps := p.BTH.PSN
	op := p.BTH.Opcode &^ 0xe0
	if ps != u.ePSN {
		if psn.Diff(u.ePSN, ps) < 0 {
			u.duplicate(p, op)
			return
		}
		u.f.cnt.outOfSeq.Add(1)
		if !u.nakSent {
			u.nakSent = true
			u.f.cnt.nakSent.Add(1)
			u.sendAck(roce.NAKSyndrome(roce.NAKPSNSequenceError), u.ePSN)
		}
		return
	}
	switch op {
	case roce.RCSendFirst, roce.RCSendOnly, roce.RCSendOnlyImm, roce.RCSendMiddle, roce.RCSendLast, roce.RCSendLastImm:
		first := op == roce.RCSendFirst || op == roce.RCSendOnly || op == roce.RCSendOnlyImm
		last := op != roce.RCSendFirst && op != roce.RCSendMiddle
		if first {
			if u.rcv.active {
				u.nak(roce.NAKInvalidRequest)
				return
			}
			if !u.claimRecv() {
				u.f.cnt.rnrNakSent.Add(1)
				u.sendAck(roce.RNRNAKSyndrome(q.attr.MinRNRTimer), ps)
				return
			}
		} else if !u.rcv.active {
			u.nak(roce.NAKInvalidRequest)
			return
		}
		if st := u.placeRecv(p.Payload); st != verbsio.StatusSuccess {
			u.recvError(st)
			if st == verbsio.StatusLocLenErr {
				u.nak(roce.NAKInvalidRequest)
			} else {
				u.nak(roce.NAKRemoteOperationalErr)
			}
			return
		}
		if last {
			u.finishRecv(p, verbsio.WCRecv)
		}
	case roce.RCWriteFirst, roce.RCWriteOnly, roce.RCWriteOnlyImm:
		if !u.startWrite(&p.RETH) {
			u.nak(roce.NAKRemoteAccessError)
			return
		}
		if op == roce.RCWriteOnlyImm && !u.rcv.active && !u.claimRecv() {
			u.f.cnt.rnrNakSent.Add(1)
			u.sendAck(roce.RNRNAKSyndrome(q.attr.MinRNRTimer), ps)
			return
		}
		if !u.placeWrite(p.Payload) {
			u.nak(roce.NAKInvalidRequest)
			return
		}
		if op != roce.RCWriteFirst {
			u.endWrite(p, op == roce.RCWriteOnlyImm)
		}
	case roce.RCWriteMiddle, roce.RCWriteLast, roce.RCWriteLastImm:
		if !u.wr.active {
			u.nak(roce.NAKInvalidRequest)
			return
		}
		if op == roce.RCWriteLastImm && !u.rcv.active && !u.claimRecv() {
			u.f.cnt.rnrNakSent.Add(1)
			u.sendAck(roce.RNRNAKSyndrome(q.attr.MinRNRTimer), ps)
			return
		}
		if !u.placeWrite(p.Payload) {
			u.nak(roce.NAKInvalidRequest)
			return
		}
		if op != roce.RCWriteMiddle {
			u.endWrite(p, op == roce.RCWriteLastImm)
		}
	case roce.RCReadRequest:
		if !u.startRead(ps, &p.RETH) {
			return
		}
		u.msn++
		u.ePSN = u.ePSN.Add(npackets(uint64(p.RETH.DMALen), u.mtu))
		u.nakSent = false
		return
	case roce.RCCompareSwap, roce.RCFetchAdd:
		orig, st := u.doAtomic(op, &p.AtomicETH)
		if st != 0 {
			u.nak(st)
			return
		}
		u.rememberAtomic(ps, orig)
		u.msn++
		u.ePSN = u.ePSN.Next()
		u.nakSent = false
		u.sendAtomicAck(ps, orig)
		return
	default:
		u.nak(roce.NAKInvalidRequest)
		return
	}
	u.ePSN = u.ePSN.Next()
	u.nakSent = false
	if p.BTH.AckReq {
		u.owe()
	}
}

// duplicate answers a request the responder has already executed.
func (u *udpQP) duplicate(p *roce.Packet, op roce.Opcode) {
	u.f.cnt.duplicates.Add(1)
	switch op {
	case roce.RCReadRequest:
		u.startRead(p.BTH.PSN, &p.RETH) // READs are executed again
	case roce.RCCompareSwap, roce.RCFetchAdd:
		for _, a := range u.atoms {
			if a.valid && a.psn == p.BTH.PSN {
				u.sendAtomicAck(a.psn, a.orig)
				return
			}
		}
		// Too old to be in the cache: it completed long ago.
	default:
		if p.BTH.AckReq {
			u.sendAck(roce.ACKSyndrome(0x1f), u.ePSN.Add(-1))
		}
	}
}

// owe schedules a coalesced acknowledgement after the current batch.
func (u *udpQP) owe() {
	if !u.ackDue {
		u.ackDue = true
		u.f.ackQ = append(u.f.ackQ, u)
	}
}

// nak sends a NAK for the expected PSN.
func (u *udpQP) nak(code roce.NAKCode) {
	u.f.cnt.nakSent.Add(1)
	u.sendAck(roce.NAKSyndrome(code), u.ePSN)
}

// sendAck sends an ACKNOWLEDGE with syndrome syn for PSN p.
func (u *udpQP) sendAck(syn roce.Syndrome, p psn.PSN) {
	q := u.q
	t := u.header(roce.RCAck, p, false, q.destQPN)
	t.AETH = roce.AETH{Syndrome: syn, MSN: u.msn & 0xffffff}
	u.sendControl(&u.path)
	u.f.cnt.acksSent.Add(1)
}

func (u *udpQP) sendAtomicAck(p psn.PSN, orig uint64) {
	q := u.q
	t := u.header(roce.RCAtomicAck, p, false, q.destQPN)
	t.AETH = roce.AETH{Syndrome: roce.ACKSyndrome(0x1f), MSN: u.msn & 0xffffff}
	t.AtomicAckETH = roce.AtomicAckETH{OrigData: orig}
	u.sendControl(&u.path)
}

// claimRecv takes the next receive WQE (own RQ or SRQ) for a message.
func (u *udpQP) claimRecv() bool {
	q := u.q
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
func (u *udpQP) placeRecv(b []byte) verbsio.Status {
	q := u.q
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
		m := q.localMR(s.LKey, verbsio.AccessLocalWrite)
		if m == nil {
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
func (u *udpQP) finishRecv(p *roce.Packet, op verbsio.WCOpcode) {
	q := u.q
	e := ring.CQE{WRID: u.rcv.id, Opcode: uint8(op), ByteLen: uint32(u.rcv.off), QPN: q.qpn, SrcQP: q.destQPN}
	if p.BTH.Opcode.HasImm() {
		e.Imm = immFromWire(p.ImmDt.Data)
		e.Flags = uint8(verbsio.WCWithImm)
	}
	q.recvCQ.ring.Push(&e, q.ctx.pid)
	u.rcv.active = false
	u.msn++
}

// recvError completes the current receive WQE with st.
func (u *udpQP) recvError(st verbsio.Status) {
	q := u.q
	e := ring.CQE{WRID: u.rcv.id, Status: uint8(st), Opcode: uint8(verbsio.WCRecv), QPN: q.qpn, SrcQP: q.destQPN}
	q.recvCQ.ring.Push(&e, q.ctx.pid)
	u.rcv.active = false
}

// startWrite checks an incoming RDMA WRITE's RETH and remembers where it
// goes.
func (u *udpQP) startWrite(h *roce.RETH) bool {
	u.wr.active = false
	if h.DMALen == 0 {
		u.wr.active, u.wr.mem, u.wr.off = true, nil, 0
		return true
	}
	mem, ok := u.q.localTarget(h.RKey, h.VA, uint64(h.DMALen), verbsio.AccessRemoteWrite)
	if !ok {
		return false
	}
	u.wr.active, u.wr.mem, u.wr.off = true, mem, 0
	return true
}

func (u *udpQP) placeWrite(b []byte) bool {
	if u.wr.off+len(b) > len(u.wr.mem) {
		return false
	}
	u.wr.off += copy(u.wr.mem[u.wr.off:], b)
	return true
}

// endWrite finishes an RDMA WRITE; with immediate data it completes a
// receive WQE.
func (u *udpQP) endWrite(p *roce.Packet, imm bool) {
	q := u.q
	n := u.wr.off
	u.wr.active = false
	u.msn++
	if imm {
		e := ring.CQE{WRID: u.rcv.id, Opcode: uint8(verbsio.WCRecvRDMAWithImm), ByteLen: uint32(n), Imm: immFromWire(p.ImmDt.Data),
			QPN: q.qpn, SrcQP: q.destQPN, Flags: uint8(verbsio.WCWithImm)}
		q.recvCQ.ring.Push(&e, q.ctx.pid)
		u.rcv.active = false
	}
}

// startRead queues a READ for response (also for a duplicate request).
func (u *udpQP) startRead(first psn.PSN, h *roce.RETH) bool {
	q := u.q
	var mem []byte
	if h.DMALen > 0 {
		var ok bool
		if mem, ok = u.q.localTarget(h.RKey, h.VA, uint64(h.DMALen), verbsio.AccessRemoteRead); !ok {
			u.nak(roce.NAKRemoteAccessError)
			return false
		}
	}
	if u.rdN == len(u.rdq) || u.rdN >= max(int(q.attr.MaxDestRdAtomic), 1)*4 {
		u.nak(roce.NAKInvalidRequest)
		return false
	}
	j := &u.rdq[(u.rdHd+u.rdN)%len(u.rdq)]
	*j = readJob{first: first, data: mem, npkt: npackets(uint64(h.DMALen), u.mtu)}
	u.rdN++
	u.f.activate(u)
	u.sendReadResponses()
	return true
}

// sendReadResponses transmits queued READ responses, a bounded number per
// call so one large READ does not starve the rest.
func (u *udpQP) sendReadResponses() {
	q := u.q
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
			t := u.header(op, j.first.Add(i), false, q.destQPN)
			if op.Layout().Has(roce.ExtAETH) {
				t.AETH = roce.AETH{Syndrome: roce.ACKSyndrome(0x1f), MSN: u.msn & 0xffffff}
			}
			u.rdSrc[0] = j.data
			u.sendPacket(&u.path, u.rdSrc[:], uint64(off), n, true)
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
func (u *udpQP) doAtomic(op roce.Opcode, h *roce.AtomicETH) (uint64, roce.NAKCode) {
	if h.VA%8 != 0 {
		return 0, roce.NAKInvalidRequest
	}
	mem, ok := u.q.localTarget(h.RKey, h.VA, 8, verbsio.AccessRemoteAtomic)
	if !ok {
		return 0, roce.NAKRemoteAccessError
	}
	if uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return 0, roce.NAKRemoteOperationalErr
	}
	if op == roce.RCFetchAdd {
		return fetchAdd(mem, h.SwapAdd), 0
	}
	return compareSwap(mem, h.Compare, h.SwapAdd), 0
}

func (u *udpQP) rememberAtomic(p psn.PSN, orig uint64) {
	u.atoms[u.atomI] = atomEntry{psn: p, valid: true, orig: orig}
	u.atomI = (u.atomI + 1) % len(u.atoms)
}

// ucRecv is the UC responder: no acknowledgements; a PSN gap drops the
// message in progress.
func (u *udpQP) ucRecv(p *roce.Packet) {
	ps := p.BTH.PSN
	op := p.BTH.Opcode &^ 0xe0
	if ps != u.ePSN {
		u.f.cnt.outOfSeq.Add(1)
		u.wr.active = false
		if u.rcv.active {
			u.rcv.off = 0 // the WQE is reused by the next message
		}
	}
	u.ePSN = ps.Next()
	switch op {
	case roce.RCSendFirst, roce.RCSendOnly, roce.RCSendOnlyImm:
		if !u.rcv.active && !u.claimRecv() {
			return // dropped
		}
		u.rcv.off = 0
		fallthrough
	case roce.RCSendMiddle, roce.RCSendLast, roce.RCSendLastImm:
		if !u.rcv.active {
			return
		}
		if st := u.placeRecv(p.Payload); st != verbsio.StatusSuccess {
			u.recvError(st)
			return
		}
		if op != roce.RCSendFirst && op != roce.RCSendMiddle {
			u.finishRecv(p, verbsio.WCRecv)
		}
	case roce.RCWriteFirst, roce.RCWriteOnly, roce.RCWriteOnlyImm:
		if !u.startWrite(&p.RETH) {
			return
		}
		fallthrough
	case roce.RCWriteMiddle, roce.RCWriteLast, roce.RCWriteLastImm:
		if !u.wr.active || !u.placeWrite(p.Payload) {
			u.wr.active = false
			return
		}
		imm := op == roce.RCWriteOnlyImm || op == roce.RCWriteLastImm
		if op == roce.RCWriteFirst || op == roce.RCWriteMiddle {
			return
		}
		if imm && !u.rcv.active && !u.claimRecv() {
			u.wr.active = false
			return
		}
		u.endWrite(p, imm)
	}
}

// udRecv is the UD responder: a Q_Key check, a receive WQE, a GRH.
func (u *udpQP) udRecv(p *roce.Packet, from netip.AddrPort) {
	q := u.q
	if p.BTH.Opcode.Transport() != roce.Transport(0x60) || p.DETH.QKey != q.attr.QKey {
		u.f.cnt.malformed.Add(1)
		return
	}
	if !u.claimRecv() {
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
	st := u.placeRecv(grh[:])
	if st == verbsio.StatusSuccess {
		st = u.placeRecv(p.Payload)
	}
	if st != verbsio.StatusSuccess {
		u.recvError(st)
		return
	}
	e := ring.CQE{WRID: u.rcv.id, Opcode: uint8(verbsio.WCRecv), ByteLen: uint32(u.rcv.off), QPN: q.qpn,
		SrcQP: p.DETH.SrcQP, Flags: uint8(verbsio.WCWithGRH)}
	if p.BTH.Opcode.HasImm() {
		e.Imm = immFromWire(p.ImmDt.Data)
		e.Flags |= uint8(verbsio.WCWithImm)
	}
	q.recvCQ.ring.Push(&e, q.ctx.pid)
	u.rcv.active = false
}
