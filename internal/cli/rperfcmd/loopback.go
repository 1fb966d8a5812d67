package rperfcmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
)

// loopbackServerFlag is the hidden flag that makes a process the server
// of --loopback: it listens on 127.0.0.1 and reports its port on fd 3.
const loopbackServerFlag = "loopback-server"

// Loopback waits.
const (
	// loopbackStartWait bounds the server's start, up to listening.
	loopbackStartWait = 15 * time.Second
	// loopbackExitWait bounds the server's exit after the client's end.
	loopbackExitWait = 5 * time.Second
)

// runLoopback runs the server as a second rperf process on this host and
// the client here, and prints the client's report. The server process
// never outlives this one: it is killed when the client is done and it has
// not exited by itself, and the kernel kills it if this process dies
// (PR_SET_PDEATHSIG).
func runLoopback(ctx context.Context, o *options, p *prepared, stdout, stderr io.Writer) error {
	return loopbackWith(o, []string{o.test.Command()}, func(client *options) error {
		return runSide(ctx, client, p, stdout, stderr, nil)
	})
}

// loopbackWith runs command (the words naming it, e.g. "write-lat" or
// "paths") as the server process with o's flags, and client, given o set
// up to connect to it, here; see runLoopback.
func loopbackWith(o *options, command []string, client func(*options) error) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--loopback: cannot find the rperf executable to start the server: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("--loopback: %w", err)
	}
	defer pr.Close()
	args := append(append(command[:len(command):len(command)], "--"+loopbackServerFlag), serverFlags(o.fs)...)
	if !o.changed("port") {
		args = append(args, "--port=0")
	}
	cmd := exec.Command(exe, args...)
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Stdout = io.Discard
	serr := &tailBuffer{max: 4096}
	cmd.Stderr = serr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return fmt.Errorf("--loopback: start the server process %s: %w", exe, err)
	}
	pw.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var exitErr error
	reaped := false
	reap := func(wait time.Duration) {
		if reaped {
			return
		}
		select {
		case exitErr = <-exited:
		case <-time.After(wait):
			cmd.Process.Kill()
			exitErr = <-exited
			if exitErr == nil {
				exitErr = errors.New("killed")
			}
		}
		reaped = true
	}
	defer reap(0)

	port, udpPort, err := readPort(pr, loopbackStartWait)
	if err != nil {
		reap(loopbackExitWait)
		if msg := serverMessage(serr, exitErr); msg != "" {
			return fmt.Errorf("--loopback: the server process failed: %s", msg)
		}
		return fmt.Errorf("--loopback: the server process did not start listening: %v", err)
	}

	co := *o
	co.loopback, co.host, co.port = false, "127.0.0.1", port
	if udpPort > 0 {
		co.peerUDPPort = udpPort // -R: the client's CM sends to the server's engine
	}
	clientErr := client(&co)
	wait := loopbackExitWait
	if clientErr != nil {
		wait = 500 * time.Millisecond
	}
	reap(wait)
	msg := serverMessage(serr, exitErr)
	switch {
	case clientErr != nil && msg != "":
		return &wrapped{msg: fmt.Sprintf("%v (the loopback server: %s)", clientErr, msg), err: clientErr}
	case clientErr != nil:
		return clientErr
	case exitErr != nil:
		if msg == "" {
			msg = exitErr.Error()
		}
		return fmt.Errorf("--loopback: the client finished but the server process failed: %s", msg)
	}
	return nil
}

// serverFlags renders the flags the user set, for the server process:
// all but --loopback and the client's output files.
func serverFlags(fs *pflag.FlagSet) []string {
	var args []string
	fs.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "loopback", "json", "hgrm", loopbackServerFlag:
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return args
}

// readPort reads "port N" or "port N udp M" from the server's pipe: the
// port it listens on and its engine's UDP port (0 if it has none).
func readPort(r *os.File, wait time.Duration) (port, udpPort int, err error) {
	r.SetReadDeadline(time.Now().Add(wait))
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, 0, fmt.Errorf("no port within %v", wait)
		}
		return 0, 0, errors.New("it exited before listening")
	}
	n, _ := fmt.Sscanf(line, "port %d udp %d", &port, &udpPort)
	if n < 1 || port <= 0 {
		return 0, 0, fmt.Errorf("unexpected message %q", line)
	}
	return port, udpPort, nil
}

// reportPort tells the --loopback parent where the server listens and,
// on the udp fabric, its engine's UDP port (for -R).
func reportPort(port, udpPort int) {
	f := os.NewFile(3, "loopback-port")
	if f == nil {
		return
	}
	line := "port " + strconv.Itoa(port)
	if udpPort > 0 {
		line += " udp " + strconv.Itoa(udpPort)
	}
	f.WriteString(line + "\n")
	f.Close()
}

// serverMessage returns the server's own error line, without its "rperf: "
// prefix, or a description of how it ended.
func serverMessage(b *tailBuffer, exitErr error) string {
	text := strings.TrimSpace(b.String())
	var last string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "rperf: ") {
			last = strings.TrimPrefix(l, "rperf: ")
		}
	}
	if last != "" {
		return last
	}
	var ee *exec.ExitError
	if errors.As(exitErr, &ee) && !ee.Exited() {
		return "it was killed (" + ee.String() + ")"
	}
	if exitErr != nil && text != "" {
		lines := strings.Split(text, "\n")
		return strings.TrimSpace(lines[len(lines)-1])
	}
	return ""
}

// wrapped is an error with its own text that still unwraps to err (for
// the exit code).
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
