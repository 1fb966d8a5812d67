package netns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadNS names the network namespace of the calling thread, e.g.
// "net:[4026531840]".
func threadNS() (string, error) {
	return os.Readlink("/proc/thread-self/ns/net")
}

// nsID names the namespace ns as threadNS would.
func nsID(t *testing.T, ns string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(NSPath(ns), &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("net:[%d]", st.Ino)
}

func TestRunResults(t *testing.T) {
	p := Setup(t, Options{})
	errBoom := errors.New("boom")
	tests := []struct {
		name    string
		ns      string
		fn      func() error
		wantErr error // nil: success; otherwise errors.Is target
	}{
		{"success", p.A.NS, func() error { return nil }, nil},
		{"fn error", p.A.NS, func() error { return errBoom }, errBoom},
		{"goexit", p.B.NS, func() error { runtime.Goexit(); return nil }, ErrGoexit},
		{"missing namespace", Prefix + "does-not-exist", func() error { return nil }, os.ErrNotExist},
		{"path form", "/proc/self/ns/net", func() error { return nil }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(tt.ns, tt.fn)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Run: %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestRunRepanics(t *testing.T) {
	p := Setup(t, Options{})
	defer func() {
		if r := recover(); r != "inside" {
			t.Errorf("recovered %v, want the panic value from fn", r)
		}
	}()
	Run(p.A.NS, func() error { panic("inside") })
	t.Error("Run returned after a panic in fn")
}

func TestRunNamespaceScope(t *testing.T) {
	p := Setup(t, Options{})
	runtime.LockOSThread()
	root, err := threadNS()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	wantA := nsID(t, p.A.NS)
	if wantA == root {
		t.Fatal("A's namespace is the root namespace")
	}

	var inside, child string
	err = p.A.Run(func() error {
		var err error
		if inside, err = threadNS(); err != nil {
			return err
		}
		// A goroutine started inside runs on another thread, in the
		// original namespace.
		done := make(chan error)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var err error
			child, err = threadNS()
			done <- err
		}()
		return <-done
	})
	if err != nil {
		t.Fatal(err)
	}
	if inside != wantA {
		t.Errorf("inside Run: %s, want A's %s", inside, wantA)
	}
	if child != root {
		t.Errorf("goroutine started inside Run: %s, want root %s", child, root)
	}

	// Many concurrent Runs, then no thread of the process is left in a
	// pair namespace.
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		h := p.A
		if i%2 == 1 {
			h = p.B
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.Run(func() error { time.Sleep(time.Millisecond); return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	tasks, err := filepath.Glob("/proc/self/task/*/ns/net")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("list threads: %v (%d)", err, len(tasks))
	}
	for _, task := range tasks {
		id, err := os.Readlink(task)
		if err != nil {
			continue // thread exited meanwhile
		}
		if id != root {
			t.Errorf("%s is in %s after Run returned, want root %s", task, id, root)
		}
	}
}

func TestRunStartsChildInNamespace(t *testing.T) {
	p := Setup(t, Options{})
	cmd := exec.Command("ip", "-o", "link", "show")
	var out strings.Builder
	cmd.Stdout = &out
	if err := p.B.Run(cmd.Start); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := linkNames(out.String()); !slices.Equal(got, []string{"lo", p.B.Link}) {
		t.Errorf("child started inside Run sees links %v, want [lo %s]", got, p.B.Link)
	}
}

// linkNames extracts the interface names from "ip -o link show" output.
func linkNames(out string) []string {
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func TestCommandSeesOnlyItsLinks(t *testing.T) {
	p := Setup(t, Options{Middle: true})
	tests := []struct {
		ns   string
		want []string
	}{
		{p.A.NS, []string{"lo", p.A.Link}},
		{p.B.NS, []string{"lo", p.B.Link}},
		{p.Mid.NS, []string{"lo", p.Mid.LinkA, p.Mid.LinkB}},
	}
	for _, tt := range tests {
		out, err := Command(tt.ns, "ip", "-o", "link", "show").Output()
		if err != nil {
			t.Fatalf("ip link in %s: %v", tt.ns, err)
		}
		want := slices.Clone(tt.want)
		sort.Strings(want)
		if got := linkNames(string(out)); !slices.Equal(got, want) {
			t.Errorf("%s: links %v, want %v", tt.ns, got, want)
		}
	}
}

// Environment of the child-process helper.
const (
	childEnv     = "RPERF_NETNS_CHILD" // "listen" or "send"
	childAddrEnv = "RPERF_NETNS_ADDR"  // address to listen on or send to
)

// TestMain runs childProcess instead of the tests when the test binary was
// started as a child by TestCommandRunsTestBinary.
func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		if err := childProcess(mode); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childProcess is what the test binary does as a child in a namespace: it
// prints the links it sees in /sys, then receives or sends one datagram.
func childProcess(mode string) error {
	ents, _ := os.ReadDir("/sys/class/net")
	var links []string
	for _, e := range ents {
		links = append(links, e.Name())
	}
	fmt.Printf("links %s\n", strings.Join(links, ","))
	addr := netip.MustParseAddrPort(os.Getenv(childAddrEnv))
	switch mode {
	case "listen":
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Println("ready")
		c.SetReadDeadline(time.Now().Add(exchangeTimeout))
		buf := make([]byte, 64)
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		fmt.Printf("got %s from %s\n", buf[:n], from.Addr())
	case "send":
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.Write([]byte("hello-from-child")); err != nil {
			return err
		}
		fmt.Println("sent")
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return nil
}

func TestCommandRunsTestBinary(t *testing.T) {
	p := Setup(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*exchangeTimeout)
	defer cancel()

	// A child in B listens; the parent sends from a socket in A.
	listenAt := netip.AddrPortFrom(p.B.Addr4.Addr(), 47910)
	cmd := CommandContext(ctx, p.B.NS, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=listen", childAddrEnv+"="+listenAt.String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == "ready" {
			break
		}
	}
	ca, err := p.A.ListenUDP("udp4", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	if _, err := ca.WriteToUDPAddrPort([]byte("hello-from-parent"), listenAt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child in B: %v; output %q", err, lines)
	}
	wantLinks := "links " + strings.Join([]string{"lo", p.B.Link}, ",")
	if !slices.Contains(lines, wantLinks) {
		t.Errorf("child in B printed %q, want %q (its own /sys)", lines, wantLinks)
	}
	wantGot := "got hello-from-parent from " + p.A.Addr4.Addr().String()
	if !slices.Contains(lines, wantGot) {
		t.Errorf("child in B printed %q, want %q", lines, wantGot)
	}

	// A child in A sends to a socket the parent holds in B.
	cb, err := p.B.ListenUDP("udp6", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	cmd = CommandContext(ctx, p.A.NS, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=send", childAddrEnv+"="+cb.LocalAddr().String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child in A: %v: %s", err, out)
	}
	cb.SetReadDeadline(time.Now().Add(exchangeTimeout))
	buf := make([]byte, 64)
	n, from, err := cb.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:n]) != "hello-from-child" || from.Addr() != p.A.Addr6.Addr() {
		t.Errorf("B received %q from %v, want hello-from-child from %v", buf[:n], from, p.A.Addr6.Addr())
	}
}
