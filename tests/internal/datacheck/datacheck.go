// Package datacheck gives test messages contents that the receiving side
// can verify byte by byte (rperf's --validate).
//
// A message is named by a 64-bit id: who sent it, on which QP, in which
// run, and its number in the run ([ID]). Its contents are a pure function
// of the id and the offset: the first 8 bytes hold the id (little endian),
// and every further 8-byte word w holds a 64-bit mix of the id and w
// ([Fill]). A receiver that knows which message it expects compares every
// byte ([Check]); one that may have missed messages (UC, UD) reads the
// number from the message first ([Number]). A message of n bytes is the
// first n bytes of that stream, so a shorter message is a prefix of a
// longer one with the same id.
//
// Filling and checking cost about a nanosecond per 8 bytes; the tests do
// neither unless validation was asked for.
package datacheck

import (
	"encoding/binary"
	"fmt"
)

// Side bits of an id: who wrote the message.
const (
	Client = 0
	Server = 1
)

// ID names message k (0-based, below 2^32) of a run on a QP, sent by side
// (Client or Server). Runs and QPs are taken modulo 2^16 and 2^15.
func ID(side, qp, run int, k int64) uint64 {
	return uint64(side&1)<<63 | uint64(qp&0x7fff)<<48 | uint64(run&0xffff)<<32 | uint64(uint32(k))
}

// word returns the w-th 8-byte word of message id.
func word(id uint64, w int) uint64 {
	if w == 0 {
		return id
	}
	z := id + uint64(w)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Fill writes message id's contents into b (all of b).
func Fill(b []byte, id uint64) {
	n := len(b) / 8
	for w := 0; w < n; w++ {
		binary.LittleEndian.PutUint64(b[8*w:], word(id, w))
	}
	if t := len(b) - 8*n; t > 0 {
		var last [8]byte
		binary.LittleEndian.PutUint64(last[:], word(id, n))
		copy(b[8*n:], last[:t])
	}
}

// Mismatch is the first byte of a buffer that differs from the message
// it should hold.
type Mismatch struct {
	ID        uint64 // the message expected
	Off, Size int    // the offset of the first wrong byte, and the size checked
	Got, Want byte
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("byte %d of %d is %#02x, want %#02x (message id %#016x)", m.Off, m.Size, m.Got, m.Want, m.ID)
}

// Check compares b with message id's first len(b) bytes and returns the
// first difference, or nil.
func Check(b []byte, id uint64) *Mismatch {
	n := len(b) / 8
	for w := 0; w < n; w++ {
		if got, want := binary.LittleEndian.Uint64(b[8*w:]), word(id, w); got != want {
			return mismatch(b, id, 8*w, got, want)
		}
	}
	if t := len(b) - 8*n; t > 0 {
		var last [8]byte
		binary.LittleEndian.PutUint64(last[:], word(id, n))
		for i := 0; i < t; i++ {
			if b[8*n+i] != last[i] {
				return &Mismatch{ID: id, Off: 8*n + i, Size: len(b), Got: b[8*n+i], Want: last[i]}
			}
		}
	}
	return nil
}

func mismatch(b []byte, id uint64, off int, got, want uint64) *Mismatch {
	i := 0
	for ; i < 7 && byte(got>>(8*i)) == byte(want>>(8*i)); i++ {
	}
	return &Mismatch{ID: id, Off: off + i, Size: len(b), Got: byte(got >> (8 * i)), Want: byte(want >> (8 * i))}
}

// Number reads which message of a run b holds, for a receiver that may
// have missed some: base is ID(side, qp, run, 0) and next the first number
// it can still expect. A message of 4 bytes or more names its number (and
// ok is false if the side, QP or run bytes it holds differ from base's); a
// shorter one holds only the number's low bytes, taken as the first number
// from next on that ends in them. Check must still compare the whole
// message.
func Number(b []byte, base uint64, next int64) (k int64, ok bool) {
	if len(b) >= 4 {
		ok = true
		for i := 4; i < len(b) && i < 8; i++ {
			ok = ok && b[i] == byte(base>>(8*i))
		}
		return int64(binary.LittleEndian.Uint32(b)), ok
	}
	var low uint64
	for i := len(b) - 1; i >= 0; i-- {
		low = low<<8 | uint64(b[i])
	}
	mask := uint64(1)<<(8*uint(len(b))) - 1
	k = next + int64((low-uint64(next))&mask)
	return k, k <= 0xffffffff
}

// Errorf describes a failed check of message k (counted from 1) of what
// (e.g. "the peer's RDMA WRITE") on QP qp.
func Errorf(what string, k int64, qp int, err error) error {
	return fmt.Errorf("data validation failed: %s #%d on QP %d: %w", what, k, qp, err)
}

// Head returns the id a message claims: its first 8 bytes (fewer when it
// is shorter), for error messages.
func Head(b []byte) uint64 {
	var h [8]byte
	copy(h[:], b)
	return binary.LittleEndian.Uint64(h[:])
}
