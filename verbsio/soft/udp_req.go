package soft

import (
	"encoding/binary"
	"net/netip"

	"github.com/rperf/rperf/internal/psn"
	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
)

// maxInflight bounds the packets a QP has on the wire unacknowledged;
// minWindow is the least the window shrinks to after losses, and the
// window a QP starts with.
const (
	maxInflight = 2048
	minWindow   = 16
	// initSSThresh ends the first slow start early: doubling up to a
	// first loss overshoots a short queue by as much again, and
	// go-back-N resends all of it.
	initSSThresh = 64
)

// The window (cwnd, in packets) adapts to the peer as TCP's does: it
// starts at minWindow and grows by every packet acknowledged (slow start)
// up to ssthresh (initSSThresh at first), then by one packet per window; a loss (a timeout, a
// sequence NAK, an RNR NAK, a lost READ response) halves it and sets
// ssthresh there. It applies inside a message: a message longer than the
// window leaves as the acknowledgements come back, its packets asking for
// one every quarter window. A slow peer (Soft-RoCE in a VM drops what
// overflows its NIC ring) is thus never sent more than it acknowledged
// lately, and go-back-N resends at most a window.

// The requester side of the udp fabric. sqExec is the oldest WQE not yet
// completed, sendPos the next WQE to put on the wire; WQEs in between are
// on the wire and wait for their acknowledgement or response. Recovery is
// go-back-N: a timeout, a NAK or an RNR NAK rewinds sendPos to the WQE
// holding the PSN to resend.

// execute is the udp fabric's doorbell: it transmits and flushes.
func (u *udpQP) execute() {
	q := u.q
	if q.state == verbsio.QPStateErr {
		q.flushSQ()
		return
	}
	u.transmit()
	u.f.flush()
}

func (u *udpQP) slot(pos uint32) *reqWQE { return &u.req[pos&(u.q.sq.Depth()-1)] }

// onlyOpcode returns the single-packet RoCE opcode of a SEND or RDMA WRITE
// WQE on a QP of type t; roce.Segment cuts longer messages from it.
func onlyOpcode(t verbsio.QPType, op verbsio.Opcode) roce.Opcode {
	if t == verbsio.QPTypeUD {
		if op == verbsio.OpSendImm {
			return roce.UDSendOnlyImm
		}
		return roce.UDSendOnly
	}
	o := roce.RCWriteOnly
	switch op {
	case verbsio.OpSend:
		o = roce.RCSendOnly
	case verbsio.OpSendImm:
		o = roce.RCSendOnlyImm
	case verbsio.OpRDMAWriteImm:
		o = roce.RCWriteOnlyImm
	}
	if t == verbsio.QPTypeUC {
		o += roce.UCSendOnly - roce.RCSendOnly // the same operation in UC's opcode range
	}
	return o
}

func npackets(n uint64, mtu int) int {
	if n == 0 {
		return 1
	}
	return int((n + uint64(mtu) - 1) / uint64(mtu))
}

// maxBackoff bounds the doublings of the retransmission timeout after
// timeouts in a row: with retry count 7 and timeout 14 (67 ms), a peer
// silent for 12.8 s in all (67 ms × (1+2+4+8+16+32+64+64)) is gone.
const maxBackoff = 6

// readPart is the most packets one READ request asks for (sendRead).
const readPart = minWindow

// outstandingReads counts the READ requests and atomics on the wire not
// answered in full: what the responder holds resources for (each part of
// a READ is a request of its own).
func (u *udpQP) outstandingReads() int {
	q := u.q
	n := 0
	for pos := q.sqExec; pos != u.wireEnd(); pos++ {
		op := verbsio.Opcode(q.sq.WQE(pos).Opcode)
		r := u.slot(pos)
		switch {
		case r.done || !r.started:
		case op.IsAtomic():
			n++
		case op == verbsio.OpRDMARead:
			asked := r.end
			if pos == u.sendPos {
				asked = u.sqPSN // partly asked for
			}
			if psn.Diff(r.rdNext, asked) > 0 {
				n += int(r.first.Forward(asked.Add(-1)))/readPart - int(r.first.Forward(r.rdNext))/readPart + 1
			}
		}
	}
	return n
}

// transmit puts WQEs from sendPos on the wire.
func (u *udpQP) transmit() {
	q := u.q
	f := u.f
	if u.rnrUntil != 0 || u.paceAt != 0 {
		return
	}
	for u.sendPos != q.sqPI && !u.rdLoss {
		if u.cwnd == 0 {
			u.cwnd, u.ssthresh = minWindow, initSSThresh
		}
		if q.typ == verbsio.QPTypeRC && !u.forceAck && u.inflight() >= u.cwnd {
			// The window is full. A message that must ask for an
			// acknowledgement (a tail probe, a resend after a timeout)
			// goes anyway: held back, nothing would ever answer.
			break
		}
		pos := u.sendPos
		w := q.sq.WQE(pos)
		r := u.slot(pos)
		op := verbsio.Opcode(w.Opcode)
		if !r.started {
			*r = reqWQE{started: true, first: u.sqPSN}
			if !opcodeOK(q.typ, op) {
				r.done, r.status = true, verbsio.StatusLocQPOpErr
				u.sendPos++
				continue
			}
		}
		if (op == verbsio.OpRDMARead || op.IsAtomic()) && u.outstandingReads() >= max(int(q.attr.MaxRdAtomic), 1) {
			break
		}
		var st verbsio.Status
		switch {
		case op == verbsio.OpRDMARead:
			st = u.sendRead(pos, w, r)
		case op.IsAtomic():
			st = u.sendAtomic(pos, w, r)
		case q.typ == verbsio.QPTypeUD:
			st = u.sendUD(pos, w, r)
		default:
			st = u.sendMessage(pos, w, r)
		}
		if st == statusPaused {
			break
		}
		if st != verbsio.StatusSuccess {
			r.done, r.status = true, st
		}
		u.sendPos++
		u.sendOff = 0
		if q.typ != verbsio.QPTypeRC && !r.done {
			// Unreliable transports complete once on the wire.
			r.done = true
		}
	}
	if q.typ == verbsio.QPTypeRC && q.sqExec != u.wireEnd() {
		if u.deadline == 0 {
			u.arm()
		}
		f.activate(u)
	}
	u.completeDone()
}

// ackEvery is how many messages a requester sends without asking for an
// acknowledgement, unless one is signaled (its completion is wanted now).
// Acknowledgements are datagrams of their own; asking for one per message
// doubles the packets of a stream of small sends.
const ackEvery = 32

// probeDelay is how long unacknowledged messages that asked for no
// acknowledgement wait before the requester asks (it resends their last
// packet with AckReq, a tail probe).
const probeDelay = 200_000

// wantAck decides whether the last packet of the WQE at pos asks for an
// acknowledgement, and records it.
func (u *udpQP) wantAck(pos uint32, p psn.PSN) bool {
	q := u.q
	if q.typ != verbsio.QPTypeRC {
		return false
	}
	w := q.sq.WQE(pos)
	signaled := q.sqSigAll || verbsio.SendFlags(w.Flags)&verbsio.SendSignaled != 0
	nearFull := q.sqPI-q.sqDone >= uint32(q.cap.MaxSendWR)-uint32(q.cap.MaxSendWR)/4
	fills := int(psn.Diff(u.unaPSN(), p))+1 >= u.cwnd // nothing more leaves before an answer
	if !(signaled || u.forceAck || u.recovering || u.sinceAck >= ackEvery || nearFull || fills) {
		u.sinceAck++
		return false
	}
	u.expectAnswer(p)
	u.sinceAck, u.forceAck = 0, false
	return true
}

// expectAnswer records that packet p asks for an answer (an ACK, READ
// responses or an atomic ACK): the retransmission timer now runs.
func (u *udpQP) expectAnswer(p psn.PSN) {
	if !u.ackOut {
		u.ackOut = true
		u.deadline = 0
	}
	u.reqAck = p
}

// arm sets the timer: the retransmission timeout while an answer is
// awaited, the probe delay while only unacknowledged messages wait.
func (u *udpQP) arm() {
	q := u.q
	if q.sqExec == u.wireEnd() {
		u.deadline = 0
		return
	}
	switch {
	case u.ackOut && u.timeout > 0:
		u.deadline = now() + u.timeout<<u.backoff
	case u.ackOut:
		u.deadline = 0 // timeout 0: wait for ever
	default:
		d := int64(probeDelay)
		if u.timeout > 0 && u.timeout < d {
			d = u.timeout
		}
		u.deadline = now() + d
	}
}

// unaPSN is the oldest PSN on the wire not acknowledged: the first of the
// oldest WQE not done, or past it what was acknowledged of it.
func (u *udpQP) unaPSN() psn.PSN {
	q := u.q
	if q.sqExec == u.wireEnd() {
		return u.sqPSN
	}
	r := u.slot(q.sqExec)
	first := r.first
	// Past the first PSN: what was acknowledged of a SEND or WRITE; what
	// arrived of a READ's responses (a later response acknowledges the
	// requests before it, not the READ's own missing ones); nothing of an
	// atomic.
	p := u.acked
	switch op := verbsio.Opcode(q.sq.WQE(q.sqExec).Opcode); {
	case op == verbsio.OpRDMARead:
		p = r.rdNext
	case op.IsAtomic():
		return first
	}
	if psn.Diff(first, p) > 0 && psn.Diff(p, u.sqPSN) >= 0 {
		return p
	}
	return first
}

// inflight is the number of packets on the wire not acknowledged.
func (u *udpQP) inflight() int { return int(psn.Diff(u.unaPSN(), u.sqPSN)) }

// wireEnd is the position after the last WQE with packets on the wire:
// sendPos, or the one after it while the WQE at sendPos is partly sent
// (the window or the pacer holds the rest back, or a resend starts inside
// it).
func (u *udpQP) wireEnd() uint32 {
	if u.sendOff > 0 {
		return u.sendPos + 1
	}
	if u.sendPos != u.q.sqPI {
		// Being sent: its first packets are out.
		if r := u.slot(u.sendPos); r.started && u.sqPSN != r.first {
			return u.sendPos + 1
		}
	}
	return u.sendPos
}

// header fills the transmit packet's BTH.
func (u *udpQP) header(op roce.Opcode, p psn.PSN, ackReq bool, dest uint32) *roce.Packet {
	t := &u.f.tx
	t.BTH = roce.BTH{Opcode: op, PKey: roce.DefaultPKey, DestQP: dest, AckReq: ackReq, PSN: p}
	return t
}

// sendPacket sends the packet whose headers are in f.tx, with the n
// payload bytes at offset off of srcs. A requester's payload is gathered
// in place (the verbs contract keeps a send buffer untouched until its
// completion): the header and the trailer (pad and ICRC) go in the arena,
// the payload stays where it is. A responder's payload (READ responses)
// is memory later requests may change before the batch leaves, so it is
// copied (snapshot). The ICRC is computed for the packet's place in its
// GSO group.
func (u *udpQP) sendPacket(path *udpPath, srcs [][]byte, off uint64, n int, snapshot bool) {
	q := u.q
	f := u.f
	t := &f.tx
	hl := t.BTH.Opcode.Layout().HeaderLen
	pad := roce.PadLen(n)
	size := hl + n + pad + roce.ICRCLen
	copyBytes := 0
	if snapshot {
		copyBytes = n
	}
	id := f.begin(path, size, len(srcs)+2, copyBytes, q.seg != verbsio.SegmentEngine)
	hdr := f.alloc(hl)
	t.EncodeHeaders(hdr, n)
	crc := path.icrcBegin(id, size, hdr)
	f.piece(hdr)
	for _, s := range srcs {
		if n == 0 {
			break
		}
		if off >= uint64(len(s)) {
			off -= uint64(len(s))
			continue
		}
		k := min(uint64(len(s))-off, uint64(n))
		p := s[off : off+k]
		if snapshot {
			c := f.alloc(int(k))
			copy(c, p)
			p = c
		}
		crc = roce.ICRCUpdate(crc, p)
		f.piece(p)
		n -= int(k)
		off = 0
	}
	tr := f.alloc(pad + roce.ICRCLen)
	clear(tr[:pad])
	crc = roce.ICRCUpdate(crc, tr[:pad])
	binary.LittleEndian.PutUint32(tr[pad:], crc)
	f.piece(tr)
}

// sendControl sends the header-only packet in f.tx (ACK, READ request,
// atomic request or ACK).
func (u *udpQP) sendControl(path *udpPath) { u.sendPacket(path, nil, 0, 0, false) }

// sendMessage transmits a SEND or RDMA WRITE from sendOff to its end.
func (u *udpQP) sendMessage(pos uint32, w *ring.SendWQE, r *reqWQE) verbsio.Status {
	q := u.q
	total, nsrc, st := q.gather(pos, w)
	if st != verbsio.StatusSuccess {
		return st
	}
	r.total = total
	op := verbsio.Opcode(w.Opcode)
	seg, err := roce.Segment(onlyOpcode(q.typ, op), int(total), u.mtu)
	if err != nil {
		return verbsio.StatusLocLenErr
	}
	npkt := seg.Packets
	start := int(u.sendOff / uint64(u.mtu))
	r.end = r.first.Add(npkt)
	srcs := q.src[:nsrc]
	var t0 int64
	if q.pace != nil {
		t0 = now()
	}
	rc := q.typ == verbsio.QPTypeRC
	stride := max(u.cwnd/4, 1)
	for i := start; i < npkt; i++ {
		off := uint64(i) * uint64(u.mtu)
		n := int(min(uint64(u.mtu), total-min(total, off)))
		if rc && i > start && u.inflight() >= u.cwnd {
			// The window is full: the rest leaves as acknowledgements
			// come (onResponse transmits), or a timeout resends.
			u.sendOff = off
			return statusPaused
		}
		if q.pace != nil && !q.takePace(uint64(n), t0, &u.paceDue) {
			// Paced: the rest of the message leaves when the bucket
			// refills (tick).
			u.sendOff = off
			u.paceAt = t0 + max(q.pace.Wait(uint64(n), t0), 1)
			u.f.activate(u)
			return statusPaused
		}
		rop, _ := seg.Opcode(i)
		last := i == npkt-1
		var ask bool
		switch {
		case last:
			ask = u.wantAck(pos, u.sqPSN)
		case rc && ((i+1)%stride == 0 || u.inflight()+1 >= u.cwnd):
			// Inside a long message: an acknowledgement every quarter
			// window, and where the window fills, keeps it moving.
			u.expectAnswer(u.sqPSN)
			ask = true
		}
		t := u.header(rop, u.sqPSN, ask, q.destQPN)
		if rop.Layout().Has(roce.ExtRETH) {
			t.RETH = roce.RETH{VA: w.RAddr, RKey: w.RKey, DMALen: uint32(total)}
		}
		if rop.Layout().Has(roce.ExtImmDt) {
			t.ImmDt = roce.ImmDt{Data: immToWire(w.Imm)}
		}
		u.sendPacket(&u.path, srcs, off, n, false)
		u.countSent(1)
		u.sqPSN = u.sqPSN.Next()
	}
	return verbsio.StatusSuccess
}

// countSent counts the request packet at sqPSN, which spans n PSNs (a
// READ request spans its responses): a retransmission when that PSN went
// out before.
func (u *udpQP) countSent(n int) {
	if psn.Diff(u.highPSN, u.sqPSN) < 0 {
		u.f.cnt.retransmitted.Add(1)
	}
	if end := u.sqPSN.Add(n); psn.Diff(u.highPSN, end) > 0 {
		u.highPSN = end
	}
}

// statusPaused is the answer of sendMessage and sendRead when pacing or
// the window holds the rest of a message back (not a completion status).
const statusPaused verbsio.Status = 0xff

// sendRead transmits a READ request for the part not yet received.
func (u *udpQP) sendRead(pos uint32, w *ring.SendWQE, r *reqWQE) verbsio.Status {
	q := u.q
	total, _, st := q.scatterLocal(pos, w)
	if st != verbsio.StatusSuccess {
		return st
	}
	r.total = total
	r.end = r.first.Add(npackets(total, u.mtu))
	if u.sqPSN == r.first {
		r.rdNext = r.first
	}
	done := r.first.Forward(u.sqPSN) // packets asked for already (or answered, after a go-back)
	off := uint64(done) * uint64(u.mtu)
	rest := total - min(total, off)
	// A READ longer than readPart packets is asked for in parts of
	// readPart, each when the window has room: the responder (Soft-RoCE
	// in a VM, say) would otherwise answer with a burst of the whole
	// message. Parts lie on a fixed grid from the first PSN, so a request
	// after a go-back ends where the part it repeats ended: a responder
	// takes a repeated request only within the original one.
	n := npackets(rest, u.mtu)
	part := rest
	if k := readPart - int(done)%readPart; n > k {
		n, part = k, uint64(k)*uint64(u.mtu)
	}
	t := u.header(roce.RCReadRequest, u.sqPSN, true, q.destQPN)
	t.RETH = roce.RETH{VA: w.RAddr + off, RKey: w.RKey, DMALen: uint32(part)}
	u.sendControl(&u.path)
	u.countSent(n)
	u.sqPSN = u.sqPSN.Add(n)
	u.expectAnswer(u.sqPSN.Add(-1))
	// A READ request always asks for an answer: it is the message a
	// timeout wanted sent whatever the window (forceAck). Left set, the
	// window would never bound a stream of READs again, and every
	// timeout would ask a stalled responder for everything outstanding.
	u.forceAck = false
	if part < rest {
		u.sendOff = off + part
		return statusPaused
	}
	return verbsio.StatusSuccess
}

// sendAtomic transmits a COMPARE_SWAP or FETCH_ADD.
func (u *udpQP) sendAtomic(pos uint32, w *ring.SendWQE, r *reqWQE) verbsio.Status {
	q := u.q
	total, n, st := q.scatterLocal(pos, w)
	if st != verbsio.StatusSuccess {
		return st
	}
	if n != 1 || total != 8 {
		return verbsio.StatusLocLenErr
	}
	op := roce.RCFetchAdd
	if verbsio.Opcode(w.Opcode) == verbsio.OpAtomicCmpSwp {
		op = roce.RCCompareSwap
	}
	t := u.header(op, u.sqPSN, true, q.destQPN)
	t.AtomicETH = roce.AtomicETH{VA: w.RAddr, RKey: w.RKey, SwapAdd: w.CompareAdd, Compare: 0}
	if op == roce.RCCompareSwap {
		t.AtomicETH.SwapAdd, t.AtomicETH.Compare = w.Swap, w.CompareAdd
	}
	u.sendControl(&u.path)
	r.total = 8
	u.expectAnswer(u.sqPSN)
	u.forceAck = false // it asks for an answer (see sendRead)
	u.countSent(1)
	u.sqPSN = u.sqPSN.Next()
	r.end = u.sqPSN
	return verbsio.StatusSuccess
}

// sendUD transmits a UD SEND through the WQE's address handle.
func (u *udpQP) sendUD(pos uint32, w *ring.SendWQE, r *reqWQE) verbsio.Status {
	q := u.q
	if w.AH == 0 || w.AH > maxAH {
		return verbsio.StatusLocQPOpErr
	}
	a := q.ctx.ahs[w.AH-1].Load()
	if a == nil || a.ud == nil {
		return verbsio.StatusLocQPOpErr
	}
	total, nsrc, st := q.gather(pos, w)
	if st != verbsio.StatusSuccess {
		return st
	}
	if total > uint64(u.mtu) {
		return verbsio.StatusLocLenErr
	}
	op := onlyOpcode(q.typ, verbsio.Opcode(w.Opcode))
	n := int(total)
	if q.pace != nil {
		if t0 := now(); !q.takePace(uint64(n), t0, &u.paceDue) {
			u.paceAt = t0 + max(q.pace.Wait(uint64(n), t0), 1)
			u.f.activate(u)
			return statusPaused
		}
	}
	t := u.header(op, u.sqPSN, false, w.UDQPN)
	qkey := w.UDQKey
	if qkey&0x80000000 != 0 {
		qkey = q.attr.QKey
	}
	t.DETH = roce.DETH{QKey: qkey, SrcQP: q.qpn}
	if op.Layout().Has(roce.ExtImmDt) {
		t.ImmDt = roce.ImmDt{Data: immToWire(w.Imm)}
	}
	u.sendPacket(a.ud, q.src[:nsrc], 0, n, false)
	u.sqPSN = u.sqPSN.Next()
	r.total = total
	return verbsio.StatusSuccess
}

// completeDone retires finished WQEs in order: a completion for signaled
// successes and for every error; an error moves the QP to ERR.
func (u *udpQP) completeDone() {
	q := u.q
	for q.sqExec != u.wireEnd() {
		r := u.slot(q.sqExec)
		if !r.done {
			break
		}
		pos := q.sqExec
		w := q.sq.WQE(pos)
		if pos == u.sendPos {
			// Failed while partly sent (a NAK for its first packets):
			// the rest never goes.
			u.sendPos, u.sendOff = pos+1, 0
		}
		if r.status != verbsio.StatusSuccess {
			q.complete(pos, r.status, 0)
			q.sqExec++
			r.started = false
			q.toErr()
			return
		}
		if q.sqSigAll || verbsio.SendFlags(w.Flags)&verbsio.SendSignaled != 0 {
			q.complete(pos, verbsio.StatusSuccess, uint32(r.total))
		}
		r.started = false
		q.sqExec++
	}
	if u.ackOut && psn.Diff(u.reqAck, u.unaPSN()) > 0 {
		u.ackOut = false // answered
		u.deadline = 0
	}
	if u.nakActed && psn.Diff(u.nakPSN, u.unaPSN()) > 0 {
		u.nakActed = false // the loss at nakPSN is repaired
	}
	if u.rdLoss && (q.sqExec == u.wireEnd() || verbsio.Opcode(q.sq.WQE(q.sqExec).Opcode) != verbsio.OpRDMARead) {
		u.rdLoss = false // no READ waits for a response any more
	}
	if q.sqExec == u.wireEnd() {
		u.deadline = 0
	} else if u.deadline == 0 {
		u.arm()
	}
}

// lastSentPSN is the PSN of the last packet on the wire.
func (u *udpQP) lastSentPSN() (psn.PSN, bool) {
	q := u.q
	if q.sqExec == u.wireEnd() {
		return 0, false
	}
	return u.sqPSN.Add(-1), true
}

// wqeAt finds the WQE on the wire whose PSN range holds p.
func (u *udpQP) wqeAt(p psn.PSN) (uint32, bool) {
	q := u.q
	for pos := q.sqExec; pos != u.wireEnd(); pos++ {
		r := u.slot(pos)
		if psn.Diff(r.first, p) >= 0 && psn.Diff(p, r.end) > 0 {
			return pos, true
		}
	}
	return 0, false
}

// ackUpTo handles an acknowledgement of every PSN up to and including p.
func (u *udpQP) ackUpTo(p psn.PSN) {
	q := u.q
	progress := 0
	if next := p.Next(); psn.Diff(u.acked, next) > 0 && psn.Diff(next, u.highPSN) >= 0 {
		// Acknowledged further, inside a message too.
		progress = int(psn.Diff(u.acked, next))
		u.acked = next
		if psn.Diff(u.sqPSN, next) > 0 {
			u.skipAcked()
		}
	}
	for pos := q.sqExec; pos != u.sendPos; pos++ {
		r := u.slot(pos)
		if r.done {
			continue
		}
		if psn.Diff(p, r.end.Add(-1)) > 0 {
			break // not covered yet
		}
		op := verbsio.Opcode(q.sq.WQE(pos).Opcode)
		if op == verbsio.OpRDMARead {
			// Acknowledged past a READ whose responses have not all
			// come: the responder answered it before, so they were
			// lost; ask again.
			u.goBackOnce(r.rdNext)
			break
		}
		if op.IsAtomic() {
			// Acknowledged past an atomic whose response never came:
			// it was lost; ask again.
			u.goBackOnce(r.first)
			break
		}
		r.done = true
		progress = max(progress, 1)
	}
	if progress > 0 {
		u.madeProgress(progress)
	}
}

// skipAcked moves a resend's starting point forward past what the peer
// has acknowledged since the rewind. After a timeout (the peer's
// acknowledgements late, as when it was off the CPU) an acknowledgement
// past what the resend has sent proves that the peer holds packets of the
// first transmission: the timeout was spurious (as TCP's F-RTO concludes),
// and the rest of that transmission is in the peer's queue, so the resend
// skips to where it ended; a packet of it that was lost after all brings
// a sequence NAK, or the timeout, as any loss does. Resending instead
// would send the peer what it has (and, the window counting from the
// acknowledged PSN, without bound: a 1 MiB SEND stream resent 1,390
// packets the peer had after three timeouts). It stops at a READ or
// atomic, whose responses an acknowledgement does not carry.
func (u *udpQP) skipAcked() {
	q := u.q
	to := u.acked
	if u.rtoSkip && psn.Diff(u.acked, u.rtoHigh) > 0 {
		to = u.rtoHigh
	}
	u.rtoSkip = false
	for psn.Diff(u.sqPSN, to) > 0 && u.sendPos != q.sqPI {
		r := u.slot(u.sendPos)
		if op := verbsio.Opcode(q.sq.WQE(u.sendPos).Opcode); op == verbsio.OpRDMARead || op.IsAtomic() {
			return
		}
		if !r.started {
			// Rewound past: its PSNs are those of its first
			// transmission, which the acknowledgement covers.
			if psn.Diff(u.sqPSN, r.first) != 0 {
				return
			}
			r.started = true
		}
		if psn.Diff(to, r.end) > 0 {
			// Inside this message: resend from there.
			u.sendOff = uint64(r.first.Forward(to)) * uint64(u.mtu)
			u.sqPSN = to
			return
		}
		u.sqPSN = r.end
		u.sendPos++
		u.sendOff = 0
	}
}

// readLoss notes that a READ response was lost (a later one came first).
// Asking again at once would queue the new responses behind those of the
// requests still being answered, which then overtake them and look like
// more losses (a storm). So the window halves now, nothing more is asked
// for, and the requests are repeated from the oldest missing response
// once the response to the last PSN asked for has come (settleReads), or
// at the timeout.
func (u *udpQP) readLoss() {
	if u.rdLoss {
		return
	}
	u.rdLoss = true
	u.ssthresh = max(u.cwnd/2, minWindow)
	u.cwnd, u.caAcked = u.ssthresh, 0
}

// settleReads repeats the READ requests from the oldest missing response,
// after a loss, once response ps is the last one asked for.
func (u *udpQP) settleReads(ps psn.PSN) {
	if !u.rdLoss || ps.Next() != u.sqPSN {
		return
	}
	u.rdLoss = false
	if u.rewind(u.unaPSN()) {
		u.recovering = true
		u.f.cnt.rewinds.Add(1)
	}
}

// madeProgress resets the retry budget and restarts the timer after n
// packets were answered, and grows the window.
func (u *udpQP) madeProgress(n int) {
	q := u.q
	u.recovering = false
	if u.cwnd < u.ssthresh {
		u.cwnd += n
	} else if u.caAcked += n; u.caAcked >= u.cwnd {
		u.caAcked -= u.cwnd
		u.cwnd++
	}
	u.cwnd = min(u.cwnd, maxInflight)
	u.retryLeft = int(q.attr.RetryCnt)
	u.rnrLeft = int(q.attr.RNRRetry)
	u.backoff = 0
	u.deadline = 0 // re-armed when the completions are retired
}

// goBackOnce is goBack for the signals that repeat (a duplicated NAK,
// every response after a lost one): it acts once per PSN until the
// oldest unacknowledged PSN passes it or a timeout resends it. Later
// WQEs completing is no reason to act again: their responses come from
// the first transmission and each would rewind the window once more.
func (u *udpQP) goBackOnce(p psn.PSN) {
	if u.nakActed && u.nakPSN == p {
		return
	}
	u.nakActed, u.nakPSN = true, p
	u.goBack(p)
}

// goBack rewinds transmission to PSN p (go-back-N) after a loss.
func (u *udpQP) goBack(p psn.PSN) {
	u.rdLoss, u.rtoSkip = false, false
	if !u.rewind(p) {
		return
	}
	u.recovering = true
	// Every rewind resends the whole window: halve it (down to
	// minWindow) so that a lossy path is not flooded with resends; each
	// acknowledgement that makes progress grows it back.
	u.ssthresh = max(u.cwnd/2, minWindow)
	u.cwnd, u.caAcked = u.ssthresh, 0
	u.f.cnt.rewinds.Add(1)
}

// rewind moves transmission back to PSN p; false when no WQE on the wire
// holds p.
func (u *udpQP) rewind(p psn.PSN) bool {
	q := u.q
	pos, ok := u.wqeAt(p)
	if !ok {
		return false
	}
	r := u.slot(pos)
	u.sendPos = pos
	u.sqPSN = p
	op := verbsio.Opcode(q.sq.WQE(pos).Opcode)
	switch {
	case op == verbsio.OpRDMARead:
		u.sqPSN = r.rdNext
		u.sendOff = uint64(r.first.Forward(r.rdNext)) * uint64(u.mtu)
	case op.IsAtomic():
		u.sqPSN = r.first
		u.sendOff = 0
	default:
		u.sendOff = uint64(r.first.Forward(p)) * uint64(u.mtu)
	}
	for i := pos; i != q.sqPI; i++ {
		s := u.slot(i)
		if i != pos {
			s.started = false
		}
		s.done = false
	}
	return true
}

// onResponse handles an ACK, NAK, READ response or atomic ACK.
func (u *udpQP) onResponse(p *roce.Packet, from netip.AddrPort) {
	q := u.q
	if q.typ != verbsio.QPTypeRC || !fromPeer(from, u.path.to) || q.state == verbsio.QPStateErr {
		u.f.cnt.wrongPeer.Add(1)
		return
	}
	ps := p.BTH.PSN
	switch p.BTH.Opcode {
	case roce.RCAck:
		syn := p.AETH.Syndrome
		switch {
		case syn.IsACK():
			u.ackUpTo(ps)
		case syn.IsRNRNAK():
			u.f.cnt.rnrNakRecv.Add(1)
			u.ackUpTo(ps.Add(-1))
			u.onRNR(ps, syn.Value())
		default:
			u.f.cnt.nakRecv.Add(1)
			u.ackUpTo(ps.Add(-1))
			switch syn.NAKCode() {
			case roce.NAKPSNSequenceError:
				u.goBackOnce(ps)
			case roce.NAKInvalidRequest:
				u.failAt(ps, verbsio.StatusRemInvReqErr)
			case roce.NAKRemoteAccessError:
				u.failAt(ps, verbsio.StatusRemAccessErr)
			default:
				u.failAt(ps, verbsio.StatusRemOpErr)
			}
		}
	case roce.RCAtomicAck:
		pos, ok := u.wqeAt(ps)
		if !ok {
			u.f.cnt.duplicates.Add(1)
			break
		}
		w := q.sq.WQE(pos)
		if !verbsio.Opcode(w.Opcode).IsAtomic() {
			// An atomic ACK naming another request: it is nobody's
			// answer, and its data must not land in that request's
			// buffer.
			u.f.cnt.malformed.Add(1)
			break
		}
		u.ackUpTo(ps.Add(-1))
		r := u.slot(pos)
		if !r.done && r.first == ps {
			if total, n, st := q.scatterLocal(pos, w); st == verbsio.StatusSuccess && n == 1 && total == 8 {
				binary.LittleEndian.PutUint64(q.src[0], p.AtomicAckETH.OrigData)
			}
			r.done = true
			u.madeProgress(1)
		}
	default: // READ response
		pos, ok := u.wqeAt(ps)
		if !ok {
			u.f.cnt.duplicates.Add(1)
			break
		}
		r := u.slot(pos)
		if verbsio.Opcode(q.sq.WQE(pos).Opcode) != verbsio.OpRDMARead {
			u.f.cnt.malformed.Add(1) // a READ response naming another request
			break
		}
		if r.done {
			u.f.cnt.duplicates.Add(1)
			break
		}
		if ps != r.rdNext {
			u.f.cnt.duplicates.Add(1)
			if psn.Diff(r.rdNext, ps) > 0 {
				u.readLoss() // a response was lost
			}
			// The responder is still answering (a slow one streams
			// for longer than the timeout): restart the timer, or it
			// would ask again for what is on its way.
			u.deadline = 0
			u.settleReads(ps)
			break
		}
		if r.rdNext == r.first {
			u.ackUpTo(r.first.Add(-1))
		}
		w := q.sq.WQE(pos)
		off := uint64(r.first.Forward(ps)) * uint64(u.mtu)
		_, n, st := q.scatterLocal(pos, w)
		if st != verbsio.StatusSuccess || off+uint64(len(p.Payload)) > r.total {
			u.failAt(ps, verbsio.StatusLocLenErr)
			break
		}
		scatterAt(q.src[:n], off, p.Payload)
		r.rdNext = r.rdNext.Next()
		if r.rdNext == r.end {
			r.done = true
		}
		u.madeProgress(1)
		u.settleReads(ps)
	}
	u.completeDone()
	if q.state != verbsio.QPStateErr {
		u.transmit()
	}
}

// scatterAt copies src into the destination buffers at message offset off.
func scatterAt(dsts [][]byte, off uint64, src []byte) {
	for _, d := range dsts {
		if off >= uint64(len(d)) {
			off -= uint64(len(d))
			continue
		}
		k := copy(d[off:], src)
		src = src[k:]
		off = 0
		if len(src) == 0 {
			return
		}
	}
}

// failAt completes the WQE holding PSN p with st.
func (u *udpQP) failAt(p psn.PSN, st verbsio.Status) {
	if pos, ok := u.wqeAt(p); ok {
		r := u.slot(pos)
		r.done, r.status = true, st
	}
}

// onRNR waits out a receiver-not-ready NAK, then resends from p.
func (u *udpQP) onRNR(p psn.PSN, timer uint8) {
	q := u.q
	if q.attr.RNRRetry != 7 {
		if u.rnrLeft == 0 {
			u.failAt(p, verbsio.StatusRNRRetryExcErr)
			return
		}
		u.rnrLeft--
	}
	u.goBack(p)
	u.rnrUntil = now() + verbsio.RNRTimerDuration(timer)
	u.f.activate(u)
}

// tick runs the QP's timers.
func (u *udpQP) tick(t int64) {
	if u.rnrUntil != 0 && t >= u.rnrUntil {
		u.rnrUntil = 0
		u.transmit()
	}
	if u.paceAt != 0 && t >= u.paceAt {
		u.paceAt, u.paceDue = 0, u.paceAt
		u.transmit()
	}
	if u.rdN > 0 {
		u.sendReadResponses()
	}
	if u.deadline != 0 && t >= u.deadline {
		u.deadline = 0
		if !u.ackOut {
			if u.paceAt != 0 {
				// The pacer holds the next packet back: it leaves
				// soon and can ask then; a probe would only resend
				// data through the same pacer, halving the rate.
				u.arm()
				return
			}
			// Tail probe: resend the last packet sent, asking for an
			// acknowledgement. It costs no retry.
			if last, ok := u.lastSentPSN(); ok && u.rewind(last) {
				u.forceAck = true
				u.transmit()
			}
			return
		}
		u.f.cnt.timeouts.Add(1)
		// Each timeout in a row doubles the next (up to maxBackoff
		// doublings): a peer that stalls for a while (a VM off the
		// CPU) is waited for instead of declared gone after the
		// retry count's worth of one timeout.
		u.backoff = min(u.backoff+1, maxBackoff)
		if u.retryLeft == 0 {
			u.failAt(u.unaPSN(), verbsio.StatusRetryExcErr)
			u.completeDone()
			return
		}
		u.retryLeft--
		u.forceAck = true
		u.nakActed = false // the resend may be lost again; its signals count
		u.goBack(u.unaPSN())
		u.rtoHigh, u.rtoSkip = u.highPSN, true
		// Nothing came back for a whole timeout: how much the peer
		// takes now is unknown, so the window restarts from its least
		// (TCP's loss window). A stalled responder (a VM off the CPU)
		// still holds the requests it had; asking again for the whole
		// window would double its work when it wakes.
		u.cwnd, u.caAcked = minWindow, 0
		u.transmit()
	}
}
