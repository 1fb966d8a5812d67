package ring

import "unsafe"

// Send ring layout.
const (
	SendWQEHdr = 64 // bytes of a send WQE before its SGEs or inline data
)

// SendWQE is the fixed part of a send WQE as stored in the send ring. The
// SGEs (SGESize bytes each) or the inline payload follow it.
type SendWQE struct {
	WRID       uint64 // 0
	Opcode     uint8  // 8: verbsio.Opcode
	Flags      uint8  // 9: verbsio.SendFlags
	NumSGE     uint16 // 10
	InlineLen  uint32 // 12: bytes of inline payload (Flags has INLINE)
	Imm        uint32 // 16
	RKey       uint32 // 20
	RAddr      uint64 // 24
	CompareAdd uint64 // 32
	Swap       uint64 // 40
	UDQPN      uint32 // 48
	UDQKey     uint32 // 52
	AH         uint32 // 56: address handle number (UD)
	_          uint32 // 60
}

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
