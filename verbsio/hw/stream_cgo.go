//go:build linux && cgo && ibverbs

package hw

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// hwStream is verbsio.SendStream on one QP: rperf_stream runs the
// sender's post/poll loop in C on a thread of its own
// (rperf_stream_start) while the calling goroutine sleeps on a pipe, as
// hwTurn does for write_lat. On rxe each ibv_post_send of a large message
// is a system call that does the message's work (a millisecond or more
// under emulation); made from the goroutine's thread, each is a long cgo
// call that wakes sysmon and hands the P around (thousands of voluntary
// context switches per run, see docs/interop.md).
type hwStream struct {
	q        *hwQP
	released bool
	th       jobThread
	wr       [1]verbsio.SendWR
}

var (
	errStreamReleased = &verbsio.Error{Op: "send_stream", Errno: unix.EINVAL, Detail: "the family was released"}
	errStreamShape    = &verbsio.Error{Op: "send_stream", Errno: unix.EINVAL, Detail: "Depth and CQMod must be positive"}
	errStreamStamps   = &verbsio.Error{Op: "send_stream", Errno: unix.EINVAL, Detail: "PostStamps and CompStamps need Target entries each"}
)

// streamStamps is where the stamps begin in the job's mapping.
const streamStamps = (int(unsafe.Sizeof(C.struct_rperf_stream_job{})) + 63) &^ 63

// Stream implements verbsio.SendStream. Completions it leaves (not a
// success of the stream's tag) are in the send CQ's scratch for Poll. It
// runs only when that scratch holds nothing not yet returned (else it
// returns at once, having done nothing: the caller's Poll drains it).
func (t *hwStream) Stream(s *verbsio.Stream) error {
	q := t.q
	switch {
	case t.released:
		return errStreamReleased
	case q.qp == nil:
		return errSendClosed
	case s.Depth <= 0 || s.CQMod <= 0:
		return errStreamShape
	case (s.PostStamps != nil && int64(len(s.PostStamps)) < s.Target) || (s.CompStamps != nil && int64(len(s.CompStamps)) < s.Target):
		return errStreamStamps
	case s.Completed >= s.Target:
		return nil
	}
	cq := q.scq
	if cq == nil || cq.cq == nil || cq.ex != nil || cq.head != cq.tail {
		return nil
	}
	t.wr[0] = s.WR
	if _, err := q.send.pack(t.wr[:]); err != nil {
		return err
	}
	stamped := s.PostStamps != nil || s.CompStamps != nil
	need := streamStamps
	if stamped {
		need += 16 * int(s.Target)
	}
	if err := t.th.prepare("send_stream", need); err != nil {
		return err
	}
	cq.head, cq.tail = 0, 0
	j := (*C.struct_rperf_stream_job)(unsafe.Pointer(&t.th.mem[0]))
	*j = C.struct_rperf_stream_job{
		qp: q.qp, wr: (*C.struct_ibv_send_wr)(q.sendMem), cq: cq.cq,
		wc: (*C.struct_ibv_wc)(unsafe.Pointer(&cq.wcs[0])), nwc: C.int(len(cq.wcs)),
		tag: C.uint64_t(s.Tag), target: C.int64_t(s.Target), depth: C.int64_t(s.Depth), cq_mod: C.int64_t(s.CQMod),
		idle_ns: C.int64_t(max(s.Idle, 1)), budget_ns: C.int64_t(max(s.Budget, 1)),
		posted: C.int64_t(s.Posted), completed: C.int64_t(s.Completed), last_sig: C.int64_t(s.LastSig),
		fd: t.th.fd,
	}
	var posts, comps []int64
	if stamped {
		all := unsafe.Slice((*int64)(unsafe.Pointer(&t.th.mem[streamStamps])), 2*s.Target)
		posts, comps = all[:s.Target], all[s.Target:]
		j.post_stamps, j.comp_stamps = (*C.int64_t)(unsafe.Pointer(&posts[0])), (*C.int64_t)(unsafe.Pointer(&comps[0]))
		if s.PostStamps == nil {
			j.post_stamps = nil
		}
		if s.CompStamps == nil {
			j.comp_stamps = nil
		}
	}
	off := monoOffset()
	if ret := C.rperf_stream_start(j); ret != 0 {
		return verbsio.Errorf("send_stream", unix.Errno(ret), "start the stream's thread")
	}
	if err := t.th.wait("send_stream"); err != nil {
		return err
	}
	p0, c0 := s.Posted, s.Completed
	s.Posted, s.Completed, s.LastSig = int64(j.posted), int64(j.completed), int64(j.last_sig)
	if s.PostStamps != nil {
		for k := p0; k < s.Posted; k++ {
			s.PostStamps[k] = posts[k] + off
		}
	} else if p0 == 0 && s.Posted > 0 {
		s.First = int64(j.first) + off
	}
	if s.CompStamps != nil {
		for k := c0; k < min(s.Completed, s.Target); k++ {
			s.CompStamps[k] = comps[k] + off
		}
	}
	if c0 < s.Target && s.Completed >= s.Target {
		s.Last = int64(j.last) + off
	}
	if j.left_to > j.left_from {
		cq.head, cq.tail = int(j.left_from), int(j.left_to)
	}
	if j.post_err != 0 {
		return postSendErrs.errno(int(uint32(j.post_err)))
	}
	return nil
}

// monoOffset returns what turns a CLOCK_MONOTONIC reading into
// clock.Now's scale (the same clock from another origin).
func monoOffset() int64 {
	var a, c unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &a)
	b := clock.Now()
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &c)
	return b - (a.Nano()+c.Nano())/2
}

// Release implements verbsio.SendStream.
func (t *hwStream) Release() error {
	t.released = true
	t.th.release()
	return nil
}
