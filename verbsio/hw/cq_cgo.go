//go:build linux && cgo && ibverbs

package hw

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"math"
	"time"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// maxPollBatch bounds a CQ's C array of struct ibv_wc. A Poll asking for
// more completions crosses into C once per maxPollBatch.
const maxPollBatch = 4096

// hwCQ is a completion queue (struct ibv_cq) with its own completion
// channel, which Wait sleeps on. It is owned by one goroutine at a time.
type hwCQ struct {
	c       *hwContext
	cq      *C.struct_ibv_cq // nil once destroyed
	channel *C.struct_ibv_comp_channel
	fd      int // the channel's fd, non-blocking
	depth   int

	mem unsafe.Pointer // C array of len(wcs) struct ibv_wc
	wcs []cWC          // Poll's scratch, in mem

	// An extended CQ (CreateCQEx: ibv_create_cq_ex) is polled through
	// ex with the fields wcFlags names; its completion timestamps and
	// flow tags land in ts and tags (C arrays beside wcs, same indices).
	ex      *C.struct_ibv_cq_ex
	wcFlags C.uint64_t
	exMem   unsafe.Pointer
	ts      []C.uint64_t
	tags    []C.uint32_t
	// wcs[head:tail] are completions already taken out of the CQ and not
	// yet returned: the one Wait found, or those a post on a QP of this
	// CQ polled in its crossing (hwQP.PostSend). Poll returns them first.
	head, tail int
}

// CreateCQ implements verbsio.ContextImpl: ibv_create_comp_channel, then
// ibv_create_cq bound to it, then the C scratch Poll converts from.
func (c *hwContext) CreateCQ(attr verbsio.CQInitAttr) (verbsio.CQImpl, error) {
	if attr.CQE <= 0 || attr.CQE > math.MaxInt32 {
		return nil, verbsio.Errorf("create_cq", unix.EINVAL, "cqe %d", attr.CQE)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return nil, errClosedCtx("create_cq")
	}
	ch, err := C.ibv_create_comp_channel(c.ctx)
	if ch == nil {
		return nil, verbsio.Errorf("create_comp_channel", errnoOf(err, unix.EMFILE), "%s", c.name)
	}
	fd := int(ch.fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		C.ibv_destroy_comp_channel(ch)
		return nil, verbsio.Errorf("create_comp_channel", errnoOf(err, unix.EINVAL), "set the channel fd non-blocking")
	}
	var cq *C.struct_ibv_cq
	var cqx *C.struct_ibv_cq_ex
	if attr.WCFlags != 0 {
		// ibv_create_cq_ex: a device that cannot give a field asked for
		// refuses the CQ (EOPNOTSUPP), as verbs has it.
		cqx, err = C.rperf_create_cq_ex(c.ctx, C.int(attr.CQE), ch, C.uint64_t(attr.WCFlags))
		if cqx == nil {
			C.ibv_destroy_comp_channel(ch)
			return nil, verbsio.Errorf("create_cq_ex", errnoOf(err, unix.EOPNOTSUPP), "%d entries with wc_flags %s (the device's completion_timestamp_mask and hca_core_clock say whether it stamps; rdiag info)", attr.CQE, attr.WCFlags)
		}
		cq = C.rperf_cq_ex_to_cq(cqx)
	} else if cq, err = C.ibv_create_cq(c.ctx, C.int(attr.CQE), nil, ch, 0); cq == nil {
		C.ibv_destroy_comp_channel(ch)
		return nil, verbsio.Errorf("create_cq", errnoOf(err, unix.EINVAL), "%d entries (the device allows max_cqe; see QueryDevice)", attr.CQE)
	}
	q, err := newCQ(c, unsafe.Pointer(cq), int(cq.cqe))
	if err == nil && cqx != nil {
		err = q.extend(unsafe.Pointer(cqx), attr.WCFlags)
	}
	if err != nil {
		if q != nil {
			q.release()
		}
		C.ibv_destroy_cq(cq)
		C.ibv_destroy_comp_channel(ch)
		return nil, err
	}
	q.channel, q.fd = ch, fd
	c.cqs[q] = struct{}{}
	return q, nil
}

// newCQ wraps a struct ibv_cq * and allocates its scratch. Tests call it
// with a fake CQ whose context's ops are test functions.
func newCQ(c *hwContext, cq unsafe.Pointer, depth int) (*hwCQ, error) {
	n := max(1, min(depth, maxPollBatch))
	mem := C.calloc(C.size_t(n), C.sizeof_struct_ibv_wc)
	if mem == nil {
		return nil, verbsio.Errorf("create_cq", unix.ENOMEM, "completion scratch of %d entries", n)
	}
	return &hwCQ{
		c:     c,
		cq:    (*C.struct_ibv_cq)(cq),
		fd:    -1,
		depth: depth,
		mem:   mem,
		wcs:   unsafe.Slice((*cWC)(mem), n),
	}, nil
}

// extend makes q an extended CQ polled through cqx (a struct
// ibv_cq_ex *, whose struct ibv_cq q already holds) with the fields
// flags names, and allocates the C arrays its timestamps and flow tags
// land in. Tests call it with the fake's extended CQ.
func (q *hwCQ) extend(cqx unsafe.Pointer, flags verbsio.CQWCFlags) error {
	n := len(q.wcs)
	mem := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.uint64_t(0))+unsafe.Sizeof(C.uint32_t(0))))
	if mem == nil {
		return verbsio.Errorf("create_cq_ex", unix.ENOMEM, "timestamp scratch of %d entries", n)
	}
	q.ex, q.wcFlags, q.exMem = (*C.struct_ibv_cq_ex)(cqx), C.uint64_t(flags), mem
	q.ts = unsafe.Slice((*C.uint64_t)(mem), n)
	q.tags = unsafe.Slice((*C.uint32_t)(unsafe.Add(mem, n*int(unsafe.Sizeof(C.uint64_t(0))))), n)
	return nil
}

// pollC polls up to want completions into the scratch from index at: one
// ibv_poll_cq, or for an extended CQ one start/next/end poll crossing. It
// returns their number or a negative value on error.
func (q *hwCQ) pollC(want, at int) int {
	if q.ex != nil {
		return int(C.rperf_poll_cq_ex(q.ex, C.int(want), (*C.struct_ibv_wc)(unsafe.Pointer(&q.wcs[at])), &q.ts[at], &q.tags[at], q.wcFlags))
	}
	return int(C.rperf_poll_cq(q.cq, C.int(want), (*C.struct_ibv_wc)(unsafe.Pointer(&q.wcs[at]))))
}

// convert converts the scratch's entries from index at into dst, with an
// extended CQ's timestamps and flow tags.
func (q *hwCQ) convert(dst []verbsio.WC, at int) {
	convertWCs(dst, q.wcs[at:at+len(dst)])
	if q.ex == nil {
		return
	}
	for i := range dst {
		dst[i].Timestamp, dst[i].FlowTag = uint64(q.ts[at+i]), uint32(q.tags[at+i])
	}
}

// Poll implements verbsio.CQImpl: one ibv_poll_cq into the C scratch per
// min(len(wcs), 4096) entries, then a conversion into wcs. It does not
// allocate. Completions already taken out of the CQ (by Wait, or by a
// post that polled in its crossing) come first, without a crossing; only
// when they do not fill wcs does Poll ask the CQ for more.
func (q *hwCQ) Poll(wcs []verbsio.WC) (int, error) {
	if q.cq == nil {
		return 0, errPollClosed
	}
	n := 0
	if q.head < q.tail {
		n = min(q.tail-q.head, len(wcs))
		q.convert(wcs[:n], q.head)
		q.head += n
		if q.head < q.tail {
			return n, nil
		}
		q.head, q.tail = 0, 0
	}
	for n < len(wcs) {
		want := min(len(wcs)-n, len(q.wcs))
		got := q.pollC(want, 0)
		if got < 0 {
			return n, pollErrs.errno(int(unix.EIO))
		}
		q.convert(wcs[n:n+got], 0)
		n += got
		if got < want {
			break
		}
	}
	return n, nil
}

// Wait implements verbsio.CQImpl with the CQ's completion channel: it arms
// the CQ (ibv_req_notify_cq), polls once to catch a completion that came
// before the arming, and otherwise sleeps in poll(2) on the channel fd until
// an event (read and acknowledged with ibv_get_cq_event and
// ibv_ack_cq_events) or the timeout. The completion it finds is kept and
// returned first by the next Poll. It does not busy-poll.
func (q *hwCQ) Wait(timeout time.Duration) error {
	if q.cq == nil {
		return errPollClosed
	}
	if q.head < q.tail {
		return nil
	}
	q.head, q.tail = 0, 0
	deadline := time.Now().Add(timeout)
	for {
		if ret := C.rperf_req_notify_cq(q.cq, 0); ret != 0 {
			return verbsio.Errorf("req_notify_cq", unix.Errno(abs(int(ret))), "arm the CQ")
		}
		got := q.pollC(1, 0)
		if got < 0 {
			return pollErrs.errno(int(unix.EIO))
		}
		if got == 1 {
			q.tail = 1
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return verbsio.ErrTimeout
		}
		if q.fd < 0 {
			// No channel (a test's fake CQ): nothing can wake us.
			time.Sleep(left)
			continue
		}
		ms := int(min((left+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
		fds := [1]unix.PollFd{{Fd: int32(q.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds[:], ms); err != nil && err != unix.EINTR {
			return verbsio.Errorf("get_cq_event", errnoOf(err, unix.EIO), "poll the completion channel")
		}
		if fds[0].Revents&unix.POLLIN != 0 {
			q.drainEvents()
		}
	}
}

// drainEvents reads and acknowledges every pending event of the channel.
func (q *hwCQ) drainEvents() {
	var n C.uint
	for {
		var evCQ *C.struct_ibv_cq
		var evCtx unsafe.Pointer
		if C.ibv_get_cq_event(q.channel, &evCQ, &evCtx) != 0 {
			break // EAGAIN: drained
		}
		n++
	}
	if n > 0 {
		C.ibv_ack_cq_events(q.cq, n)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// Depth implements verbsio.CQImpl: the entries the device granted.
func (q *hwCQ) Depth() int { return q.depth }

// Destroy implements verbsio.CQImpl with ibv_destroy_cq (EBUSY while QPs
// use it), then destroys the completion channel and frees the scratch.
func (q *hwCQ) Destroy() error {
	q.c.mu.Lock()
	defer q.c.mu.Unlock()
	return q.destroyLocked()
}

func (q *hwCQ) destroyLocked() error {
	if q.cq == nil {
		return nil
	}
	if ret, err := C.ibv_destroy_cq(q.cq); ret != 0 {
		return cerr("destroy_cq", ret, err, "queue pairs still use the CQ")
	}
	q.cq = nil
	if q.channel != nil {
		C.ibv_destroy_comp_channel(q.channel)
		q.channel, q.fd = nil, -1
	}
	q.release()
	delete(q.c.cqs, q)
	return nil
}

// release frees the scratch.
func (q *hwCQ) release() {
	q.cq = nil
	if q.mem != nil {
		C.free(q.mem)
		q.mem, q.wcs, q.head, q.tail = nil, nil, 0, 0
	}
	if q.exMem != nil {
		C.free(q.exMem)
		q.ex, q.exMem, q.ts, q.tags = nil, nil, nil, nil
	}
}
