package shm

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Proc is a handle on a peer process: a pidfd where the kernel offers one
// (so the handle stays bound to that process even if its pid is reused),
// used to fetch the peer's memfds and to learn when it exits.
type Proc struct {
	pid   int
	pidfd int // -1 when pidfd_open is unavailable
	self  bool
	dead  atomic.Bool
}

// Self is the handle of this process.
func Self() *Proc { return &Proc{pid: os.Getpid(), pidfd: -1, self: true} }

// OpenProc opens a handle on process pid.
func OpenProc(pid int) (*Proc, error) {
	if pid == os.Getpid() {
		return Self(), nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("peer process %d does not exist (did it exit?)", pid)
		}
		if !errors.Is(err, unix.ENOSYS) {
			return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
		}
		fd = -1
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("peer process %d does not exist (did it exit?)", pid)
		}
	}
	return &Proc{pid: pid, pidfd: fd}, nil
}

// PID is the process id.
func (p *Proc) PID() int { return p.pid }

// IsSelf reports whether the handle is this process.
func (p *Proc) IsSelf() bool { return p.self }

// PidFD is the pidfd, or -1.
func (p *Proc) PidFD() int { return p.pidfd }

// MarkDead records that the process exited.
func (p *Proc) MarkDead() { p.dead.Store(true) }

// Dead reports whether the process is known to have exited. It is one
// atomic load; the Watcher sets it.
func (p *Proc) Dead() bool { return p.dead.Load() }

// CheckAlive asks the kernel whether the process is still alive and
// records the answer.
func (p *Proc) CheckAlive() bool {
	if p.self {
		return true
	}
	if p.dead.Load() {
		return false
	}
	alive := true
	if p.pidfd >= 0 {
		fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		alive = !(err == nil && n > 0)
	} else if err := unix.Kill(p.pid, 0); errors.Is(err, unix.ESRCH) {
		alive = false
	}
	if !alive {
		p.dead.Store(true)
	}
	return alive
}

// GetFD duplicates the peer's descriptor fd into this process, with
// pidfd_getfd or, failing that, by opening /proc/PID/fd/FD. Both need the
// same rights as ptrace (same user, and kernel.yama.ptrace_scope <= 1).
func (p *Proc) GetFD(fd int) (int, error) {
	if p.self {
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return -1, fmt.Errorf("dup fd %d: %w", fd, err)
		}
		return nfd, nil
	}
	if p.pidfd >= 0 {
		nfd, err := unix.PidfdGetfd(p.pidfd, fd, 0)
		if err == nil {
			return nfd, nil
		}
		if errors.Is(err, unix.ESRCH) {
			p.dead.Store(true)
			return -1, fmt.Errorf("peer process %d exited", p.pid)
		}
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return -1, fmt.Errorf("pidfd_getfd from process %d: %w", p.pid, err)
		}
	}
	path := "/proc/" + strconv.Itoa(p.pid) + "/fd/" + strconv.Itoa(fd)
	nfd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return -1, fmt.Errorf("no permission to reach process %d's shared memory: run both sides as the same user, and check kernel.yama.ptrace_scope (rdiag check): %w", p.pid, err)
		}
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	return nfd, nil
}

// Close releases the handle.
func (p *Proc) Close() error {
	if p.pidfd >= 0 {
		err := unix.Close(p.pidfd)
		p.pidfd = -1
		return err
	}
	return nil
}

// WriteAt copies local into the peer's memory at remote address addr with
// process_vm_writev. iov and riov are caller-provided scratch (one entry
// each) so the call does not allocate.
func (p *Proc) WriteAt(addr uint64, local []byte, iov []unix.Iovec, riov []unix.RemoteIovec) error {
	return p.vm(unix.ProcessVMWritev, local, addr, iov, riov)
}

// ReadAt copies the peer's memory at addr into local with process_vm_readv.
func (p *Proc) ReadAt(local []byte, addr uint64, iov []unix.Iovec, riov []unix.RemoteIovec) error {
	return p.vm(unix.ProcessVMReadv, local, addr, iov, riov)
}

// vm moves len(local) bytes between local and the peer's addr with rw
// (process_vm_readv or process_vm_writev); a short transfer is EFAULT.
func (p *Proc) vm(rw func(int, []unix.Iovec, []unix.RemoteIovec, uint) (int, error), local []byte, addr uint64, iov []unix.Iovec, riov []unix.RemoteIovec) error {
	if len(local) == 0 {
		return nil
	}
	iov[0].Base = unsafe.SliceData(local)
	iov[0].SetLen(len(local))
	riov[0].Base = uintptr(addr)
	riov[0].Len = len(local)
	n, err := rw(p.pid, iov[:1], riov[:1], 0)
	iov[0].Base = nil
	if err != nil {
		return err
	}
	if n != len(local) {
		return unix.EFAULT
	}
	return nil
}
