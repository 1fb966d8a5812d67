package soft_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
)

// The test binary re-executes itself as the peer process: with
// RPERF_SOFT_CHILD set, TestMain runs that child role instead of the tests.
func TestMain(m *testing.M) {
	if role := os.Getenv("RPERF_SOFT_CHILD"); role != "" {
		if path := os.Getenv("RPERF_CHILD_CPUPROFILE"); path != "" {
			f, err := os.Create(path + "." + role)
			if err == nil {
				pprof.StartCPUProfile(f)
				go func() {
					ch := make(chan os.Signal, 1)
					signal.Notify(ch, os.Interrupt)
					<-ch
					pprof.StopCPUProfile()
					f.Close()
					os.Exit(0)
				}()
				code := runChild(role)
				pprof.StopCPUProfile()
				f.Close()
				os.Exit(code)
			}
		}
		os.Exit(runChild(role))
	}
	os.Exit(m.Run())
}

// child is a peer process started by a test, talking line by line over its
// stdin and stdout.
type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startChild(tb testing.TB, role string, extra ...*os.File) *child {
	tb.Helper()
	return startChildCmd(tb, exec.Command(os.Args[0], "-test.run=^$"), role, extra...)
}

// startChildCmd starts cmd, a command that runs this test binary (in a
// namespace, say), as the peer process of role.
func startChildCmd(tb testing.TB, cmd *exec.Cmd, role string, extra ...*os.File) *child {
	tb.Helper()
	cmd.Env = append(os.Environ(), "RPERF_SOFT_CHILD="+role)
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = extra
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewReader(out)}
	tb.Cleanup(func() {
		if os.Getenv("RPERF_CHILD_CPUPROFILE") != "" {
			// Let the child write its profile (TestMain stops it on
			// SIGINT), for at most a second.
			c.cmd.Process.Signal(os.Interrupt)
			t := time.AfterFunc(time.Second, func() { c.cmd.Process.Kill() })
			defer t.Stop()
		} else {
			c.cmd.Process.Kill()
		}
		c.cmd.Wait()
	})
	return c
}

func (c *child) send(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if _, err := fmt.Fprintf(c.in, format+"\n", args...); err != nil {
		tb.Fatalf("write to child: %v", err)
	}
}

// recv reads one line, failing the test after 10 seconds.
func (c *child) recv(tb testing.TB) string {
	tb.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := c.out.ReadString('\n')
		ch <- res{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			tb.Fatalf("read from child: %v", r.err)
		}
		return strings.TrimSpace(r.s)
	case <-time.After(10 * time.Second):
		tb.Fatal("child did not answer within 10s")
	}
	return ""
}

func formatEndpoint(e verbsio.Endpoint) string {
	return fmt.Sprintf("%d %s %d %d %d %d", e.QPN, e.GID, e.RKey, e.VAddr, e.LID, e.PSN)
}

func parseEndpoint(s string) (verbsio.Endpoint, error) {
	var e verbsio.Endpoint
	var g string
	if _, err := fmt.Sscanf(s, "%d %s %d %d %d %d", &e.QPN, &g, &e.RKey, &e.VAddr, &e.LID, &e.PSN); err != nil {
		return e, fmt.Errorf("parse endpoint %q: %w", s, err)
	}
	gid, err := verbsio.ParseGID(g)
	e.GID = gid
	return e, err
}
