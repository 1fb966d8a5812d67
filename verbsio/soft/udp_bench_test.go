package soft_test

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/udp"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// udpChild starts a child on udp_lo in role and connects a busy-polled
// local side to it.
func udpChild(b *testing.B, role string, size int) (*verbstest.Side, *child, verbsio.Endpoint) {
	os.Setenv("RPERF_SOFT_DEVICE", "udp_lo")
	os.Setenv("RPERF_SOFT_SIZE", strconv.Itoa(size))
	defer os.Unsetenv("RPERF_SOFT_DEVICE")
	defer os.Unsetenv("RPERF_SOFT_SIZE")
	s := verbstest.NewSide(b, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, BufSize: size,
		NoProgress: true, CQE: 4096, Cap: verbsio.QPCap{MaxSendWR: 256, MaxRecvWR: 512, MaxInlineData: 64}})
	c := startChild(b, role)
	ep, err := parseEndpoint(c.recv(b))
	if err != nil {
		b.Fatal(err)
	}
	c.recv(b)
	c.send(b, "%s", formatEndpoint(s.Endpoint()))
	if err := s.QP.Connect(s.Endpoint(), ep, verbsio.ConnectOptions{Access: verbsio.AccessRemoteWrite}); err != nil {
		b.Fatal(err)
	}
	if got := c.recv(b); got != "ready" {
		b.Fatalf("child: %q", got)
	}
	return s, c, ep
}

// BenchmarkUDPSendPingPong measures a perftest send_lat round trip over the
// udp fabric between two processes on loopback, both busy polling, beside
// a busy-polling raw UDP echo of the same size between the same processes
// (recvfrom with MSG_DONTWAIT in a loop and one sendto, raw system calls:
// rperf baseline's UDP ping-pong), measured in interleaved rounds.
// Metrics: ns/rtt, ref-ns/rtt, x-ref.
func BenchmarkUDPSendPingPong(b *testing.B) {
	for _, size := range []int{64} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			s, c, _ := udpChild(b, "sendpong", 1<<16)
			var rawPort int
			fmt.Sscanf(c.recv(b), "raw %d", &rawPort)
			raw, _, err := busySocket()
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(raw)
			if err := unix.Connect(raw, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: rawPort}); err != nil {
				b.Fatal(err)
			}
			m := 1000
			rounds := max(b.N/m, 5)
			c.send(b, "%d %d %d", rounds, m, size)
			payload, in := make([]byte, size), make([]byte, size+1)
			recv := []verbsio.RecvWR{{SGL: []verbsio.SGE{s.MR.SGE(0, 4096)}}}
			for i := 0; i < 256; i++ {
				s.QP.PostRecv(recv)
			}
			wr := []verbsio.SendWR{{Opcode: verbsio.OpSend, Flags: verbsio.SendInline, SGL: []verbsio.SGE{s.MR.SGE(8192, size)}}}
			wcs := make([]verbsio.WC, 16)
			ref := make([]time.Duration, rounds)
			eng := make([]time.Duration, rounds)
			b.ResetTimer()
			for r := 0; r < rounds; r++ {
				t0 := time.Now()
				for i := 0; i < m; i++ {
					busyPing(b, raw, payload, in)
				}
				t1 := time.Now()
				for i := 0; i < m; i++ {
					wr[0].Flags &^= verbsio.SendSignaled
					if i%64 == 63 {
						wr[0].Flags |= verbsio.SendSignaled
					}
					if _, err := s.QP.PostSend(wr); err != nil {
						b.Fatal(err)
					}
					for got := false; !got; {
						n, err := s.CQ.Poll(wcs)
						if err != nil {
							b.Fatal(err)
						}
						for _, wc := range wcs[:n] {
							if wc.Status != verbsio.StatusSuccess {
								b.Fatal(wc.Status)
							}
							if wc.Opcode.IsRecv() {
								got = true
								s.QP.PostRecv(recv)
							}
						}
					}
				}
				ref[r], eng[r] = t1.Sub(t0), time.Since(t1)
			}
			b.StopTimer()
			if got := c.recv(b); got != "done" {
				b.Fatalf("child: %s", got)
			}
			c.send(b, "exit")
			e, f := median(eng)/time.Duration(m), median(ref)/time.Duration(m)
			b.ReportMetric(float64(e.Nanoseconds()), "ns/rtt")
			b.ReportMetric(float64(f.Nanoseconds()), "ref-ns/rtt")
			b.ReportMetric(float64(e)/float64(f), "x-ref")
		})
	}
}

// BenchmarkUDPWriteBandwidth measures one-sided RDMA WRITE bandwidth over
// the udp fabric into a passive process (its engine running in the
// background), beside two references measured in alternating runs: raw UDP
// GSO sends between two processes on the same loopback with the engine's
// packet size, received datagram by datagram (ref) and with UDP GRO, as the
// engine receives (ref-gro, the kernel's best: one copy each way and
// nothing else, where the engine also computes and checks every packet's
// ICRC and places the payload). Metrics: GiB/s, ref-GiB/s, x-ref,
// ref-gro-GiB/s, x-ref-gro.
func BenchmarkUDPWriteBandwidth(b *testing.B) {
	const size = 64 << 10
	const depth = 128
	s, c, ep := udpChild(b, "target", size*depth)
	sinks := [2]*child{startChild(b, "udpsink"), startChild(b, "udpsink-gro")}
	var sinkTo [2]netip.AddrPort
	for i, k := range sinks {
		port, _ := strconv.Atoi(k.recv(b))
		sinkTo[i] = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	}
	raw, err := udp.Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	// The engine's packets for a 64 KiB write: 4096-byte payloads, 4112
	// bytes on the wire, 15 to a GSO send. The reference reads as much
	// distinct memory as the engine's window (depth messages of size
	// bytes), as the engine does: a single hot buffer would measure the
	// cache, not the path.
	const seg = 4112
	const group = 15 * seg
	refMem := make([]byte, size*depth+group)
	n := max(b.N, 2000)

	var engRates []float64
	var refRates, refDgrams [2][]float64
	b.ResetTimer()
	for rep := 0; rep < 3; rep++ {
		// References: raw GSO sends, as many bytes as the engine moves,
		// measured by the receiver from its first datagram to its last.
		for i, sink := range sinks {
			sink.send(b, "reset")
			sink.recv(b)
			sends := n * size / group
			for k := 0; k < sends; k++ {
				off := k * group % (size * depth)
				o := raw.Queue()
				o.Buf, o.To, o.GSO = refMem[off:off+group], sinkTo[i], seg
				if raw.Pending() == 8 {
					raw.Flush()
				}
			}
			raw.Flush()
			time.Sleep(50 * time.Millisecond)
			sink.send(b, "report")
			var bytes, dgrams, ns int64
			fmt.Sscanf(sink.recv(b), "%d %d %d", &bytes, &dgrams, &ns)
			refRates[i] = append(refRates[i], float64(bytes)/(float64(ns)/1e9)/(1<<30))
			refDgrams[i] = append(refDgrams[i], float64(dgrams)/float64(sends*15))
		}

		// The engine: a window of depth writes, refilled with one post of
		// a list, every cqMod-th write signaled: perftest's defaults for
		// 64 KiB (tx depth 128; -Q 1 above 8 KiB), where each completion
		// frees a slot as soon as its acknowledgement arrives.
		const cqMod = 1
		wrs := make([]verbsio.SendWR, depth)
		sges := make([]verbsio.SGE, depth)
		wcs := make([]verbsio.WC, depth)
		t0 := time.Now()
		posted, done := 0, 0
		for done < n {
			k := 0
			for posted-done+k < depth && posted+k < n {
				i := posted + k
				off := i % depth * size
				sges[k] = s.MR.SGE(off, size)
				wrs[k] = verbsio.SendWR{ID: uint64(i), Opcode: verbsio.OpRDMAWrite, SGL: sges[k : k+1],
					Remote: verbsio.RemoteAddr{Addr: ep.VAddr + uint64(off), RKey: ep.RKey}}
				if i%cqMod == cqMod-1 || i == n-1 {
					wrs[k].Flags = verbsio.SendSignaled
				}
				k++
			}
			if k > 0 {
				if _, err := s.QP.PostSend(wrs[:k]); err != nil {
					b.Fatal(err)
				}
				posted += k
			}
			m, err := s.CQ.Poll(wcs)
			if err != nil {
				b.Fatal(err)
			}
			for _, wc := range wcs[:m] {
				if wc.Status != verbsio.StatusSuccess {
					b.Fatal(wc.Status)
				}
				// A signaled completion retires the writes before it.
				done = int(wc.ID) + 1
			}
		}
		el := time.Since(t0)
		engRates = append(engRates, float64(n)*size/el.Seconds()/(1<<30))
	}
	b.StopTimer()
	for _, sink := range sinks {
		sink.send(b, "exit")
	}
	c.send(b, "report")
	c.recv(b)
	c.send(b, "exit")
	c.cmd.Wait()
	eng := medianF(engRates)
	ref, gro := medianF(refRates[0]), medianF(refRates[1])
	b.SetBytes(size)
	b.ReportMetric(eng, "GiB/s")
	b.ReportMetric(ref, "ref-GiB/s")
	b.ReportMetric(eng/ref, "x-ref")
	b.ReportMetric(medianF(refDgrams[0]), "ref-delivered")
	b.ReportMetric(gro, "ref-gro-GiB/s")
	b.ReportMetric(eng/gro, "x-ref-gro")
}

// busyPing sends out on the connected socket fd and spins on recvfrom
// with MSG_DONTWAIT until the answer, raw system calls (see busyPong).
func busyPing(b *testing.B, fd int, out, in []byte) {
	if _, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&out[0])), uintptr(len(out)), 0, 0, 0); e != 0 {
		b.Fatal(e)
	}
	deadline := time.Now().Add(10 * time.Second)
	for spins := 1; ; spins++ {
		n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&in[0])), uintptr(len(in)), unix.MSG_DONTWAIT, 0, 0)
		if e == 0 {
			if int(n) != len(out) {
				b.Fatalf("raw echo of %d bytes, not %d", n, len(out))
			}
			return
		}
		if e != unix.EAGAIN {
			b.Fatal(e)
		}
		if spins&4095 == 0 && time.Now().After(deadline) {
			b.Fatal("raw ping-pong: no answer within 10s")
		}
	}
}

func medianF(v []float64) float64 {
	s := append([]float64(nil), v...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// BenchmarkUDPMessageRate measures 64-byte SENDs per second from this
// process to a busy-polling receiver process over the udp fabric, posted
// one per PostSend (generic, perftest's -l 1) and through the qp_burst
// family (64 staged, one flush: one sendmmsg), in alternating rounds.
// Metrics: ns/msg for burst, generic-ns/msg, x-generic.
func BenchmarkUDPMessageRate(b *testing.B) {
	const batch = 64
	s, c, _ := udpChild(b, "sink", 1<<16)
	sge := s.MR.SGE(0, 64)
	wr := []verbsio.SendWR{{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{sge}}}
	f, st := s.Ctx.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilyQPBurst, Object: s.QP})
	if st != verbsio.IntfOK {
		b.Fatal(st)
	}
	burst := f.(verbsio.QPBurst)
	wcs := make([]verbsio.WC, 16)
	wait := func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, err := s.CQ.Poll(wcs)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				if wcs[0].Status != verbsio.StatusSuccess {
					b.Fatal(wcs[0].Status)
				}
				return
			}
			if time.Now().After(deadline) {
				b.Fatal("no completion")
			}
		}
	}
	generic := func() {
		for i := 0; i < batch; i++ {
			wr[0].Flags = 0
			if i == batch-1 {
				wr[0].Flags = verbsio.SendSignaled
			}
			if _, err := s.QP.PostSend(wr); err != nil {
				b.Fatal(err)
			}
		}
		wait()
	}
	bursty := func() {
		for i := 0; i < batch-1; i++ {
			burst.SendPending(sge.Addr, sge.Length, sge.LKey, 0)
		}
		burst.SendPending(sge.Addr, sge.Length, sge.LKey, verbsio.BurstSignaled)
		burst.SendFlush()
		wait()
	}
	generic()
	bursty()
	alternate(b, batch, generic, bursty, "msg")
	c.cmd.Process.Signal(os.Interrupt)
	c.cmd.Wait()

	// The kernel's own limit for comparison: 64-byte datagrams sent with
	// sendmmsg in batches of 64 to a receiver process; the rate is the
	// receiver's, from its first datagram to its last (drops not counted).
	sink := startChild(b, "udpsink")
	port, _ := strconv.Atoi(sink.recv(b))
	raw, err := udp.Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	sink.send(b, "reset")
	sink.recv(b)
	msg := make([]byte, 64+16) // a 64-byte SEND is 80 bytes on the wire
	for i := 0; i < 2000; i++ {
		for k := 0; k < batch; k++ {
			o := raw.Queue()
			o.Buf, o.To = msg, to
		}
		raw.Flush()
	}
	time.Sleep(50 * time.Millisecond)
	sink.send(b, "report")
	var bytes, dgrams, ns int64
	fmt.Sscanf(sink.recv(b), "%d %d %d", &bytes, &dgrams, &ns)
	sink.send(b, "exit")
	if dgrams > 0 {
		b.ReportMetric(float64(ns)/float64(dgrams), "raw-udp-ns/msg")
	}
}
