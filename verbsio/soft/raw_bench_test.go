package soft_test

import (
	"net"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/verbsio"
)

// Raw benchmarks over a veth pair between two namespaces: each path of a
// RAW_PACKET QP against plain packet sockets doing the same work, in
// alternating rounds of the same run (alternateAs: ns per packet or round
// trip of the path and of the reference, and x-afpacket, the reference's
// time over the path's: above 1 the QP is faster).
//
//	go test ./verbsio/soft -run '^$' -bench 'Raw' -benchtime 100000x

// packetSocket is the reference: a packet socket bound to the link in
// h's namespace, receiving IPv4 frames to UDP port udpPort (0: none), as
// a classic BPF filter picks them.
func packetSocket(b testing.TB, h netns.Host, udpPort uint16) int {
	proto := uint16(0)
	if udpPort != 0 {
		proto = unix.ETH_P_IP
	}
	var fd int
	err := h.Run(func() error {
		ifc, err := net.InterfaceByName(h.Link)
		if err != nil {
			return err
		}
		be := proto<<8 | proto>>8
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(be)); err != nil {
			return err
		}
		if udpPort != 0 {
			// Ethernet 14 + IPv4 20 (no options in the test's frames): the
			// UDP destination port at byte 36.
			prog := []unix.SockFilter{
				{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 36},
				{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(udpPort)},
				{Code: unix.BPF_RET | unix.BPF_K, K: 0xffff},
				{Code: unix.BPF_RET | unix.BPF_K, K: 0},
			}
			if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
				&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
				return err
			}
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: be, Ifindex: ifc.Index})
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	return fd
}

func sendFrame(b testing.TB, fd int, f []byte) {
	for {
		_, err := unix.Write(fd, f)
		if err == nil {
			return
		}
		if err != unix.EAGAIN && err != unix.ENOBUFS && err != unix.EINTR {
			b.Fatal(err)
		}
	}
}

// recvFrame reads one frame from fd (its filter passes only the test's).
func recvFrame(b testing.TB, fd int, buf []byte) {
	for {
		_, err := unix.Read(fd, buf)
		if err == nil {
			return
		}
		if err != unix.EINTR && err != unix.EAGAIN {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawSend64 is the 64-byte (60 before the FCS) packet rate of a
// RAW_PACKET QP's send paths against one write(2) per frame on a packet
// socket: the generic path posting one work request per call, a post
// list of 64, and the burst family's 64 staged sends per flush; every
// 64th send is signaled. The frames go to a MAC nobody has, so the
// receiving end drops them at once and the sender is measured.
//
// It runs once per transmit mode of the raw port (OpenOptions.RawIO):
// sendmmsg (the default), past the qdisc, the TX ring and AF_XDP.
func BenchmarkRawSend64(b *testing.B) {
	for _, mode := range []string{"sendmmsg", "bypass", "txring", "xdp"} {
		b.Run("io="+mode, func(b *testing.B) { rawSend64(b, mode) })
	}
}

func rawSend64(b *testing.B, mode string) {
	const batch = 64
	w := newRawWire(b, netns.Options{}, verbsio.OpenOptions{RawIO: mode}, 0)
	qp := w.a.rawQP(b, 1024, 1)
	nobody := *w.b
	nobody.mac = [6]byte{0x02, 0x72, 0x70, 0, 0, 0x99}
	f := udpFrame(b, w.a, &nobody, 4000, 5000, 0, 60-42)
	copy(w.a.buf, f)
	ref := packetSocket(b, w.a.host, 0)
	sge := w.a.mr.SGE(0, len(f))
	wcs := make([]verbsio.WC, 16)
	wait := func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, err := w.a.cq.Poll(wcs)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				if wcs[0].Status != verbsio.StatusSuccess {
					b.Fatalf("send: %v", wcs[0].Status)
				}
				return
			}
			if time.Now().After(deadline) {
				b.Fatal("no send completion in 10 s")
			}
		}
	}
	one := []verbsio.SendWR{{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{sge}}}
	list := make([]verbsio.SendWR, batch)
	for i := range list {
		list[i] = verbsio.SendWR{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{sge}}
	}
	list[batch-1].Flags = verbsio.SendSignaled
	fam, st := w.a.ctx.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilyQPBurst, Object: qp})
	if st != verbsio.IntfOK {
		b.Fatalf("qp_burst: %v", st)
	}
	burst := fam.(verbsio.QPBurst)
	defer burst.Release()
	paths := []struct {
		name string
		run  func()
	}{
		{"generic", func() {
			for i := 0; i < batch; i++ {
				one[0].Flags = 0
				if i == batch-1 {
					one[0].Flags = verbsio.SendSignaled
				}
				if _, err := qp.PostSend(one); err != nil {
					b.Fatal(err)
				}
			}
			wait()
		}},
		{"generic-list64", func() {
			if _, err := qp.PostSend(list); err != nil {
				b.Fatal(err)
			}
			wait()
		}},
		{"burst", func() {
			for i := 0; i < batch-1; i++ {
				burst.SendPending(sge.Addr, sge.Length, sge.LKey, 0)
			}
			burst.SendPending(sge.Addr, sge.Length, sge.LKey, verbsio.BurstSignaled)
			if err := burst.SendFlush(); err != nil {
				b.Fatal(err)
			}
			wait()
		}},
	}
	reference := func() {
		for range batch {
			sendFrame(b, ref, f)
		}
	}
	for _, p := range paths {
		b.Run("path="+p.name, func(b *testing.B) {
			p.run()
			reference()
			alternateAs(b, batch, reference, p.run, "pkt", "afpacket")
		})
	}
}

// BenchmarkRawRecv64 is the receive side's cost per 64-byte frame under
// each receive ring (OpenOptions.RawIO v2 and v3): a round is 1024
// frames sent from A with write(2) on a packet socket and all of them
// taken from B's RAW_PACKET QP, against the same sends read at B with
// read(2) on a packet socket filtered to them (x-afpacket above 1: the
// QP's ring is faster). A V3 ring hands its last, partly filled block
// over only when the block timer fires (1 ms), once per round. AF_XDP
// receive is not built (docs/raw.md).
func BenchmarkRawRecv64(b *testing.B) {
	for _, mode := range []string{"v2", "v3"} {
		b.Run("io="+mode, func(b *testing.B) { rawRecv64(b, mode) })
	}
}

func rawRecv64(b *testing.B, mode string) {
	const batch = 1024
	w := newRawWire(b, netns.Options{}, verbsio.OpenOptions{RawIO: mode}, 0)
	qb := w.b.rawQP(b, 16, 2*batch)
	fb := mustFlow(b, qb, w.b.udpTo(5000, 0))
	defer fb.Destroy()
	const slot = 2048
	w.b.postRecvs(b, qb, 0, 2*batch, slot)
	toQP := udpFrame(b, w.a, w.b, 4000, 5000, 0, 60-42)
	toRef := udpFrame(b, w.a, w.b, 4001, 5001, 0, 60-42)
	tx := packetSocket(b, w.a.host, 0)
	ref := packetSocket(b, w.b.host, 5001)
	// Room for a round's frames (an skb of a 64-byte frame takes ~768
	// bytes of the socket's buffer; the default holds ~270).
	if err := unix.SetsockoptInt(ref, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20); err != nil {
		b.Fatal(err)
	}
	wcs := make([]verbsio.WC, batch)
	rwr := make([]verbsio.RecvWR, batch)
	sgl := make([]verbsio.SGE, batch)
	for i := range rwr {
		rwr[i].SGL = sgl[i : i+1]
	}
	path := func() {
		for range batch {
			sendFrame(b, tx, toQP)
		}
		deadline := time.Now().Add(10 * time.Second)
		for got := 0; got < batch; {
			k, err := w.b.cq.Poll(wcs[:batch-got])
			if err != nil {
				b.Fatal(err)
			}
			for i, wc := range wcs[:k] {
				if wc.Status != verbsio.StatusSuccess {
					b.Fatalf("receive: %v", wc.Status)
				}
				rwr[i].ID, sgl[i] = wc.ID, w.b.mr.SGE(int(wc.ID), slot)
			}
			if k > 0 {
				if _, err := qb.PostRecv(rwr[:k]); err != nil {
					b.Fatal(err)
				}
			}
			got += k
			if k == 0 {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d frames in 10 s", got, batch)
				}
				idle(w.b.cq)
			}
		}
	}
	buf := make([]byte, 2048)
	reference := func() {
		for range batch {
			sendFrame(b, tx, toRef)
		}
		for range batch {
			recvFrame(b, ref, buf)
		}
	}
	path()
	reference()
	alternateAs(b, batch, reference, path, "pkt", "afpacket")
}

// BenchmarkRawPingPong64 is a 64-byte round trip A -> B -> A between two
// RAW_PACKET QPs (B echoes from a goroutine) against the same round trip
// between plain packet sockets (write(2) and blocking read(2)): the
// rounds' means (x-afpacket) and the median round trips (p50-x-afpacket).
func BenchmarkRawPingPong64(b *testing.B) {
	const rtts = 100
	w := newRawWire(b, netns.Options{}, verbsio.OpenOptions{}, 0)
	qa := w.a.rawQP(b, 16, 256)
	qb := w.b.rawQP(b, 16, 256)
	fa := mustFlow(b, qa, w.a.udpTo(4000, 0))
	defer fa.Destroy()
	fb := mustFlow(b, qb, w.b.udpTo(5000, 0))
	defer fb.Destroy()
	toB := udpFrame(b, w.a, w.b, 4000, 5000, 0, 60-42)
	toA := udpFrame(b, w.b, w.a, 5000, 4000, 0, 60-42)
	copy(w.a.buf, toB)
	copy(w.b.buf, toA)
	const slot = 2048
	w.a.postRecvs(b, qa, slot, 256, slot)
	w.b.postRecvs(b, qb, slot, 256, slot)

	// Every round trip's time, path and reference, for the medians.
	pathRTT := make([]time.Duration, 0, max(b.N, 8*rtts)+2*rtts)
	refRTT := make([]time.Duration, 0, max(b.N, 8*rtts)+2*rtts)

	// echo answers n frames on B's QP, reposting each receive.
	echo := func(n int, done chan<- error) {
		wcs := make([]verbsio.WC, 8)
		wr := []verbsio.SendWR{{Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled | verbsio.SendInline,
			SGL: []verbsio.SGE{w.b.mr.SGE(0, len(toA))}}}
		rwr := []verbsio.RecvWR{{SGL: make([]verbsio.SGE, 1)}}
		deadline := time.Now().Add(30 * time.Second)
		for got := 0; got < n; {
			k, err := w.b.cq.Poll(wcs)
			if err != nil {
				done <- err
				return
			}
			for _, wc := range wcs[:k] {
				if wc.Opcode == verbsio.WCSend {
					continue
				}
				got++
				rwr[0].ID, rwr[0].SGL[0] = wc.ID, w.b.mr.SGE(int(wc.ID), slot)
				qb.PostRecv(rwr)
				if _, err := qb.PostSend(wr); err != nil {
					done <- err
					return
				}
			}
			if k == 0 {
				if time.Now().After(deadline) {
					done <- errTimeout
					return
				}
				idle(w.b.cq)
			}
		}
		done <- nil
	}
	path := func() {
		done := make(chan error, 1)
		go echo(rtts, done)
		wcs := make([]verbsio.WC, 8)
		wr := []verbsio.SendWR{{Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled | verbsio.SendInline,
			SGL: []verbsio.SGE{w.a.mr.SGE(0, len(toB))}}}
		rwr := []verbsio.RecvWR{{SGL: make([]verbsio.SGE, 1)}}
		for i := 0; i < rtts; i++ {
			t0 := time.Now()
			if _, err := qa.PostSend(wr); err != nil {
				b.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for answered := false; !answered; {
				k, err := w.a.cq.Poll(wcs)
				if err != nil {
					b.Fatal(err)
				}
				for _, wc := range wcs[:k] {
					if wc.Opcode != verbsio.WCSend {
						answered = true
						rwr[0].ID, rwr[0].SGL[0] = wc.ID, w.a.mr.SGE(int(wc.ID), slot)
						qa.PostRecv(rwr)
					}
				}
				if k == 0 {
					if time.Now().After(deadline) {
						b.Fatal("no pong in 10 s")
					}
					idle(w.a.cq)
				}
			}
			pathRTT = append(pathRTT, time.Since(t0))
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	// The reference's frames use ports of their own: neither side's QP
	// rule takes them, and the sockets' filters take only them.
	refToB := udpFrame(b, w.a, w.b, 4001, 5001, 0, 60-42)
	refToA := udpFrame(b, w.b, w.a, 5001, 4001, 0, 60-42)
	refA, refB := packetSocket(b, w.a.host, 4001), packetSocket(b, w.b.host, 5001)
	reference := func() {
		done := make(chan struct{})
		go func() {
			buf := make([]byte, 2048)
			for range rtts {
				recvFrame(b, refB, buf)
				sendFrame(b, refB, refToA)
			}
			close(done)
		}()
		buf := make([]byte, 2048)
		for range rtts {
			t0 := time.Now()
			sendFrame(b, refA, refToB)
			recvFrame(b, refA, buf)
			refRTT = append(refRTT, time.Since(t0))
		}
		<-done
	}
	path()
	reference()
	pathRTT, refRTT = pathRTT[:0], refRTT[:0]
	alternateAs(b, rtts, reference, path, "rtt", "afpacket")
	// The rounds' means carry this machine's tails; the median round
	// trip says what a typical one costs.
	slices.Sort(pathRTT)
	slices.Sort(refRTT)
	p50, r50 := pathRTT[len(pathRTT)/2], refRTT[len(refRTT)/2]
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns/rtt")
	b.ReportMetric(float64(r50.Nanoseconds()), "afpacket-p50-ns/rtt")
	b.ReportMetric(float64(r50)/float64(p50), "p50-x-afpacket")
}

// idle is a poll loop's empty turn: sleep in the CQ's wait (the engine's
// file descriptors; it polls for a moment first) a millisecond at most,
// as the reference's blocking read(2) sleeps in the kernel at once. It
// used to spin 100 us before waiting: on a loaded machine with both ends
// in one process that spin took the CPU the other end and the kernel's
// softirq needed, and a round trip took 200-460 us instead of 15-25.
func idle(cq *verbsio.CQ) { cq.Wait(time.Millisecond) }

var errTimeout = errorString("no ping in 30 s")

type errorString string

func (e errorString) Error() string { return string(e) }
