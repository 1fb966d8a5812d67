// Package baseline measures this machine's own limits for the work the
// engine's tests do, with the same clock (internal/clock) and statistics
// (reports.Recorder, reports' records) as every other rperf test, so that
// an engine figure can be read against what the host can do at all:
//
//   - UDPPingPong: a busy-polling UDP ping-pong between two processes on
//     loopback, the machine's floor under send-lat and write-lat on
//     udp_lo: each side spins on recvfrom(MSG_DONTWAIT) of a non-blocking
//     socket and answers with one sendto, both without the Go scheduler's
//     system-call hand-off (RawSyscall: neither call can block).
//   - UDPStream: UDP streaming with GSO and GRO between two processes, the
//     engine's packets (payload plus the 16 bytes of RoCE header and ICRC
//     a middle packet of a WRITE carries) cut by the kernel from one
//     sendmsg of up to 64 KiB and coalesced again for a GRO receiver: the
//     kernel's best for write-bw on udp_lo.
//   - SHMPingPong: a flag ping-pong through shared memory between two
//     processes: a message of n bytes and a sequence number written by one
//     side, spun on by the other, which answers the same way; the floor
//     under write-lat on shm0.
//   - RawPingPong: a busy-polling ping-pong of whole frames between two
//     processes over packet sockets on a link (a veth pair between two
//     network namespaces in the tests), the reference for rperf raw-lat.
//   - Memmove: copy bandwidth, warm (the same source and destination every
//     time) and cache-cold (a new part of regions larger than the
//     last-level cache every time): what the shm fabric's copies cost.
//   - Syscall and ClockRead: the cost of one system call (getppid, through
//     Go's ordinary path and without the scheduler's hand-off) and of one
//     clock read, the two costs every engine operation and every rperf
//     sample carry.
//
// The ping-pongs' second process is this program again: a caller gives a
// [Launcher] that starts it in [Peer]'s role (rperf baseline re-executes
// itself with a hidden flag; Go's tests re-execute the test binary). The
// peer gets the socket or the shared memory as file descriptor 3 and its
// orders on stdin, and answers on stdout.
//
// Every wait is bounded: a peer that stops answering fails the measurement
// after [StallTimeout], and a peer that loses its parent dies with it.
package baseline

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
)

// Names: the test field of the machine's records.
const (
	NameUDPPingPong = "baseline_udp_pingpong"
	NameUDPStream   = "baseline_udp_stream"
	NameSHMPingPong = "baseline_shm_pingpong"
	NameMemmoveWarm = "baseline_memmove_warm"
	NameMemmoveCold = "baseline_memmove_cold"
	NameSyscall     = "baseline_syscall"
	NameSyscallRaw  = "baseline_syscall_raw"
	NameClockRead   = "baseline_clock_read"
)

// Roles a [Peer] plays.
const (
	RoleUDPPong    = "udp-pong"
	RoleSHMPong    = "shm-pong"
	RoleStreamSend = "udp-stream-send"
)

// StallTimeout bounds every wait for the other process: a ping-pong whose
// answer does not come, a stream that stops arriving, a peer that does
// not report.
const StallTimeout = 10 * time.Second

// Warmup is how many round trips precede a ping-pong's measured ones.
const Warmup = 1000

// Launcher returns the command that runs [Peer] in role: the caller's own
// program with the arguments that make it a peer. Its standard input,
// output and extra files are set by this package.
type Launcher func(role string) *exec.Cmd

// peer is a started peer process: its orders go to in, its answers come
// from out.
type peer struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	errb    *strings.Builder // its standard error, complete once reaped
	reaped  sync.Once
	exitErr error
}

// start starts role with fd as its descriptor 3. The peer dies with this
// process (PR_SET_PDEATHSIG).
func start(launch Launcher, role string, fd *os.File) (*peer, error) {
	cmd := launch(role)
	cmd.ExtraFiles = []*os.File{fd}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &peer{cmd: cmd, in: in, out: bufio.NewReader(out), errb: &strings.Builder{}}
	cmd.Stderr = &limitedWriter{b: p.errb, max: 4096}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the %s process: %w", role, err)
	}
	return p, nil
}

// send gives the peer one order line.
func (p *peer) send(format string, args ...any) error {
	if _, err := fmt.Fprintf(p.in, format+"\n", args...); err != nil {
		return p.failed(fmt.Errorf("write to the peer: %w", err))
	}
	return nil
}

// recv reads the peer's next line, waiting up to wait.
func (p *peer) recv(wait time.Duration) (string, error) {
	type line struct {
		s   string
		err error
	}
	ch := make(chan line, 1)
	go func() {
		s, err := p.out.ReadString('\n')
		ch <- line{strings.TrimSpace(s), err}
	}()
	select {
	case l := <-ch:
		if l.err != nil {
			return "", p.failed(errors.New("the peer process ended"))
		}
		return l.s, nil
	case <-time.After(wait):
		p.cmd.Process.Kill()
		return "", p.failed(fmt.Errorf("the peer process said nothing for %v", wait))
	}
}

// expect reads the peer's next line and checks that it is want.
func (p *peer) expect(want string, wait time.Duration) error {
	got, err := p.recv(wait)
	if err != nil {
		return err
	}
	if got != want {
		return p.failed(fmt.Errorf("the peer process said %q, not %q", got, want))
	}
	return nil
}

// failed adds the peer's own error message to err: the peer has failed,
// or is failing the measurement, so it is reaped first.
func (p *peer) failed(err error) error {
	p.reap()
	if msg := strings.TrimSpace(p.errb.String()); msg != "" {
		return fmt.Errorf("%w (peer: %s)", err, lastLine(msg))
	}
	return err
}

// exitWait bounds a peer's exit once its input has closed (a binary built
// with the race detector sleeps a second at exit).
const exitWait = 5 * time.Second

// reap waits up to exitWait for the peer to exit, then kills it; after
// it, the peer's standard error is complete. Only the first call waits.
func (p *peer) reap() error {
	p.reaped.Do(func() {
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case p.exitErr = <-done:
		case <-time.After(exitWait):
			p.cmd.Process.Kill()
			<-done
			p.exitErr = errors.New("it did not exit; killed")
		}
	})
	return p.exitErr
}

// close ends the peer: its input closes, and it must exit (see reap).
func (p *peer) close() error {
	p.in.Close()
	if err := p.reap(); err != nil {
		return p.failed(fmt.Errorf("the peer process: %w", err))
	}
	return nil
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// limitedWriter keeps the first max bytes written to it.
type limitedWriter struct {
	b   *strings.Builder
	max int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if room := w.max - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Peer runs role with fd as the socket or shared memory the measuring
// process gave it, reading orders from in and answering on out, until in
// closes. It is the whole of a peer process.
func Peer(role string, fd *os.File, in io.Reader, out io.Writer) error {
	if fd == nil {
		return fmt.Errorf("baseline peer %s: no file descriptor 3 (start it through a Launcher)", role)
	}
	defer fd.Close() // and keeps fd alive: its finalizer would close the descriptor
	ctl := bufio.NewReader(in)
	switch role {
	case RoleUDPPong:
		return udpPong(fd, ctl, out)
	case RoleSHMPong:
		return shmPong(fd, ctl, out)
	case RoleStreamSend:
		return streamSend(fd, ctl, out)
	case RoleRawPong:
		return rawPong(fd, ctl, out)
	}
	return fmt.Errorf("baseline peer: unknown role %q (want %s, %s, %s or %s)", role, RoleUDPPong, RoleSHMPong, RoleStreamSend, RoleRawPong)
}

// orders reads order lines until in closes, calling fn for each.
func orders(ctl *bufio.Reader, fn func(line string) error) error {
	for {
		line, err := ctl.ReadString('\n')
		if err != nil {
			return nil // the measuring process is done
		}
		if err := fn(strings.TrimSpace(line)); err != nil {
			return err
		}
	}
}

// pingPongResult is the latency record of a ping-pong's round trips.
func pingPongResult(test string, size, iters int, rec *reports.Recorder) (reports.Result, error) {
	return reports.NewLatencyResult(reports.LatencySpec{
		Test: test, Bytes: int64(size), Iterations: int64(iters), Mode: reports.ModeIterations,
		RTTFactor: reports.RTTFactorRoundTrip,
	}, rec)
}

// spinner bounds a busy wait; its zero value is ready. It reads the clock
// only every 4096th empty poll, never on a wait that ends sooner, so a
// measured round trip carries no clock read of its own: the bound is
// StallTimeout from the first of those reads.
type spinner struct {
	n        int
	deadline int64
}

// spin counts one empty poll and says whether the wait may go on.
func (s *spinner) spin() bool {
	s.n++
	if s.n&4095 != 0 {
		return true
	}
	now := clock.Now()
	if s.deadline == 0 {
		s.deadline = now + int64(StallTimeout)
	}
	return now < s.deadline
}

// checkCount refuses a count below 1.
func checkCount(what string, n int) error {
	if n < 1 {
		return fmt.Errorf("%s %d: must be at least 1", what, n)
	}
	return nil
}
