package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// ErrGoexit is returned by Run when fn ended its goroutine with
// runtime.Goexit (for example through t.FailNow, which must not be called
// inside fn).
var ErrGoexit = errors.New("function called runtime.Goexit")

// Run calls fn on an OS thread switched into network namespace ns (a name
// under RunDir, or a path such as /proc/PID/ns/net) and returns fn's error.
//
// How it works, and what follows from Go's threading model:
//
//   - fn runs on a new goroutine locked to its OS thread (runtime.LockOSThread);
//     only that thread enters ns, with setns(2). The caller's goroutine and
//     thread never change namespace.
//   - Goroutines that fn starts run on other threads, in the process's
//     original namespace: they do not inherit ns. Do the namespace-sensitive
//     work (socket, bind, netlink, opening /proc/sys/net) in fn itself.
//   - /proc/net is /proc/self/net, which shows the namespace of the
//     process's main thread, not of this one: read /proc/thread-self/net
//     inside fn instead. /proc/sys/net follows the thread.
//   - Sockets created inside fn belong to ns for their whole life: after Run
//     returns they can be used from any goroutine and still send and receive
//     in ns. That is the main use (see ListenUDP).
//   - A child started inside fn with exec.Cmd.Start is forked from this
//     thread and so starts in ns as well (Command is the simpler way).
//   - After fn, the thread is switched back to its original namespace and
//     unlocked, returning to Go's pool. If switching back fails, or fn left
//     the thread locked, the goroutine exits still locked and the runtime
//     destroys the thread: no thread ever returns to the pool in ns.
//   - A panic in fn is re-raised in the caller; runtime.Goexit in fn (t.FailNow,
//     t.Fatal) yields ErrGoexit. Do not call t.Fatal inside fn; return an error.
func Run(ns string, fn func() error) error {
	target, err := unix.Open(NSPath(ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns: run in %s: open namespace: %w", ns, err)
	}
	defer unix.Close(target)

	type result struct {
		err      error
		returned bool // fn returned or panicked (not Goexit)
		panicked bool
		pval     any
	}
	done := make(chan result, 1)
	go func() {
		var res result
		defer func() { done <- res }() // also runs on Goexit
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			res.returned = true
			res.err = fmt.Errorf("netns: run in %s: open current namespace: %w", ns, err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			res.returned = true
			res.err = fmt.Errorf("netns: run in %s: setns: %w", ns, err)
			return
		}
		defer func() {
			// Only a thread back in its original namespace may return to
			// the pool; otherwise exit locked so the runtime discards it.
			if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
		}()
		defer func() {
			if r := recover(); r != nil {
				res.returned, res.panicked, res.pval = true, true, r
			}
		}()
		res.err = fn()
		res.returned = true
	}()
	res := <-done
	switch {
	case res.panicked:
		panic(res.pval)
	case !res.returned:
		return fmt.Errorf("netns: run in %s: %w", ns, ErrGoexit)
	}
	return res.err
}

// Command returns a command that runs name with args inside namespace ns,
// through "ip netns exec" (which also mounts a /sys that shows ns, so the
// child's /sys/class/net lists only its own links). The returned Cmd's Path
// is ip; ip execs name in place, so Process.Pid and signals reach the child
// itself. Set Env, Stdout and the rest as usual before starting it.
func Command(ns, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// CommandContext is Command with a context that kills the child when done.
func CommandContext(ctx context.Context, ns, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// ListenUDP opens a UDP socket in namespace ns, as net.ListenPacket(network,
// address) would there. The socket stays in ns.
func ListenUDP(ns, network, address string) (*net.UDPConn, error) {
	var conn *net.UDPConn
	err := Run(ns, func() error {
		pc, err := net.ListenPacket(network, address)
		if err != nil {
			return err
		}
		c, ok := pc.(*net.UDPConn)
		if !ok {
			pc.Close()
			return fmt.Errorf("network %q is not udp", network)
		}
		conn = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("netns: listen udp in %s: %w", ns, err)
	}
	return conn, nil
}

// Run calls fn inside h's namespace; see the package-level Run.
func (h Host) Run(fn func() error) error { return Run(h.NS, fn) }

// Command returns a command that runs inside h's namespace; see the
// package-level Command.
func (h Host) Command(name string, args ...string) *exec.Cmd {
	return Command(h.NS, name, args...)
}

// ListenUDP opens a UDP socket in h's namespace bound to h's own address for
// network ("udp4" or "udp6") and port (0 picks one).
func (h Host) ListenUDP(network string, port int) (*net.UDPConn, error) {
	var addr string
	switch network {
	case "udp4":
		addr = net.JoinHostPort(h.Addr4.Addr().String(), fmt.Sprint(port))
	case "udp6":
		addr = net.JoinHostPort(h.Addr6.Addr().String(), fmt.Sprint(port))
	default:
		return nil, fmt.Errorf("netns: listen udp in %s: network %q: want udp4 or udp6", h.NS, network)
	}
	return ListenUDP(h.NS, network, addr)
}
