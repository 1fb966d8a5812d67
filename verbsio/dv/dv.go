// Package dv is direct verbs for the built-in engine, as mlx5dv is for
// mlx5: an application takes a QP's send ring and a CQ's completion ring
// (InitQP, InitCQ: buffers, WQE and CQE layout, producer and consumer
// indices, doorbell records), writes work requests into the send ring
// itself, rings the doorbell once per batch and reads completions straight
// from the completion ring. It is the fastest way to post and poll: no work
// request or completion structs, no per-request call, one engine call per
// batch. SetAllocator lets the application supply the queues' memory.
//
// # Send ring and doorbell record
//
// QPRing.Buf holds Depth slots of Stride bytes; the WQE at free-running
// index i is in slot i mod Depth. A WQE is a SendWQE followed by NumSGE
// SGEs (verbsio.SGE, 16 bytes each) or, with SendInline, InlineLen bytes of
// data. The send doorbell record DBRec is a uint32 in the DBRecSize bytes
// that follow the ring in the same send queue buffer. To post, the
// application writes WQEs at the producer index, stores the index after the
// last one in DBRec and rings the doorbell (QP.Ring, or QPRing.RingDB): the
// engine reads DBRec and executes every WQE before it. Ringing is a call
// rather than a store to a doorbell register because the engine is
// software that runs in the application's process when asked: the call is
// mlx5's doorbell (UAR) write, DBRec its doorbell record. Slots are free
// again once the engine has executed their WQE (on udp: once the peer
// acknowledged it); QPRing.Free tells how many are.
//
// The engine trusts nothing it reads from the ring and checks every WQE
// when it executes it, so misuse completes with an error status and never
// makes the engine touch memory outside registered regions:
//   - a malformed WQE (an opcode the QP type does not take, more SGEs than
//     MaxSGE, more inline data than MaxInline, a bad lkey, an SGE outside
//     its region) completes with LOC_QP_OP_ERR, LOC_LEN_ERR or LOC_PROT_ERR
//     and moves the QP to ERR, as verbs does;
//   - a doorbell record past the ring (more new WQEs than free slots, or an
//     index behind the producer index) moves the QP to ERR: the WQEs the
//     engine had accepted complete with WR_FLUSH_ERR, the first WQE the
//     doorbell claimed completes with LOC_QP_OP_ERR and VendorErr
//     VendorErrDoorbell, the rest are dropped, and RingDB also returns
//     ErrDoorbell. The QP cannot go on because the application has
//     overwritten slots the engine still owned (WQEs not executed yet, or,
//     on udp, not yet acknowledged, which a retransmission rereads); only a
//     reset (modify to RESET, then INIT, RTR, RTS) clears it.
//
// QPRing.Doorbell(pi), the explicit-index doorbell, is the checked variant:
// it refuses an index past the ring with an error before storing it and
// leaves the QP as it was (useful while developing; it is what the first
// version of this package offered).
//
// # Completion ring and consumer index
//
// CQRing.Buf holds a CQHeaderSize-byte header, then Depth slots of
// CQSlotSize bytes; the entry at free-running position p is in slot p mod
// Depth. A slot starts with a 64-bit state word: the position the slot is
// for in bits 0-31, the phase in bits 32-33 (0 free, 1 claimed by a
// producer, 2 ready) and the producer's pid in bits 34-63. The entry at the
// consumer index ci belongs to the application when the state word equals
// ReadyState(ci) (mlx5's owner bit); the CQE follows the state word, at
// CQEOffset. The application reads it, advances ci and stores ci in the CQ
// doorbell record DBRec (at CQDBRecOff in the header), as mlx5's set_ci.
//
// The engine frees the slots before DBRec, applying each entry's effects as
// if it had been polled (a send completion frees send ring slots, an error
// completion moves its QP to ERR), when it next runs for the CQ: the CQ
// doorbell CQRing.Update, the Poll paths, verbsio.CQ.Wait, or a doorbell of
// a QP whose send CQ it is. Producers (this process's engine and, on the
// shm fabric, peer processes) see only slot states: a slot the application
// has read counts as full until the engine frees it, so ring Update at
// least once per Depth/2 entries. Update also runs the engine's progress
// (on udp the engine receives only when something drives it, unless
// background progress runs) and reports overruns and lost completions as
// verbsio.CQ.Poll does (the header counts them at CQOverrunOff and
// CQLostOff). CQ.Next does all this: it reads from the ring and rings
// Update when the ring looks empty and every Depth/2 entries.
//
// The WQE and CQE layouts are the engine's ABI; they are the same on the
// shm and udp fabrics. Posting through verbsio.QP.PostSend, or polling
// through verbsio.CQ.Poll, while the rings are used directly works (the
// indices resynchronize) but shares the rings: use one or the other.
//
// # Queue memory from the application
//
// SetAllocator installs alloc and free callbacks on a context (as
// mlx5dv_set_context_attr with MLX5DV_CTX_ATTR_BUF_ALLOCATORS). Queues
// created afterwards take their buffers from it where the memory is the
// creating process's alone; SetAllocator returns that set:
//   - shm fabric: send queues (the ring and its doorbell record). Receive
//     queues, SRQs and CQs stay in the engine's shared segments (memfd) and
//     the allocator is not asked for them: peer processes map them, a sender
//     claiming receive WQEs from the receiver's receive queue or SRQ and
//     pushing completions into its CQ, so they must be shared memory the
//     engine can pass to a peer by file descriptor.
//   - udp fabric: send queues, receive queues and CQs: peers reach them
//     only through packets that this process's engine handles. SRQ rings
//     stay in the engine's memory on both fabrics.
//
// Alloc(res, size, align) returns at least size bytes whose address is a
// multiple of align (QueueAlign); the engine zeroes and formats them. An
// error from Alloc fails the create call with an *AllocError matching
// ENOMEM and the error Alloc returned; a buffer too small or misaligned is
// given back to Free and the create call fails with an *AllocError
// matching EINVAL. Free is called exactly once for every buffer a
// successful Alloc returned, with the same slice: when the object is
// destroyed, when the context closes, or when the create call fails after
// taking it. Both callbacks run on the goroutine creating or
// destroying the object (or closing the context), without the engine's
// locks held, so they may call into verbsio (Context.Alloc, say). The memory
// must stay valid and unused by the application until Free. Objects keep
// the allocator they were created with; installing another one, or none
// (the zero Allocator), affects later objects only.
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
	// (see the package documentation: the QP goes to ERR).
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
