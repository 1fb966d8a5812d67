//go:build linux

package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rperf/rperf/tests/interop/internal/agentproto"
	"github.com/rperf/rperf/tests/interop/internal/image"
)

// Config describes the VM to boot.
type Config struct {
	Image *image.Image
	Link  *Link
	// Results is shared read-write as /out: every output file lands there.
	Results string
	// Share is shared read-only as /opt/interop: the agent (bin/) and the
	// programs to run.
	Share string
	// Dir holds the control socket.
	Dir    string
	SMP    int // vCPUs; 1 by default (TCG shares the host's cores)
	MemMB  int // 1024 by default
	Boot   time.Duration
	Limit  time.Duration // qemu's whole life, then it is killed
	Append string        // more kernel arguments
	// Console names the serial console's log in Results; "console.log"
	// by default.
	Console string
}

// VM is a booted VM with its agent connected.
type VM struct {
	cmd      *exec.Cmd
	conn     net.Conn
	qemuDone chan struct{}
	qemuErr  error
	// Kernel is the guest's kernel release, from the agent's hello.
	Kernel string
	// Console is the serial console log file.
	Console string

	mu      sync.Mutex
	nextID  int
	waiters map[int]chan agentproto.Event
	gone    bool // the agent's connection ended
}

// Boot starts qemu inside the link's namespace and waits for the agent.
func Boot(ctx context.Context, c Config) (*VM, error) {
	if c.SMP == 0 {
		c.SMP = 1
	}
	if c.MemMB == 0 {
		c.MemMB = 1024
	}
	sock := filepath.Join(c.Dir, "ctl-"+strconv.Itoa(os.Getpid())+".sock")
	os.Remove(sock)
	if c.Console == "" {
		c.Console = "console.log"
	}
	console := filepath.Join(c.Results, c.Console)
	args := []string{
		"-accel", "tcg", "-cpu", "max", "-smp", strconv.Itoa(c.SMP), "-m", strconv.Itoa(c.MemMB),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", c.Image.Kernel, "-initrd", c.Image.Initrd,
		"-append", "console=ttyS0 panic=-1 loglevel=5 interop.addr=" + VMAddr + prefix4 + " interop.addr6=" + VMAddr6 + prefix6 + " " + c.Append,
		"-serial", "file:" + console,
		"-netdev", "tap,id=n0,ifname=" + Tap + ",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=52:54:00:77:00:01",
		"-fsdev", "local,id=out,path=" + c.Results + ",security_model=none",
		"-device", "virtio-9p-pci,fsdev=out,mount_tag=out",
		"-fsdev", "local,id=share,path=" + c.Share + ",security_model=none,readonly=on",
		"-device", "virtio-9p-pci,fsdev=share,mount_tag=share",
		"-chardev", "socket,id=ctl,path=" + sock + ",server=on,wait=off",
		"-device", "virtio-serial-pci", "-device", "virtserialport,chardev=ctl,name=" + agentproto.Port,
	}
	cmd := c.Link.Command("qemu-system-x86_64", args...)
	qlog, err := os.Create(filepath.Join(c.Results, "qemu.log"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(qlog, "qemu-system-x86_64 %s\n", strings.Join(args, " "))
	cmd.Stdout, cmd.Stderr = qlog, qlog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	v := &VM{cmd: cmd, qemuDone: make(chan struct{}), Console: console, waiters: map[int]chan agentproto.Event{}}
	if err := cmd.Start(); err != nil {
		qlog.Close()
		return nil, fmt.Errorf("qemu: %w", err)
	}
	go func() {
		t := time.AfterFunc(c.Limit, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		v.qemuErr = cmd.Wait()
		t.Stop()
		qlog.Close()
		close(v.qemuDone)
	}()
	fail := func(err error) (*VM, error) {
		v.Kill()
		return nil, fmt.Errorf("%w (console: %s, qemu: %s)", err, console, qlog.Name())
	}
	deadline := time.Now().Add(c.Boot)
	for v.conn == nil {
		conn, err := net.Dial("unix", sock)
		if err == nil {
			v.conn = conn
			break
		}
		select {
		case <-v.qemuDone:
			return fail(fmt.Errorf("qemu exited at once: %v", v.qemuErr))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("qemu's control socket %s did not appear within %v", sock, c.Boot))
		}
	}
	hello := make(chan agentproto.Event, 1)
	v.waiters[0] = hello
	go v.read()
	select {
	case e := <-hello:
		v.Kernel = e.Info
		v.forget(0)
	case <-v.qemuDone:
		return fail(fmt.Errorf("the VM stopped before its agent started: %v", v.qemuErr))
	case <-time.After(time.Until(deadline)):
		return fail(fmt.Errorf("the VM's agent did not start within %v", c.Boot))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	return v, nil
}

// read dispatches the agent's events to the requests waiting for them.
func (v *VM) read() {
	sc := bufio.NewScanner(v.conn)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e agentproto.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		v.mu.Lock()
		ch := v.waiters[e.ID]
		v.mu.Unlock()
		if ch != nil {
			select {
			case ch <- e:
			default: // nobody listens any more
			}
		}
	}
	// The agent is gone: end every wait.
	v.mu.Lock()
	v.gone = true
	for id, ch := range v.waiters {
		select {
		case ch <- agentproto.Event{ID: id, Kind: agentproto.EventError, Err: "the VM's agent disconnected"}:
		default:
		}
	}
	v.waiters = map[int]chan agentproto.Event{}
	v.mu.Unlock()
}

// request sends r with a fresh id and returns the channel of its events.
func (v *VM) request(r agentproto.Request) (int, chan agentproto.Event, error) {
	v.mu.Lock()
	v.nextID++
	r.ID = v.nextID
	ch := make(chan agentproto.Event, 4)
	v.waiters[r.ID] = ch
	v.mu.Unlock()
	b, _ := json.Marshal(r)
	if _, err := v.conn.Write(append(b, '\n')); err != nil {
		v.forget(r.ID)
		return 0, nil, fmt.Errorf("agent: %w", err)
	}
	return r.ID, ch, nil
}

func (v *VM) forget(id int) {
	v.mu.Lock()
	delete(v.waiters, id)
	v.mu.Unlock()
}

// call sends r and waits up to wait for its first event.
func (v *VM) call(r agentproto.Request, wait time.Duration) (agentproto.Event, error) {
	id, ch, err := v.request(r)
	if err != nil {
		return agentproto.Event{}, err
	}
	defer v.forget(id)
	select {
	case e := <-ch:
		if e.Kind == agentproto.EventError {
			return e, errors.New(e.Err)
		}
		return e, nil
	case <-time.After(wait):
		return agentproto.Event{}, fmt.Errorf("agent: no answer to %s within %v", r.Op, wait)
	}
}

// Name implements Runner.
func (v *VM) Name() string { return "vm" }

// Start implements Runner: output is relative to the results directory,
// which the guest sees as /out.
func (v *VM) Start(argv []string, output string, limit time.Duration) (Proc, error) {
	id, ch, err := v.request(agentproto.Request{Op: agentproto.OpStart, Argv: argv, Output: "/out/" + output, Timeout: limit.Seconds()})
	if err != nil {
		return nil, err
	}
	p := &vmProc{vm: v, id: id, done: make(chan struct{}), begin: time.Now()}
	// The agent kills the process at limit; the host gives it a margin
	// for the answer, then gives up on the agent.
	first := time.NewTimer(limit + 30*time.Second)
	select {
	case e := <-ch:
		if e.Kind != agentproto.EventStarted {
			first.Stop()
			v.forget(id)
			return nil, fmt.Errorf("%s: %s", argv[0], e.Err)
		}
	case <-first.C:
		v.forget(id)
		return nil, fmt.Errorf("%s: the agent did not start it", argv[0])
	}
	go func() {
		defer v.forget(id)
		defer first.Stop()
		select {
		case e := <-ch:
			p.res = Result{RC: e.RC, Killed: e.Killed, Wall: time.Duration(e.Wall * float64(time.Second)), Usage: e.Usage}
			if e.Kind == agentproto.EventError {
				p.res = Result{RC: -1, Killed: true, Wall: time.Since(p.begin), Err: errors.New(e.Err)}
			}
		case <-first.C:
			p.res = Result{RC: -1, Killed: true, Wall: time.Since(p.begin), Err: errors.New("the agent never reported its end")}
		}
		close(p.done)
	}()
	return p, nil
}

type vmProc struct {
	vm    *VM
	id    int
	done  chan struct{}
	begin time.Time
	res   Result
}

func (p *vmProc) Done() <-chan struct{} { return p.done }
func (p *vmProc) Result() Result        { <-p.done; return p.res }

func (p *vmProc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.vm.call(agentproto.Request{Op: agentproto.OpKill, Target: p.id}, 10*time.Second)
}

func (p *vmProc) WaitListen(port int, cm bool, wait time.Duration) error {
	req := agentproto.Request{Op: agentproto.OpWaitListen, Port: port, Timeout: wait.Seconds()}
	what := "TCP"
	if cm {
		req.Space, what = agentproto.SpaceRDMACM, "rdma_cm"
	}
	_, err := p.vm.call(req, wait+10*time.Second)
	if err != nil {
		select {
		case <-p.done:
			return fmt.Errorf("it ended before listening on %s port %d", what, port)
		default:
		}
	}
	return err
}

// Dead reports whether the VM stopped or its agent went away (a guest
// kernel panic does both).
func (v *VM) Dead() bool {
	select {
	case <-v.qemuDone:
		return true
	default:
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gone
}

// Panic returns the first line of the console log that shows why the
// guest kernel failed (BUG, Oops, panic), or "".
func (v *VM) Panic() string {
	b, _ := os.ReadFile(v.Console)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "BUG:") || strings.Contains(l, "Oops") || strings.Contains(l, "Kernel panic") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// Shutdown powers the VM off and waits for qemu, killing it after wait.
func (v *VM) Shutdown(wait time.Duration) error {
	v.call(agentproto.Request{Op: agentproto.OpPowerOff}, 5*time.Second)
	select {
	case <-v.qemuDone:
	case <-time.After(wait):
		v.Kill()
		return fmt.Errorf("the VM did not power off within %v; qemu killed", wait)
	}
	if v.conn != nil {
		v.conn.Close()
	}
	return nil
}

// Kill kills qemu at once.
func (v *VM) Kill() {
	syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
	<-v.qemuDone
	if v.conn != nil {
		v.conn.Close()
	}
}
