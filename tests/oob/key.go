package oob

import (
	"fmt"
)

// Sizes of perftest's KEY messages on the wire, trailing NUL included.
const (
	// KeySize is the length of the key message without a GID
	// (LID:OUT_READS:QPN:PSN:RKEY:VADDR:SRQN), used by perftest when no GID
	// index is in use (InfiniBand link and no -x).
	KeySize = 59
	// KeySizeGID is the length of the key message that carries a GID
	// (LID:OUT_READS:QPN:PSN:RKEY:VADDR:G0:...:G15:SRQN:), used on every
	// RoCE link and whenever -x is given.
	KeySizeGID = 108
)

// Dest is what one side tells the other about one of its QPs: the contents
// of a perftest KEY message (struct pingpong_dest on the wire).
type Dest struct {
	LID      uint16   // local port LID; 0 on RoCE
	OutReads uint16   // outstanding RDMA reads/atomics the sender allows (-o)
	QPN      uint32   // QP number; only the low 24 bits go on the wire
	PSN      uint32   // initial packet sequence number; low 24 bits only
	RKey     uint32   // remote key of the peer-accessible buffer
	VAddr    uint64   // address of the peer-accessible buffer
	GID      [16]byte // raw GID; sent only when HasGID is set
	HasGID   bool     // selects the 108-byte GID form over the 59-byte form
	SRQN     uint32   // XRC/DC SRQ number, else 0
}

// keyField describes one hex field of a key message.
type keyField struct {
	name  string
	width int
}

// Fields before the GID (both forms) and the SRQN field at the end.
var keyHead = [...]keyField{
	{"LID", 4}, {"OUT_READS", 4}, {"QPN", 6}, {"PSN", 6}, {"RKEY", 8}, {"VADDR", 16},
}

var keySRQN = keyField{"SRQN", 8}

// gidFields names the 16 one-byte GID fields of the GID form.
var gidFields = func() (f [16]keyField) {
	for i := range f {
		f[i] = keyField{fmt.Sprintf("GID[%d]", i), 2}
	}
	return f
}()

const mask24 = 0xffffff

// KeyLen returns the wire length of d's key message: KeySizeGID when
// d.HasGID is set, else KeySize.
func (d Dest) KeyLen() int {
	if d.HasGID {
		return KeySizeGID
	}
	return KeySize
}

// AppendKey appends d's key message, trailing NUL included, to dst and
// returns the extended slice. The layout is perftest's: lower-case hex,
// colon separated; QPN and PSN are masked to 24 bits so the message always
// has its fixed size. It does not allocate when dst has room.
func AppendKey(dst []byte, d Dest) []byte {
	vals := [...]uint64{
		uint64(d.LID), uint64(d.OutReads), uint64(d.QPN & mask24),
		uint64(d.PSN & mask24), uint64(d.RKey), d.VAddr,
	}
	for i, f := range keyHead {
		if i > 0 {
			dst = append(dst, ':')
		}
		dst = appendHex(dst, vals[i], f.width)
	}
	dst = append(dst, ':')
	if d.HasGID {
		for _, g := range d.GID {
			dst = appendHex(dst, uint64(g), 2)
			dst = append(dst, ':')
		}
		dst = appendHex(dst, uint64(d.SRQN), keySRQN.width)
		dst = append(dst, ':')
	} else {
		dst = appendHex(dst, uint64(d.SRQN), keySRQN.width)
	}
	return append(dst, 0)
}

// FormatKey returns d's key message, trailing NUL included.
func FormatKey(d Dest) []byte {
	return AppendKey(make([]byte, 0, d.KeyLen()), d)
}

// ParseKey parses a key message as perftest sends it, trailing NUL
// included. The form is chosen by length (KeySize or KeySizeGID). Parsing is
// strict: every field must have exactly its width in hex digits (either
// case), separators and the terminating NUL must be where perftest puts
// them. Errors match ErrProtocol. ParseKey never panics.
func ParseKey(b []byte) (Dest, error) {
	var d Dest
	switch len(b) {
	case KeySize:
	case KeySizeGID:
		d.HasGID = true
	default:
		return Dest{}, protoErrorf("key message is %d bytes, want %d (without GID) or %d (with GID)", len(b), KeySize, KeySizeGID)
	}
	p := keyParser{b: b}
	var head [len(keyHead)]uint64
	for i, f := range keyHead {
		if i > 0 {
			p.sep(':', f.name)
		}
		head[i] = p.hex(f)
	}
	if d.HasGID {
		for i := range d.GID {
			p.sep(':', gidFields[i].name)
			d.GID[i] = byte(p.hex(gidFields[i]))
		}
		p.sep(':', keySRQN.name)
		d.SRQN = uint32(p.hex(keySRQN))
		p.sep(':', "end")
	} else {
		p.sep(':', keySRQN.name)
		d.SRQN = uint32(p.hex(keySRQN))
	}
	p.sep(0, "end")
	if p.err != nil {
		return Dest{}, p.err
	}
	d.LID = uint16(head[0])
	d.OutReads = uint16(head[1])
	d.QPN = uint32(head[2])
	d.PSN = uint32(head[3])
	d.RKey = uint32(head[4])
	d.VAddr = head[5]
	return d, nil
}

// keyParser walks a key message, remembering the first error.
type keyParser struct {
	b   []byte
	off int
	err error
}

func (p *keyParser) sep(c byte, before string) {
	if p.err != nil {
		return
	}
	if p.off >= len(p.b) || p.b[p.off] != c {
		want := "':'"
		if c == 0 {
			want = "NUL"
		}
		p.err = protoErrorf("key message: want %s at offset %d (before %s), got %s", want, p.off, before, quoteByte(p.b, p.off))
		return
	}
	p.off++
}

func (p *keyParser) hex(f keyField) uint64 {
	if p.err != nil {
		return 0
	}
	if p.off+f.width > len(p.b) {
		p.err = protoErrorf("key message: field %s truncated at offset %d", f.name, p.off)
		return 0
	}
	var v uint64
	for i := 0; i < f.width; i++ {
		c := p.b[p.off+i]
		var n byte
		switch {
		case c >= '0' && c <= '9':
			n = c - '0'
		case c >= 'a' && c <= 'f':
			n = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			n = c - 'A' + 10
		default:
			p.err = protoErrorf("key message: field %s must be %d hex digits, got %q at offset %d", f.name, f.width, p.b[p.off:p.off+f.width], p.off)
			return 0
		}
		v = v<<4 | uint64(n)
	}
	p.off += f.width
	return v
}

func quoteByte(b []byte, off int) string {
	if off >= len(b) {
		return "end of message"
	}
	if b[off] == 0 {
		return "NUL"
	}
	return fmt.Sprintf("%q", b[off:off+1])
}

const hexDigits = "0123456789abcdef"

// appendHex appends v as exactly width lower-case hex digits (v must fit).
func appendHex(dst []byte, v uint64, width int) []byte {
	for i := width - 1; i >= 0; i-- {
		dst = append(dst, hexDigits[(v>>(4*uint(i)))&0xf])
	}
	return dst
}
