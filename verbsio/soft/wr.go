package soft

import (
	"sync/atomic"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
)

// Work requests, on every fabric: PostSend validates each request and
// encodes it into the send ring, the doorbell hands the ring to the
// fabric (qpTransport.execute), and the fabric uses what is here for the
// local side of a request (gather, scatterLocal: keys, PD, rights, bounds
// and lengths), its completion and the remote atomics.

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
	case verbsio.QPTypeRawPacket:
		return op == verbsio.OpSend || op == verbsio.OpTSO // a frame, or a send to segment (raw_qp.go)
	}
	return false
}

// PostSend implements verbsio.QPImpl: it writes the requests into the send
// ring and rings the doorbell, which executes them.
func (q *qp) PostSend(wrs []verbsio.SendWR) (int, error) {
	c := q.ctx
	c.lock() // background progress may move the QP to ERR: read its state under the lock
	switch q.state {
	case verbsio.QPStateRTS, verbsio.QPStateSQD, verbsio.QPStateErr:
	default:
		c.unlock()
		return 0, errPostState
	}
	var err error
	n := 0
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

// execute rings the doorbell: the fabric moves the WQEs from sqExec to
// sqPI.
func (q *qp) execute() { q.t.execute() }

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
	if wr.Opcode == verbsio.OpTSO {
		if err := q.encodeTSO(pos, wr); err != nil {
			return err
		}
	}
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
	// The SGE loop is scatterLocal's with no right needed, written out:
	// gather is on every send's path, and keeps it free of a call.
	nsge := int(w.NumSGE)
	if nsge > q.cap.MaxSendSGE {
		return 0, 0, verbsio.StatusLocLenErr
	}
	sges := q.sq.SGEs(pos, nsge)
	for i := range sges {
		s := &sges[i]
		m := q.localMR(s.LKey, 0)
		if m == nil {
			return 0, 0, verbsio.StatusLocProtErr
		}
		b, ok := m.slice(s.Addr, s.Length)
		if !ok {
			return 0, 0, verbsio.StatusLocProtErr
		}
		q.src[i] = b
		total += uint64(s.Length)
	}
	if total > q.maxMsg {
		return 0, 0, verbsio.StatusLocLenErr
	}
	return total, nsge, verbsio.StatusSuccess
}

// scatterLocal resolves the WQE's local destination buffers (READ and
// atomic results), which need LOCAL_WRITE: at most max_send_sge of them,
// each inside its region, at most max_msg_sz in all.
func (q *qp) scatterLocal(pos uint32, w *ring.SendWQE) (total uint64, n int, st verbsio.Status) {
	nsge := int(w.NumSGE) // read once, as in gather
	if nsge > q.cap.MaxSendSGE {
		return 0, 0, verbsio.StatusLocLenErr
	}
	sges := q.sq.SGEs(pos, nsge)
	for i := range sges {
		s := &sges[i]
		m := q.localMR(s.LKey, verbsio.AccessLocalWrite)
		if m == nil {
			return 0, 0, verbsio.StatusLocProtErr
		}
		b, ok := m.slice(s.Addr, s.Length)
		if !ok {
			return 0, 0, verbsio.StatusLocProtErr
		}
		q.src[i] = b
		total += uint64(s.Length)
	}
	if total > q.maxMsg {
		return 0, 0, verbsio.StatusLocLenErr
	}
	return total, nsge, verbsio.StatusSuccess
}

const grhSize = 40

// The remote atomics are CPU atomics on the target's memory, so they are
// atomic for the CPUs as for the engine (AtomicGlob). mem is the 8-byte,
// 8-byte aligned target; each returns the value it found.

// compareSwap stores swap if the value is compare.
func compareSwap(mem []byte, compare, swap uint64) uint64 {
	p := (*uint64)(unsafe.Pointer(&mem[0]))
	for {
		cur := atomic.LoadUint64(p)
		if cur != compare || atomic.CompareAndSwapUint64(p, cur, swap) {
			return cur
		}
	}
}

// fetchAdd adds add.
func fetchAdd(mem []byte, add uint64) uint64 {
	p := (*uint64)(unsafe.Pointer(&mem[0]))
	return atomic.AddUint64(p, add) - add
}
