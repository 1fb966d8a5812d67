package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Bounds for every traffic loop in these tests.
const (
	exchangeCount   = 200
	exchangeTimeout = 5 * time.Second
)

func TestSubnets(t *testing.T) {
	seen := map[netip.Prefix]bool{}
	for _, pid := range []int{1, 4242, 99999, 1 << 22} {
		for n := uint32(1); n <= 20; n++ {
			a4, b4, a6, b6 := subnets(pid, n)
			for _, p := range []netip.Prefix{a4, b4} {
				if !netip.MustParsePrefix("10.192.0.0/10").Contains(p.Addr()) || p.Bits() != 24 {
					t.Fatalf("subnets(%d, %d): %v outside 10.192.0.0/10 or not /24", pid, n, p)
				}
			}
			for _, p := range []netip.Prefix{a6, b6} {
				if !netip.MustParsePrefix("fd72:7066::/32").Contains(p.Addr()) || p.Bits() != 64 {
					t.Fatalf("subnets(%d, %d): %v outside fd72:7066::/32 or not /64", pid, n, p)
				}
			}
			if a4.Masked() != b4.Masked() || a6.Masked() != b6.Masked() || a4 == b4 || a6 == b6 {
				t.Fatalf("subnets(%d, %d): A %v %v and B %v %v must share subnets with distinct addresses", pid, n, a4, a6, b4, b6)
			}
			seen[a4.Masked()] = true
		}
	}
	if len(seen) < 70 { // 80 draws from 2^14 subnets: a few collisions at most
		t.Errorf("only %d distinct subnets in 80 pairs", len(seen))
	}
}

func TestNSPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"rperf-1-1-a", "/run/netns/rperf-1-1-a"},
		{"/proc/1/ns/net", "/proc/1/ns/net"},
	}
	for _, tt := range tests {
		if got := NSPath(tt.in); got != tt.want {
			t.Errorf("NSPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNewPairRejectsBadOptions(t *testing.T) {
	Skip(t)
	tests := []struct {
		name string
		opts Options
	}{
		{"negative mtu", Options{MTU: -1}},
		{"bridge without middle", Options{Bridge: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := NewPair(tt.opts); err == nil {
				p.Close()
				t.Fatal("NewPair succeeded, want error")
			}
		})
	}
}

// exchange sends count numbered datagrams from a to b, which echoes each;
// it returns how many b received and how many echoes a received.
func exchange(t *testing.T, ca, cb *net.UDPConn, count int) (atB, atA int) {
	t.Helper()
	deadline := time.Now().Add(exchangeTimeout)
	done := make(chan int)
	go func() {
		got := 0
		buf := make([]byte, 2048)
		cb.SetReadDeadline(deadline)
		for got < count {
			n, from, err := cb.ReadFromUDPAddrPort(buf)
			if err != nil {
				break
			}
			got++
			cb.WriteToUDPAddrPort(buf[:n], from)
		}
		done <- got
	}()
	dst := cb.LocalAddr().(*net.UDPAddr).AddrPort()
	msg := make([]byte, 64)
	ca.SetReadDeadline(deadline)
	buf := make([]byte, 2048)
	seen := map[uint32]bool{}
	for i := 0; i < count && time.Now().Before(deadline); i++ {
		binary.BigEndian.PutUint32(msg, uint32(i))
		if _, err := ca.WriteToUDPAddrPort(msg, dst); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		// Lock-step: wait for the echo, so no burst can overflow a queue.
		n, _, err := ca.ReadFromUDPAddrPort(buf)
		if err != nil {
			break
		}
		if n == len(msg) {
			seen[binary.BigEndian.Uint32(buf)] = true
		}
	}
	return <-done, len(seen)
}

func listenPair(t *testing.T, p *Pair, network string) (ca, cb *net.UDPConn) {
	t.Helper()
	ca, err := p.A.ListenUDP(network, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ca.Close() })
	cb, err = p.B.ListenUDP(network, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cb.Close() })
	return ca, cb
}

func TestPairExchange(t *testing.T) {
	Skip(t)
	tests := []struct {
		name    string
		opts    Options
		network string
	}{
		{"veth udp4", Options{}, "udp4"},
		{"veth udp6", Options{}, "udp6"},
		{"veth jumbo udp4", Options{MTU: 9000}, "udp4"},
		{"bridged middle udp4", Options{Middle: true, Bridge: true}, "udp4"},
		{"bridged middle udp6", Options{Middle: true, Bridge: true}, "udp6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Setup(t, tt.opts)
			ca, cb := listenPair(t, p, tt.network)
			atB, atA := exchange(t, ca, cb, exchangeCount)
			if atB != exchangeCount || atA != exchangeCount {
				t.Errorf("B received %d, A received %d echoes; want %d each", atB, atA, exchangeCount)
			}
		})
	}
}

func TestMiddleWithoutForwarderIsCut(t *testing.T) {
	p := Setup(t, Options{Middle: true})
	if p.Mid == nil || p.Mid.Bridge != "" {
		t.Fatalf("Mid = %+v, want a middle without bridge", p.Mid)
	}
	ca, cb := listenPair(t, p, "udp4")
	cb.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	for i := 0; i < 5; i++ {
		ca.WriteToUDPAddrPort([]byte("x"), cb.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	if _, _, err := cb.ReadFromUDPAddrPort(make([]byte, 16)); err == nil {
		t.Fatal("a datagram crossed a middle namespace that forwards nothing")
	}
}

func TestNoLeakToRootNamespace(t *testing.T) {
	p := Setup(t, Options{})

	// The pair's addresses are not local to the root namespace.
	for _, a := range []netip.Addr{p.A.Addr4.Addr(), p.B.Addr4.Addr(), p.A.Addr6.Addr()} {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
		if err == nil {
			c.Close()
			t.Errorf("bind to %v in the root namespace succeeded", a)
		} else if !errors.Is(err, syscall.EADDRNOTAVAIL) {
			t.Errorf("bind to %v in the root namespace: %v, want EADDRNOTAVAIL", a, err)
		}
	}
	// Nor are their links.
	for _, l := range []string{p.A.Link, p.B.Link} {
		if _, err := net.InterfaceByName(l); err == nil {
			t.Errorf("link %s visible in the root namespace", l)
		}
	}

	// A root-namespace socket on the very port B uses hears nothing of the
	// exchange.
	root, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	port := root.LocalAddr().(*net.UDPAddr).Port
	ca, err := p.A.ListenUDP("udp4", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	cb, err := p.B.ListenUDP("udp4", port)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if atB, _ := exchange(t, ca, cb, 20); atB != 20 {
		t.Fatalf("B received %d of 20", atB)
	}
	root.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, from, err := root.ReadFromUDP(make([]byte, 2048)); err == nil {
		t.Errorf("root namespace socket received %d bytes from %v", n, from)
	}

	// Inside A only A's links are visible, with the pair's addresses.
	err = p.A.Run(func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		var names []string
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		sort.Strings(names)
		if want := []string{"lo", p.A.Link}; !slices.Equal(names, want) {
			return fmt.Errorf("links %v, want %v", names, want)
		}
		ifc, _ := net.InterfaceByName(p.A.Link)
		addrs, err := ifc.Addrs()
		if err != nil {
			return err
		}
		var got []string
		for _, a := range addrs {
			got = append(got, a.String())
		}
		for _, want := range []string{p.A.Addr4.String(), p.A.Addr6.String()} {
			if !slices.Contains(got, want) {
				return fmt.Errorf("addresses %v lack %s", got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func TestMTU(t *testing.T) {
	Skip(t)
	tests := []struct {
		name string
		mtu  int
		want int
	}{
		{"default", 0, 1500},
		{"minimum ipv6", 1280, 1280},
		{"jumbo", 9000, 9000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Setup(t, Options{MTU: tt.mtu})
			for _, h := range []Host{p.A, p.B} {
				err := h.Run(func() error {
					ifc, err := net.InterfaceByName(h.Link)
					if err != nil {
						return err
					}
					if ifc.MTU != tt.want {
						return fmt.Errorf("%s mtu %d, want %d", h.Link, ifc.MTU, tt.want)
					}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
			// A datagram filling the MTU passes; one byte more, with
			// fragmentation forbidden, is refused.
			ca, cb := listenPair(t, p, "udp4")
			rc, err := ca.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			rc.Control(func(fd uintptr) {
				syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_MTU_DISCOVER, syscall.IP_PMTUDISC_DO)
			})
			dst := cb.LocalAddr().(*net.UDPAddr).AddrPort()
			if _, err := ca.WriteToUDPAddrPort(make([]byte, tt.want-28), dst); err != nil {
				t.Fatalf("send %d-byte datagram: %v", tt.want-28, err)
			}
			cb.SetReadDeadline(time.Now().Add(exchangeTimeout))
			if n, _, err := cb.ReadFromUDPAddrPort(make([]byte, 65536)); err != nil || n != tt.want-28 {
				t.Fatalf("receive: %d bytes, %v; want %d", n, err, tt.want-28)
			}
			if _, err := ca.WriteToUDPAddrPort(make([]byte, tt.want-27), dst); !errors.Is(err, syscall.EMSGSIZE) {
				t.Errorf("send %d-byte datagram with DF: %v, want EMSGSIZE", tt.want-27, err)
			}
		})
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	Skip(t)
	tests := []struct {
		name string
		opts Options
	}{
		{"pair", Options{}},
		{"middle", Options{Middle: true}},
		{"bridged middle", Options{Middle: true, Bridge: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPair(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			names := p.Namespaces()
			want := 2
			if tt.opts.Middle {
				want = 3
			}
			if len(names) != want {
				t.Fatalf("Namespaces() = %v, want %d", names, want)
			}
			// Hold a socket in A across Close: the namespace's name must
			// still go.
			c, err := p.A.ListenUDP("udp4", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if err := p.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			out, err := exec.Command("ip", "netns", "list").CombinedOutput()
			if err != nil {
				t.Fatalf("ip netns list: %v: %s", err, out)
			}
			for _, ns := range names {
				if _, err := os.Stat(NSPath(ns)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s still exists: %v", NSPath(ns), err)
				}
				if strings.Contains(string(out), ns) {
					t.Errorf("ip netns list still shows %s", ns)
				}
				if err := Run(ns, func() error { return nil }); err == nil {
					t.Errorf("Run in deleted %s succeeded", ns)
				}
			}
			for _, l := range []string{LinkA, LinkB, MidLinkA, MidLinkB} {
				if _, err := net.InterfaceByName(l); err == nil {
					t.Errorf("link %s exists in the root namespace", l)
				}
			}
		})
	}
}

func TestQdisc(t *testing.T) {
	Skip(t)
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skip("tc command not installed")
	}
	tests := []struct {
		name     string
		spec     []string
		optional bool // the kernel may lack it
	}{
		{"tbf", []string{"tbf", "rate", "100mbit", "burst", "32k", "latency", "20ms"}, false},
		{"htb", []string{"htb"}, false},
		{"fq", []string{"fq"}, true},
		{"netem", []string{"netem", "delay", "1ms"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPair(Options{Qdisc: tt.spec})
			if err != nil {
				if tt.optional {
					if !strings.Contains(err.Error(), "tc -n") {
						t.Errorf("error does not name the tc command: %v", err)
					}
					t.Skipf("qdisc %s unavailable on this kernel: %v", tt.name, err)
				}
				t.Fatal(err)
			}
			defer p.Close()
			for _, h := range []Host{p.A, p.B} {
				out, err := exec.Command("tc", "-n", h.NS, "qdisc", "show", "dev", h.Link, "root").CombinedOutput()
				if err != nil {
					t.Fatalf("tc qdisc show: %v: %s", err, out)
				}
				if !strings.HasPrefix(string(out), "qdisc "+tt.spec[0]+" ") {
					t.Errorf("%s root qdisc: %q, want %s", h.NS, out, tt.spec[0])
				}
			}
			ca, cb := listenPair(t, p, "udp4")
			if atB, atA := exchange(t, ca, cb, 20); atB != 20 || atA != 20 {
				t.Errorf("through %s: B got %d, A got %d, want 20", tt.name, atB, atA)
			}
		})
	}
}

func TestCleanupStale(t *testing.T) {
	Skip(t)
	// A pid that surely ran and exited.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	if processAlive(dead) {
		t.Skipf("pid %d was reused at once", dead)
	}
	stale := fmt.Sprintf("%s%d-1-a", Prefix, dead)
	live := fmt.Sprintf("%s%d-999999-a", Prefix, os.Getpid())
	for _, ns := range []string{stale, live} {
		if err := ip("netns", "add", ns); err != nil {
			t.Fatal(err)
		}
	}
	defer ip("netns", "delete", live)
	defer ip("netns", "delete", stale)
	removed, err := CleanupStale()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, stale) {
		t.Errorf("CleanupStale removed %v, want %s among them", removed, stale)
	}
	if slices.Contains(removed, live) {
		t.Errorf("CleanupStale removed %s of a live process", live)
	}
	names, err := List()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, stale) || !slices.Contains(names, live) {
		t.Errorf("List() = %v after cleanup; want %s gone and %s kept", names, stale, live)
	}
}

func TestNeighbors(t *testing.T) {
	Skip(t)
	tests := []struct {
		name string
		opts Options
	}{
		{"static", Options{}},
		{"static with middle", Options{Middle: true, Bridge: true}},
		{"dynamic", Options{DynamicNeighbors: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Setup(t, tt.opts)
			for _, hp := range [][2]Host{{p.A, p.B}, {p.B, p.A}} {
				h, peer := hp[0], hp[1]
				out, err := exec.Command("ip", "-n", h.NS, "neigh", "show", "dev", h.Link, "nud", "permanent").CombinedOutput()
				if err != nil {
					t.Fatalf("ip neigh: %v: %s", err, out)
				}
				for _, a := range []netip.Addr{peer.Addr4.Addr(), peer.Addr6.Addr()} {
					has := strings.Contains(string(out), a.String()+" ")
					if has == tt.opts.DynamicNeighbors {
						t.Errorf("%s: permanent entry for %v: %v, want %v (%q)", h.NS, a, has, !tt.opts.DynamicNeighbors, out)
					}
				}
			}
			ca, cb := listenPair(t, p, "udp6")
			if atB, atA := exchange(t, ca, cb, 10); atB != 10 || atA != 10 {
				t.Errorf("B got %d, A got %d of 10", atB, atA)
			}
		})
	}
}

// TestDrops reads the drop counters of every link of a pair with a
// bridge in the middle, and names a link its namespace lacks.
func TestDrops(t *testing.T) {
	p := Setup(t, Options{Middle: true, Bridge: true})
	if _, err := p.Drops(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := linkDrops(p.A.NS, "nosuch0"); err == nil || !strings.Contains(err.Error(), "has no nosuch0") {
		t.Errorf("an unknown link: %v", err)
	}
}
