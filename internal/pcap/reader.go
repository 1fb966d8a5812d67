package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"time"
)

// Format is the container format of a capture file.
type Format int

// Formats.
const (
	FormatPcap   Format = iota + 1 // classic libpcap format
	FormatPcapNG                   // pcapng
)

// String returns "pcap" or "pcapng".
func (f Format) String() string {
	switch f {
	case FormatPcap:
		return "pcap"
	case FormatPcapNG:
		return "pcapng"
	}
	return fmt.Sprintf("format(%d)", int(f))
}

// Limits that protect the reader from files that claim huge sizes.
const (
	// MaxCaptureLen is the largest captured length of one packet the reader
	// accepts: libpcap's maximum snapshot length.
	MaxCaptureLen = 262144
	// maxBlockLen is the largest pcapng block the reader loads into memory;
	// longer blocks of types it does not decode are skipped without loading.
	maxBlockLen = 1 << 20
)

// Magic numbers.
const (
	magicMicro   = 0xa1b2c3d4
	magicNano    = 0xa1b23c4d
	blockSHB     = 0x0a0d0d0a
	blockIDB     = 0x00000001
	blockPB      = 0x00000002
	blockSPB     = 0x00000003
	blockEPB     = 0x00000006
	byteOrderBOM = 0x1a2b3c4d
)

// ErrFormat is the kind of every error about a malformed or unsupported
// file; test with errors.Is.
var ErrFormat = errors.New("malformed capture")

// FormatError describes what is wrong with the file and where.
type FormatError struct {
	Record int    // 1-based packet record or pcapng block number; 0 for the file header
	Detail string // what is wrong
	Err    error  // an underlying I/O error, if any
}

// Error returns "pcap: record N: detail[: err]".
func (e *FormatError) Error() string {
	s := "pcap: "
	if e.Record > 0 {
		s += fmt.Sprintf("record %d: ", e.Record)
	} else {
		s += "file header: "
	}
	s += e.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrFormat) true.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

// Unwrap returns the underlying I/O error.
func (e *FormatError) Unwrap() error { return e.Err }

// Packet is one captured packet.
type Packet struct {
	Timestamp time.Time // UTC; the zero Time for a pcapng simple packet block, which has none
	LinkType  LinkType
	// Data is the captured bytes. It is only valid until the next call to
	// Next, which reuses the buffer.
	Data []byte
	// OrigLen is the packet's length on the wire, which may exceed
	// len(Data) when the capture was truncated to a snapshot length.
	OrigLen int
	// Interface is the pcapng interface index within its section; 0 for
	// classic pcap.
	Interface int
}

type iface struct {
	linkType LinkType
	snaplen  uint32
	// timestamp resolution: units per second as 10^exp (pow2 false) or
	// 2^exp (pow2 true)
	exp    uint8
	pow2   bool
	offset int64 // if_tsoffset, seconds
}

// Reader reads packets from a capture. It is not safe for concurrent use.
type Reader struct {
	r      *bufio.Reader
	format Format
	order  binary.ByteOrder
	buf    []byte
	record int
	err    error // sticky

	// classic pcap
	nano     bool
	linkType LinkType
	snaplen  uint32

	// pcapng
	ifaces []iface
}

// NewReader reads the file header from r and returns a Reader positioned at
// the first packet. It detects the format and byte order from the magic
// number.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{r: bufio.NewReaderSize(r, 64<<10)}
	var m [4]byte
	if _, err := io.ReadFull(rd.r, m[:]); err != nil {
		return nil, rd.ioErr("reading magic number", err)
	}
	switch {
	case binary.BigEndian.Uint32(m[:]) == blockSHB:
		rd.format = FormatPcapNG
		rd.record = 1
		var h [8]byte
		copy(h[:], m[:])
		if _, err := io.ReadFull(rd.r, h[4:]); err != nil {
			return nil, rd.ioErr("reading section header", err)
		}
		if err := rd.readSHB(h); err != nil {
			return nil, err
		}
		return rd, nil
	case binary.LittleEndian.Uint32(m[:]) == magicMicro:
		rd.order = binary.LittleEndian
	case binary.LittleEndian.Uint32(m[:]) == magicNano:
		rd.order, rd.nano = binary.LittleEndian, true
	case binary.BigEndian.Uint32(m[:]) == magicMicro:
		rd.order = binary.BigEndian
	case binary.BigEndian.Uint32(m[:]) == magicNano:
		rd.order, rd.nano = binary.BigEndian, true
	default:
		return nil, &FormatError{Detail: fmt.Sprintf("unknown magic number %#x: not a pcap or pcapng file", m[:])}
	}
	rd.format = FormatPcap
	var h [20]byte
	if _, err := io.ReadFull(rd.r, h[:]); err != nil {
		return nil, rd.ioErr("reading file header", err)
	}
	if major := rd.order.Uint16(h[0:]); major != 2 {
		return nil, &FormatError{Detail: fmt.Sprintf("unsupported version %d.%d", major, rd.order.Uint16(h[2:]))}
	}
	rd.snaplen = rd.order.Uint32(h[12:])
	// The upper bits of the link-type field carry FCS information.
	rd.linkType = LinkType(rd.order.Uint32(h[16:]) & 0x03ffffff)
	return rd, nil
}

// Format returns the file's format.
func (r *Reader) Format() Format { return r.format }

// LinkType returns the link type of a classic pcap file, or of the first
// interface of the current pcapng section (0 if it has none yet).
func (r *Reader) LinkType() LinkType {
	if r.format == FormatPcap {
		return r.linkType
	}
	if len(r.ifaces) > 0 {
		return r.ifaces[0].linkType
	}
	return 0
}

// ioErr turns a read error into a FormatError; a clean end of input in the
// middle of a structure becomes io.ErrUnexpectedEOF.
func (r *Reader) ioErr(what string, err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &FormatError{Record: r.record, Detail: "truncated file while " + what, Err: err}
}

// Next returns the next packet, or io.EOF after the last one. The returned
// Data is valid until the following call. After an error other than io.EOF
// the reader is unusable and returns the same error again.
func (r *Reader) Next() (Packet, error) {
	if r.err != nil {
		return Packet{}, r.err
	}
	var p Packet
	var err error
	if r.format == FormatPcap {
		p, err = r.nextPcap()
	} else {
		p, err = r.nextNG()
	}
	if err != nil {
		r.err = err
	}
	return p, err
}

func (r *Reader) grow(n int) []byte {
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	return r.buf[:n]
}

func (r *Reader) nextPcap() (Packet, error) {
	var h [16]byte
	n, err := io.ReadFull(r.r, h[:])
	if err == io.EOF && n == 0 {
		return Packet{}, io.EOF
	}
	r.record++
	if err != nil {
		return Packet{}, r.ioErr("reading record header", err)
	}
	sec := int64(r.order.Uint32(h[0:]))
	frac := int64(r.order.Uint32(h[4:]))
	caplen := r.order.Uint32(h[8:])
	orig := r.order.Uint32(h[12:])
	if caplen > MaxCaptureLen {
		return Packet{}, &FormatError{Record: r.record, Detail: fmt.Sprintf("captured length %d exceeds the %d-byte limit", caplen, MaxCaptureLen)}
	}
	data := r.grow(int(caplen))
	if _, err := io.ReadFull(r.r, data); err != nil {
		return Packet{}, r.ioErr("reading packet data", err)
	}
	if !r.nano {
		frac *= 1000
	}
	if orig < caplen {
		orig = caplen
	}
	return Packet{
		Timestamp: time.Unix(sec, frac).UTC(),
		LinkType:  r.linkType,
		Data:      data,
		OrigLen:   int(orig),
	}, nil
}

func (r *Reader) nextNG() (Packet, error) {
	for {
		var h [8]byte
		n, err := io.ReadFull(r.r, h[:])
		if err == io.EOF && n == 0 {
			return Packet{}, io.EOF
		}
		r.record++
		if err != nil {
			return Packet{}, r.ioErr("reading block header", err)
		}
		if binary.BigEndian.Uint32(h[0:]) == blockSHB {
			// A new section: the byte order may change.
			if err := r.readSHB(h); err != nil {
				return Packet{}, err
			}
			continue
		}
		typ := r.order.Uint32(h[0:])
		total := r.order.Uint32(h[4:])
		if total < 12 || total%4 != 0 {
			return Packet{}, &FormatError{Record: r.record, Detail: fmt.Sprintf("block type %#x has invalid length %d", typ, total)}
		}
		switch typ {
		case blockIDB, blockEPB, blockSPB, blockPB:
		default:
			// Skip without loading it.
			if _, err := io.CopyN(io.Discard, r.r, int64(total)-8); err != nil {
				return Packet{}, r.ioErr(fmt.Sprintf("skipping block type %#x", typ), err)
			}
			continue
		}
		if total > maxBlockLen {
			return Packet{}, &FormatError{Record: r.record, Detail: fmt.Sprintf("block type %#x length %d exceeds the %d-byte limit", typ, total, maxBlockLen)}
		}
		blk := r.grow(int(total) - 8)
		if _, err := io.ReadFull(r.r, blk); err != nil {
			return Packet{}, r.ioErr(fmt.Sprintf("reading block type %#x", typ), err)
		}
		if t := r.order.Uint32(blk[len(blk)-4:]); t != total {
			return Packet{}, &FormatError{Record: r.record, Detail: fmt.Sprintf("block type %#x trailing length %d differs from %d", typ, t, total)}
		}
		body := blk[:len(blk)-4]
		switch typ {
		case blockIDB:
			if err := r.readIDB(body); err != nil {
				return Packet{}, err
			}
		case blockEPB:
			return r.readEPB(body)
		case blockSPB:
			return r.readSPB(body)
		case blockPB:
			return r.readPB(body)
		}
	}
}

// readSHB reads the rest of a section header block whose block type and
// total length fields are in h. It starts a new section: byte order and
// interfaces are reset.
func (r *Reader) readSHB(h [8]byte) error {
	var bom [4]byte
	if _, err := io.ReadFull(r.r, bom[:]); err != nil {
		return r.ioErr("reading section header", err)
	}
	var order binary.ByteOrder
	switch {
	case binary.LittleEndian.Uint32(bom[:]) == byteOrderBOM:
		order = binary.LittleEndian
	case binary.BigEndian.Uint32(bom[:]) == byteOrderBOM:
		order = binary.BigEndian
	default:
		return &FormatError{Record: r.record, Detail: fmt.Sprintf("section header byte-order magic %#x is invalid", bom[:])}
	}
	r.order = order
	total := order.Uint32(h[4:])
	if total < 28 || total%4 != 0 || total > maxBlockLen {
		return &FormatError{Record: r.record, Detail: fmt.Sprintf("section header length %d is invalid", total)}
	}
	body := r.grow(int(total) - 12)
	if _, err := io.ReadFull(r.r, body); err != nil {
		return r.ioErr("reading section header", err)
	}
	if major := order.Uint16(body[0:]); major != 1 {
		return &FormatError{Record: r.record, Detail: fmt.Sprintf("unsupported pcapng version %d.%d", major, order.Uint16(body[2:]))}
	}
	if t := order.Uint32(body[len(body)-4:]); t != total {
		return &FormatError{Record: r.record, Detail: fmt.Sprintf("section header trailing length %d differs from %d", t, total)}
	}
	r.ifaces = r.ifaces[:0]
	return nil
}

const maxInterfaces = 1 << 16

func (r *Reader) readIDB(b []byte) error {
	if len(b) < 8 {
		return &FormatError{Record: r.record, Detail: "interface description block shorter than 16 bytes"}
	}
	if len(r.ifaces) >= maxInterfaces {
		return &FormatError{Record: r.record, Detail: "more than 65536 interfaces in one section"}
	}
	ifc := iface{
		linkType: LinkType(r.order.Uint16(b[0:])),
		snaplen:  r.order.Uint32(b[4:]),
		exp:      6,
	}
	opts := b[8:]
	for len(opts) >= 4 {
		code := r.order.Uint16(opts[0:])
		l := int(r.order.Uint16(opts[2:]))
		if code == 0 { // opt_endofopt
			break
		}
		padded := (l + 3) &^ 3
		if 4+padded > len(opts) {
			return &FormatError{Record: r.record, Detail: fmt.Sprintf("interface option %d overruns its block", code)}
		}
		v := opts[4 : 4+l]
		switch code {
		case 9: // if_tsresol
			if l != 1 {
				return &FormatError{Record: r.record, Detail: fmt.Sprintf("if_tsresol option has length %d, want 1", l)}
			}
			ifc.pow2 = v[0]&0x80 != 0
			ifc.exp = v[0] & 0x7f
			if (!ifc.pow2 && ifc.exp > 19) || (ifc.pow2 && ifc.exp > 63) {
				return &FormatError{Record: r.record, Detail: fmt.Sprintf("unsupported timestamp resolution %#x", v[0])}
			}
		case 14: // if_tsoffset
			if l != 8 {
				return &FormatError{Record: r.record, Detail: fmt.Sprintf("if_tsoffset option has length %d, want 8", l)}
			}
			ifc.offset = int64(r.order.Uint64(v))
		}
		opts = opts[4+padded:]
	}
	r.ifaces = append(r.ifaces, ifc)
	return nil
}

var pow10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// timestamp converts a pcapng timestamp in the interface's units.
func (ifc *iface) timestamp(ts uint64) time.Time {
	var sec, nsec uint64
	if ifc.pow2 {
		sec = ts >> ifc.exp
		frac := ts & (1<<ifc.exp - 1)
		hi, lo := bits.Mul64(frac, 1e9)
		if ifc.exp == 0 {
			nsec = 0
		} else {
			nsec = lo>>ifc.exp | hi<<(64-ifc.exp)
		}
	} else {
		unit := pow10[ifc.exp]
		sec = ts / unit
		frac := ts % unit
		if ifc.exp <= 9 {
			nsec = frac * pow10[9-ifc.exp]
		} else {
			nsec = frac / pow10[ifc.exp-9]
		}
	}
	return time.Unix(int64(sec)+ifc.offset, int64(nsec)).UTC()
}

func (r *Reader) iface(id uint32) (*iface, error) {
	if uint64(id) >= uint64(len(r.ifaces)) {
		return nil, &FormatError{Record: r.record, Detail: fmt.Sprintf("packet refers to interface %d but the section describes %d", id, len(r.ifaces))}
	}
	return &r.ifaces[id], nil
}

func (r *Reader) packetData(b []byte, caplen, orig uint32) ([]byte, int, error) {
	if caplen > MaxCaptureLen {
		return nil, 0, &FormatError{Record: r.record, Detail: fmt.Sprintf("captured length %d exceeds the %d-byte limit", caplen, MaxCaptureLen)}
	}
	if uint64(caplen) > uint64(len(b)) {
		return nil, 0, &FormatError{Record: r.record, Detail: fmt.Sprintf("captured length %d overruns its block", caplen)}
	}
	if orig < caplen {
		orig = caplen
	}
	return b[:caplen:caplen], int(orig), nil
}

func (r *Reader) readEPB(b []byte) (Packet, error) {
	if len(b) < 20 {
		return Packet{}, &FormatError{Record: r.record, Detail: "enhanced packet block shorter than 32 bytes"}
	}
	id := r.order.Uint32(b[0:])
	ifc, err := r.iface(id)
	if err != nil {
		return Packet{}, err
	}
	ts := uint64(r.order.Uint32(b[4:]))<<32 | uint64(r.order.Uint32(b[8:]))
	data, orig, err := r.packetData(b[20:], r.order.Uint32(b[12:]), r.order.Uint32(b[16:]))
	if err != nil {
		return Packet{}, err
	}
	return Packet{Timestamp: ifc.timestamp(ts), LinkType: ifc.linkType, Data: data, OrigLen: orig, Interface: int(id)}, nil
}

func (r *Reader) readPB(b []byte) (Packet, error) {
	if len(b) < 20 {
		return Packet{}, &FormatError{Record: r.record, Detail: "packet block shorter than 32 bytes"}
	}
	id := uint32(r.order.Uint16(b[0:]))
	ifc, err := r.iface(id)
	if err != nil {
		return Packet{}, err
	}
	ts := uint64(r.order.Uint32(b[4:]))<<32 | uint64(r.order.Uint32(b[8:]))
	data, orig, err := r.packetData(b[20:], r.order.Uint32(b[12:]), r.order.Uint32(b[16:]))
	if err != nil {
		return Packet{}, err
	}
	return Packet{Timestamp: ifc.timestamp(ts), LinkType: ifc.linkType, Data: data, OrigLen: orig, Interface: int(id)}, nil
}

func (r *Reader) readSPB(b []byte) (Packet, error) {
	if len(b) < 4 {
		return Packet{}, &FormatError{Record: r.record, Detail: "simple packet block shorter than 16 bytes"}
	}
	ifc, err := r.iface(0)
	if err != nil {
		return Packet{}, err
	}
	orig := r.order.Uint32(b[0:])
	caplen := uint64(orig)
	if ifc.snaplen != 0 && uint64(ifc.snaplen) < caplen {
		caplen = uint64(ifc.snaplen)
	}
	if avail := uint64(len(b) - 4); avail < caplen {
		caplen = avail
	}
	data, n, err := r.packetData(b[4:], uint32(caplen), orig)
	if err != nil {
		return Packet{}, err
	}
	// A simple packet block has no timestamp.
	return Packet{LinkType: ifc.linkType, Data: data, OrigLen: n}, nil
}
