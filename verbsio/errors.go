package verbsio

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Error is a verbs error: the operation that failed, the errno with its verbs
// meaning, and a human-readable detail. errors.Is(err, unix.EINVAL) reports
// whether a verbs call failed with EINVAL.
type Error struct {
	Op     string     // the verb, e.g. "modify_qp"
	Errno  unix.Errno // EINVAL, ENOMEM, EBUSY, EPERM, ...
	Detail string     // what was wrong and, where it helps, how to fix it
}

// Error implements error.
func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Op + ": " + e.Errno.Error()
	}
	return e.Op + ": " + e.Detail + " (" + errnoName(e.Errno) + ")"
}

// Unwrap returns the errno so that errors.Is matches it.
func (e *Error) Unwrap() error { return e.Errno }

// Errorf builds an *Error for op with errno and a formatted detail. It is
// meant for setup paths; fast paths return preallocated errors.
func Errorf(op string, errno unix.Errno, format string, args ...any) *Error {
	return &Error{Op: op, Errno: errno, Detail: fmt.Sprintf(format, args...)}
}

func errnoName(e unix.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return e.Error()
}

// ErrNotSupported is matched (with errors.Is) by every error that says a
// provider or device does not offer a feature.
var ErrNotSupported = errors.New("not supported")

// UnsupportedError says that a feature is unavailable, why, and how to get
// it. It matches ErrNotSupported and unix.EOPNOTSUPP.
type UnsupportedError struct {
	Feature  string // what was asked for, e.g. "kernel RDMA device mlx5_0"
	Provider string // the provider that answered
	Reason   string // why it is unavailable here
	Fix      string // what the user can do, empty if nothing
}

// Error implements error.
func (e *UnsupportedError) Error() string {
	s := e.Feature + " is not available"
	if e.Provider != "" {
		s += " from provider " + e.Provider
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

// Is reports whether target is ErrNotSupported or EOPNOTSUPP.
func (e *UnsupportedError) Is(target error) bool {
	return target == ErrNotSupported || target == unix.EOPNOTSUPP
}
