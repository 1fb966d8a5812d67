package faultrelay_test

import (
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"github.com/rperf/rperf/internal/testsupport/faultrelay"
	"github.com/rperf/rperf/internal/testsupport/netns"
)

// A relay on loopback that drops the first datagram from A to B.
func ExampleNew() {
	a, _ := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	b, _ := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	defer a.Close()
	defer b.Close()
	r, err := faultrelay.New(faultrelay.Config{
		PeerA: a.LocalAddr().(*net.UDPAddr).AddrPort(),
		PeerB: b.LocalAddr().(*net.UDPAddr).AddrPort(),
		AtoB:  faultrelay.Faults{Drop: 1, MaxFaults: 1},
		Seed:  1,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	// A talks to the relay as if it were B.
	for _, m := range []string{"one", "two", "three"} {
		a.WriteToUDPAddrPort([]byte(m), r.AddrA())
	}
	buf := make([]byte, 64)
	b.SetReadDeadline(time.Now().Add(2 * time.Second))
	for i := 0; i < 2; i++ {
		n, from, err := b.ReadFromUDPAddrPort(buf)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(buf[:n]), from == r.AddrB())
	}
	s := r.Stats().AtoB // counted before "three" was sent on
	fmt.Println("received", s.Received, "dropped", s.Dropped)
	// Output:
	// two true
	// three true
	// received 3 dropped 1
}

// Two engines in two namespaces with a transparent, faulty wire between
// them: the usual shape of a transport test. It needs root; a test would
// call netns.Setup(t, ...) instead of NewPair, to skip without root and
// clean up by itself.
func ExampleNewWire() {
	p, err := netns.NewPair(netns.Options{Middle: true, MTU: 1500})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	w, err := faultrelay.NewWire(p.Mid, faultrelay.WireConfig{
		Seed:  1,
		Ports: []uint16{4791}, // RoCEv2 only; ARP and the rest cross untouched
		AtoB: faultrelay.Faults{
			Drop:    0.01,
			Corrupt: 0.001, CorruptFrom: 12, // past the BTH
			FixChecksum: true, // so that only the ICRC can catch it
		},
		BtoA: faultrelay.Faults{Reorder: 0.01, Delay: time.Millisecond},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()

	// Engines as child processes, one per namespace, each given the other's
	// real address: headers reach the peer exactly as sent.
	server := netns.Command(p.B.NS, os.Args[0], "-serve", p.B.Addr4.Addr().String())
	client := netns.Command(p.A.NS, os.Args[0], "-connect", p.B.Addr4.Addr().String())
	_, _ = server, client // Start, Wait as usual

	// Or engines in this process: sockets opened inside each namespace stay
	// there, whichever goroutine uses them.
	ca, err := p.A.ListenUDP("udp4", 4791)
	if err != nil {
		log.Fatal(err)
	}
	defer ca.Close()
	cb, err := p.B.ListenUDP("udp4", 4791)
	if err != nil {
		log.Fatal(err)
	}
	defer cb.Close()
	// ... run the engines over ca and cb ...

	fmt.Printf("%+v\n", w.Stats().AtoB)
}
