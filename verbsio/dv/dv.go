// Package dv is direct verbs for the built-in engine, as mlx5dv is for
// mlx5: an application takes a QP's send ring and a CQ's completion ring
// (InitQP, InitCQ), writes work requests into the send ring itself, rings
// the doorbell once per batch (QP.Ring) and reads completions straight
// from the completion ring (CQ.Next); SetAllocator lets it supply the
// queues' memory. It is the fastest way to post and poll: no work request
// or completion structs, one engine call per batch. The engine still
// checks every WQE it executes, so a misused ring completes with an error
// status and never makes it touch memory outside registered regions.
//
// The specification — ring and entry layouts, the doorbell record and
// consumer index protocol, what a malformed WQE or a doorbell past the
// ring does, and the allocator's contract — is in docs/verbsio.md
// (section "Direct verbs"); the declarations below document each field.
package dv

import (
	"errors"
	"fmt"
	"sync/atomic"
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

// DBRecSize is the bytes after the send ring that hold its doorbell
// record (the record is the first uint32; the rest is reserved).
const DBRecSize = 64

// VendorErrDoorbell is the vendor error of the completion that reports a
// doorbell record past the ring.
const VendorErrDoorbell = 0xdb01

// ErrDoorbell is returned by RingDB (and QP.Ring) when the doorbell record
// claimed more WQEs than the ring holds; the QP is in ERR.
var ErrDoorbell = errors.New("dv: doorbell record past the ring: more new WQEs than free slots; the QP is in ERR (reset it)")

func init() {
	if unsafe.Sizeof(SendWQE{}) != WQEHeaderSize || unsafe.Sizeof(verbsio.SGE{}) != SGESize {
		panic("dv: WQE layout")
	}
}

// QPRing is what a provider hands out for a QP.
type QPRing struct {
	Buf       []byte // the send ring: Depth slots of Stride bytes
	Stride    int    // bytes per WQE slot
	Depth     uint32 // slots, a power of two
	MaxSGE    int
	MaxInline int
	QPN       uint32
	// DBRec is the send doorbell record: the application stores the
	// free-running producer index (the position after the last WQE
	// written) before ringing. It lives in the DBRecSize bytes after Buf.
	DBRec *atomic.Uint32
	// RingDB is the doorbell: the engine reads DBRec and executes the WQEs
	// before it. It returns an error, and executes nothing, when the QP is
	// not in RTS, SQD or ERR; and ErrDoorbell when DBRec is past the ring
	// (the QP goes to ERR; docs/verbsio.md, "Direct verbs").
	RingDB func() error
	// Doorbell is the checked doorbell: it stores pi in DBRec and rings,
	// unless pi is past the ring, which it refuses with an error,
	// changing nothing.
	Doorbell func(pi uint32) error
	// Producer returns the engine's producer index (the position after the
	// last WQE it accepted), and Free the slots that may be written from
	// there.
	Producer func() uint32
	Free     func() uint32
}

// CQRing is what a provider hands out for a CQ.
type CQRing struct {
	Buf     []byte // the completion ring: CQHeaderSize bytes, then Depth slots
	Depth   uint32 // slots, a power of two
	CQESize int    // bytes per slot (CQSlotSize)
	// DBRec is the CQ doorbell record: the consumer index the application
	// stores after reading entries (at CQDBRecOff in Buf).
	DBRec *atomic.Uint32
	// Update is the CQ doorbell: the engine frees the slots before DBRec,
	// applying their entries' effects, runs its progress, and reports an
	// overrun or a lost completion as verbsio.CQ.Poll does.
	Update func() error
	// Poll consumes the next completion into wc through the engine,
	// reporting false when the ring is empty (the engine's progress runs
	// first, as for CQ.Poll).
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

// InitQP takes the send ring of qp (mlx5dv_init_obj's QP part). After the
// QP is reset (modified to RESET), its indices start again at 0: call
// InitQP again.
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

// Next returns the WQE at the producer index and advances it; call Ring
// once the batch is written. It returns nil when the ring has no free slot
// (poll completions first).
func (q *QP) Next() (*SendWQE, uint32) {
	p := q.Producer()
	if d := q.pi - p; int32(d) < 0 || d > q.Depth {
		q.pi = p // the QP was posted to through verbsio, or reset, since
	}
	if q.pi-p >= q.Free() {
		return nil, 0
	}
	pos := q.pi
	q.pi++
	return q.WQE(pos), pos
}

// Ring stores the producer index in the doorbell record and rings the
// doorbell: the engine executes every WQE written since the last Ring.
func (q *QP) Ring() error {
	if p := q.Producer(); int32(q.pi-p) < 0 {
		q.pi = p // posted to through verbsio since
	}
	q.DBRec.Store(q.pi)
	err := q.RingDB()
	if errors.Is(err, ErrDoorbell) {
		q.pi = q.Producer() // the engine dropped what it could not take
	}
	return err
}

// String describes the ring.
func (q *QP) String() string {
	return fmt.Sprintf("dv qp %#x: %d slots of %d bytes", q.QPN, q.Depth, q.Stride)
}
