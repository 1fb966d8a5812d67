package dv

import (
	"errors"
	"sync/atomic"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
)

// Completion ring layout: byte offsets in CQRing.Buf. Every header word is a
// uint32 in the machine's byte order, accessed atomically.
const (
	CQHeaderSize = 256 // bytes before the first slot
	CQSlotSize   = 64  // bytes per slot: state word, CQE, padding
	CQEOffset    = 8   // the CQE follows the slot's 64-bit state word

	CQTailOff    = 0   // the next position producers claim (the producer index)
	CQHeadOff    = 64  // the engine's consumer index: the slots before it are free for producers
	CQOverrunOff = 136 // completions dropped because the ring was full
	CQLostOff    = 140 // completions lost because their producer died while writing them
	CQDepthOff   = 144 // slots
	CQFlagsOff   = 148 // the ring's options: CQFlagTimestamp
	CQDBRecOff   = 192 // the doorbell record: the application's consumer index
)

// Phases of a slot's state word (bits 32-33).
const (
	PhaseFree    = 0
	PhaseClaimed = 1
	PhaseReady   = 2
)

// ReadyState is the state word of a slot whose entry for position pos is
// ready to be read.
func ReadyState(pos uint32) uint64 { return uint64(pos) | PhaseReady<<32 }

// CQE is a completion entry as stored in a slot, CQEOffset bytes in.
type CQE struct {
	WRID      uint64
	ByteLen   uint32
	Imm       uint32
	QPN       uint32
	SrcQP     uint32
	WQEIndex  uint32 // send completions: the free-running send ring index of the WQE
	VendorErr uint32
	Status    uint8 // verbsio.Status
	Opcode    uint8 // verbsio.WCOpcode
	Flags     uint8 // verbsio.WCFlags
	_         uint8
	FlowTag   uint32 // verbsio.WC.FlowTag
	Timestamp uint64 // verbsio.WC.Timestamp: ns of CLOCK_REALTIME when the CQ was created with a timestamp flag, else 0
}

// CQEStructSize is the size of CQE.
const CQEStructSize = 48

// CQFlagTimestamp in the header word at CQFlagsOff says the engine stamps
// every entry (a CQ created with verbsio.WCExCompletionTimestamp).
const CQFlagTimestamp = 1 << 0

func init() {
	if unsafe.Sizeof(CQE{}) != CQEStructSize || CQEOffset+CQEStructSize > CQSlotSize {
		panic("dv: CQE layout")
	}
}

// WC fills wc from e, as CQ.Poll would.
func (e *CQE) WC(wc *verbsio.WC) {
	*wc = verbsio.WC{
		ID:        e.WRID,
		Status:    verbsio.Status(e.Status),
		Opcode:    verbsio.WCOpcode(e.Opcode),
		VendorErr: e.VendorErr,
		ByteLen:   e.ByteLen,
		Imm:       e.Imm,
		QPN:       e.QPN,
		SrcQP:     e.SrcQP,
		Flags:     verbsio.WCFlags(e.Flags),
		FlowTag:   e.FlowTag,
		Timestamp: e.Timestamp,
	}
}

// CQ is the direct view of a CQ's completion ring.
type CQ struct {
	CQRing
	ci    uint32 // consumer index
	read  uint32 // entries read since the engine last freed slots
	slots unsafe.Pointer
	head  *atomic.Uint32
	err   error
}

var errBadCQRing = errors.New("dv: the provider's completion ring does not have the documented layout")

// InitCQ takes cq's completion ring (mlx5dv_init_obj's CQ part).
func InitCQ(cq *verbsio.CQ) (*CQ, error) {
	p, ok := cq.Impl().(CQProvider)
	if !ok {
		return nil, ErrNoDV
	}
	r, err := p.DVCQ()
	if err != nil {
		return nil, err
	}
	if r.Depth == 0 || r.Depth&(r.Depth-1) != 0 || r.CQESize != CQSlotSize ||
		len(r.Buf) < CQHeaderSize+int(r.Depth)*CQSlotSize || r.DBRec == nil || r.Update == nil {
		return nil, errBadCQRing
	}
	c := &CQ{CQRing: r, slots: unsafe.Pointer(&r.Buf[CQHeaderSize]), head: (*atomic.Uint32)(unsafe.Pointer(&r.Buf[CQHeadOff]))}
	c.ci = c.head.Load()
	if d := r.DBRec.Load(); int32(d-c.ci) > 0 {
		c.ci = d // another view read entries the engine has not freed yet
	}
	return c, nil
}

// CI is the consumer index: the position of the next entry to read.
func (c *CQ) CI() uint32 { return c.ci }

// State returns the state word of the slot of position pos.
func (c *CQ) State(pos uint32) uint64 {
	return (*atomic.Uint64)(unsafe.Add(c.slots, uintptr(pos&(c.Depth-1))*CQSlotSize)).Load()
}

// Entry returns the CQE in the slot of position pos, without checking that
// it is ready.
func (c *CQ) Entry(pos uint32) *CQE {
	return (*CQE)(unsafe.Add(c.slots, uintptr(pos&(c.Depth-1))*CQSlotSize+CQEOffset))
}

// Peek returns the entry at the consumer index if it is ready, else nil;
// it consumes nothing.
func (c *CQ) Peek() *CQE {
	if c.State(c.ci) != ReadyState(c.ci) {
		return nil
	}
	return c.Entry(c.ci)
}

// Consume advances the consumer index past the entry Peek returned and
// stores it in the doorbell record.
func (c *CQ) Consume() {
	c.ci++
	c.read++
	c.DBRec.Store(c.ci)
}

// Next returns the next completion, read in place from the ring, and
// consumes it; nil when there is none. When the ring looks empty, and every
// Depth/2 entries, it rings the CQ doorbell (Update: the engine frees the
// slots read and makes progress). The entry stays valid until the next
// call of Next, Update or Poll on this CQ or a doorbell of a QP whose send
// CQ it is: copy what outlives that.
func (c *CQ) Next() *CQE {
	if c.read >= c.Depth/2 {
		c.update()
	}
	e := c.Peek()
	if e == nil {
		c.update()
		if e = c.Peek(); e == nil {
			return nil
		}
	}
	c.Consume()
	return e
}

func (c *CQ) update() {
	if err := c.Update(); err != nil && c.err == nil {
		c.err = err
	}
	c.read = 0
	if h := c.head.Load(); int32(h-c.ci) > 0 {
		// The engine consumed past us: through Poll, or skipping the slot
		// of a producer that died.
		c.ci = h
		c.DBRec.Store(h)
	}
}

// Err returns, and clears, the error the CQ doorbell reported since the
// last call: an overrun (completions were dropped) or a lost completion.
func (c *CQ) Err() error {
	err := c.err
	c.err = nil
	return err
}

// Overruns is the count of completions dropped because the ring was full.
func (c *CQ) Overruns() uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&c.Buf[CQOverrunOff])).Load()
}
