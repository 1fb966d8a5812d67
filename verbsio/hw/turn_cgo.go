//go:build linux && cgo && ibverbs

package hw

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// families are the interface families the provider offers, with their
// highest versions.
var families = map[string]int{verbsio.FamilyWriteTurn: 1}

// QueryInterface implements verbsio.Interfacer. The provider offers one
// family, verbsio.FamilyWriteTurn, bound to an RC or UC QP of this
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
	return &hwTurn{q: qp}, verbsio.IntfOK
}

// hwTurn is verbsio.WriteTurn on one QP: the request is packed in Go
// before the crossing, and rperf_turns runs the turns in C.
type hwTurn struct {
	q        *hwQP
	owed     C.int
	postErr  C.uint64_t
	released bool
}

var (
	errTurnReleased = &verbsio.Error{Op: "write_turn", Errno: unix.EINVAL, Detail: "the family was released"}
	errTurnOne      = &verbsio.Error{Op: "write_turn", Errno: unix.EINVAL, Detail: "a turn posts one signaled request"}
	errTurnNil      = &verbsio.Error{Op: "write_turn", Errno: unix.EINVAL, Detail: "no marker byte to store (markAt is nil)"}
)

// Turns implements verbsio.WriteTurn. The completions found are taken in
// C when they are the request's successes; one that is not (or that did
// not come in time) is left for the send CQ's Poll, in order: the turns
// poll in C only when the CQ's scratch holds nothing not yet returned.
// It does not allocate.
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
	n := int(C.rperf_turns((*C.uint8_t)(unsafe.Pointer(wait)), C.uint8_t(want), C.uint64_t(max(spins, 1)),
		(*C.uint8_t)(unsafe.Pointer(markAt)), C.uint8_t(mark), (*C.int64_t)(unsafe.Pointer(&stamps[0])), C.int(len(stamps)),
		q.qp, (*C.struct_ibv_send_wr)(q.sendMem), ccq, wc, &t.owed, &t.postErr))
	if t.postErr != 0 {
		return n, false, postSendErrs.errno(int(uint32(t.postErr)))
	}
	if t.owed == 2 {
		cq.tail = 1 // the completion found, for Poll
	}
	return n, t.owed != 0, nil
}

// Release implements verbsio.WriteTurn.
func (t *hwTurn) Release() error {
	t.released = true
	return nil
}
