package oob

import (
	"errors"
	"fmt"
)

// Error kinds. Every error returned by a Conn method matches at most one of
// them with errors.Is; the message itself names the step and the fix.
var (
	// ErrPeerClosed means the peer closed or reset the connection, usually
	// because it exited after an error of its own.
	ErrPeerClosed = errors.New("peer closed the connection")
	// ErrTimeout means the peer stayed silent past the I/O deadline.
	ErrTimeout = errors.New("peer did not answer in time")
	// ErrIncompatible means the two sides cannot run together: a peer
	// version that is too old, key messages of different forms, or test
	// parameters that must match but do not.
	ErrIncompatible = errors.New("peers are incompatible")
	// ErrProtocol means the peer sent bytes that are not what the protocol
	// allows at this step.
	ErrProtocol = errors.New("malformed message from peer")
)

// cmError carries a complete user-facing message and the kinds and causes
// it matches, so that the text stays exactly as composed while errors.Is
// and errors.As still see ErrTimeout, os.ErrDeadlineExceeded and the like.
type cmError struct {
	msg  string
	errs []error
}

func (e *cmError) Error() string   { return e.msg }
func (e *cmError) Unwrap() []error { return e.errs }

// newError returns an error with text msg that wraps each non-nil err.
func newError(msg string, errs ...error) error {
	e := &cmError{msg: msg}
	for _, err := range errs {
		if err != nil {
			e.errs = append(e.errs, err)
		}
	}
	return e
}

func protoErrorf(format string, args ...any) error {
	return newError(fmt.Sprintf(format, args...), ErrProtocol)
}
