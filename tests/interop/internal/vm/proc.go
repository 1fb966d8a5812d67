//go:build linux

package vm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rperf/rperf/tests/interop/internal/agentproto"
)

// Result is how a program ended.
type Result struct {
	// RC is the exit code: the program's, 128+signal when a signal ended
	// it, -1 when it could not start.
	RC int
	// Killed is set when the suite killed it: its time limit, or the
	// other side of its test ended and it did not follow within the grace.
	Killed bool
	Wall   time.Duration
	// Usage is what the guest's kernel counted for the process (VM
	// processes only; nil elsewhere).
	Usage *agentproto.Usage
	// Err says why it could not start.
	Err error
}

// Proc is a started program.
type Proc interface {
	// Done is closed when the program has ended.
	Done() <-chan struct{}
	// Result is valid once Done is closed.
	Result() Result
	// Kill kills the program and what it started.
	Kill()
	// WaitListen waits until the program's side has a TCP socket
	// listening on port, or with cm an rdma_cm listener (the VM's kernel
	// rdma_cm; on the host, rperf's own announcement in its output),
	// without connecting to it.
	WaitListen(port int, cm bool, wait time.Duration) error
}

// Runner starts programs on one side of the link.
type Runner interface {
	// Name is "host" or "vm".
	Name() string
	// Start runs argv with its output appended to output, a path relative
	// to the results directory, and kills it after limit.
	Start(argv []string, output string, limit time.Duration) (Proc, error)
}

// HostRunner runs programs in the link's namespace on the host.
type HostRunner struct {
	Link    *Link
	Results string // the results directory
}

// Name implements Runner.
func (h *HostRunner) Name() string { return "host" }

// Start implements Runner.
func (h *HostRunner) Start(argv []string, output string, limit time.Duration) (Proc, error) {
	path := filepath.Join(h.Results, output)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := h.Link.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &hostProc{cmd: cmd, done: make(chan struct{}), begin: time.Now(), log: path}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, err
	}
	go func() {
		defer out.Close()
		t := time.AfterFunc(limit, func() { p.kill() })
		err := cmd.Wait()
		t.Stop()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what it left behind
		p.mu.Lock()
		p.res.Wall = time.Since(p.begin)
		p.res.RC = exitCode(err)
		p.res.Killed = p.killed
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

type hostProc struct {
	cmd    *exec.Cmd
	done   chan struct{}
	begin  time.Time
	log    string // the output file
	mu     sync.Mutex
	killed bool
	res    Result
}

func (p *hostProc) Done() <-chan struct{} { return p.done }

func (p *hostProc) Result() Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.res
}

func (p *hostProc) Kill() { p.kill() }

func (p *hostProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

func (p *hostProc) WaitListen(port int, cm bool, wait time.Duration) error {
	// "ip netns exec" execs the program in place: its pid's net directory
	// shows the namespace's sockets.
	dir := "/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/net"
	listening := func() bool { return agentproto.Listening(dir, port) }
	what := "TCP"
	if cm {
		// rperf's rdma_cm on the udp fabric lives in the process: it
		// says when it listens.
		what = "rdma_cm"
		listening = func() bool {
			b, _ := os.ReadFile(p.log)
			return strings.Contains(string(b), CMAnnouncement(port))
		}
	}
	deadline := time.Now().Add(wait)
	for !listening() {
		select {
		case <-p.done:
			return fmt.Errorf("it ended before listening on %s port %d", what, port)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s port %d after %v", what, port, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// CMAnnouncement is what rperf prints once its rdma_cm listens on port
// (a test command with -R, and rperf rping -s).
func CMAnnouncement(port int) string {
	return "on rdma_cm port " + strconv.Itoa(port) + " "
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}
