package ring

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// wake wakes every futex waiter on addr (in any process).
func wake(addr *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), 1 /* FUTEX_WAKE */, 1<<30, 0, 0, 0)
}
