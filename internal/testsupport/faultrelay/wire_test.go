package faultrelay

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/testsupport/netns"
)

// wireSetup makes an A — Mid — B pair, a Wire in Mid and a socket on each
// host, all removed when the test ends.
func wireSetup(t *testing.T, network string, cfg WireConfig, portB int) (p *netns.Pair, w *Wire, a, b *net.UDPConn) {
	t.Helper()
	return wireSetupWith(t, netns.Options{Middle: true}, network, cfg, portB)
}

func wireSetupWith(t *testing.T, opts netns.Options, network string, cfg WireConfig, portB int) (p *netns.Pair, w *Wire, a, b *net.UDPConn) {
	t.Helper()
	p = netns.Setup(t, opts)
	w, err := NewWire(p.Mid, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	a, err = p.A.ListenUDP(network, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err = p.B.ListenUDP(network, portB)
	if err != nil {
		t.Fatal(err)
	}
	growBuffers(a)
	growBuffers(b)
	t.Cleanup(func() { b.Close() })
	return p, w, a, b
}

func TestWireTransparent(t *testing.T) {
	tests := []struct {
		network string
		dynamic bool // resolve addresses through the wire
	}{
		{"udp4", false},
		{"udp6", false},
		{"udp4", true},
		{"udp6", true},
	}
	for _, tt := range tests {
		network := tt.network
		name := network
		if tt.dynamic {
			name += " with neighbour discovery"
		}
		t.Run(name, func(t *testing.T) {
			opts := netns.Options{Middle: true, DynamicNeighbors: tt.dynamic}
			p, w, a, b := wireSetupWith(t, opts, network, WireConfig{}, 0)
			if tt.dynamic {
				// Resolve first: a burst sent while resolution is pending
				// may be dropped or reordered by the sender's kernel.
				sendStream(t, a, addrOf(b), 1, 64)
				if got := receiveStream(b, 1); len(got.seqs) != 1 {
					t.Fatal("nothing crossed while resolving addresses")
				}
				sendStream(t, b, addrOf(a), 1, 64)
				if got := receiveStream(a, 1); len(got.seqs) != 1 {
					t.Fatal("nothing came back while resolving addresses")
				}
				s := settled(w.Stats)
				if s.AtoB.Other == 0 || s.BtoA.Other == 0 {
					t.Errorf("no ARP or neighbour discovery frames crossed: %+v", s)
				}
				w.Close()
				var err error
				if w, err = NewWire(p.Mid, WireConfig{}); err != nil {
					t.Fatal(err)
				}
				defer w.Close()
			}
			const n = 500
			sendStream(t, a, addrOf(b), n, 1000)
			got := receiveStream(b, n)
			if len(got.seqs) != n || got.corrupted != 0 || got.inversions() != 0 {
				t.Fatalf("B got %d intact (%d corrupted, %d out of order), want %d in order", len(got.seqs), got.corrupted, got.inversions(), n)
			}
			// B sees A's own address and port: nothing was rewritten.
			if got.from[addrOf(a)] != n {
				t.Errorf("B's datagrams came from %v, want all from A's %v", got.from, addrOf(a))
			}
			sendStream(t, b, addrOf(a), 50, 100)
			if back := receiveStream(a, 50); len(back.seqs) != 50 || back.from[addrOf(b)] != 50 {
				t.Errorf("A got %d from %v, want 50 from %v", len(back.seqs), back.from, addrOf(b))
			}
			s := settled(w.Stats)
			if s.AtoB.Received != n || s.AtoB.Forwarded != n || s.BtoA.Received != 50 || s.BtoA.Forwarded != 50 {
				t.Errorf("counters %+v, want %d and 50 received and forwarded", s, n)
			}
			if s.AtoB.Errors+s.BtoA.Errors != 0 {
				t.Errorf("errors: %+v", s)
			}
			if network == "udp4" {
				checkTTL(t, p, a, b)
			}
		})
	}
}

// checkTTL shows that an IPv4 datagram reaches B with the TTL A sent it
// with: the middle is no router.
func checkTTL(t *testing.T, p *netns.Pair, a, b *net.UDPConn) {
	t.Helper()
	rc, err := b.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTTL, 1) })
	arc, _ := a.SyscallConn()
	arc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TTL, 7) })
	if _, err := a.WriteToUDPAddrPort([]byte("ttl"), addrOf(b)); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(streamTimeout))
	oob := make([]byte, 64)
	_, oobn, _, _, err := b.ReadMsgUDPAddrPort(make([]byte, 16), oob)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 || len(msgs[0].Data) < 1 {
		t.Fatalf("control messages %v, %v", msgs, err)
	}
	if ttl := msgs[0].Data[0]; ttl != 7 {
		t.Errorf("TTL at B %d, want 7 as sent", ttl)
	}
}

func TestWireCutsWhenClosed(t *testing.T) {
	_, w, a, b := wireSetup(t, "udp4", WireConfig{}, 0)
	sendStream(t, a, addrOf(b), 5, 100)
	if got := receiveStream(b, 5); len(got.seqs) != 5 {
		t.Fatalf("B got %d of 5 through a running wire", len(got.seqs))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	noRelayGoroutines(t)
	sendStream(t, a, addrOf(b), 5, 100)
	if got := receiveStream(b, 5); len(got.seqs) != 0 {
		t.Errorf("B got %d through a closed wire", len(got.seqs))
	}
}

// udpCsumErrors reads UDP InCsumErrors (UDP and UDP-Lite over IPv4 and
// IPv6) of the namespace of host h.
func udpCsumErrors(t *testing.T, h netns.Host) int {
	t.Helper()
	total := 0
	err := h.Run(func() error {
		for _, file := range []string{"/proc/thread-self/net/snmp", "/proc/thread-self/net/snmp6"} {
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			var header []string
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				fields := strings.Fields(sc.Text())
				switch {
				case len(fields) == 2 && fields[0] == "Udp6InCsumErrors":
					v, _ := strconv.Atoi(fields[1])
					total += v
				case len(fields) > 1 && fields[0] == "Udp:" && header == nil:
					header = fields
				case len(fields) > 1 && fields[0] == "Udp:":
					for i, name := range header {
						if name == "InCsumErrors" && i < len(fields) {
							v, _ := strconv.Atoi(fields[i])
							total += v
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

func TestWireFaults(t *testing.T) {
	const n = 1000
	tests := []struct {
		name    string
		network string
		f       Faults
		check   func(t *testing.T, p *netns.Pair, got received, c Counters)
	}{
		{"drop udp4", "udp4", Faults{Drop: 0.2}, func(t *testing.T, _ *netns.Pair, got received, c Counters) {
			if !within(c.Dropped, n, 0.2) || len(got.seqs) != n-int(c.Dropped) {
				t.Errorf("Dropped %d, B got %d of %d", c.Dropped, len(got.seqs), n)
			}
		}},
		{"drop udp6", "udp6", Faults{Drop: 0.2}, func(t *testing.T, _ *netns.Pair, got received, c Counters) {
			if !within(c.Dropped, n, 0.2) || len(got.seqs) != n-int(c.Dropped) {
				t.Errorf("Dropped %d, B got %d of %d", c.Dropped, len(got.seqs), n)
			}
		}},
		{"duplicate", "udp4", Faults{Duplicate: 0.2}, func(t *testing.T, _ *netns.Pair, got received, c Counters) {
			if !within(c.Duplicated, n, 0.2) || got.duplicates() != int(c.Duplicated) {
				t.Errorf("Duplicated %d, B saw %d duplicates", c.Duplicated, got.duplicates())
			}
		}},
		{"reorder", "udp6", Faults{Reorder: 0.1}, func(t *testing.T, _ *netns.Pair, got received, c Counters) {
			if !within(c.Reordered, n, 0.1*0.9) || got.inversions() != int(c.Reordered-c.ReorderTimeouts) || len(got.seqs) != n {
				t.Errorf("Reordered %d (%d timeouts), B saw %d inversions in %d", c.Reordered, c.ReorderTimeouts, got.inversions(), len(got.seqs))
			}
		}},
		{"corrupt, checksum fixed: delivered damaged", "udp4", Faults{Corrupt: 0.1, FixChecksum: true}, func(t *testing.T, _ *netns.Pair, got received, c Counters) {
			if !within(c.Corrupted, n, 0.1) || got.corrupted != int(c.Corrupted) || len(got.seqs) != n-int(c.Corrupted) {
				t.Errorf("Corrupted %d, B saw %d corrupted and %d intact", c.Corrupted, got.corrupted, len(got.seqs))
			}
		}},
		{"corrupt udp6, checksum fixed", "udp6", Faults{Corrupt: 0.1, CorruptMode: CorruptByte, FixChecksum: true}, func(t *testing.T, _ *netns.Pair, got received, c Counters) {
			if !within(c.Corrupted, n, 0.1) || got.corrupted != int(c.Corrupted) {
				t.Errorf("Corrupted %d, B saw %d corrupted", c.Corrupted, got.corrupted)
			}
		}},
		{"corrupt, checksum kept: receiver's UDP rejects", "udp4", Faults{Corrupt: 0.1}, func(t *testing.T, p *netns.Pair, got received, c Counters) {
			if !within(c.Corrupted, n, 0.1) || got.corrupted != 0 || len(got.seqs) != n-int(c.Corrupted) {
				t.Errorf("Corrupted %d, B saw %d corrupted and %d intact", c.Corrupted, got.corrupted, len(got.seqs))
			}
			if e := udpCsumErrors(t, p.B); e != int(c.Corrupted) {
				t.Errorf("B's UDP InCsumErrors %d, want Corrupted = %d", e, c.Corrupted)
			}
		}},
		{"corrupt udp6, checksum kept", "udp6", Faults{Corrupt: 0.1}, func(t *testing.T, p *netns.Pair, got received, c Counters) {
			if got.corrupted != 0 || udpCsumErrors(t, p.B) != int(c.Corrupted) {
				t.Errorf("Corrupted %d, B saw %d corrupted, %d checksum errors", c.Corrupted, got.corrupted, udpCsumErrors(t, p.B))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, w, a, b := wireSetup(t, tt.network, WireConfig{AtoB: tt.f, Seed: 5}, 0)
			sendStream(t, a, addrOf(b), n, 300)
			got := receiveStream(b, 2*n)
			c := settled(w.Stats).AtoB
			if c.Received != n || c.Errors != 0 || c.Discarded != 0 {
				t.Fatalf("counters %+v: want %d received, no errors or discards", c, n)
			}
			if c.Forwarded != n-c.Dropped+c.Duplicated {
				t.Errorf("Forwarded %d, want %d", c.Forwarded, n-c.Dropped+c.Duplicated)
			}
			tt.check(t, p, got, c)
		})
	}
}

func TestWirePortFilterAndCaps(t *testing.T) {
	const roce = 4791
	cfg := WireConfig{AtoB: Faults{Drop: 1}, Ports: []uint16{roce}, MaxDatagrams: 30}
	p, w, a, b := wireSetup(t, "udp4", cfg, roce)
	other, err := p.B.ListenUDP("udp4", 0)
	if err != nil {
		t.Fatal(err)
	}
	growBuffers(other)
	defer other.Close()

	sendStream(t, a, addrOf(other), 20, 100) // not port 4791: untouched
	if got := receiveStream(other, 20); len(got.seqs) != 20 {
		t.Errorf("other port got %d of 20", len(got.seqs))
	}
	sendStream(t, a, addrOf(b), 20, 100) // port 4791: all dropped
	if got := receiveStream(b, 20); len(got.seqs) != 0 {
		t.Errorf("port %d got %d, want all dropped", roce, len(got.seqs))
	}
	c := settled(w.Stats).AtoB
	// 40 received, of which the cap of 30 accepted: 20 passed, 10 dropped.
	if c.Received != 40 || c.Passed != 20 || c.Dropped != 10 || c.Discarded != 10 || c.Forwarded != 20 {
		t.Errorf("counters %+v, want 40 received, 20 passed, 10 dropped, 10 discarded", c)
	}
}

// TestWireSegmentsGSO sends UDP GSO super-packets from A: B must receive
// the individual datagrams, and faults must count datagrams.
func TestWireSegmentsGSO(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			const seg, segs, rounds = 1000, 8, 10
			_, w, a, b := wireSetup(t, network, WireConfig{AtoB: Faults{Drop: 1, MaxFaults: 3}}, 0)
			rc, err := a.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var serr error
			rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT, seg) })
			if serr != nil {
				t.Skipf("UDP_SEGMENT unsupported: %v", serr)
			}
			for r := 0; r < rounds; r++ {
				var buf []byte
				for i := 0; i < segs; i++ {
					buf = append(buf, stampDatagram(r*segs+i, seg)...)
				}
				if _, err := a.WriteToUDPAddrPort(buf, addrOf(b)); err != nil {
					t.Fatalf("GSO send: %v", err)
				}
			}
			got := receiveStream(b, rounds*segs)
			if len(got.seqs) != rounds*segs-3 || got.corrupted != 0 {
				t.Errorf("B got %d intact, %d corrupted; want %d intact", len(got.seqs), got.corrupted, rounds*segs-3)
			}
			if len(got.seqs) > 0 && got.seqs[0] != 3 {
				t.Errorf("first datagram at B #%d, want #3 (the first three dropped)", got.seqs[0])
			}
			if c := settled(w.Stats).AtoB; c.Received != rounds*segs || c.Dropped != 3 {
				t.Errorf("counters %+v, want %d received, 3 dropped", c, rounds*segs)
			}
		})
	}
}

func TestNewWireRejects(t *testing.T) {
	netns.Skip(t)
	bridged := netns.Setup(t, netns.Options{Middle: true, Bridge: true})
	plain := netns.Setup(t, netns.Options{Middle: true})
	tests := []struct {
		name string
		mid  *netns.Middle
		cfg  WireConfig
	}{
		{"no middle", nil, WireConfig{}},
		{"bridged middle", bridged.Mid, WireConfig{}},
		{"bad faults", plain.Mid, WireConfig{BtoA: Faults{Reorder: 3}}},
		{"missing link", &netns.Middle{NS: plain.Mid.NS, LinkA: "nope", LinkB: plain.Mid.LinkB}, WireConfig{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewWire(tt.mid, tt.cfg)
			if err == nil {
				w.Close()
				t.Fatal("NewWire succeeded")
			}
			if !strings.HasPrefix(err.Error(), "faultrelay: new wire: ") {
				t.Errorf("error %q lacks the faultrelay: new wire: prefix", err)
			}
		})
	}
}

// TestWireWithAddresses checks the intended use: endpoints bound to the
// hosts' own addresses, faults in the B->A direction only.
func TestWireWithAddresses(t *testing.T) {
	p, w, a, b := wireSetup(t, "udp4", WireConfig{BtoA: Faults{Duplicate: 1, MaxFaults: 1}}, 0)
	if got, want := addrOf(a).Addr(), p.A.Addr4.Addr(); got != want {
		t.Fatalf("A's socket on %v, want %v", got, want)
	}
	sendStream(t, b, addrOf(a), 3, 64)
	got := receiveStream(a, 4)
	if fmt.Sprint(got.seqs) != "[0 0 1 2]" {
		t.Errorf("A got %v, want [0 0 1 2]", got.seqs)
	}
	if settled(w.Stats).BtoA.Duplicated != 1 {
		t.Errorf("counters %+v", settled(w.Stats).BtoA)
	}
}
