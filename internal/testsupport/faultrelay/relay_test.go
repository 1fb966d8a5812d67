package faultrelay

import (
	"encoding/binary"
	"hash/crc32"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
)

// Bounds for every traffic loop in these tests.
const (
	streamTimeout = 10 * time.Second
	quietPeriod   = 300 * time.Millisecond
)

// stampDatagram builds datagram seq of size bytes: seq, then filler, then a
// CRC-32 of everything before it, so a receiver can tell corruption.
func stampDatagram(seq, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint32(b, uint32(seq))
	for i := 4; i < size-4; i++ {
		b[i] = byte(seq + i)
	}
	binary.BigEndian.PutUint32(b[size-4:], crc32.ChecksumIEEE(b[:size-4]))
	return b
}

func stampIntact(b []byte) bool {
	return len(b) >= 8 && crc32.ChecksumIEEE(b[:len(b)-4]) == binary.BigEndian.Uint32(b[len(b)-4:])
}

// received is what a receiver saw of a stream.
type received struct {
	seqs      []int // in arrival order, intact datagrams only
	corrupted int
	from      map[netip.AddrPort]int
}

// sendStream sends count stamped datagrams from c to dst, paced in small
// bursts so no socket queue overflows.
func sendStream(t *testing.T, c *net.UDPConn, dst netip.AddrPort, count, size int) {
	t.Helper()
	deadline := time.Now().Add(streamTimeout)
	for i := 0; i < count; i++ {
		if _, err := c.WriteToUDPAddrPort(stampDatagram(i, size), dst); err != nil {
			t.Fatalf("send #%d: %v", i, err)
		}
		if i%20 == 19 {
			time.Sleep(200 * time.Microsecond)
		}
		if time.Now().After(deadline) {
			t.Fatalf("sending %d datagrams took over %v", count, streamTimeout)
		}
	}
}

// receiveStream reads until want datagrams arrived, or nothing came for
// quietPeriod, or streamTimeout passed.
func receiveStream(c *net.UDPConn, want int) received {
	r := received{from: map[netip.AddrPort]int{}}
	deadline := time.Now().Add(streamTimeout)
	buf := make([]byte, 1<<16)
	for len(r.seqs)+r.corrupted < want && time.Now().Before(deadline) {
		c.SetReadDeadline(time.Now().Add(quietPeriod))
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			break
		}
		r.from[from]++
		if !stampIntact(buf[:n]) {
			r.corrupted++
			continue
		}
		r.seqs = append(r.seqs, int(binary.BigEndian.Uint32(buf)))
	}
	return r
}

func (r received) duplicates() int {
	seen := map[int]bool{}
	d := 0
	for _, s := range r.seqs {
		if seen[s] {
			d++
		}
		seen[s] = true
	}
	return d
}

func (r received) inversions() int {
	n := 0
	for i := 1; i < len(r.seqs); i++ {
		if r.seqs[i] < r.seqs[i-1] {
			n++
		}
	}
	return n
}

func listenLoopback(t *testing.T, network string) *net.UDPConn {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "udp6" {
		addr = "[::1]:0"
	}
	pc, err := net.ListenPacket(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	c := pc.(*net.UDPConn)
	growBuffers(c)
	t.Cleanup(func() { c.Close() })
	return c
}

func addrOf(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

// newRelay starts a relay between a and b, closed when the test ends.
func newRelay(t *testing.T, cfg Config, a, b *net.UDPConn) *Relay {
	t.Helper()
	if a != nil && !cfg.PeerA.IsValid() {
		cfg.PeerA = addrOf(a)
	}
	if b != nil && !cfg.PeerB.IsValid() {
		cfg.PeerB = addrOf(b)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// settled returns the counters once they stopped changing: a receiver may
// see a datagram an instant before the forwarder counts it as forwarded.
func settled(stats func() Stats) Stats {
	prev := stats()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		cur := stats()
		if cur == prev {
			return cur
		}
		prev = cur
	}
	return prev
}

// noRelayGoroutines fails t if goroutines of this package's forwarders are
// still running shortly after they were closed.
func noRelayGoroutines(t *testing.T) {
	t.Helper()
	var stacks string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "faultrelay.(*runner)") && !strings.Contains(stacks, "faultrelay.(*Relay)") && !strings.Contains(stacks, "faultrelay.(*Wire)") &&
			!strings.Contains(stacks, "faultrelay.loop") {
			return
		}
	}
	t.Errorf("forwarder goroutines still running after Close:\n%s", stacks)
}

func TestRelayFaithful(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			a, b := listenLoopback(t, network), listenLoopback(t, network)
			listen := "127.0.0.1:0"
			if network == "udp6" {
				listen = "[::1]:0"
			}
			r := newRelay(t, Config{ListenA: listen, ListenB: listen}, a, b)
			const n = 1000
			sendStream(t, a, r.AddrA(), n, 200)
			got := receiveStream(b, n)
			if len(got.seqs) != n || got.corrupted != 0 || got.inversions() != 0 {
				t.Fatalf("B got %d intact (%d corrupted, %d out of order), want %d in order", len(got.seqs), got.corrupted, got.inversions(), n)
			}
			if got.from[r.AddrB()] != n {
				t.Errorf("B's datagrams came from %v, want all from the relay's %v", got.from, r.AddrB())
			}
			// And back.
			sendStream(t, b, r.AddrB(), 100, 1400)
			back := receiveStream(a, 100)
			if len(back.seqs) != 100 || back.from[r.AddrA()] != 100 {
				t.Errorf("A got %d from %v, want 100 from %v", len(back.seqs), back.from, r.AddrA())
			}
			s := settled(r.Stats)
			if want := (Counters{Received: n, Forwarded: n}); s.AtoB != want {
				t.Errorf("A->B counters %+v, want %+v", s.AtoB, want)
			}
			if want := (Counters{Received: 100, Forwarded: 100}); s.BtoA != want {
				t.Errorf("B->A counters %+v, want %+v", s.BtoA, want)
			}
		})
	}
}

func TestRelayFaults(t *testing.T) {
	const n = 2000
	tests := []struct {
		name  string
		f     Faults
		check func(t *testing.T, got received, c Counters)
	}{
		{"drop", Faults{Drop: 0.2}, func(t *testing.T, got received, c Counters) {
			if !within(c.Dropped, n, 0.2) || len(got.seqs) != n-int(c.Dropped) {
				t.Errorf("Dropped %d, B got %d of %d", c.Dropped, len(got.seqs), n)
			}
		}},
		{"duplicate", Faults{Duplicate: 0.2}, func(t *testing.T, got received, c Counters) {
			if !within(c.Duplicated, n, 0.2) || got.duplicates() != int(c.Duplicated) || len(got.seqs) != n+int(c.Duplicated) {
				t.Errorf("Duplicated %d, B saw %d duplicates in %d", c.Duplicated, got.duplicates(), len(got.seqs))
			}
		}},
		{"reorder", Faults{Reorder: 0.1}, func(t *testing.T, got received, c Counters) {
			if !within(c.Reordered, n, 0.1*0.9) || got.inversions() != int(c.Reordered-c.ReorderTimeouts) || len(got.seqs) != n {
				t.Errorf("Reordered %d (%d timeouts), B saw %d inversions in %d", c.Reordered, c.ReorderTimeouts, got.inversions(), len(got.seqs))
			}
		}},
		{"corrupt", Faults{Corrupt: 0.1}, func(t *testing.T, got received, c Counters) {
			if !within(c.Corrupted, n, 0.1) || got.corrupted != int(c.Corrupted) || len(got.seqs) != n-int(c.Corrupted) {
				t.Errorf("Corrupted %d, B saw %d corrupted and %d intact", c.Corrupted, got.corrupted, len(got.seqs))
			}
		}},
		{"corrupt outside range leaves stamps intact", Faults{Corrupt: 1, CorruptFrom: 400}, func(t *testing.T, got received, c Counters) {
			if c.Corrupted != 0 || got.corrupted != 0 {
				t.Errorf("Corrupted %d, B saw %d corrupted; the range is past the payload", c.Corrupted, got.corrupted)
			}
		}},
		{"everything at once", Faults{Drop: 0.05, Duplicate: 0.05, Reorder: 0.05, Corrupt: 0.05}, func(t *testing.T, got received, c Counters) {
			total := len(got.seqs) + got.corrupted
			if want := n - int(c.Dropped) + int(c.Duplicated); total != want {
				t.Errorf("B got %d, want Received-Dropped+Duplicated = %d (%+v)", total, want, c)
			}
			for _, v := range []uint64{c.Dropped, c.Duplicated, c.Corrupted} {
				if !within(v, n, 0.05) {
					t.Errorf("counters %+v: a count is far from 5%% of %d", c, n)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := listenLoopback(t, "udp4"), listenLoopback(t, "udp4")
			r := newRelay(t, Config{AtoB: tt.f, Seed: 99}, a, b)
			sendStream(t, a, r.AddrA(), n, 100)
			got := receiveStream(b, n*2)
			c := settled(r.Stats).AtoB
			if c.Received != n || c.Errors != 0 || c.Discarded != 0 {
				t.Fatalf("counters %+v: want %d received, no errors or discards", c, n)
			}
			if c.Forwarded != n-c.Dropped+c.Duplicated {
				t.Errorf("Forwarded %d, want %d", c.Forwarded, n-c.Dropped+c.Duplicated)
			}
			tt.check(t, got, c)
			if settled(r.Stats).BtoA != (Counters{}) {
				t.Errorf("B->A counters %+v, want zero", settled(r.Stats).BtoA)
			}
		})
	}
}

func TestRelayDelay(t *testing.T) {
	a, b := listenLoopback(t, "udp4"), listenLoopback(t, "udp4")
	const delay = 40 * time.Millisecond
	r := newRelay(t, Config{AtoB: Faults{Delay: delay}, BtoA: Faults{Delay: delay}}, a, b)
	start := time.Now()
	sendStream(t, a, r.AddrA(), 1, 64)
	if got := receiveStream(b, 1); len(got.seqs) != 1 {
		t.Fatal("nothing crossed")
	}
	sendStream(t, b, r.AddrB(), 1, 64)
	if got := receiveStream(a, 1); len(got.seqs) != 1 {
		t.Fatal("nothing came back")
	}
	if rtt := time.Since(start); rtt < 2*delay || rtt > 2*delay+time.Second {
		t.Errorf("round trip %v, want about %v", rtt, 2*delay)
	}
	if s := settled(r.Stats); s.AtoB.Delayed != 1 || s.BtoA.Delayed != 1 {
		t.Errorf("Delayed %d and %d, want 1 and 1", s.AtoB.Delayed, s.BtoA.Delayed)
	}
}

func TestRelayMaxDatagrams(t *testing.T) {
	a, b := listenLoopback(t, "udp4"), listenLoopback(t, "udp4")
	r := newRelay(t, Config{MaxDatagrams: 10}, a, b)
	sendStream(t, a, r.AddrA(), 25, 64)
	got := receiveStream(b, 25)
	if len(got.seqs) != 10 {
		t.Errorf("B got %d, want the cap of 10", len(got.seqs))
	}
	if c := settled(r.Stats).AtoB; c.Received != 25 || c.Forwarded != 10 || c.Discarded != 15 {
		t.Errorf("counters %+v, want 25 received, 10 forwarded, 15 discarded", c)
	}
}

func TestRelayMaxDuration(t *testing.T) {
	start := time.Now()
	r, err := New(Config{MaxDuration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done():
	case <-time.After(5 * time.Second):
		r.Close()
		t.Fatal("relay still running 5s after a 100ms MaxDuration")
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("stopped after %v, before MaxDuration", d)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close after expiry: %v", err)
	}
	noRelayGoroutines(t)
}

func TestRelayLearnsPeers(t *testing.T) {
	a, b := listenLoopback(t, "udp4"), listenLoopback(t, "udp4")
	r, err := New(Config{}) // neither peer configured
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// B speaks first: the relay does not know A yet.
	sendStream(t, b, r.AddrB(), 3, 64)
	if got := receiveStream(a, 3); len(got.seqs) != 0 {
		t.Fatalf("A got %d datagrams before the relay could know it", len(got.seqs))
	}
	if c := settled(r.Stats).BtoA; c.Discarded != 3 {
		t.Errorf("B->A Discarded %d, want 3", c.Discarded)
	}
	// A speaks: learned, and B (learned from its first datagrams) hears it.
	sendStream(t, a, r.AddrA(), 5, 64)
	if got := receiveStream(b, 5); len(got.seqs) != 5 {
		t.Fatalf("B got %d of 5", len(got.seqs))
	}
	sendStream(t, b, r.AddrB(), 4, 64)
	if got := receiveStream(a, 4); len(got.seqs) != 4 {
		t.Fatalf("A got %d of 4 after being learned", len(got.seqs))
	}
}

func TestRelaySetFaults(t *testing.T) {
	a, b := listenLoopback(t, "udp4"), listenLoopback(t, "udp4")
	r := newRelay(t, Config{}, a, b)
	sendStream(t, a, r.AddrA(), 10, 64)
	if got := receiveStream(b, 10); len(got.seqs) != 10 {
		t.Fatalf("B got %d of 10 before faults", len(got.seqs))
	}
	if err := r.SetFaults(AtoB, Faults{Drop: 1}); err != nil {
		t.Fatal(err)
	}
	sendStream(t, a, r.AddrA(), 10, 64)
	if got := receiveStream(b, 10); len(got.seqs) != 0 {
		t.Fatalf("B got %d with Drop 1", len(got.seqs))
	}
	tests := []struct {
		d Direction
		f Faults
	}{
		{AtoB, Faults{Drop: 2}},
		{Direction(5), Faults{}},
	}
	for _, tt := range tests {
		if err := r.SetFaults(tt.d, tt.f); err == nil {
			t.Errorf("SetFaults(%v, %+v) succeeded", tt.d, tt.f)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"bad A->B faults", Config{AtoB: Faults{Drop: -1}}},
		{"bad B->A faults", Config{BtoA: Faults{Corrupt: 2}}},
		{"negative duration", Config{MaxDuration: -time.Second}},
		{"bad listen address", Config{ListenA: "not an address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r, err := New(tt.cfg); err == nil {
				r.Close()
				t.Fatal("New succeeded")
			} else if !strings.HasPrefix(err.Error(), "faultrelay: new: ") {
				t.Errorf("error %q lacks the faultrelay: new: prefix", err)
			}
		})
	}
}

func TestRelayCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	var relays []*Relay
	for i := 0; i < 5; i++ {
		a, b := listenLoopback(t, "udp4"), listenLoopback(t, "udp4")
		r := newRelay(t, Config{AtoB: Faults{Delay: time.Hour}, BtoA: Faults{Reorder: 1}}, a, b)
		sendStream(t, a, r.AddrA(), 5, 64) // parked in the delay queue
		sendStream(t, b, r.AddrB(), 1, 64) // held for reordering
		relays = append(relays, r)
	}
	time.Sleep(50 * time.Millisecond)
	for _, r := range relays {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		select {
		case <-r.Done():
		default:
			t.Error("Done not closed after Close")
		}
		if err := r.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
	noRelayGoroutines(t)
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines after closing, %d before", after, before)
	}
}

// TestRelayBetweenNamespaces relays between two hosts that share no link:
// each side's socket lives in that side's namespace, on its loopback.
func TestRelayBetweenNamespaces(t *testing.T) {
	p := netns.Setup(t, netns.Options{})
	connA, err := netns.ListenUDP(p.A.NS, "udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	connB, err := netns.ListenUDP(p.B.NS, "udp4", "127.0.0.1:0")
	if err != nil {
		connA.Close()
		t.Fatal(err)
	}
	a, err := netns.ListenUDP(p.A.NS, "udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := netns.ListenUDP(p.B.NS, "udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	growBuffers(a)
	growBuffers(b)
	r := newRelay(t, Config{ConnA: connA, ConnB: connB, BtoA: Faults{Drop: 1, MaxFaults: 2}}, a, b)
	sendStream(t, a, r.AddrA(), 50, 100)
	if got := receiveStream(b, 50); len(got.seqs) != 50 {
		t.Errorf("B (in its namespace) got %d of 50", len(got.seqs))
	}
	sendStream(t, b, r.AddrB(), 10, 100)
	if got := receiveStream(a, 10); len(got.seqs) != 8 || got.seqs[0] != 2 {
		t.Errorf("A got %v, want #2..#9 (first two dropped)", got.seqs)
	}
}

func TestRelayBadSendCountsErrors(t *testing.T) {
	a := listenLoopback(t, "udp4")
	// B's address is an IPv6 one while the relay's B side is IPv4: every
	// send fails.
	r := newRelay(t, Config{PeerB: netip.MustParseAddrPort("[::1]:9")}, a, nil)
	sendStream(t, a, r.AddrA(), 5, 64)
	deadline := time.Now().Add(streamTimeout)
	for r.Stats().AtoB.Errors < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if c := settled(r.Stats).AtoB; c.Errors != 5 || c.Forwarded != 0 {
		t.Errorf("counters %+v, want 5 errors", c)
	}
}
