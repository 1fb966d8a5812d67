package ring

import (
	"unsafe"

	"github.com/rperf/rperf/verbsio/dv"
)

// Send ring layout.
const (
	SendWQEHdr = 64 // bytes of a send WQE before its SGEs or inline data
)

// SendWQE is the fixed part of a send WQE as stored in the send ring (its
// layout is direct verbs' ABI, defined in verbsio/dv). The SGEs
// (SGESize bytes each) or the inline payload follow it.
type SendWQE = dv.SendWQE

// SendStride is the bytes per send WQE with room for maxSGE SGEs or
// maxInline bytes of inline data, rounded up to 64.
func SendStride(maxSGE, maxInline int) int {
	body := maxSGE * SGESize
	if in := (maxInline + 15) &^ 15; in > body {
		body = in
	}
	return (SendWQEHdr + body + 63) &^ 63
}

// SQ is a view of a send ring.
type SQ struct {
	base   unsafe.Pointer
	mask   uint32
	stride uint32
	size   int
}

// SQSize is the bytes a send ring needs.
func SQSize(depth, maxSGE, maxInline int) int { return depth * SendStride(maxSGE, maxInline) }

// ViewSQ views mem as a send ring.
func ViewSQ(mem []byte, depth, maxSGE, maxInline int) (SQ, error) {
	if depth <= 0 || depth > 1<<24 || !isPow2(uint32(depth)) || len(mem) < SQSize(depth, maxSGE, maxInline) {
		return SQ{}, ErrBadRing
	}
	return SQ{base: unsafe.Pointer(&mem[0]), mask: uint32(depth - 1), stride: uint32(SendStride(maxSGE, maxInline)), size: SQSize(depth, maxSGE, maxInline)}, nil
}

// Stride is the bytes per WQE.
func (q SQ) Stride() int { return int(q.stride) }

// Depth is the number of WQE slots.
func (q SQ) Depth() uint32 { return q.mask + 1 }

// WQE returns the WQE at position pos.
func (q SQ) WQE(pos uint32) *SendWQE {
	return (*SendWQE)(unsafe.Add(q.base, uintptr(pos&q.mask)*uintptr(q.stride)))
}

// SGEs returns the SGE area of the WQE at pos, n entries long. The caller
// checks n against the QP's limit.
func (q SQ) SGEs(pos uint32, n int) []SGE {
	return unsafe.Slice((*SGE)(unsafe.Add(unsafe.Pointer(q.WQE(pos)), SendWQEHdr)), n)
}

// Inline returns the inline payload area of the WQE at pos, n bytes long.
func (q SQ) Inline(pos uint32, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(q.WQE(pos)), SendWQEHdr)), n)
}
