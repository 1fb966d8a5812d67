package ring

import (
	"sync/atomic"
	"unsafe"
)

// Work queue layouts.
const (
	WQHeaderSize = 128 // bytes before the first receive WQE
	SGESize      = 16
	RecvWQEHdr   = 16 // bytes of a receive WQE before its SGEs
)

// SGE is a scatter/gather entry as stored in a WQE.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WQHeader is the header of a receive ring: the producer index, written by
// the owner, and the consumer index, advanced by compare-and-swap.
type WQHeader struct {
	PI atomic.Uint32
	_  [60]byte
	CI atomic.Uint32
	_  [60]byte
}

// A receive WQE is read by consumers while the owner may be rewriting the
// slot (a consumer that loses the CAS race discards what it read), so every
// word is accessed atomically; on amd64 these are plain moves.
type recvWQEHdr struct {
	wrID atomic.Uint64
	nsge atomic.Uint32
	_    uint32
}

type sgeWords struct {
	addr atomic.Uint64
	lk   atomic.Uint64 // Length | LKey<<32
}

// RQ is a view of a receive ring (a QP's receive queue or an SRQ).
type RQ struct {
	hdr    *WQHeader
	base   unsafe.Pointer
	mask   uint32
	stride uint32
	maxSGE uint32
}

// RecvStride is the bytes per receive WQE with room for maxSGE SGEs.
func RecvStride(maxSGE int) int { return RecvWQEHdr + maxSGE*SGESize }

// RQSize is the bytes a receive ring needs.
func RQSize(depth, maxSGE int) int { return WQHeaderSize + depth*RecvStride(maxSGE) }

// ViewRQ views mem as a receive ring of depth WQEs with room for maxSGE
// SGEs each. It checks that the geometry fits mem and trusts nothing else.
func ViewRQ(mem []byte, depth, maxSGE int) (RQ, error) {
	if depth <= 0 || depth > 1<<24 || !isPow2(uint32(depth)) || maxSGE <= 0 || maxSGE > 256 ||
		len(mem) < RQSize(depth, maxSGE) {
		return RQ{}, ErrBadRing
	}
	return RQ{
		hdr:    (*WQHeader)(unsafe.Pointer(&mem[0])),
		base:   unsafe.Pointer(&mem[WQHeaderSize]),
		mask:   uint32(depth - 1),
		stride: uint32(RecvStride(maxSGE)),
		maxSGE: uint32(maxSGE),
	}, nil
}

// Valid reports whether r views a ring.
func (r RQ) Valid() bool { return r.hdr != nil }

// Header returns the ring header.
func (r RQ) Header() *WQHeader { return r.hdr }

// Depth is the number of WQE slots.
func (r RQ) Depth() uint32 { return r.mask + 1 }

// MaxSGE is the SGE capacity of each WQE.
func (r RQ) MaxSGE() int { return int(r.maxSGE) }

func (r RQ) wqe(pos uint32) unsafe.Pointer {
	return unsafe.Add(r.base, uintptr(pos&r.mask)*uintptr(r.stride))
}

// Free is the number of slots the producer may still fill.
func (r RQ) Free() uint32 { return r.mask + 1 - (r.hdr.PI.Load() - r.hdr.CI.Load()) }

// Write stores a WQE at position pi (the caller checked there is room and
// that len(sges) <= MaxSGE). Publish makes written WQEs visible.
func (r RQ) Write(pi uint32, wrID uint64, sges []SGE) {
	w := r.wqe(pi)
	h := (*recvWQEHdr)(w)
	h.wrID.Store(wrID)
	h.nsge.Store(uint32(len(sges)))
	dst := unsafe.Slice((*sgeWords)(unsafe.Add(w, RecvWQEHdr)), len(sges))
	for i := range sges {
		dst[i].addr.Store(sges[i].Addr)
		dst[i].lk.Store(uint64(sges[i].Length) | uint64(sges[i].LKey)<<32)
	}
}

// Publish makes the WQEs before pi visible to consumers.
func (r RQ) Publish(pi uint32) { r.hdr.PI.Store(pi) }

// Claim takes the next WQE for a consumer: it copies its ID and SGEs (into
// sges, which must hold MaxSGE entries) and returns the number of SGEs.
// ok is false when the ring is empty. A WQE whose SGE count is corrupt is
// claimed and returned with n = -1 so the caller can fail it.
func (r RQ) Claim(sges []SGE) (wrID uint64, n int, ok bool) {
	for {
		ci := r.hdr.CI.Load()
		if ci == r.hdr.PI.Load() {
			return 0, 0, false
		}
		w := r.wqe(ci)
		h := (*recvWQEHdr)(w)
		wrID = h.wrID.Load()
		nsge := h.nsge.Load()
		n = -1
		if nsge <= r.maxSGE && int(nsge) <= len(sges) {
			n = int(nsge)
			src := unsafe.Slice((*sgeWords)(unsafe.Add(w, RecvWQEHdr)), n)
			for i := range src {
				lk := src[i].lk.Load()
				sges[i] = SGE{Addr: src[i].addr.Load(), Length: uint32(lk), LKey: uint32(lk >> 32)}
			}
		}
		if r.hdr.CI.CompareAndSwap(ci, ci+1) {
			return wrID, n, true
		}
	}
}

// Empty reports whether no WQE is waiting.
func (r RQ) Empty() bool { return r.hdr.CI.Load() == r.hdr.PI.Load() }
