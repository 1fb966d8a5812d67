package portlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"golang.org/x/sys/unix"
)

// The test binary holds a lock itself when run with this variable set
// (the child of TestAcrossProcesses).
const holdEnv = "RPERF_PORTLOCK_HOLD"

func TestMain(m *testing.M) {
	if dev := os.Getenv(holdEnv); dev != "" {
		l, err := Acquire(dev)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		bufio.NewReader(os.Stdin).ReadString('\n') // until the parent says
		l.Release()
		fmt.Println("released")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Every test runs in namespaces of its own, so that test runs beside it
// (other packages, other checkouts) never hold the same port.

func TestInProcess(t *testing.T) {
	p := netns.Setup(t, netns.Options{})
	if err := p.A.Run(inProcess); err != nil {
		t.Fatal(err)
	}
}

func inProcess() error {
	l, err := Acquire("lo")
	if err != nil {
		return err
	}
	_, err = Acquire("lo")
	var busy *BusyError
	if !errors.As(err, &busy) || !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("second Acquire: %v, want a BusyError matching EBUSY", err)
	}
	if busy.PID != os.Getpid() || !strings.Contains(err.Error(), fmt.Sprint("process ", os.Getpid())) {
		return fmt.Errorf("holder pid %d (%q), want %d", busy.PID, err, os.Getpid())
	}
	if err := l.Release(); err != nil {
		return err
	}
	if err := l.Release(); err == nil {
		return errors.New("a second Release succeeded")
	}
	l2, err := Acquire("lo")
	if err != nil {
		return fmt.Errorf("Acquire after Release: %v", err)
	}
	l2.Release()
	if _, err := Acquire("no-such-dev0"); err == nil || errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("a missing device: %v", err)
	}
	return nil
}

// TestAcrossProcesses: a port held by another process is EBUSY naming
// that process; when the holder dies (SIGKILL, no cleanup of its own) the
// port is free at once.
func TestAcrossProcesses(t *testing.T) {
	p := netns.Setup(t, netns.Options{})
	for _, how := range []string{"release", "kill"} {
		t.Run(how, func(t *testing.T) {
			cmd := p.A.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), holdEnv+"=lo")
			stdin, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			r := bufio.NewReader(out)
			line, _ := r.ReadString('\n')
			if line != "locked\n" {
				t.Fatalf("child: %q", line)
			}
			err := p.A.Run(func() error { _, err := Acquire("lo"); return err })
			var busy *BusyError
			if !errors.As(err, &busy) || busy.PID != cmd.Process.Pid {
				t.Fatalf("Acquire while the child holds it: %v, want EBUSY naming pid %d", err, cmd.Process.Pid)
			}
			if how == "kill" {
				cmd.Process.Kill()
			} else {
				stdin.Write([]byte("\n"))
				if line, _ := r.ReadString('\n'); line != "released\n" {
					t.Fatalf("child: %q", line)
				}
			}
			cmd.Wait()
			err = p.A.Run(func() error {
				l, err := Acquire("lo")
				if err == nil {
					l.Release()
				}
				return err
			})
			if err != nil {
				t.Fatalf("Acquire after the holder's %s: %v", how, err)
			}
		})
	}
}

// TestPerNamespace: the same interface index in two network namespaces
// is two ports.
func TestPerNamespace(t *testing.T) {
	p := netns.Setup(t, netns.Options{})
	var locks []*Lock
	for _, h := range []netns.Host{p.A, p.B} {
		err := h.Run(func() error {
			l, err := Acquire("lo")
			locks = append(locks, l)
			return err
		})
		if err != nil {
			t.Fatalf("lo in %s: %v", h.NS, err)
		}
	}
	err := p.A.Run(func() error { _, err := Acquire("lo"); return err })
	if !errors.Is(err, unix.EBUSY) {
		t.Errorf("lo in A again: %v, want EBUSY", err)
	}
	for _, l := range locks {
		l.Release()
	}
}

// TestBusyWithoutPID: when the holder's pid cannot be learned the error
// still says what to do.
func TestBusyWithoutPID(t *testing.T) {
	msg := (&BusyError{Netdev: "eth9"}).Error()
	if !strings.Contains(msg, "eth9") || !strings.Contains(msg, "another process") {
		t.Errorf("message %q", msg)
	}
}
