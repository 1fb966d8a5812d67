// Package portlock gives one raw QP at a time, across every process of
// the host, the use of an Ethernet port: what mana's exclusive port use
// needs (manadv(7): creating a RAW_PACKET QP fails with EBUSY while the
// port is in use).
//
// The lock is a listening Unix socket in the abstract namespace named
// after the port's interface index. Binding the name is atomic, so the
// first process gets it and every later bind fails with EADDRINUSE. The
// abstract namespace belongs to the network namespace, as interface
// indexes do, so a port's lock is the port's alone. The kernel releases
// the name when the socket closes, which it does when the process exits,
// however it exits: a crashed holder leaves no stale lock behind (a lock
// file with flock(2) would be released too, but it needs a directory every
// process can write, and a file name per network namespace). A process
// that fails to get the lock connects to the holder's socket and reads
// its pid (SO_PEERCRED) for the error message. The socket is close-on-exec,
// so a child the holder starts does not inherit the lock.
//
// Any process in the network namespace can bind the name, so a hostile
// one can keep the port "busy" (as it could hold a lock file); it cannot
// take a port another process holds.
package portlock

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// Prefix starts every lock's abstract socket name; the interface index
// follows.
const Prefix = "rperf-raw-port:"

// Lock is a held port.
type Lock struct {
	fd      int
	Netdev  string
	Ifindex int
}

// BusyError says the port is held by another raw QP. It matches
// unix.EBUSY with errors.Is.
type BusyError struct {
	Netdev string
	PID    int // the holder's pid, 0 when it could not be learned
}

// Error says which port is held, by whom, and what to do.
func (e *BusyError) Error() string {
	who := "another process"
	if e.PID != 0 {
		who = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("port %s is in use by a raw QP of %s; destroy that QP (or end that process) first", e.Netdev, who)
}

// Is matches unix.EBUSY.
func (e *BusyError) Is(target error) bool { return target == unix.EBUSY }

func name(ifindex int) string { return "@" + Prefix + strconv.Itoa(ifindex) }

// Acquire takes the port of netdev ifname (in the calling thread's
// network namespace), or fails with a *BusyError while another holder,
// in this process or any other, has it.
func Acquire(ifname string) (*Lock, error) {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("portlock: %w", err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("portlock: socket: %w", err)
	}
	sa := &unix.SockaddrUnix{Name: name(ifc.Index)}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, &BusyError{Netdev: ifname, PID: holder(sa)}
		}
		return nil, fmt.Errorf("portlock: bind %q: %w", sa.Name, err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("portlock: listen: %w", err)
	}
	return &Lock{fd: fd, Netdev: ifname, Ifindex: ifc.Index}, nil
}

// holder returns the pid of the process listening on sa, or 0.
func holder(sa *unix.SockaddrUnix) int {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, sa); err != nil {
		return 0 // its backlog is full, or it is just gone
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0
	}
	return int(cred.Pid)
}

// Release gives the port back. Releasing twice is an error.
func (l *Lock) Release() error {
	if l.fd < 0 {
		return errors.New("portlock: released twice")
	}
	err := unix.Close(l.fd)
	l.fd = -1
	return err
}
