package ring

import (
	"errors"
	"sync/atomic"
	"time"
	"unsafe"
)

// Completion ring layout.
const (
	CQHeaderSize = 256 // bytes before the first slot
	CQESize      = 64  // bytes per slot
)

const (
	phaseFree    = 0
	phaseClaimed = 1
	phaseReady   = 2
)

// CQHeader is the header of a completion ring. Fields on separate cache
// lines are written by different parties.
type CQHeader struct {
	Tail    atomic.Uint32 // next position producers claim
	_       [60]byte
	Head    atomic.Uint32 // next position the consumer reads (published for observers)
	_       [60]byte
	Notify  atomic.Uint32 // futex word, bumped when a waiter is armed
	Armed   atomic.Uint32 // 1 while the consumer sleeps or is about to
	Overrun atomic.Uint32 // count of completions dropped because the ring was full
	Lost    atomic.Uint32 // count of slots skipped because their producer died
	Depth   uint32        // slots, a power of two
	// Flags are the ring's options (FlagTimestamp), set by the owner at
	// creation; producers in any process read them.
	Flags atomic.Uint32
	_     [40]byte
	// DBRec is the consumer's doorbell record (direct verbs): an
	// application that reads entries straight from the ring stores the
	// position after the last one it read; the owner's engine frees the
	// slots before it (Consumer.Pos to DBRec) when it next runs.
	DBRec atomic.Uint32
	_     [60]byte
}

// CQE is a completion entry as stored in a slot (after the state word).
type CQE struct {
	WRID      uint64
	ByteLen   uint32
	Imm       uint32
	QPN       uint32
	SrcQP     uint32
	SQIdx     uint32 // send completions: the send ring index of the WQE
	VendorErr uint32
	Status    uint8
	Opcode    uint8
	Flags     uint8
	_         uint8
	FlowTag   uint32 // receives: the tag of the steering rule that delivered it
	Timestamp uint64 // when the completion was produced, ns of CLOCK_REALTIME (FlagTimestamp)
}

// FlagTimestamp in CQHeader.Flags asks producers to stamp every entry:
// Push sets CQE.Timestamp, unless the producer set it already (a raw
// receive carries the kernel's stamp of its frame).
const FlagTimestamp = 1 << 0

// Clock is the engine's completion clock: nanoseconds of CLOCK_REALTIME
// (the clock the kernel stamps received frames with), read through the
// vDSO without allocating.
func Clock() uint64 { return uint64(time.Now().UnixNano()) }

type cqSlot struct {
	state atomic.Uint64
	e     CQE
	_     [CQESize - 8 - unsafe.Sizeof(CQE{})]byte
}

// CQ is a view of a completion ring in (shared) memory.
type CQ struct {
	hdr   *CQHeader
	slots unsafe.Pointer
	mask  uint32
}

// CQSize is the bytes a ring of depth slots needs.
func CQSize(depth int) int { return CQHeaderSize + depth*CQESize }

// ErrBadRing says that memory does not hold a valid ring.
var ErrBadRing = errors.New("ring: memory too small or depth not a power of two")

func isPow2(n uint32) bool { return n != 0 && n&(n-1) == 0 }

// InitCQ formats mem as an empty ring of depth slots.
func InitCQ(mem []byte, depth int) (CQ, error) {
	if depth <= 0 || depth > 1<<24 || !isPow2(uint32(depth)) || len(mem) < CQSize(depth) {
		return CQ{}, ErrBadRing
	}
	r := view(mem, uint32(depth))
	*r.hdr = CQHeader{} // the memory may come from an application's allocator
	r.hdr.Depth = uint32(depth)
	for i := uint32(0); i < uint32(depth); i++ {
		r.slot(i).state.Store(uint64(i))
	}
	return r, nil
}

// AttachCQ views mem, formatted by InitCQ possibly in another process, as a
// ring. It trusts nothing in mem: the depth must match what the owner
// published elsewhere and fit the mapping.
func AttachCQ(mem []byte, depth int) (CQ, error) {
	if depth <= 0 || depth > 1<<24 || !isPow2(uint32(depth)) || len(mem) < CQSize(depth) {
		return CQ{}, ErrBadRing
	}
	return view(mem, uint32(depth)), nil
}

func view(mem []byte, depth uint32) CQ {
	return CQ{
		hdr:   (*CQHeader)(unsafe.Pointer(&mem[0])),
		slots: unsafe.Pointer(&mem[CQHeaderSize]),
		mask:  depth - 1,
	}
}

// Valid reports whether r views a ring.
func (r CQ) Valid() bool { return r.hdr != nil }

// Header returns the ring header.
func (r CQ) Header() *CQHeader { return r.hdr }

// Depth is the number of slots.
func (r CQ) Depth() uint32 { return r.mask + 1 }

func (r CQ) slot(pos uint32) *cqSlot {
	return (*cqSlot)(unsafe.Add(r.slots, uintptr(pos&r.mask)*CQESize))
}

func free(pos uint32) uint64         { return uint64(pos) }
func claimed(pos, pid uint32) uint64 { return uint64(pos) | phaseClaimed<<32 | uint64(pid)<<34 }
func ready(pos uint32) uint64        { return uint64(pos) | phaseReady<<32 }
func split(s uint64) (pos, phase, pid uint32) {
	return uint32(s), uint32(s>>32) & 3, uint32(s >> 34)
}

// Push adds e to the ring on behalf of process pid and wakes a sleeping
// consumer. It returns false, and counts an overrun, when the ring is full.
func (r CQ) Push(e *CQE, pid uint32) bool {
	for {
		t := r.hdr.Tail.Load()
		s := r.slot(t)
		st := s.state.Load()
		pos, phase, _ := split(st)
		switch {
		case pos == t && phase == phaseFree:
			if !s.state.CompareAndSwap(st, claimed(t, pid)) {
				continue
			}
			r.hdr.Tail.CompareAndSwap(t, t+1)
			if e.Timestamp == 0 && r.hdr.Flags.Load()&FlagTimestamp != 0 {
				e.Timestamp = Clock()
			}
			s.e = *e
			s.state.Store(ready(t))
			if r.hdr.Armed.Load() != 0 {
				r.hdr.Armed.Store(0)
				r.hdr.Notify.Add(1)
				wake(&r.hdr.Notify)
			}
			return true
		case pos == t:
			// Another producer claimed t; help the tail along.
			r.hdr.Tail.CompareAndSwap(t, t+1)
		case int32(pos-t) < 0:
			// The slot still holds a position from the previous lap: full.
			if r.hdr.Tail.Load() == t {
				r.hdr.Overrun.Add(1)
				return false
			}
		}
	}
}

// Consumer reads a ring. It is used by one goroutine of the ring's owner.
type Consumer struct {
	r    CQ
	head uint32
}

// NewConsumer returns the consumer of r.
func NewConsumer(r CQ) *Consumer { return &Consumer{r: r, head: r.hdr.Head.Load()} }

// Pos is the next position the consumer reads.
func (c *Consumer) Pos() uint32 { return c.head }

// Ring returns the ring being consumed.
func (c *Consumer) Ring() CQ { return c.r }

// Poll copies the next entry into e and returns Ready; or returns Empty; or
// Claimed with the pid of the producer that holds the next slot but has not
// published it yet.
func (c *Consumer) Poll(e *CQE) (st PollState, pid uint32) {
	s := c.r.slot(c.head)
	v := s.state.Load()
	pos, phase, p := split(v)
	if pos != c.head {
		return Empty, 0
	}
	switch phase {
	case phaseReady:
		*e = s.e
		s.state.Store(free(c.head + c.r.mask + 1))
		c.head++
		c.r.hdr.Head.Store(c.head)
		return Ready, 0
	case phaseClaimed:
		return Claimed, p
	}
	return Empty, 0
}

// Peek reports what Poll would find, without consuming anything.
func (c *Consumer) Peek() (st PollState, pid uint32) {
	pos, phase, p := split(c.r.slot(c.head).state.Load())
	if pos != c.head {
		return Empty, 0
	}
	switch phase {
	case phaseReady:
		return Ready, 0
	case phaseClaimed:
		return Claimed, p
	}
	return Empty, 0
}

// NonEmpty reports whether the next slot is ready, without consuming it.
func (c *Consumer) NonEmpty() bool {
	pos, phase, _ := split(c.r.slot(c.head).state.Load())
	return pos == c.head && phase == phaseReady
}

// SkipClaimed frees the next slot if it is still claimed by pid (whose
// process has died) and counts a lost completion. It reports whether it
// skipped.
func (c *Consumer) SkipClaimed(pid uint32) bool {
	s := c.r.slot(c.head)
	if !s.state.CompareAndSwap(claimed(c.head, pid), free(c.head+c.r.mask+1)) {
		return false
	}
	c.head++
	c.r.hdr.Head.Store(c.head)
	c.r.hdr.Lost.Add(1)
	return true
}

// PollState says what Consumer.Poll found.
type PollState uint8

// Poll results.
const (
	Empty PollState = iota
	Ready
	Claimed
)
