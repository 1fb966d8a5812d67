package afpacket

import (
	"fmt"
	"sort"
	"testing"
	"time"
	"unsafe"

	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
	"golang.org/x/sys/unix"
)

// Benchmarks over a veth pair between two namespaces (root needed). Each
// measures its path and a plain AF_PACKET reference in interleaved rounds
// of the same run and reports both with their ratio:
//
//	ns/pkt, ref-ns/pkt (medians over the rounds), x-ref (the median of the
//	rounds' reference time / path time: above 1 the path is faster)
//
// go test ./verbsio/soft/internal/afpacket -run '^$' -bench . -benchtime 200000x

// nowhere is a unicast MAC nobody has: the peer drops such frames as
// soon as they arrive (PACKET_OTHERHOST), so a send benchmark measures
// the sender, not the peer's stack.
var nowhere = [6]byte{0x02, 0x72, 0x70, 0, 0, 0x99}

// frame64 is a 64-byte IPv4/UDP frame (60 bytes before the FCS, as
// perftest's raw_ethernet_bw -s 64 sends).
func (w *wire) frame64(b testing.TB, dst [6]byte) []byte {
	h := netpkt.Headers{Dst: dst, Src: w.macA, SrcIP: w.ipA, DstIP: w.ipB, Proto: netpkt.ProtoUDP, SrcPort: 4000, DstPort: 5000}
	f, err := h.Append(nil, make([]byte, 60-h.Len()))
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// refSender is the reference: a bound packet socket, one sendto(2) per
// frame.
type refSender struct{ fd int }

func (w *wire) refSender(b testing.TB, ns func(func() error) error, link string) *refSender {
	var r refSender
	err := ns(func() error {
		fd, ifindex, err := socket(link)
		if err != nil {
			return err
		}
		r.fd = fd
		return bind(fd, ifindex, 0)
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(r.fd) })
	return &r
}

func (r *refSender) send(f []byte) {
	for {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(r.fd), uintptr(unsafe.Pointer(&f[0])), uintptr(len(f)), 0, 0, 0)
		if e != unix.EAGAIN && e != unix.ENOBUFS && e != unix.EINTR {
			if e != 0 {
				panic(e)
			}
			return
		}
	}
}

// rounds runs ref and path alternately, m operations each per round
// (which of them goes first alternates too), and reports the medians per
// unit ("pkt", "rtt", "msg").
func rounds(b *testing.B, m int, unit string, ref, path func(n int)) {
	r := max(b.N/m, 3)
	var refT, pathT []float64
	ref(m) // warm up both
	path(m)
	b.ResetTimer()
	timed := func(f func(int)) float64 {
		t0 := time.Now()
		f(m)
		return float64(time.Since(t0).Nanoseconds()) / float64(m)
	}
	for i := range r {
		// Alternate which goes first, so that neither pays for the other.
		if i%2 == 0 {
			refT = append(refT, timed(ref))
			pathT = append(pathT, timed(path))
		} else {
			pathT = append(pathT, timed(path))
			refT = append(refT, timed(ref))
		}
	}
	b.StopTimer()
	// The ratio is the median of each round's, so that a stretch of load
	// that slows both sides of a round cancels out.
	ratios := make([]float64, len(refT))
	for i := range refT {
		ratios[i] = refT[i] / pathT[i]
	}
	b.ReportMetric(median(pathT), "ns/"+unit)
	b.ReportMetric(median(refT), "ref-ns/"+unit)
	b.ReportMetric(median(ratios), "x-ref")
	b.ReportMetric(0, "ns/op")
}

func median(v []float64) float64 {
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	return v[len(v)/2]
}

// BenchmarkSend64 is the 64-byte packet rate of each transmit path
// against one sendto(2) per frame: one frame per call (the generic
// path's cost) and batches of 64 (the burst path's).
func BenchmarkSend64(b *testing.B) {
	w := newWire(b)
	f := w.frame64(b, nowhere)
	for _, tc := range []struct {
		mode   TXMode
		batch  int
		bypass bool
	}{
		{TXSendmmsg, 1, false}, {TXSendmmsg, 64, false}, {TXRing, 1, false}, {TXRing, 64, false},
		{TXSendmmsg, 1, true}, {TXSendmmsg, 64, true}, {TXRing, 64, true},
		{TXXDP, 1, false}, {TXXDP, 64, false},
	} {
		b.Run(fmt.Sprintf("tx=%s/batch=%d/bypass=%v", tc.mode, tc.batch, tc.bypass), func(b *testing.B) {
			ref := w.refSender(b, w.pair.A.Run, w.pair.A.Link)
			tx := w.tx(b, TXOptions{Mode: tc.mode, Batch: tc.batch, QdiscBypass: tc.bypass})
			batch := make([][]byte, tc.batch)
			for i := range batch {
				batch[i] = f
			}
			rounds(b, 4096, "pkt", func(n int) {
				for range n {
					ref.send(f)
				}
			}, func(n int) {
				for i := 0; i < n; i += tc.batch {
					if _, err := tx.Send(batch); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// spinWait polls fn for up to 100 µs, then sleeps in wait between tries
// (every end of every ping-pong does the same, so that the reference's
// slower polls do not buy it a longer spin).
func spinWait(fn func() bool, wait func()) {
	var start time.Time
	for i := 0; !fn(); i++ {
		switch {
		case i == 0:
			start = time.Now()
		case i%16 == 0 && time.Since(start) > 100*time.Microsecond:
			wait()
		}
	}
}

// BenchmarkPingPong64 is a 64-byte round trip A -> B -> A: the
// reference is plain packet sockets (recvfrom/sendto, busy polling), the
// path a receive ring and a transmit socket at each end.
func BenchmarkPingPong64(b *testing.B) {
	w := newWire(b)
	toB, toA := w.frame64(b, w.macB), w.frame64(b, w.macA)
	copy(toA[6:12], w.macB[:])
	type end struct {
		rx *RX
		tx *TX
	}
	for _, tc := range []struct {
		rx RingVersion
		m  int
	}{{RingV2, 200}, {RingV3, 20}} {
		b.Run(fmt.Sprintf("rx=v%d", tc.rx), func(b *testing.B) {
			// The reference: a receiving packet socket per end, filtered to
			// the frames of the test.
			refA, refB := w.refRecv(b, true), w.refRecv(b, false)
			refTxA := w.refSender(b, w.pair.A.Run, w.pair.A.Link)
			refTxB := w.refSender(b, w.pair.B.Run, w.pair.B.Link)
			var a, bb end
			for _, e := range []struct {
				host bool
				end  *end
			}{{true, &a}, {false, &bb}} {
				run, link, peer := w.pair.A.Run, w.pair.A.Link, w.macB
				if !e.host {
					run, link, peer = w.pair.B.Run, w.pair.B.Link, w.macA
				}
				err := run(func() (err error) {
					if e.end.rx, err = OpenRX(link, RXOptions{Version: tc.rx}); err != nil {
						return err
					}
					if err := e.end.rx.SetFilter(fromMAC(peer)); err != nil {
						return err
					}
					e.end.tx, err = OpenTX(link, TXOptions{Batch: 1})
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { e.end.rx.Close(); e.end.tx.Close() })
			}
			buf := make([]byte, 2048)
			refEcho := func(n int) {
				for range n {
					spinWait(func() bool { return refB.recv(buf) }, refB.wait)
					refTxB.send(toA)
				}
			}
			one := [][]byte{nil}
			echo := func(n int) {
				fr := [][]byte{toA}
				for range n {
					spinWait(func() bool { _, ok := bb.rx.Next(); return ok }, func() { bb.rx.Wait(10 * time.Millisecond) })
					bb.tx.Send(fr)
				}
			}
			rounds(b, tc.m, "rtt", func(n int) {
				for refA.recv(buf) || refB.recv(buf) { // the path's frames of the last round
				}
				done := make(chan struct{})
				go func() { refEcho(n); close(done) }()
				for range n {
					refTxA.send(toB)
					spinWait(func() bool { return refA.recv(buf) }, refA.wait)
				}
				<-done
			}, func(n int) {
				for drain(a.rx) || drain(bb.rx) { // the reference's frames
				}
				done := make(chan struct{})
				go func() { echo(n); close(done) }()
				one[0] = toB
				for range n {
					a.tx.Send(one)
					spinWait(func() bool { _, ok := a.rx.Next(); return ok }, func() { a.rx.Wait(10 * time.Millisecond) })
				}
				<-done
			})
		})
	}
}

func drain(r *RX) bool {
	got := false
	for _, ok := r.Next(); ok; _, ok = r.Next() {
		got = true
	}
	return got
}

func fromMAC(mac [6]byte) []unix.SockFilter {
	// ld [6]; jeq mac[0:4]; ldh [10]; jeq mac[4:6]; ret -1; ret 0
	hi := uint32(mac[0])<<24 | uint32(mac[1])<<16 | uint32(mac[2])<<8 | uint32(mac[3])
	lo := uint32(mac[4])<<8 | uint32(mac[5])
	return []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 6},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: hi, Jf: 3},
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 10},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: lo, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
	}
}

// refReceiver is a plain packet socket read with recvfrom(2).
type refReceiver struct{ fd int }

func (w *wire) refRecv(b testing.TB, atA bool) *refReceiver {
	run, link, peer := w.pair.B.Run, w.pair.B.Link, w.macA
	if atA {
		run, link, peer = w.pair.A.Run, w.pair.A.Link, w.macB
	}
	var r refReceiver
	err := run(func() error {
		fd, ifindex, err := socket(link)
		if err != nil {
			return err
		}
		r.fd = fd
		prog := fromMAC(peer)
		fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp); err != nil {
			return err
		}
		if err := setInt(fd, unix.PACKET_IGNORE_OUTGOING, 1, "ignore outgoing"); err != nil {
			return err
		}
		return bind(fd, ifindex, unix.ETH_P_ALL)
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(r.fd) })
	return &r
}

func (r *refReceiver) recv(buf []byte) bool {
	n, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(r.fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
	return e == 0 && n > 0
}

func (r *refReceiver) wait() {
	unix.Poll([]unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}, 10)
}

// BenchmarkTSO64K sends 64 KiB TCP sends as MSS-sized frames: the kernel
// cutting them (one large frame with a virtio-net header; software GSO
// because the veth's checksum offload is off, as a NIC without TSO) against
// the engine cutting them with netpkt.TSO and sending the frames as one
// sendmmsg batch (the reference here). Metrics per 64 KiB send.
func BenchmarkTSO64K(b *testing.B) {
	w := newWire(b)
	if err := w.pair.A.Run(func() error { return SetFeature(w.pair.A.Link, OffloadTxCsum, false) }); err != nil {
		b.Fatal(err)
	}
	h := netpkt.Headers{Dst: nowhere, Src: w.macA, SrcIP: w.ipA, DstIP: w.ipB, DF: true, Proto: netpkt.ProtoTCP, SrcPort: 4000, DstPort: 5000, TCPFlags: netpkt.TCPAck}
	hdr, _ := h.AppendHeader(nil, 0)
	const mss = 1448
	payload := make([]byte, 0xffff-(len(hdr)-netpkt.EthLen)) // the largest IPv4 packet
	frame := append(append([]byte(nil), hdr...), payload...)
	var cut netpkt.TSO
	if err := cut.Init(hdr, len(payload), mss); err != nil {
		b.Fatal(err)
	}
	frames := make([][]byte, cut.Frames())
	for i := range frames {
		frames[i] = make([]byte, len(hdr)+mss)
	}
	for _, mode := range []TXMode{TXSendmmsg, TXRing, TXXDP} {
		b.Run("engine-tx="+mode.String(), func(b *testing.B) {
			gso := w.tx(b, TXOptions{VnetHdr: true})
			eng := w.tx(b, TXOptions{Mode: mode, Batch: 64})
			rounds(b, 64, "msg", func(n int) {
				for range n {
					var t netpkt.TSO
					t.Init(hdr, len(payload), mss)
					for i := range frames {
						off, k := t.Chunk(i)
						frames[i] = frames[i][:t.Frame(frames[i][:cap(frames[i])], i, payload[off:off+k])]
					}
					if _, err := eng.Send(frames); err != nil {
						b.Fatal(err)
					}
				}
			}, func(n int) {
				for range n {
					g, err := PrepareGSO(frame, mss)
					if err != nil {
						b.Fatal(err)
					}
					if err := gso.SendGSO(frame, g); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
