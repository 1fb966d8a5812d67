package mad

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sizes of a MAD and its parts.
const (
	Size       = 256 // a whole MAD
	HeaderSize = 24  // the common MAD header
	DataSize   = Size - HeaderSize
)

// Header constants of every CM MAD Linux sends and accepts.
const (
	BaseVersion  = 1    // IB_MGMT_BASE_VERSION
	ClassCM      = 0x07 // IB_MGMT_CLASS_CM
	ClassVersion = 2    // IB_CM_CLASS_VERSION (IBA 1.2)
	MethodSend   = 0x03 // IB_MGMT_METHOD_SEND: CM messages are unsolicited sends
)

// QP1QKey is the Q_Key of the general services QP (QP1) that MADs are sent
// with (IB_QP1_QKEY).
const QP1QKey = 0x80010000

// AttrID is a CM message's attribute ID: which message the MAD carries.
type AttrID uint16

// CM attribute IDs (IBTA Table 104).
const (
	AttrClassPortInfo AttrID = 0x0001
	AttrREQ           AttrID = 0x0010
	AttrMRA           AttrID = 0x0011
	AttrREJ           AttrID = 0x0012
	AttrREP           AttrID = 0x0013
	AttrRTU           AttrID = 0x0014
	AttrDREQ          AttrID = 0x0015
	AttrDREP          AttrID = 0x0016
	AttrSIDRREQ       AttrID = 0x0017
	AttrSIDRREP       AttrID = 0x0018
	AttrLAP           AttrID = 0x0019
	AttrAPR           AttrID = 0x001a
)

var attrNames = map[AttrID]string{
	AttrClassPortInfo: "ClassPortInfo", AttrREQ: "REQ", AttrMRA: "MRA", AttrREJ: "REJ",
	AttrREP: "REP", AttrRTU: "RTU", AttrDREQ: "DREQ", AttrDREP: "DREP",
	AttrSIDRREQ: "SIDR_REQ", AttrSIDRREP: "SIDR_REP", AttrLAP: "LAP", AttrAPR: "APR",
}

// String returns the message name ("REQ", "SIDR_REP", ...) or the number.
func (a AttrID) String() string {
	if s, ok := attrNames[a]; ok {
		return s
	}
	return fmt.Sprintf("attr %#04x", uint16(a))
}

// Header is the common MAD header (IBTA 13.4.3, struct ib_mad_hdr).
type Header struct {
	BaseVersion   uint8
	MgmtClass     uint8
	ClassVersion  uint8
	Method        uint8
	Status        uint16
	ClassSpecific uint16
	TID           uint64 // transaction ID
	AttrID        AttrID
	Resv          uint16 // reserved; kept so a header re-encodes as received
	AttrMod       uint32
}

// Marshal writes the header into b[:HeaderSize].
func (h *Header) Marshal(b []byte) error {
	if len(b) < HeaderSize {
		return newErr("encode header", fmt.Sprintf("buffer of %d bytes, need %d", len(b), HeaderSize), ErrShortBuffer)
	}
	b[0], b[1], b[2], b[3] = h.BaseVersion, h.MgmtClass, h.ClassVersion, h.Method
	binary.BigEndian.PutUint16(b[4:], h.Status)
	binary.BigEndian.PutUint16(b[6:], h.ClassSpecific)
	binary.BigEndian.PutUint64(b[8:], h.TID)
	binary.BigEndian.PutUint16(b[16:], uint16(h.AttrID))
	binary.BigEndian.PutUint16(b[18:], h.Resv)
	binary.BigEndian.PutUint32(b[20:], h.AttrMod)
	return nil
}

// Unmarshal reads the header from b[:HeaderSize].
func (h *Header) Unmarshal(b []byte) error {
	if len(b) < HeaderSize {
		return newErr("decode header", fmt.Sprintf("%d bytes, a MAD header is %d", len(b), HeaderSize), ErrTruncated)
	}
	h.BaseVersion, h.MgmtClass, h.ClassVersion, h.Method = b[0], b[1], b[2], b[3]
	h.Status = binary.BigEndian.Uint16(b[4:])
	h.ClassSpecific = binary.BigEndian.Uint16(b[6:])
	h.TID = binary.BigEndian.Uint64(b[8:])
	h.AttrID = AttrID(binary.BigEndian.Uint16(b[16:]))
	h.Resv = binary.BigEndian.Uint16(b[18:])
	h.AttrMod = binary.BigEndian.Uint32(b[20:])
	return nil
}

// CMHeader returns the header of a CM message with attribute a and
// transaction ID tid, as Linux's cm_format_mad_hdr fills it.
func CMHeader(a AttrID, tid uint64) Header {
	return Header{BaseVersion: BaseVersion, MgmtClass: ClassCM, ClassVersion: ClassVersion,
		Method: MethodSend, TID: tid, AttrID: a}
}

// Message is one CM message: the 232 bytes after the MAD header.
type Message interface {
	// Attr is the message's attribute ID.
	Attr() AttrID
	// String is a one-line summary of the fields that identify the
	// message ("REQ comm 0x1d2a sid 0x106... qpn 0x11 psn 0x3a5b1c").
	String() string
	encode(e *encoder)
	decode(d *decoder)
}

// MAD is a decoded CM MAD.
type MAD struct {
	Header
	Msg Message
}

// String is the message's summary with the transaction ID.
func (m *MAD) String() string {
	if m.Msg == nil {
		return fmt.Sprintf("%s tid %#x (no message)", m.AttrID, m.TID)
	}
	return fmt.Sprintf("%s tid %#x", m.Msg.String(), m.TID)
}

// newMessage returns an empty message for attribute a, or nil.
func newMessage(a AttrID) Message {
	switch a {
	case AttrREQ:
		return new(REQ)
	case AttrMRA:
		return new(MRA)
	case AttrREJ:
		return new(REJ)
	case AttrREP:
		return new(REP)
	case AttrRTU:
		return new(RTU)
	case AttrDREQ:
		return new(DREQ)
	case AttrDREP:
		return new(DREP)
	case AttrSIDRREQ:
		return new(SIDRREQ)
	case AttrSIDRREP:
		return new(SIDRREP)
	}
	return nil
}

// Decode decodes a CM MAD. b must be exactly Size bytes (the payload of a
// UD packet to QP1). The header must be a CM class version 2 Send, and the
// attribute one of the messages of this package; anything else is an *Error
// whose Kind says which check failed. Decode never panics and keeps no
// reference to b.
func Decode(b []byte) (MAD, error) {
	var m MAD
	if len(b) < Size {
		return m, newErr("decode", fmt.Sprintf("%d bytes, a MAD is %d", len(b), Size), ErrTruncated)
	}
	if len(b) > Size {
		return m, newErr("decode", fmt.Sprintf("%d bytes, a MAD is %d", len(b), Size), ErrLength)
	}
	if err := m.Header.Unmarshal(b); err != nil {
		return m, err
	}
	if err := CheckHeader(&m.Header); err != nil {
		return m, err
	}
	msg := newMessage(m.AttrID)
	if msg == nil {
		return m, newErr("decode", fmt.Sprintf("attribute %s is not a CM message this decoder knows", m.AttrID), ErrAttr)
	}
	msg.decode(&decoder{b: b[HeaderSize:Size]})
	m.Msg = msg
	return m, nil
}

// CheckHeader reports whether h is the header of a CM MAD that Linux's CM
// accepts: base version 1, class 0x07, class version 2, method Send.
func CheckHeader(h *Header) error {
	switch {
	case h.BaseVersion != BaseVersion:
		return newErr("decode", fmt.Sprintf("base version %d, not %d", h.BaseVersion, BaseVersion), ErrHeader)
	case h.MgmtClass != ClassCM:
		return newErr("decode", fmt.Sprintf("management class %#02x, not CM (%#02x)", h.MgmtClass, ClassCM), ErrHeader)
	case h.ClassVersion != ClassVersion:
		return newErr("decode", fmt.Sprintf("CM class version %d, not %d", h.ClassVersion, ClassVersion), ErrHeader)
	case h.Method != MethodSend:
		return newErr("decode", fmt.Sprintf("method %#02x, not Send (%#02x)", h.Method, MethodSend), ErrHeader)
	}
	return nil
}

// Encode writes m as a Size-byte MAD into b. m.AttrID must match the
// message (zero takes the message's); fields wider than their wire width are
// an error naming the field.
func Encode(b []byte, m *MAD) error {
	if len(b) < Size {
		return newErr("encode", fmt.Sprintf("buffer of %d bytes, need %d", len(b), Size), ErrShortBuffer)
	}
	if m.Msg == nil {
		return newErr("encode", "no message", ErrRange)
	}
	h := m.Header
	if h.AttrID == 0 {
		h.AttrID = m.Msg.Attr()
	}
	if h.AttrID != m.Msg.Attr() {
		return newErr("encode", fmt.Sprintf("header attribute %s carries a %s message", h.AttrID, m.Msg.Attr()), ErrRange)
	}
	if err := h.Marshal(b); err != nil {
		return err
	}
	data := b[HeaderSize:Size]
	clear(data)
	e := encoder{b: data}
	m.Msg.encode(&e)
	return e.err
}

// Append encodes m and appends the Size bytes to dst.
func Append(dst []byte, m *MAD) ([]byte, error) {
	n := len(dst)
	dst = append(dst, make([]byte, Size)...)
	if err := Encode(dst[n:], m); err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// Reserved returns the bits of the message data (DataSize bytes, after the
// header) that message a does not define: the bits Encode leaves zero and
// Decode ignores. It returns nil for an attribute this package does not
// know.
func Reserved(a AttrID) []byte {
	msg := newMessage(a)
	if msg == nil {
		return nil
	}
	used := make([]byte, DataSize)
	e := encoder{b: make([]byte, DataSize), used: used}
	msg.encode(&e)
	for i := range used {
		used[i] = ^used[i]
	}
	return used
}

// Sentinel error kinds. Errors returned by this package are *Error values
// whose Kind is one of these; test them with errors.Is.
var (
	// ErrTruncated means the input is shorter than a MAD.
	ErrTruncated = errors.New("truncated")
	// ErrLength means the input is longer than a MAD.
	ErrLength = errors.New("bad length")
	// ErrHeader means the MAD header is not a CM class version 2 Send.
	ErrHeader = errors.New("not a CM MAD")
	// ErrAttr means the attribute ID is not a message this package decodes.
	ErrAttr = errors.New("unknown attribute")
	// ErrRange means a value does not fit its field.
	ErrRange = errors.New("field out of range")
	// ErrShortBuffer means the output buffer is too small.
	ErrShortBuffer = errors.New("buffer too short")
)

// Error describes a decode or encode failure: Op names the operation,
// Detail what was wrong, Kind is one of the sentinel errors.
type Error struct {
	Op     string
	Detail string
	Kind   error
}

// Error returns "cm mad: op: detail".
func (e *Error) Error() string { return "cm mad: " + e.Op + ": " + e.Detail }

// Unwrap returns the sentinel kind.
func (e *Error) Unwrap() error { return e.Kind }

func newErr(op, detail string, kind error) *Error {
	return &Error{Op: op, Detail: detail, Kind: kind}
}
