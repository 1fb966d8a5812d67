package soft

import (
	"sync/atomic"
	"unsafe"
)

// The control segment: one memfd per context that peers map to find the
// context's memory regions, queue pairs, completion queues and shared
// receive queues. Everything a peer reads from it is validated against the
// peer's own facts (its mapping sizes, the key it was given) before use: a
// corrupt table can make an operation fail, never touch memory outside a
// mapping.
const (
	ctrlMagic   = 0x31304d4853465052 // "RPFSHM01"
	ctrlVersion = 1

	maxMR     = 1 << 14
	maxRegion = 1 << 14
	maxQP     = 1 << 12
	maxCQ     = 1 << 12
	maxSRQ    = 1 << 10
	maxAH     = 1 << 14
	maxPD     = 1 << 12

	mrIndexBits = 14
	qpIndexBits = 12

	ctrlHeaderSize  = 4096
	mrEntrySize     = 64
	regionEntrySize = 32
	qpRecSize       = 128
	cqRecSize       = 32
	srqRecSize      = 64

	offMR     = ctrlHeaderSize
	offRegion = offMR + maxMR*mrEntrySize
	offQP     = offRegion + maxRegion*regionEntrySize
	offCQ     = offQP + maxQP*qpRecSize
	offSRQ    = offCQ + maxCQ*cqRecSize
	ctrlSize  = offSRQ + maxSRQ*srqRecSize
)

// Context states in the control header.
const (
	ctxOpen   = 1
	ctxClosed = 2
)

type ctrlHeader struct {
	magic   uint64
	version uint32
	state   atomic.Uint32
	pid     uint32
	nonce   uint32
}

// mrEntry describes a registered region to peers. key is written last when
// registering and first (to 0) when deregistering; users counts peers
// touching the region right now, so deregistration waits for them.
type mrEntry struct {
	key    atomic.Uint32
	users  atomic.Int32
	access atomic.Uint32
	pd     atomic.Uint32
	region atomic.Uint32 // region index + 1; 0: memory not shared, reach it with process_vm_*
	_      uint32
	addr   atomic.Uint64 // virtual address in the owner
	length atomic.Uint64
	regOff atomic.Uint64 // offset of addr inside the region's memfd
	_      [16]byte
}

// regionEntry describes a memfd peers may map.
type regionEntry struct {
	gen  atomic.Uint32 // 0: free
	fd   atomic.Uint32 // descriptor number in the owner
	ino  atomic.Uint64
	size atomic.Uint64
	_    uint64
}

// qpRecord describes a QP to peers sending to it.
type qpRecord struct {
	qpn        atomic.Uint32 // 0: free
	state      atomic.Uint32
	typ        atomic.Uint32
	pd         atomic.Uint32
	destQPN    atomic.Uint32 // RC/UC: the connected peer QP
	destNonce  atomic.Uint32 // RC/UC: the connected peer context
	qkey       atomic.Uint32
	access     atomic.Uint32 // QP access flags (remote write/read/atomic)
	minRNR     atomic.Uint32
	mtu        atomic.Uint32 // path MTU, bytes
	ringRegion atomic.Uint32 // region index + 1 of the QP's ring segment
	rqDepth    atomic.Uint32
	rqMaxSGE   atomic.Uint32
	srq        atomic.Uint32 // SRQ index + 1, or 0
	srqTag     atomic.Uint32
	recvCQ     atomic.Uint32 // CQ index + 1
	recvCQTag  atomic.Uint32
	_          [60]byte
}

// cqRecord describes a CQ to peers producing receive completions into it.
type cqRecord struct {
	tag    atomic.Uint32 // 0: free
	region atomic.Uint32 // region index + 1
	depth  atomic.Uint32
	_      [20]byte
}

// srqRecord describes an SRQ to peers consuming its WQEs.
type srqRecord struct {
	tag    atomic.Uint32 // 0: free
	region atomic.Uint32
	depth  atomic.Uint32
	maxSGE atomic.Uint32
	pd     atomic.Uint32
	_      [44]byte
}

// ctrlView gives typed access to a control segment mapping.
type ctrlView struct{ mem []byte }

func (v ctrlView) header() *ctrlHeader { return (*ctrlHeader)(unsafe.Pointer(&v.mem[0])) }
func (v ctrlView) mr(i uint32) *mrEntry {
	return (*mrEntry)(unsafe.Pointer(&v.mem[offMR+int(i%maxMR)*mrEntrySize]))
}
func (v ctrlView) region(i uint32) *regionEntry {
	return (*regionEntry)(unsafe.Pointer(&v.mem[offRegion+int(i%maxRegion)*regionEntrySize]))
}
func (v ctrlView) qp(i uint32) *qpRecord {
	return (*qpRecord)(unsafe.Pointer(&v.mem[offQP+int(i%maxQP)*qpRecSize]))
}
func (v ctrlView) cq(i uint32) *cqRecord {
	return (*cqRecord)(unsafe.Pointer(&v.mem[offCQ+int(i%maxCQ)*cqRecSize]))
}
func (v ctrlView) srq(i uint32) *srqRecord {
	return (*srqRecord)(unsafe.Pointer(&v.mem[offSRQ+int(i%maxSRQ)*srqRecSize]))
}

func init() {
	// The layout is an ABI between processes: fail loudly if a struct
	// outgrows its slot.
	if unsafe.Sizeof(mrEntry{}) != mrEntrySize || unsafe.Sizeof(regionEntry{}) != regionEntrySize ||
		unsafe.Sizeof(qpRecord{}) != qpRecSize || unsafe.Sizeof(cqRecord{}) != cqRecSize ||
		unsafe.Sizeof(srqRecord{}) != srqRecSize {
		panic("soft: control segment layout sizes changed")
	}
}

func mrIndex(key uint32) uint32 { return key & (maxMR - 1) }
func qpIndex(qpn uint32) uint32 { return qpn & (maxQP - 1) }
