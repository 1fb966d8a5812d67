//go:build linux && cgo && ibverbs

package hw

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// maxRing bounds the work requests of one post crossing. The scratch of a
// QP holds min(max_send_wr, maxRing) requests (and as many receive
// requests), each with room for the granted number of SGEs; a longer batch
// is posted in several crossings, with the same result.
const maxRing = 4096

// hwQP is a queue pair (struct ibv_qp) with its C scratch for posting. It
// is owned by one goroutine at a time.
type hwQP struct {
	c   *hwContext
	qp  *C.struct_ibv_qp // nil once destroyed
	typ verbsio.QPType
	cap verbsio.QPCap
	qpn uint32
	scq *hwCQ // the send CQ, which a signaled post may poll (postPoll)
	// sigAll: the QP signals every request (sq_sig_all).
	sigAll bool
	poll   postPoll

	sendMem unsafe.Pointer // C: ring of struct ibv_send_wr, then its SGEs
	recvMem unsafe.Pointer // C: ring of struct ibv_recv_wr, then its SGEs
	send    sendRing
	recv    recvRing
}

// CreateQP implements verbsio.PDImpl with ibv_create_qp for RC, UC, UD and
// RAW_PACKET queue pairs (RAW_PACKET needs CAP_NET_RAW). The granted
// capacities size the posting scratch.
func (p *hwPD) CreateQP(attr verbsio.QPInitAttr) (verbsio.QPImpl, error) {
	switch attr.Type {
	case verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD, verbsio.QPTypeRawPacket:
	default:
		return nil, verbsio.Errorf("create_qp", unix.EINVAL, "QP type %s is not supported", attr.Type)
	}
	if attr.SendCQ == nil {
		return nil, verbsio.Errorf("create_qp", unix.EINVAL, "a send CQ is required")
	}
	scq, ok := attr.SendCQ.Impl().(*hwCQ)
	if !ok {
		return nil, verbsio.Errorf("create_qp", unix.EINVAL, "the send CQ was not created by the ibverbs provider")
	}
	rcq := scq
	if attr.RecvCQ != nil {
		if rcq, ok = attr.RecvCQ.Impl().(*hwCQ); !ok {
			return nil, verbsio.Errorf("create_qp", unix.EINVAL, "the receive CQ was not created by the ibverbs provider")
		}
	}
	var srq *hwSRQ
	if attr.SRQ != nil {
		if srq, ok = attr.SRQ.Impl().(*hwSRQ); !ok {
			return nil, verbsio.Errorf("create_qp", unix.EINVAL, "the SRQ was not created by the ibverbs provider")
		}
	}
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if err := p.checkLocked("create_qp"); err != nil {
		return nil, err
	}
	if scq.cq == nil || rcq.cq == nil || (srq != nil && srq.srq == nil) {
		return nil, verbsio.Errorf("create_qp", unix.EBADF, "a CQ or the SRQ was destroyed")
	}
	var ia C.struct_ibv_qp_init_attr
	ia.send_cq = scq.cq
	ia.recv_cq = rcq.cq
	if srq != nil {
		ia.srq = srq.srq
	}
	ia.cap = C.struct_ibv_qp_cap{
		max_send_wr:     C.uint32_t(attr.Cap.MaxSendWR),
		max_recv_wr:     C.uint32_t(attr.Cap.MaxRecvWR),
		max_send_sge:    C.uint32_t(attr.Cap.MaxSendSGE),
		max_recv_sge:    C.uint32_t(attr.Cap.MaxRecvSGE),
		max_inline_data: C.uint32_t(attr.Cap.MaxInlineData),
	}
	ia.qp_type = C.enum_ibv_qp_type(attr.Type)
	if attr.SQSigAll {
		ia.sq_sig_all = 1
	}
	cqp, err := C.ibv_create_qp(p.pd, &ia)
	if cqp == nil {
		e := errnoOf(err, unix.EINVAL)
		detail := "%s QP with %+v"
		if e == unix.EPERM && attr.Type == verbsio.QPTypeRawPacket {
			detail += "; RAW_PACKET QPs need CAP_NET_RAW"
		}
		return nil, verbsio.Errorf("create_qp", e, detail, attr.Type, attr.Cap)
	}
	granted := verbsio.QPCap{
		MaxSendWR:     int(ia.cap.max_send_wr),
		MaxRecvWR:     int(ia.cap.max_recv_wr),
		MaxSendSGE:    int(ia.cap.max_send_sge),
		MaxRecvSGE:    int(ia.cap.max_recv_sge),
		MaxInlineData: int(ia.cap.max_inline_data),
	}
	if srq != nil {
		granted.MaxRecvWR, granted.MaxRecvSGE = 0, 0
	}
	q, err := newQP(p.c, unsafe.Pointer(cqp), attr.Type, granted)
	if err != nil {
		C.ibv_destroy_qp(cqp)
		return nil, err
	}
	q.scq, q.sigAll = scq, attr.SQSigAll
	p.c.qps[q] = struct{}{}
	return q, nil
}

// newQP wraps a struct ibv_qp * and allocates its posting scratch in C
// memory. Tests call it with a fake QP whose context's ops are test
// functions.
func newQP(c *hwContext, cqp unsafe.Pointer, typ verbsio.QPType, granted verbsio.QPCap) (*hwQP, error) {
	q := &hwQP{c: c, qp: (*C.struct_ibv_qp)(cqp), typ: typ, cap: granted, qpn: uint32((*C.struct_ibv_qp)(cqp).qp_num)}
	var err error
	q.sendMem, q.send.wrs, q.send.sges, err = allocRing[cSendWR](granted.MaxSendWR, granted.MaxSendSGE)
	if err != nil {
		return nil, err
	}
	q.send.maxSGE = granted.MaxSendSGE
	q.send.ud = typ == verbsio.QPTypeUD
	q.recvMem, q.recv.wrs, q.recv.sges, err = allocRing[cRecvWR](granted.MaxRecvWR, granted.MaxRecvSGE)
	if err != nil {
		q.release()
		return nil, err
	}
	q.recv.maxSGE = granted.MaxRecvSGE
	return q, nil
}

// allocRing callocs one C block for min(wrs, maxRing) requests of type W
// followed by their SGEs, and returns it with slices over both parts. A
// queue of zero requests gets no block.
func allocRing[W cSendWR | cRecvWR](wrs, sges int) (unsafe.Pointer, []W, []verbsio.SGE, error) {
	n := min(wrs, maxRing)
	if n <= 0 {
		return nil, nil, nil, nil
	}
	sges = max(sges, 0)
	wrBytes := uintptr(n) * unsafe.Sizeof(*new(W))
	size := wrBytes + uintptr(n*sges)*unsafe.Sizeof(verbsio.SGE{})
	mem := C.calloc(1, C.size_t(size))
	if mem == nil {
		return nil, nil, nil, verbsio.Errorf("create_qp", unix.ENOMEM, "posting scratch of %d bytes", size)
	}
	ring := unsafe.Slice((*W)(mem), n)
	var sgl []verbsio.SGE
	if sges > 0 {
		sgl = unsafe.Slice((*verbsio.SGE)(unsafe.Add(mem, wrBytes)), n*sges)
	}
	return mem, ring, sgl, nil
}

// QPN implements verbsio.QPImpl.
func (q *hwQP) QPN() uint32 { return q.qpn }

// Cap implements verbsio.QPImpl: the capacities the device granted.
func (q *hwQP) Cap() verbsio.QPCap { return q.cap }

// errSendNoQueue and errRecvNoQueue report a queue of zero entries.
var (
	errSendNoQueue = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "the QP has no send queue (max_send_wr 0)"}
	errRecvNoQueue = &verbsio.Error{Op: "post_recv", Errno: unix.EINVAL, Detail: "the QP has no receive queue (max_recv_wr 0, or it receives through an SRQ)"}
)

// PostSend implements verbsio.QPImpl: the batch is packed into the C ring
// and posted with one call to ibv_post_send, one crossing per 4096
// requests. When the last request of a crossing is signaled, the same
// crossing may also poll the send CQ (see postPoll); what it finds stays
// in the CQ's scratch for the next Poll, so completions come out of Poll
// as before, in order. It does not allocate.
func (q *hwQP) PostSend(wrs []verbsio.SendWR) (int, error) {
	if q.qp == nil {
		return 0, errSendClosed
	}
	return postChunks(wrs, q.send.pack, q.postSendChain, postSendErrs, errSendNoQueue)
}

// postSendChain posts the n requests packed in the ring, polling the send
// CQ in the same crossing when postPoll says so and the CQ's scratch has
// room after the completions it holds.
func (q *hwQP) postSendChain(n int) uint64 {
	first := (*C.struct_ibv_send_wr)(q.sendMem)
	cq := q.scq
	// An extended CQ is polled only through its own API: no poll in the
	// post's crossing.
	if cq != nil && cq.cq != nil && cq.ex == nil && cq.tail < len(cq.wcs) &&
		q.poll.want(q.sigAll || verbsio.SendFlags(q.send.wrs[n-1].flags)&verbsio.SendSignaled != 0) {
		if cq.head == cq.tail {
			cq.head, cq.tail = 0, 0
		}
		k := min(len(cq.wcs)-cq.tail, postPollMax)
		r := uint64(C.rperf_post_send_poll(q.qp, first, cq.cq, C.int(k), (*C.struct_ibv_wc)(unsafe.Pointer(&cq.wcs[cq.tail]))))
		if uint32(r) != 0 {
			return r
		}
		got := int(r >> 32)
		cq.tail += got
		q.poll.record(got)
		return 0
	}
	return uint64(C.rperf_post_send(q.qp, first))
}

// PostRecv implements verbsio.QPImpl like PostSend, with ibv_post_recv.
func (q *hwQP) PostRecv(wrs []verbsio.RecvWR) (int, error) {
	if q.qp == nil {
		return 0, errRecvClosed
	}
	return postChunks(wrs, q.recv.pack, func(int) uint64 {
		return uint64(C.rperf_post_recv(q.qp, (*C.struct_ibv_recv_wr)(q.recvMem)))
	}, postRecvErrs, errRecvNoQueue)
}

// Modify implements verbsio.QPImpl with ibv_modify_qp. The mask bits of
// verbsio are libibverbs' own. A rate limit with a burst size or typical
// packet size goes through ibv_modify_qp_rate_limit after the other
// attributes, since struct ibv_qp_attr has no room for them. The device,
// not this provider, checks the transition; on EINVAL the detail adds what
// verbs' rules (verbsio.CheckModify) say about the call.
func (q *hwQP) Modify(attr *verbsio.QPAttr, mask verbsio.QPAttrMask) error {
	q.c.mu.Lock()
	defer q.c.mu.Unlock()
	if q.qp == nil {
		return &verbsio.Error{Op: "modify_qp", Errno: unix.EBADF, Detail: "the QP was destroyed"}
	}
	rl := mask&verbsio.QPAttrRateLimit != 0 && (attr.MaxBurstSize != 0 || attr.TypicalPktSize != 0)
	if rl {
		mask &^= verbsio.QPAttrRateLimit
	}
	if mask != 0 {
		cur := verbsio.QPState(q.qp.state)
		ca := qpAttrToC(attr, mask)
		if ret, err := C.ibv_modify_qp(q.qp, &ca, C.int(mask)); ret != 0 {
			e := cerr("modify_qp", ret, err, "%s QP %#x %s->%s with %s", q.typ, q.qpn, cur, nextState(cur, attr, mask), mask)
			if e.Errno == unix.EINVAL {
				diag := *attr
				diag.PortNum = 1 // CheckModify knows the engine's single port
				var ve *verbsio.Error
				if _, derr := verbsio.CheckModify(q.typ, cur, &diag, mask); errors.As(derr, &ve) {
					e.Detail += "; verbs rules: " + ve.Detail
				}
			}
			return e
		}
	}
	if rl {
		ra := C.struct_ibv_qp_rate_limit_attr{
			rate_limit:     C.uint32_t(attr.RateLimit),
			max_burst_sz:   C.uint32_t(attr.MaxBurstSize),
			typical_pkt_sz: C.uint16_t(attr.TypicalPktSize),
		}
		if ret, err := C.ibv_modify_qp_rate_limit(q.qp, &ra); ret != 0 {
			return cerr("modify_qp_rate_limit", ret, err, "%d kbit/s, burst %d B, packet %d B (QueryDevice's PacketPacing has the range)", attr.RateLimit, attr.MaxBurstSize, attr.TypicalPktSize)
		}
	}
	return nil
}

func nextState(cur verbsio.QPState, a *verbsio.QPAttr, mask verbsio.QPAttrMask) verbsio.QPState {
	if mask&verbsio.QPAttrState != 0 {
		return a.State
	}
	return cur
}

// qpAttrAll is every attribute Query asks for.
const qpAttrAll = verbsio.QPAttrState | verbsio.QPAttrCurState | verbsio.QPAttrEnSQDAsyncNotify |
	verbsio.QPAttrAccessFlags | verbsio.QPAttrPkeyIndex | verbsio.QPAttrPort | verbsio.QPAttrQKey |
	verbsio.QPAttrAV | verbsio.QPAttrPathMTU | verbsio.QPAttrTimeout | verbsio.QPAttrRetryCnt |
	verbsio.QPAttrRNRRetry | verbsio.QPAttrRQPSN | verbsio.QPAttrMaxQPRdAtomic | verbsio.QPAttrMinRNRTimer |
	verbsio.QPAttrSQPSN | verbsio.QPAttrMaxDestRdAtomic | verbsio.QPAttrCap | verbsio.QPAttrDestQPN

// Query implements verbsio.QPImpl with ibv_query_qp.
func (q *hwQP) Query() (verbsio.QPAttr, error) {
	q.c.mu.Lock()
	defer q.c.mu.Unlock()
	if q.qp == nil {
		return verbsio.QPAttr{}, &verbsio.Error{Op: "query_qp", Errno: unix.EBADF, Detail: "the QP was destroyed"}
	}
	var ca C.struct_ibv_qp_attr
	var ia C.struct_ibv_qp_init_attr
	if ret, err := C.ibv_query_qp(q.qp, &ca, C.int(qpAttrAll), &ia); ret != 0 {
		return verbsio.QPAttr{}, cerr("query_qp", ret, err, "QP %#x", q.qpn)
	}
	return qpAttrFromC(&ca), nil
}

// qpAttrToC translates the fields of a selected by mask to struct
// ibv_qp_attr; the others stay zero.
func qpAttrToC(a *verbsio.QPAttr, mask verbsio.QPAttrMask) C.struct_ibv_qp_attr {
	var c C.struct_ibv_qp_attr
	set := func(m verbsio.QPAttrMask) bool { return mask&m != 0 }
	if set(verbsio.QPAttrState) {
		c.qp_state = C.enum_ibv_qp_state(a.State)
	}
	if set(verbsio.QPAttrCurState) {
		c.cur_qp_state = C.enum_ibv_qp_state(a.CurState)
	}
	if set(verbsio.QPAttrEnSQDAsyncNotify) && a.SQDrainNotify {
		c.en_sqd_async_notify = 1
	}
	if set(verbsio.QPAttrAccessFlags) {
		c.qp_access_flags = C.uint(a.AccessFlags)
	}
	if set(verbsio.QPAttrPkeyIndex) {
		c.pkey_index = C.uint16_t(a.PkeyIndex)
	}
	if set(verbsio.QPAttrPort) {
		c.port_num = C.uint8_t(a.PortNum)
	}
	if set(verbsio.QPAttrQKey) {
		c.qkey = C.uint32_t(a.QKey)
	}
	if set(verbsio.QPAttrAV) {
		c.ah_attr = ahAttrToC(&a.AH)
	}
	if set(verbsio.QPAttrPathMTU) {
		c.path_mtu = C.enum_ibv_mtu(a.PathMTU)
	}
	if set(verbsio.QPAttrTimeout) {
		c.timeout = C.uint8_t(a.Timeout)
	}
	if set(verbsio.QPAttrRetryCnt) {
		c.retry_cnt = C.uint8_t(a.RetryCnt)
	}
	if set(verbsio.QPAttrRNRRetry) {
		c.rnr_retry = C.uint8_t(a.RNRRetry)
	}
	if set(verbsio.QPAttrRQPSN) {
		c.rq_psn = C.uint32_t(a.RQPSN)
	}
	if set(verbsio.QPAttrMaxQPRdAtomic) {
		c.max_rd_atomic = C.uint8_t(a.MaxRdAtomic)
	}
	if set(verbsio.QPAttrMinRNRTimer) {
		c.min_rnr_timer = C.uint8_t(a.MinRNRTimer)
	}
	if set(verbsio.QPAttrSQPSN) {
		c.sq_psn = C.uint32_t(a.SQPSN)
	}
	if set(verbsio.QPAttrMaxDestRdAtomic) {
		c.max_dest_rd_atomic = C.uint8_t(a.MaxDestRdAtomic)
	}
	if set(verbsio.QPAttrCap) {
		c.cap = C.struct_ibv_qp_cap{
			max_send_wr:     C.uint32_t(a.Cap.MaxSendWR),
			max_recv_wr:     C.uint32_t(a.Cap.MaxRecvWR),
			max_send_sge:    C.uint32_t(a.Cap.MaxSendSGE),
			max_recv_sge:    C.uint32_t(a.Cap.MaxRecvSGE),
			max_inline_data: C.uint32_t(a.Cap.MaxInlineData),
		}
	}
	if set(verbsio.QPAttrDestQPN) {
		c.dest_qp_num = C.uint32_t(a.DestQPN)
	}
	if set(verbsio.QPAttrRateLimit) {
		c.rate_limit = C.uint32_t(a.RateLimit)
	}
	return c
}

// qpAttrFromC translates struct ibv_qp_attr back, every field.
func qpAttrFromC(c *C.struct_ibv_qp_attr) verbsio.QPAttr {
	return verbsio.QPAttr{
		State:       verbsio.QPState(c.qp_state),
		CurState:    verbsio.QPState(c.cur_qp_state),
		PathMTU:     verbsio.MTU(c.path_mtu),
		QKey:        uint32(c.qkey),
		RQPSN:       uint32(c.rq_psn),
		SQPSN:       uint32(c.sq_psn),
		DestQPN:     uint32(c.dest_qp_num),
		AccessFlags: verbsio.Access(c.qp_access_flags),
		Cap: verbsio.QPCap{
			MaxSendWR:     int(c.cap.max_send_wr),
			MaxRecvWR:     int(c.cap.max_recv_wr),
			MaxSendSGE:    int(c.cap.max_send_sge),
			MaxRecvSGE:    int(c.cap.max_recv_sge),
			MaxInlineData: int(c.cap.max_inline_data),
		},
		AH:              ahAttrFromC(&c.ah_attr),
		PkeyIndex:       uint16(c.pkey_index),
		PortNum:         uint8(c.port_num),
		Timeout:         uint8(c.timeout),
		RetryCnt:        uint8(c.retry_cnt),
		RNRRetry:        uint8(c.rnr_retry),
		MinRNRTimer:     uint8(c.min_rnr_timer),
		MaxRdAtomic:     uint8(c.max_rd_atomic),
		MaxDestRdAtomic: uint8(c.max_dest_rd_atomic),
		SQDrainNotify:   c.en_sqd_async_notify != 0,
		RateLimit:       uint32(c.rate_limit),
	}
}

// Destroy implements verbsio.QPImpl with ibv_destroy_qp, then frees the
// scratch.
func (q *hwQP) Destroy() error {
	q.c.mu.Lock()
	defer q.c.mu.Unlock()
	return q.destroyLocked()
}

func (q *hwQP) destroyLocked() error {
	if q.qp == nil {
		return nil
	}
	if ret, err := C.ibv_destroy_qp(q.qp); ret != 0 {
		return cerr("destroy_qp", ret, err, "QP %#x", q.qpn)
	}
	q.release()
	delete(q.c.qps, q)
	return nil
}

// release forgets the QP and frees its scratch.
func (q *hwQP) release() {
	q.qp = nil
	if q.sendMem != nil {
		C.free(q.sendMem)
	}
	if q.recvMem != nil {
		C.free(q.recvMem)
	}
	q.sendMem, q.recvMem = nil, nil
	q.send = sendRing{}
	q.recv = recvRing{}
}
