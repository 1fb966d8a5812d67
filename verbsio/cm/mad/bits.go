package mad

import (
	"fmt"

	"github.com/rperf/rperf/verbsio"
)

// Fields are located as the IBTA message tables give them: a byte offset
// into the message data, a bit offset from the most significant bit of that
// byte, and a width in bits. A field may span bytes (a 24-bit QPN at byte 32,
// bit 0) and is big-endian.

// decoder reads fields from message data.
type decoder struct{ b []byte }

func (d *decoder) bits(off, bit, width int) uint64 {
	start := off*8 + bit
	var v uint64
	for i := 0; i < width; i++ {
		p := start + i
		v = v<<1 | uint64(d.b[p/8]>>(7-p%8)&1)
	}
	return v
}

func (d *decoder) u8(off, bit, width int) uint8 { return uint8(d.bits(off, bit, width)) }
func (d *decoder) u16(off int) uint16           { return uint16(d.bits(off, 0, 16)) }
func (d *decoder) u32(off, width int) uint32    { return uint32(d.bits(off, 0, width)) }
func (d *decoder) u64(off int) uint64           { return d.bits(off, 0, 64) }
func (d *decoder) flag(off, bit int) bool       { return d.bits(off, bit, 1) == 1 }
func (d *decoder) bytes(off int, dst []byte)    { copy(dst, d.b[off:off+len(dst)]) }
func (d *decoder) gid(off int) (g verbsio.GID)  { copy(g[:], d.b[off:off+16]); return g }

// encoder writes fields into zeroed message data. In recording mode (used
// non-nil) it marks the bits each field occupies instead of checking values,
// and panics if two fields overlap: a layout bug, caught by the tests.
type encoder struct {
	b    []byte
	used []byte
	err  error
}

func (e *encoder) put(name string, off, bit, width int, v uint64) {
	start := off*8 + bit
	if e.used != nil {
		for i := 0; i < width; i++ {
			p := start + i
			m := byte(1) << (7 - p%8)
			if e.used[p/8]&m != 0 {
				panic(fmt.Sprintf("mad: field %s overlaps another at byte %d", name, p/8))
			}
			e.used[p/8] |= m
		}
		return
	}
	if width < 64 && v>>width != 0 {
		if e.err == nil {
			e.err = newErr("encode", fmt.Sprintf("%s = %#x does not fit in %d bits", name, v, width), ErrRange)
		}
		return
	}
	for i := width - 1; i >= 0; i-- {
		p := start + i
		if v&1 != 0 {
			e.b[p/8] |= 1 << (7 - p%8)
		}
		v >>= 1
	}
}

func (e *encoder) flag(name string, off, bit int, v bool) {
	var x uint64
	if v {
		x = 1
	}
	e.put(name, off, bit, 1, x)
}

func (e *encoder) bytes(name string, off int, src []byte) {
	if e.used != nil {
		for i := range src {
			if e.used[off+i] != 0 {
				panic(fmt.Sprintf("mad: field %s overlaps another at byte %d", name, off+i))
			}
			e.used[off+i] = 0xff
		}
		return
	}
	copy(e.b[off:], src)
}
