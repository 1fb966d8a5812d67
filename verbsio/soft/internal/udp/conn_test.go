package udp

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func recvAll(t *testing.T, c *Conn, want int) [][]byte {
	t.Helper()
	var got [][]byte
	deadline := time.Now().Add(2 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		in, err := c.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range in {
			got = append(got, append([]byte(nil), d.Buf[:d.N]...))
		}
		if len(in) == 0 {
			c.Wait(50 * time.Millisecond)
		}
	}
	return got
}

func TestBatchAndGSO(t *testing.T) {
	for _, addr := range []string{"127.0.0.1", "::1"} {
		t.Run(addr, func(t *testing.T) {
			a, err := Listen(netip.AddrPortFrom(netip.MustParseAddr(addr), 0))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := Listen(netip.AddrPortFrom(netip.MustParseAddr(addr), 0))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			var msgs [][]byte
			for i := 0; i < 10; i++ {
				m := bytes.Repeat([]byte{byte(i)}, 100+i)
				msgs = append(msgs, m)
				o := a.Queue()
				o.Buf, o.To = m, b.LocalAddr()
			}
			big := make([]byte, 2500)
			for i := range big {
				big[i] = byte(i / 1000)
			}
			o := a.Queue()
			o.Buf, o.To, o.GSO = big, b.LocalAddr(), 1000
			if err := a.Flush(); err != nil {
				t.Fatal(err)
			}
			got := recvAll(t, b, 13)
			if len(got) != 13 {
				t.Fatalf("received %d datagrams, want 13", len(got))
			}
			for i := 0; i < 10; i++ {
				if !bytes.Equal(got[i], msgs[i]) {
					t.Errorf("datagram %d differs", i)
				}
			}
			for i, n := range []int{1000, 1000, 500} {
				if len(got[10+i]) != n || got[10+i][0] != byte(i) {
					t.Errorf("GSO segment %d: %d bytes starting %d", i, len(got[10+i]), got[10+i][0])
				}
			}
			if ok, err := a.GSO(); !ok {
				t.Logf("GSO unavailable here: %v (segments were sent one by one)", err)
			}
		})
	}
}

func TestPortInUse(t *testing.T) {
	a, err := Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := Listen(a.LocalAddr()); err == nil {
		t.Fatal("second bind succeeded")
	} else if !bytes.Contains([]byte(err.Error()), []byte("in use")) {
		t.Errorf("error %q does not say the port is in use", err)
	}
}

func TestAllocs(t *testing.T) {
	a, _ := Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	defer a.Close()
	b, _ := Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	defer b.Close()
	buf := make([]byte, 64)
	to := b.LocalAddr()
	n := testing.AllocsPerRun(200, func() {
		for i := 0; i < 8; i++ {
			o := a.Queue()
			o.Buf, o.To = buf, to
		}
		a.Flush()
		b.Recv()
	})
	if n != 0 {
		t.Errorf("%.1f allocations per batch", n)
	}
}

func TestNetdevs(t *testing.T) {
	ds, err := Netdevs()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range ds {
		if d.Loopback {
			found = true
			if d.Addrs[0] != netip.MustParseAddr("127.0.0.1") && !d.Addrs[0].Is6() {
				t.Errorf("loopback addresses %v", d.Addrs)
			}
		}
	}
	if !found {
		t.Errorf("no loopback device among %v", ds)
	}
}

func TestGatherGSO(t *testing.T) {
	a, _ := Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	defer a.Close()
	b, _ := Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	defer b.Close()
	// Three 10-byte segments gathered from pieces that straddle them.
	o := a.Queue()
	o.Iov = [][]byte{[]byte("0123"), []byte("456789abcdefghij"), []byte("klmnopqrst")}
	o.To, o.GSO = b.LocalAddr(), 10
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	got := recvAll(t, b, 3)
	want := []string{"0123456789", "abcdefghij", "klmnopqrst"}
	for i := range want {
		if i >= len(got) || string(got[i]) != want[i] {
			t.Fatalf("segments %q, want %q", got, want)
		}
	}
}

// TestGRO sends a GSO run and single datagrams to a socket with GRO: the
// run arrives whole with its datagram size in Seg, and cutting it there
// gives back every datagram; a single datagram has Seg 0 or its own size.
func TestGRO(t *testing.T) {
	for _, addr := range []string{"127.0.0.1", "::1"} {
		t.Run(addr, func(t *testing.T) {
			a, err := Listen(netip.AddrPortFrom(netip.MustParseAddr(addr), 0))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := Listen(netip.AddrPortFrom(netip.MustParseAddr(addr), 0))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := b.EnableGRO(); err != nil {
				t.Fatalf("EnableGRO: %v (UDP_GRO needs Linux 5.0)", err)
			}
			run := make([]byte, 5*1000+300)
			for i := range run {
				run[i] = byte(i / 1000)
			}
			o := a.Queue()
			o.Buf, o.To, o.GSO = run, b.LocalAddr(), 1000
			o = a.Queue()
			o.Buf, o.To = []byte("single"), b.LocalAddr()
			if err := a.Flush(); err != nil {
				t.Fatal(err)
			}
			var got [][]byte
			coalesced := false
			deadline := time.Now().Add(2 * time.Second)
			for len(got) < 7 && time.Now().Before(deadline) {
				in, err := b.Recv()
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range in {
					if d.Seg == 0 || d.Seg >= d.N {
						got = append(got, append([]byte(nil), d.Buf[:d.N]...))
						continue
					}
					coalesced = true
					if d.Seg != 1000 {
						t.Errorf("Seg %d, want 1000", d.Seg)
					}
					for off := 0; off < d.N; off += d.Seg {
						got = append(got, append([]byte(nil), d.Buf[off:min(off+d.Seg, d.N)]...))
					}
				}
				if len(in) == 0 {
					b.Wait(50 * time.Millisecond)
				}
			}
			if len(got) != 7 {
				t.Fatalf("received %d datagrams, want 7", len(got))
			}
			if !coalesced {
				t.Error("the GSO run arrived cut into datagrams: GRO did not coalesce it")
			}
			for i := 0; i < 6; i++ {
				want := run[i*1000 : min((i+1)*1000, len(run))]
				if !bytes.Equal(got[i], want) {
					t.Errorf("datagram %d: %d bytes starting %d, want %d bytes of %d", i, len(got[i]), got[i][0], len(want), want[0])
				}
			}
			if string(got[6]) != "single" {
				t.Errorf("last datagram %q, want \"single\"", got[6])
			}
		})
	}
}

// zeroChecksumSender returns an IPv6 UDP socket on ::1 that sends with UDP
// checksum 0 (UDP_NO_CHECK6_TX), as Linux rxe sends RoCEv2 over IPv6.
func zeroChecksumSender(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_TX, 1); err != nil {
		t.Fatalf("UDP_NO_CHECK6_TX: %v", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet6{Addr: netip.IPv6Loopback().As16()}); err != nil {
		t.Fatal(err)
	}
	return fd
}

// TestZeroChecksumIPv6 sends datagrams with UDP checksum 0 over IPv6, as
// Linux rxe does, to a socket of this package (which must receive them)
// and to an ordinary UDP socket (which the kernel does not give them to:
// the proof that the sender really left the checksum 0). Without
// UDP_NO_CHECK6_RX the engine received nothing from rxe over an IPv6 GID.
func TestZeroChecksumIPv6(t *testing.T) {
	tx := zeroChecksumSender(t)
	plain, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(plain)
	if err := unix.Bind(plain, &unix.SockaddrInet6{Addr: netip.IPv6Loopback().As16()}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(plain)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Listen(netip.MustParseAddrPort("[::1]:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := []byte("RoCEv2 from rxe, UDP checksum 0")
	for _, to := range []unix.Sockaddr{sa, sockaddr(c.LocalAddr())} {
		if err := unix.Sendto(tx, msg, 0, to); err != nil {
			t.Fatal(err)
		}
	}
	got := recvAll(t, c, 1)
	if len(got) != 1 || !bytes.Equal(got[0], msg) {
		t.Fatalf("received %q, want the one zero-checksum datagram", got)
	}
	// The datagram to the ordinary socket was sent first: had the kernel
	// kept it, it would be queued by now.
	buf := make([]byte, 64)
	if n, _, err := unix.Recvfrom(plain, buf, unix.MSG_DONTWAIT); err == nil {
		t.Fatalf("an ordinary IPv6 UDP socket received %q: the sender did not leave the checksum 0, the test proves nothing", buf[:n])
	}
}
