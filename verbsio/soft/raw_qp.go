package soft

import (
	"encoding/binary"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/afpacket"
	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
	"github.com/rperf/rperf/verbsio/soft/internal/portlock"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"golang.org/x/sys/unix"
)

// rawQP is a RAW_PACKET QP's side on the raw fabric. Its send queue holds
// whole frames (SEND: the SGL or inline data is the frame) or TSO sends
// (OpTSO: the header kept in tso at post time, the SGL the payload); a
// doorbell builds what needs building, paces, sends the batch with one
// system call and completes. Received frames reach it through the port's
// steering table (raw_io.go), by its QPN.
type rawQP struct {
	q    *qp
	f    *rawFabric
	tso  []rawTSOHdr // per send slot: the TSO header and MSS copied at post time
	sent []uint32    // per send slot: the bytes its completion reports

	paceAt  int64 // pacing holds the send queue until then
	paceDue int64 // the paceAt that last fired (pace.TakeDue)
	active  bool

	flows []*rawFlow     // rules steering to this QP (destroy is EBUSY while any; under f.flowMu)
	lock  *portlock.Lock // mana: the port, held while the QP lives
}

// rawTSOHdr is an OpTSO request's segmentation part, copied at post time
// as a NIC copies the inline header into its WQE.
type rawTSOHdr struct {
	hdr [rawMaxTSOHdr]byte
	n   uint16
	mss uint16
}

var _ qpTransport = (*rawQP)(nil)

// Preallocated errors of posting.
var (
	errTSOHdr = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "TSO header is empty or longer than 256 bytes"}
	errTSOMSS = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "TSO MSS is 0: give the payload bytes per frame"}
)

// encodeTSO keeps the header and MSS of an OpTSO request posted at pos.
func (q *qp) encodeTSO(pos uint32, wr *verbsio.SendWR) error {
	r, ok := q.t.(*rawQP)
	if !ok {
		return errOpcode
	}
	if n := len(wr.TSO.Hdr); n == 0 || n > rawMaxTSOHdr {
		return errTSOHdr
	}
	if wr.TSO.MSS == 0 {
		return errTSOMSS
	}
	t := &r.tso[pos&(q.sq.Depth()-1)]
	t.n = uint16(copy(t.hdr[:], wr.TSO.Hdr))
	t.mss = wr.TSO.MSS
	return nil
}

func (r *rawQP) modify(verbsio.QPState, *verbsio.QPAttr, verbsio.QPAttrMask) error { return nil }

// paceChanged drops the old rate's hold and lets the new bucket keep the
// schedule of a sender late by up to rawPaceCatchUp.
func (r *rawQP) paceChanged() {
	r.paceDue = 0
	if r.q.pace != nil {
		r.q.pace.SetCatchUp(rawPaceCatchUp)
	}
}

// rawPaceCatchUp is how late a held raw QP's sender may come back and
// still catch up the frames it owes (pace.Bucket.SetCatchUp): the engine
// paces only while the application's thread polls, and a thread that
// waits for a CPU waits a scheduler tick or two (4 ms at HZ=250). With
// the credit bounded at one burst (4 KiB, 33 us at 1 Gb/s), rperf raw-bw
// over veth on an idle machine lost 4-10% of 100 Mb/s and 2-17% of 1
// Gb/s (docs/raw.md).
const rawPaceCatchUp = 10_000_000

func (r *rawQP) reset() {
	r.paceAt, r.paceDue = 0, 0
}

func (r *rawQP) flush() { r.paceAt = 0 }

// release detaches the QP: off the pacing list, its port lock released
// (mana). Its flows are gone already (destroyCheck) or, when the context
// closes, removed here.
func (r *rawQP) release() {
	f := r.f
	f.active = remove(f.active, r)
	r.active = false
	f.removeFlows(r)
	if r.lock != nil {
		r.lock.Release()
		r.lock = nil
	}
}

// destroyCheck refuses to destroy a QP that flows still steer to, as the
// kernel does (its use count).
func (r *rawQP) destroyCheck() error {
	r.f.flowMu.Lock()
	defer r.f.flowMu.Unlock()
	if n := len(r.flows); n > 0 {
		return verbsio.Errorf("destroy_qp", unix.EBUSY, "%d flows steer to the QP; destroy them first (Flow.Destroy)", n)
	}
	return nil
}

// maxFrame is the longest frame the device sends whose bytes 12-13 (the
// EtherType or TPID) are et: MTU and Ethernet header, a tag more when the
// frame is tagged.
func (r *rawQP) maxFrame(et uint16) int {
	n := r.f.dev.mtu + netpkt.EthLen
	if et == netpkt.EtherTypeVLAN || et == netpkt.EtherTypeQinQ {
		n += netpkt.VLANLen
	}
	return n
}

// etherType reads bytes 12-13 of a frame made of pieces (0 when shorter).
func etherType(src [][]byte) uint16 {
	var b [2]byte
	off, k := 0, 0
	for _, p := range src {
		for i := range p {
			if at := off + i; at == 12 || at == 13 {
				b[at-12] = p[i]
				if k++; k == 2 {
					return binary.BigEndian.Uint16(b[:])
				}
			} else if at > 13 {
				return 0
			}
		}
		off += len(p)
	}
	return 0
}

// execute is the doorbell: every WQE from sqExec on becomes frames in the
// fabric's batch, which leaves in one system call; then the WQEs
// complete. Pacing may hold the queue at a WQE; progress resumes it. A
// malformed WQE completes with its error after the frames before it left,
// and the QP goes to ERR, as verbs has it.
func (r *rawQP) execute() {
	q := r.q
	if q.state == verbsio.QPStateErr {
		q.flushSQ()
		return
	}
	if r.paceAt != 0 || r.f.tx == nil {
		return
	}
	f := r.f
	f.stampTX = q.sendCQ.ring.Header().Flags.Load()&ring.FlagTimestamp != 0
	mask := q.sq.Depth() - 1
	pos := q.sqExec
	for pos != q.sqPI {
		w := q.sq.WQE(pos)
		var n uint32
		var st verbsio.Status
		switch verbsio.Opcode(w.Opcode) {
		case verbsio.OpSend:
			n, st = r.sendFrame(pos, w)
		case verbsio.OpTSO:
			n, st = r.sendTSO(pos, w)
		default:
			st = verbsio.StatusLocQPOpErr
		}
		if st == statusPaused {
			break
		}
		if st != verbsio.StatusSuccess {
			f.sendBatch()
			if r.completeTo(pos) {
				q.complete(pos, st, 0)
				q.sqExec++
				q.toErr()
			}
			return
		}
		r.sent[pos&mask] = n
		pos++
	}
	f.sendBatch()
	r.completeTo(pos)
}

// completeTo completes the WQEs before end, whose frames were handed to
// the kernel: signaled ones with their byte counts. A system call that
// failed (the device went away) fails the first of them with GENERAL_ERR
// and the errno as vendor error, and the QP goes to ERR. It reports
// whether the QP is still usable.
func (r *rawQP) completeTo(end uint32) bool {
	q := r.q
	f := r.f
	if err := f.txErr; err != nil {
		f.txErr = nil
		if q.sqExec != end {
			w := q.sq.WQE(q.sqExec)
			e := ring.CQE{WRID: w.WRID, Status: uint8(verbsio.StatusGeneralErr), Opcode: uint8(verbsio.WCSend),
				VendorErr: errnoOf(err), QPN: q.qpn, SQIdx: q.sqExec}
			q.sendCQ.ring.Push(&e, q.ctx.pid)
			q.sqExec++
			q.toErr()
			return false
		}
	}
	mask := q.sq.Depth() - 1
	// A send completes when its frames were handed to the kernel: a
	// stamped CQ gets the moment before that system call, so that a reply
	// the peer sends at once can never look older than its request.
	stamp := uint64(0)
	if q.sendCQ.ring.Header().Flags.Load()&ring.FlagTimestamp != 0 {
		stamp = f.txStamp
	}
	for ; q.sqExec != end; q.sqExec++ {
		if q.sqSigAll || verbsio.SendFlags(q.sq.WQE(q.sqExec).Flags)&verbsio.SendSignaled != 0 {
			w := q.sq.WQE(q.sqExec)
			e := ring.CQE{WRID: w.WRID, Opcode: uint8(verbsio.WCOpcodeOf(verbsio.Opcode(w.Opcode))), ByteLen: r.sent[q.sqExec&mask], QPN: q.qpn,
				SQIdx: q.sqExec, Timestamp: stamp}
			q.sendCQ.ring.Push(&e, q.ctx.pid)
		}
	}
	return true
}

// pace spends n bytes of the QP's rate, or holds the queue and reports
// false.
func (r *rawQP) pace(n uint64) bool {
	q := r.q
	if q.pace == nil {
		return true
	}
	t := now()
	if q.takePace(n, t, &r.paceDue) {
		return true
	}
	r.paceAt = t + max(q.pace.Wait(n, t), 1)
	r.f.activate(r)
	return false
}

// sendFrame queues the frame of a SEND WQE: its buffers as they are when
// there is one and no checksum to compute (the kernel copies it out of
// registered memory), else copied into the arena and completed with
// checksums (SendIPCsum).
func (r *rawQP) sendFrame(pos uint32, w *ring.SendWQE) (uint32, verbsio.Status) {
	q := r.q
	f := r.f
	flags := verbsio.SendFlags(w.Flags) // read once: the application may write the ring
	total, nsrc, st := q.gather(pos, w)
	if st != verbsio.StatusSuccess {
		return 0, st
	}
	src := q.src[:nsrc]
	if total < netpkt.EthLen || total > uint64(r.maxFrame(etherType(src))) {
		return 0, verbsio.StatusLocLenErr // a NIC sends no runt and no frame above its MTU
	}
	if !r.pace(total) {
		return 0, statusPaused
	}
	if nsrc == 1 && flags&verbsio.SendIPCsum == 0 {
		if f.queue(src[0]) != nil {
			return 0, verbsio.StatusGeneralErr
		}
		return uint32(total), verbsio.StatusSuccess
	}
	b, err := f.room(int(total))
	if err != nil {
		return 0, verbsio.StatusGeneralErr
	}
	off := 0
	for _, p := range src {
		off += copy(b[off:], p)
	}
	if flags&verbsio.SendIPCsum != 0 {
		netpkt.FillChecksums(b, netpkt.Tag{}) // a frame without IP has nothing to compute
	}
	if f.queue(b) != nil {
		return 0, verbsio.StatusGeneralErr
	}
	return uint32(total), verbsio.StatusSuccess
}

// sendTSO cuts an OpTSO send into frames: by the kernel (one large frame
// with a virtio-net header) where the QP or the device chooses it and the
// kernel can (not VXLAN), else by the engine (netpkt.TSO) into the batch.
func (r *rawQP) sendTSO(pos uint32, w *ring.SendWQE) (uint32, verbsio.Status) {
	q := r.q
	f := r.f
	t := &r.tso[pos&(q.sq.Depth()-1)]
	hdr := t.hdr[:t.n]
	mss := int(t.mss)
	total, nsrc, st := q.gather(pos, w)
	if st != verbsio.StatusSuccess {
		return 0, st
	}
	if total > rawMaxTSO || len(hdr) < netpkt.EthLen || len(hdr)+mss > r.maxFrame(binary.BigEndian.Uint16(hdr[12:])) {
		return 0, verbsio.StatusLocLenErr
	}
	if f.tso.Init(hdr, int(total), mss) != nil {
		return 0, verbsio.StatusLocQPOpErr // not Ethernet, IP and TCP or UDP
	}
	nf := f.tso.Frames()
	if !r.pace(uint64(nf*len(hdr)) + total) {
		return 0, statusPaused
	}
	src := q.src[:nsrc]
	f.cnt.txTSO.Add(1)
	kernel := q.seg == verbsio.SegmentKernel || (q.seg == verbsio.SegmentDefault && f.segKernel)
	if kernel && nf > 1 {
		if st, ok := r.kernelTSO(hdr, src, int(total), mss, nf); ok {
			return uint32(total), st
		}
		// The kernel takes no VXLAN through a packet socket: the
		// engine cuts it below.
	}
	var payload []byte
	switch nsrc {
	case 0:
	case 1:
		payload = src[0]
	default:
		payload = f.scratch[:total]
		off := 0
		for _, p := range src {
			off += copy(payload[off:], p)
		}
	}
	for i := 0; i < nf; i++ {
		off, n := f.tso.Chunk(i)
		b, err := f.room(len(hdr) + n)
		if err != nil {
			return 0, verbsio.StatusGeneralErr
		}
		f.tso.Frame(b, i, payload[off:off+n])
		if f.queue(b) != nil {
			return 0, verbsio.StatusGeneralErr
		}
	}
	return uint32(total), verbsio.StatusSuccess
}

// kernelTSO hands a TSO send to the kernel's GSO: as one large frame per
// run of segments that fits an IP packet (64 KiB), each run's header the
// template fixed up as the NIC would have it at that segment (TCP
// sequence, IPv4 ID, CWR on the first run only, FIN and PSH on the last).
// ok is false, with nothing sent, for a send the kernel cannot cut.
func (r *rawQP) kernelTSO(hdr []byte, src [][]byte, total, mss, nf int) (verbsio.Status, bool) {
	f := r.f
	var l netpkt.Layers
	netpkt.Parse(hdr, netpkt.Tag{}, &l)
	if l.Has&netpkt.HasVXLAN != 0 || l.Has&(netpkt.HasTCP|netpkt.HasUDP) == 0 {
		return 0, false
	}
	l3, l4 := int(l.L3), int(l.L4)
	ipRoom := 0xffff - (len(hdr) - l3) // IPv4 total length
	if l.Has&netpkt.HasIPv6 != 0 {
		ipRoom = 0xffff - (len(hdr) - l3 - netpkt.IPv6Len) // IPv6 payload length
	}
	per := max(ipRoom/mss, 1) * mss // payload bytes per kernel send
	if f.sendBatch() != nil {
		return verbsio.StatusGeneralErr, true
	}
	tcp := l.Has&netpkt.HasTCP != 0
	si, soff := 0, 0 // the next source piece and offset in it
	for off, frame := 0, 0; off < total; {
		n := min(per, total-off)
		big := f.scratch[:len(hdr)+n]
		copy(big, hdr)
		if l.Has&netpkt.HasIPv4 != 0 {
			binary.BigEndian.PutUint16(big[l3+4:], binary.BigEndian.Uint16(hdr[l3+4:])+uint16(frame))
		}
		if tcp {
			binary.BigEndian.PutUint32(big[l4+4:], binary.BigEndian.Uint32(hdr[l4+4:])+uint32(off))
			if off > 0 {
				big[l4+13] &^= netpkt.TCPCwr
			}
			if off+n < total {
				big[l4+13] &^= netpkt.TCPFin | netpkt.TCPPsh
			}
		}
		for k := len(hdr); k < len(big); {
			c := copy(big[k:], src[si][soff:])
			k += c
			if soff += c; soff == len(src[si]) {
				si, soff = si+1, 0
			}
		}
		g, err := afpacket.PrepareGSO(big, mss)
		if err != nil {
			if off == 0 {
				return 0, false
			}
			f.txErr = err
			return verbsio.StatusGeneralErr, true
		}
		f.txStamp = ring.Clock()
		if err := f.gsoTX.SendGSO(big, g); err != nil {
			f.txErr = err
			f.cnt.txErrors.Add(uint64(nf - frame))
			return verbsio.StatusGeneralErr, true
		}
		segs := (n + mss - 1) / mss
		f.cnt.txFrames.Add(uint64(segs))
		f.cnt.txBytes.Add(uint64(segs*len(hdr) + n))
		off += n
		frame += segs
	}
	f.cnt.txTSOKernel.Add(1)
	return verbsio.StatusSuccess, true
}
