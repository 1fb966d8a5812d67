//go:build !linux

package diag

import (
	"errors"
	"fmt"
	"runtime"
)

// Gather is only implemented on Linux, where RDMA devices, /proc and
// memfds exist. Elsewhere it returns an error wrapping
// errors.ErrUnsupported; Evaluate still works on fabricated Inputs.
func Gather(env Env) (Inputs, error) {
	return Inputs{}, fmt.Errorf("diag: gather: not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
