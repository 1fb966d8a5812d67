//go:build linux

// Command interop-agent runs inside the interop suite's VM: it executes the
// commands the host sends over a virtio-serial port and reports their ends
// (protocol: tests/interop/internal/agentproto). The guest's init starts
// it once rxe0 exists; it never touches the network under test.
package main

import (
	"bufio"
	"encoding/json"
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

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/tests/interop/internal/agentproto"
)

func main() {
	port, err := openPort(agentproto.Port, 30*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop-agent:", err)
		os.Exit(1)
	}
	a := &agent{out: port, procs: map[int]*proc{}}
	var u unix.Utsname
	unix.Uname(&u)
	a.send(agentproto.Event{Kind: agentproto.EventHello, Info: unix.ByteSliceToString(u.Release[:])})
	sc := bufio.NewScanner(port)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r agentproto.Request
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			a.send(agentproto.Event{Kind: agentproto.EventError, Err: fmt.Sprintf("bad request %q: %v", sc.Text(), err)})
			continue
		}
		go a.handle(r)
	}
	fmt.Fprintln(os.Stderr, "interop-agent: control port closed:", sc.Err())
}

// openPort opens the virtio-serial port named name, waiting for the kernel
// to create it.
func openPort(name string, wait time.Duration) (*os.File, error) {
	deadline := time.Now().Add(wait)
	for {
		names, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err == nil && strings.TrimSpace(string(b)) == name {
				return os.OpenFile("/dev/"+filepath.Base(filepath.Dir(n)), os.O_RDWR, 0)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no virtio-serial port named %s after %v (is virtio_console loaded?)", name, wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type proc struct {
	cmd    *exec.Cmd
	killed bool
}

type agent struct {
	mu    sync.Mutex
	out   *os.File
	procs map[int]*proc
}

func (a *agent) send(e agentproto.Event) {
	b, _ := json.Marshal(e)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.out.Write(append(b, '\n'))
}

func (a *agent) handle(r agentproto.Request) {
	switch r.Op {
	case agentproto.OpStart:
		a.start(r)
	case agentproto.OpKill:
		a.mu.Lock()
		p := a.procs[r.Target]
		if p != nil {
			p.killed = true
		}
		a.mu.Unlock()
		if p == nil {
			a.send(agentproto.Event{ID: r.ID, Kind: agentproto.EventError, Err: fmt.Sprintf("no running process for request %d", r.Target)})
			return
		}
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		a.send(agentproto.Event{ID: r.ID, Kind: agentproto.EventOK})
	case agentproto.OpWaitListen:
		if err := waitListen(r.Port, r.Space, time.Duration(r.Timeout*float64(time.Second))); err != nil {
			a.send(agentproto.Event{ID: r.ID, Kind: agentproto.EventError, Err: err.Error()})
			return
		}
		a.send(agentproto.Event{ID: r.ID, Kind: agentproto.EventListening})
	case agentproto.OpPowerOff:
		a.send(agentproto.Event{ID: r.ID, Kind: agentproto.EventOK})
		unix.Sync()
		time.Sleep(200 * time.Millisecond)
		unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	default:
		a.send(agentproto.Event{ID: r.ID, Kind: agentproto.EventError, Err: "unknown op " + strconv.Quote(r.Op)})
	}
}

func (a *agent) start(r agentproto.Request) {
	fail := func(err error) {
		a.send(agentproto.Event{ID: r.ID, Kind: agentproto.EventExit, RC: -1, Err: err.Error()})
	}
	if len(r.Argv) == 0 {
		fail(errors.New("empty command"))
		return
	}
	out, err := os.OpenFile(r.Output, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fail(err)
		return
	}
	defer out.Close()
	cmd := exec.Command(r.Argv[0], r.Argv[1:]...)
	cmd.Env = append(os.Environ(), r.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		fail(err)
		return
	}
	p := &proc{cmd: cmd}
	a.mu.Lock()
	a.procs[r.ID] = p
	a.mu.Unlock()
	a.send(agentproto.Event{ID: r.ID, Kind: agentproto.EventStarted})
	if r.Timeout > 0 {
		t := time.AfterFunc(time.Duration(r.Timeout*float64(time.Second)), func() {
			a.mu.Lock()
			p.killed = true
			a.mu.Unlock()
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		})
		defer t.Stop()
	}
	err = cmd.Wait()
	rc := 0
	if err != nil {
		rc = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				rc = 128 + int(ws.Signal())
			} else {
				rc = ee.ExitCode()
			}
		}
	}
	// Reap what the process group left behind (a killed shell's children).
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	a.mu.Lock()
	killed := p.killed
	delete(a.procs, r.ID)
	a.mu.Unlock()
	ev := agentproto.Event{ID: r.ID, Kind: agentproto.EventExit, RC: rc, Killed: killed, Wall: time.Since(begin).Seconds()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		ev.Usage = &agentproto.Usage{
			UserSec: float64(ru.Utime.Nano()) / 1e9, SystemSec: float64(ru.Stime.Nano()) / 1e9,
			MajFlt: ru.Majflt, MinFlt: ru.Minflt, VolCtxSw: ru.Nvcsw, InvCtxSw: ru.Nivcsw,
		}
	}
	a.send(ev)
}

// waitListen polls /proc/net/tcp{,6} for a listening socket on port, or
// with space agentproto.SpaceRDMACM the kernel's rdma_cm identifiers
// ("rdma res show cm_id") for a listening one.
func waitListen(port int, space string, wait time.Duration) error {
	listening := func() bool { return agentproto.Listening("/proc/net", port) }
	what := "TCP"
	if space == agentproto.SpaceRDMACM {
		what = "rdma_cm"
		listening = func() bool {
			out, _ := exec.Command("/usr/bin/rdma", "res", "show", "cm_id").Output()
			return agentproto.CMListening(string(out), port)
		}
	}
	deadline := time.Now().Add(wait)
	for !listening() {
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s port %d after %v", what, port, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
