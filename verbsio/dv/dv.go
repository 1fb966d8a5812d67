// Package dv is direct verbs for the built-in engine: an application takes
// a QP's send ring and a CQ's completion ring (buffer, WQE and CQE layout,
// producer and consumer indices) and writes work requests into the ring
// itself, then rings the doorbell once for the batch. It is the fastest
// way to post: no work request structs, no per-call validation before the
// engine's own, one provider call per batch.
//
// The engine still checks every WQE when it executes it (opcode, SGE
// count, keys, bounds): a malformed WQE completes with an error status
// (LOC_QP_OP_ERR, LOC_LEN_ERR, LOC_PROT_ERR) and never makes the engine
// touch memory outside registered regions; a doorbell that claims more
// WQEs than the ring has free slots is refused with an error.
//
// The WQE layout (SendWQE, then SGEs or inline data, Stride bytes per
// slot) and the CQE layout are the engine's ABI; they are the same on the
// shm and udp fabrics.
package dv

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
)

// SendWQE is the fixed 64-byte part of a send WQE. SGEs (16 bytes each:
// address, length, lkey) or inline data follow it in the slot.
type SendWQE struct {
	WRID       uint64 // returned in the completion
	Opcode     uint8  // verbsio.Opcode
	Flags      uint8  // verbsio.SendFlags; SendInline: InlineLen bytes follow instead of SGEs
	NumSGE     uint16
	InlineLen  uint32
	Imm        uint32
	RKey       uint32
	RAddr      uint64
	CompareAdd uint64
	Swap       uint64
	UDQPN      uint32
	UDQKey     uint32
	AH         uint32 // address handle number (UD)
	_          uint32
}

// WQEHeaderSize is the size of SendWQE.
const WQEHeaderSize = 64

// SGESize is the size of one SGE in a WQE.
const SGESize = 16

func init() {
	if unsafe.Sizeof(SendWQE{}) != WQEHeaderSize || unsafe.Sizeof(verbsio.SGE{}) != SGESize {
		panic("dv: WQE layout")
	}
}

// QPRing is what a provider hands out for a QP.
type QPRing struct {
	Buf       []byte // the send ring
	Stride    int    // bytes per WQE slot
	Depth     uint32 // slots, a power of two
	MaxSGE    int
	MaxInline int
	QPN       uint32
	// Doorbell executes the WQEs written up to producer index pi (free
	// running: slot = pi mod Depth). Producer returns the index the engine
	// has consumed up to (the next free position), and Free the slots
	// that may be written.
	Doorbell func(pi uint32) error
	Producer func() uint32
	Free     func() uint32
}

// CQRing is what a provider hands out for a CQ.
type CQRing struct {
	Buf     []byte // the completion ring: header, then Depth slots
	Depth   uint32
	CQESize int
	// Poll consumes the next completion into wc, reporting false when the
	// ring is empty (the engine's progress runs first, as for CQ.Poll).
	Poll func(wc *verbsio.WC) bool
}

// Provider is implemented by the QPs and CQs of providers with direct verbs.
type Provider interface {
	DVQP() (QPRing, error)
}

// CQProvider is implemented by CQs with direct verbs.
type CQProvider interface {
	DVCQ() (CQRing, error)
}

// ErrNoDV says that the provider offers no direct verbs for the object.
var ErrNoDV = errors.New("dv: the provider offers no direct verbs for this object")

// QP is the direct view of a QP's send ring.
type QP struct {
	QPRing
	pi uint32
}

// InitQP takes the send ring of qp (mlx5dv_init_obj's QP part). Posting
// through verbsio.QP.PostSend afterwards still works but shares the ring:
// use one or the other.
func InitQP(qp *verbsio.QP) (*QP, error) {
	p, ok := qp.Impl().(Provider)
	if !ok {
		return nil, ErrNoDV
	}
	r, err := p.DVQP()
	if err != nil {
		return nil, err
	}
	return &QP{QPRing: r, pi: r.Producer()}, nil
}

// PI is the producer index: the slot the next WQE goes in.
func (q *QP) PI() uint32 { return q.pi }

// Slot returns the raw bytes of the slot at position pos.
func (q *QP) Slot(pos uint32) []byte {
	off := int(pos&(q.Depth-1)) * q.Stride
	return q.Buf[off : off+q.Stride : off+q.Stride]
}

// WQE returns the WQE at position pos, to be filled in place.
func (q *QP) WQE(pos uint32) *SendWQE { return (*SendWQE)(unsafe.Pointer(&q.Slot(pos)[0])) }

// SGEs returns n SGE slots of the WQE at pos.
func (q *QP) SGEs(pos uint32, n int) []verbsio.SGE {
	s := q.Slot(pos)
	if n > (len(s)-WQEHeaderSize)/SGESize {
		n = (len(s) - WQEHeaderSize) / SGESize
	}
	return unsafe.Slice((*verbsio.SGE)(unsafe.Pointer(&s[WQEHeaderSize])), n)
}

// Inline returns the inline data area of the WQE at pos, n bytes.
func (q *QP) Inline(pos uint32, n int) []byte {
	s := q.Slot(pos)
	return s[WQEHeaderSize : WQEHeaderSize+min(n, len(s)-WQEHeaderSize)]
}

// Next returns the WQE at the producer index and advances it; call
// Doorbell once the batch is written. It returns nil when the ring has no
// free slot (poll completions first).
func (q *QP) Next() (*SendWQE, uint32) {
	if int32(q.pi-q.Producer()) < 0 {
		q.pi = q.Producer() // the QP was posted to through verbsio since
	}
	if q.pi-q.Producer() >= q.Free() {
		return nil, 0
	}
	pos := q.pi
	q.pi++
	return q.WQE(pos), pos
}

// Ring rings the doorbell for every WQE written since the last one.
func (q *QP) Ring() error { return q.Doorbell(q.pi) }

// CQ is the direct view of a CQ.
type CQ struct{ CQRing }

// InitCQ takes cq's completion ring.
func InitCQ(cq *verbsio.CQ) (*CQ, error) {
	p, ok := cq.Impl().(CQProvider)
	if !ok {
		return nil, ErrNoDV
	}
	r, err := p.DVCQ()
	if err != nil {
		return nil, err
	}
	return &CQ{r}, nil
}

// String describes the ring.
func (q *QP) String() string {
	return fmt.Sprintf("dv qp %#x: %d slots of %d bytes", q.QPN, q.Depth, q.Stride)
}
