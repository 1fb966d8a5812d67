package roce

import "errors"

// Sentinel error kinds. Errors returned by this package are *Error values
// whose Kind is one of these; test them with errors.Is.
var (
	// ErrTooShort means the input ends before the headers it announces.
	ErrTooShort = errors.New("input too short")
	// ErrUnknownOpcode means the BTH opcode is not one this package knows.
	ErrUnknownOpcode = errors.New("unknown opcode")
	// ErrPadCount means BTH.PadCnt does not fit the packet: non-zero on an
	// opcode without payload, or larger than the bytes after the headers.
	ErrPadCount = errors.New("pad count inconsistent")
	// ErrTVer means the BTH transport header version is not 0.
	ErrTVer = errors.New("transport version not 0")
	// ErrLength means a length is inconsistent: a packet that is not a
	// multiple of 4 bytes, an opcode without payload followed by data, or an
	// IP or UDP length field that disagrees with the bytes present.
	ErrLength = errors.New("bad length")
	// ErrRange means a field value does not fit its wire width.
	ErrRange = errors.New("field out of range")
	// ErrShortBuffer means the caller's output buffer is too small.
	ErrShortBuffer = errors.New("buffer too short")
	// ErrNotRoCE means the frame is well formed but is not a RoCEv2 packet:
	// not IP, not UDP, not to port 4791, or an IP fragment.
	ErrNotRoCE = errors.New("not a RoCEv2 packet")
	// ErrUnsupported means the frame uses a feature this package does not
	// decode, such as IPv4 options or IPv6 extension headers before UDP.
	ErrUnsupported = errors.New("unsupported")
)

// Error describes a decode or encode failure. Op names the operation and
// header ("decode bth"), Detail says what was wrong, and Kind is one of the
// sentinel errors above.
type Error struct {
	Op     string
	Detail string
	Kind   error
}

// Error returns "roce: op: detail".
func (e *Error) Error() string { return "roce: " + e.Op + ": " + e.Detail }

// Unwrap returns the sentinel kind.
func (e *Error) Unwrap() error { return e.Kind }

func newErr(op, detail string, kind error) *Error {
	return &Error{Op: op, Detail: detail, Kind: kind}
}
