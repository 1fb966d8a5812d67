//go:build linux && cgo && ibverbs

package hw

/*
#include "shim.h"
*/
import "C"

import (
	"os"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// families are the interface families the provider offers, with their
// highest versions.
var families = map[string]int{verbsio.FamilyWriteTurn: 1, verbsio.FamilySendStream: 1}

// QueryInterface implements verbsio.Interfacer. The provider offers two
// families, verbsio.FamilyWriteTurn and verbsio.FamilySendStream (not on
// a QP that signals every request or whose send CQ is extended), bound to an RC or UC QP of this
// context. It is not listed in DeviceAttr.Interfaces, which names the
// MLNX_OFED-style families (qp_burst, cq_poll) the provider does not have.
func (c *hwContext) QueryInterface(q verbsio.InterfaceQuery) (any, verbsio.InterfaceStatus) {
	if st := verbsio.CheckQuery(q, families); st != verbsio.IntfOK {
		return nil, st
	}
	if q.Object == nil {
		return nil, verbsio.IntfOK
	}
	qp, ok := q.Object.(*hwQP)
	if !ok || qp.c != c || qp.qp == nil || (qp.typ != verbsio.QPTypeRC && qp.typ != verbsio.QPTypeUC) {
		return nil, verbsio.IntfInvalObj
	}
	if q.Family == verbsio.FamilySendStream {
		if qp.sigAll || qp.scq == nil || qp.scq.ex != nil {
			return nil, verbsio.IntfInvalObj // the stream polls with ibv_poll_cq and counts its signaled requests
		}
		return &hwStream{q: qp}, verbsio.IntfOK
	}
	return &hwTurn{q: qp}, verbsio.IntfOK
}

// hwTurn is verbsio.WriteTurn on one QP: the request is packed in Go
// before the crossing, and rperf_turns runs the turns in C, on a thread
// of its own (rperf_turns_start) while the calling goroutine sleeps on a
// pipe. The measured loop is then one spinning thread, as perftest's.
// With the turns on the goroutine's own thread, the Go runtime treats the
// call as a long system call: sysmon keeps waking to look at it, preempts
// it after 10 ms, and each yield or preemption wakes another thread to
// look for work; on the interop bench's two vCPUs, shared by two spinning
// processes, those threads took the CPU from a spinner (see
// docs/interop.md). A sleeping goroutine leaves every P idle, so the
// runtime parks its threads and sysmon until the turns end.
type hwTurn struct {
	q        *hwQP
	owed     C.int
	postErr  C.uint64_t
	released bool

	// The thread's side: the job and its stamps in memory outside the Go
	// heap, and the pipe on whose read end the goroutine parks until the
	// thread is done.
	th jobThread
}

// jobThread is what a call that runs a C job on a thread of its own
// needs: the job's memory outside the Go heap, and the pipe on whose read
// end the goroutine parks until the thread writes its byte.
type jobThread struct {
	mem  []byte
	r, w *os.File
	fd   C.int
	one  [1]byte
}

// prepare makes the pipe (first call) and a mapping of at least need
// bytes: system calls, no crossing into C.
func (t *jobThread) prepare(op string, need int) error {
	if t.r == nil {
		r, w, err := os.Pipe()
		if err != nil {
			return verbsio.Errorf(op, errnoOf(err, unix.EMFILE), "a pipe for the job's thread: %v", err)
		}
		t.r, t.w = r, w
		t.fd = C.int(w.Fd())
	}
	if len(t.mem) < need {
		m, err := mmapAnon(need)
		if err != nil {
			return err
		}
		if t.mem != nil {
			unix.Munmap(t.mem)
		}
		t.mem = m
	}
	return nil
}

// wait parks the goroutine until the thread has written its byte.
func (t *jobThread) wait(op string) error {
	if _, err := t.r.Read(t.one[:]); err != nil {
		return verbsio.Errorf(op, unix.EIO, "wait for the job's thread: %v", err)
	}
	return nil
}

// release closes the pipe and unmaps the memory.
func (t *jobThread) release() {
	if t.r != nil {
		t.r.Close()
		t.w.Close()
		t.r, t.w = nil, nil
	}
	if t.mem != nil {
		unix.Munmap(t.mem)
		t.mem = nil
	}
}

var (
	errTurnReleased = &verbsio.Error{Op: "write_turn", Errno: unix.EINVAL, Detail: "the family was released"}
	errTurnOne      = &verbsio.Error{Op: "write_turn", Errno: unix.EINVAL, Detail: "a turn posts one signaled request"}
	errTurnNil      = &verbsio.Error{Op: "write_turn", Errno: unix.EINVAL, Detail: "no marker byte to store (markAt is nil)"}
)

// Turns implements verbsio.WriteTurn. A call starts one thread and wakes
// the caller once: callers ask for many turns per call. The completions found are taken in
// C when they are the request's successes; one that is not (or that did
// not come in time) is left for the send CQ's Poll, in order: the turns
// poll in C only when the CQ's scratch holds nothing not yet returned.
// It does not allocate after the first call, which makes the pipe and
// maps the job's memory.
func (t *hwTurn) Turns(wait *byte, want byte, spins int, markAt *byte, mark byte, wrs []verbsio.SendWR, stamps []int64) (int, bool, error) {
	q := t.q
	switch {
	case t.released:
		return 0, false, errTurnReleased
	case q.qp == nil:
		return 0, false, errSendClosed
	case len(wrs) != 1 || (!q.sigAll && wrs[0].Flags&verbsio.SendSignaled == 0):
		return 0, false, errTurnOne
	case markAt == nil:
		return 0, false, errTurnNil
	case len(stamps) == 0:
		return 0, false, nil
	}
	if _, err := q.send.pack(wrs); err != nil {
		return 0, false, err
	}
	cq := q.scq
	var ccq *C.struct_ibv_cq
	var wc *C.struct_ibv_wc
	if cq != nil && cq.cq != nil && cq.ex == nil && cq.head == cq.tail {
		cq.head, cq.tail = 0, 0
		ccq, wc = cq.cq, (*C.struct_ibv_wc)(unsafe.Pointer(&cq.wcs[0]))
	}
	n, err := t.onThread(wait, want, spins, markAt, mark, ccq, wc, stamps)
	if err != nil {
		return 0, false, err
	}
	if t.postErr != 0 {
		return n, false, postSendErrs.errno(int(uint32(t.postErr)))
	}
	if t.owed == 2 {
		cq.tail = 1 // the completion found, for Poll
	}
	return n, t.owed != 0, nil
}

// jobStamps is where the job's stamps begin in its mapping: after the
// job, on a cache line of their own.
const jobStamps = (int(unsafe.Sizeof(C.struct_rperf_turn_job{})) + 63) &^ 63

// onThread runs the turns on a thread of their own (rperf_turns_start)
// and parks the goroutine on the job's pipe until they are done. The job,
// its stamps and the pipe are made on the first call (system calls, no
// crossing into C): a call crosses once.
func (t *hwTurn) onThread(wait *byte, want byte, spins int, markAt *byte, mark byte, ccq *C.struct_ibv_cq, wc *C.struct_ibv_wc, stamps []int64) (int, error) {
	if err := t.th.prepare("write_turn", jobStamps+8*len(stamps)); err != nil {
		return 0, err
	}
	j := (*C.struct_rperf_turn_job)(unsafe.Pointer(&t.th.mem[0]))
	out := unsafe.Slice((*int64)(unsafe.Pointer(&t.th.mem[jobStamps])), len(stamps))
	*j = C.struct_rperf_turn_job{
		wait: (*C.uint8_t)(unsafe.Pointer(wait)), want: C.uint8_t(want), spins: C.uint64_t(max(spins, 1)),
		mark_at: (*C.uint8_t)(unsafe.Pointer(markAt)), mark: C.uint8_t(mark),
		stamps: (*C.int64_t)(unsafe.Pointer(&out[0])), n: C.int(len(stamps)),
		qp: t.q.qp, wr: (*C.struct_ibv_send_wr)(t.q.sendMem), cq: ccq, wc: wc, fd: t.th.fd,
	}
	if ret := C.rperf_turns_start(j); ret != 0 {
		return 0, verbsio.Errorf("write_turn", unix.Errno(ret), "start the turns' thread")
	}
	if err := t.th.wait("write_turn"); err != nil {
		return 0, err
	}
	n := int(j.ret)
	copy(stamps[:n], out[:n])
	t.owed, t.postErr = j.owed, j.post_err
	return n, nil
}

// Release implements verbsio.WriteTurn.
func (t *hwTurn) Release() error {
	t.released = true
	t.th.release()
	return nil
}
