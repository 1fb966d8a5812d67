package shm

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	futexWait = 0
	futexWake = 1
)

// FutexWait sleeps while *addr == val, for at most timeout (which must be
// positive). It works across processes on shared memory. Spurious wake-ups
// are possible; callers re-check their condition.
func FutexWait(addr *atomic.Uint32, val uint32, timeout time.Duration) {
	ts := unix.NsecToTimespec(int64(timeout))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// FutexWake wakes every waiter on addr.
func FutexWake(addr *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, uintptr(1<<30), 0, 0, 0)
}
