package pcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// WriterOptions configures a Writer. The zero value writes nanosecond
// timestamps with a snapshot length of MaxCaptureLen.
type WriterOptions struct {
	// Snaplen is the snapshot length recorded in the header; longer packets
	// are truncated to it. 0 means MaxCaptureLen.
	Snaplen uint32
	// Microseconds selects the classic microsecond format (magic 0xa1b2c3d4)
	// instead of nanoseconds (0xa1b23c4d), for tools that read only it.
	Microseconds bool
}

// Writer writes a classic pcap file in little-endian byte order. It is not
// safe for concurrent use, and it does not buffer: wrap the destination in a
// bufio.Writer (and flush it) for many small packets.
type Writer struct {
	w       io.Writer
	snaplen uint32
	micro   bool
	hdr     [16]byte
}

var errNegativeTime = errors.New("pcap: write: timestamp before 1970 or after 2106")

// NewWriter writes a pcap file header for link type lt to w and returns a
// Writer for the packets.
func NewWriter(w io.Writer, lt LinkType, opt WriterOptions) (*Writer, error) {
	pw := &Writer{w: w, snaplen: opt.Snaplen, micro: opt.Microseconds}
	if pw.snaplen == 0 {
		pw.snaplen = MaxCaptureLen
	}
	var h [24]byte
	magic := uint32(magicNano)
	if pw.micro {
		magic = magicMicro
	}
	binary.LittleEndian.PutUint32(h[0:], magic)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], pw.snaplen)
	binary.LittleEndian.PutUint32(h[20:], uint32(lt))
	if _, err := w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("pcap: write header: %w", err)
	}
	return pw, nil
}

// WritePacket appends one packet captured at ts. data is truncated to the
// snapshot length; origLen is the length on the wire, and values below
// len(data) are raised to it. It does not allocate unless the underlying
// writer fails.
func (w *Writer) WritePacket(ts time.Time, data []byte, origLen int) error {
	sec := ts.Unix()
	if sec < 0 || sec > 0xffffffff {
		return errNegativeTime
	}
	frac := uint32(ts.Nanosecond())
	if w.micro {
		frac /= 1000
	}
	if origLen < len(data) {
		origLen = len(data)
	}
	if uint32(len(data)) > w.snaplen {
		data = data[:w.snaplen]
	}
	binary.LittleEndian.PutUint32(w.hdr[0:], uint32(sec))
	binary.LittleEndian.PutUint32(w.hdr[4:], frac)
	binary.LittleEndian.PutUint32(w.hdr[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(w.hdr[12:], uint32(origLen))
	if _, err := w.w.Write(w.hdr[:]); err != nil {
		return fmt.Errorf("pcap: write record header: %w", err)
	}
	if _, err := w.w.Write(data); err != nil {
		return fmt.Errorf("pcap: write packet data: %w", err)
	}
	return nil
}
