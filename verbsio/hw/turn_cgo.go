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

// hwTurn is verbsio.WriteTurn on one QP: the requests are packed in Go
// before the crossing, and rperf_turn spins, stamps, stores the marker,
// posts and (as PostSend does, see postPoll) polls the send CQ in C.
type hwTurn struct {
	q        *hwQP
	stamp    C.int64_t
	released bool
}

var (
	errTurnReleased = &verbsio.Error{Op: "write_turn", Errno: unix.EINVAL, Detail: "the family was released"}
	errTurnBatch    = &verbsio.Error{Op: "write_turn", Errno: unix.EINVAL, Detail: "a turn posts between 1 and the QP's max_send_wr requests"}
	errTurnNil      = &verbsio.Error{Op: "write_turn", Errno: unix.EINVAL, Detail: "no marker byte to store (markAt is nil)"}
)

// turnWaiting is rperf_turn's RPERF_TURN_WAITING.
const turnWaiting = ^uint64(0)

// Turn implements verbsio.WriteTurn. It does not allocate.
func (t *hwTurn) Turn(wait *byte, want byte, spins int, markAt *byte, mark byte, wrs []verbsio.SendWR) (int64, bool, error) {
	q := t.q
	switch {
	case t.released:
		return 0, false, errTurnReleased
	case q.qp == nil:
		return 0, false, errSendClosed
	case len(wrs) == 0 || len(wrs) > len(q.send.wrs):
		return 0, false, errTurnBatch
	case markAt == nil:
		return 0, false, errTurnNil
	}
	n, err := q.send.pack(wrs)
	if err != nil {
		return 0, false, err
	}
	first := (*C.struct_ibv_send_wr)(q.sendMem)
	signaled := q.sigAll || verbsio.SendFlags(q.send.wrs[n-1].flags)&verbsio.SendSignaled != 0
	// The poll decision is postSendChain's, taken only once the turn
	// posts (would, then want).
	cq := q.scq
	var ccq *C.struct_ibv_cq
	var wc *C.struct_ibv_wc
	k := 0
	asks := cq != nil && cq.cq != nil && cq.ex == nil && cq.tail < len(cq.wcs)
	if asks && q.poll.would(signaled) {
		if cq.head == cq.tail {
			cq.head, cq.tail = 0, 0
		}
		ccq, k = cq.cq, min(len(cq.wcs)-cq.tail, postPollMax)
		wc = (*C.struct_ibv_wc)(unsafe.Pointer(&cq.wcs[cq.tail]))
	}
	r := uint64(C.rperf_turn((*C.uint8_t)(unsafe.Pointer(wait)), C.uint8_t(want), C.uint64_t(max(spins, 1)),
		(*C.uint8_t)(unsafe.Pointer(markAt)), C.uint8_t(mark), &t.stamp, q.qp, first, ccq, C.int(k), wc))
	if r == turnWaiting {
		return 0, false, nil
	}
	if uint32(r) != 0 {
		return 0, false, postSendErrs.errno(int(uint32(r)))
	}
	if asks {
		q.poll.want(signaled) // counts the post as postSendChain does
	}
	if ccq != nil {
		got := int(r >> 32)
		cq.tail += got
		q.poll.record(got)
	}
	return int64(t.stamp), true, nil
}

// Release implements verbsio.WriteTurn.
func (t *hwTurn) Release() error {
	t.released = true
	return nil
}
