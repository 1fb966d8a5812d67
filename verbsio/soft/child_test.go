package soft_test

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/udp"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// childSide is the child's context, QP and two buffers: one from Alloc
// (shared memory) and one of ordinary Go memory.
type childSide struct {
	ctx    *verbsio.Context
	pd     *verbsio.PD
	cq     *verbsio.CQ
	qp     *verbsio.QP
	shared *verbsio.MR
	plain  *verbsio.MR
	gid    verbsio.GID
	lid    uint16
}

func newChildSide(size int) (*childSide, error) {
	dev := os.Getenv("RPERF_SOFT_DEVICE")
	if dev == "" {
		dev = "shm0"
	}
	ctx, err := verbsio.OpenWith(dev, verbsio.OpenOptions{UDPPort: -1})
	if err != nil {
		return nil, err
	}
	s := &childSide{ctx: ctx}
	if s.pd, err = ctx.AllocPD(); err != nil {
		return nil, err
	}
	if s.cq, err = ctx.CreateCQ(1024); err != nil {
		return nil, err
	}
	if s.qp, err = s.pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: verbsio.QPCap{MaxSendWR: 256, MaxRecvWR: 512, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}}); err != nil {
		return nil, err
	}
	buf, err := ctx.Alloc(size)
	if err != nil {
		return nil, err
	}
	if s.shared, err = s.pd.RegMR(buf, verbstest.AllAccess); err != nil {
		return nil, err
	}
	if s.plain, err = s.pd.RegMR(make([]byte, size), verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite|verbsio.AccessRemoteRead); err != nil {
		return nil, err
	}
	pa, err := ctx.QueryPort(1)
	if err != nil {
		return nil, err
	}
	s.lid = pa.LID
	tbl, err := ctx.QueryGIDTable(1)
	if err != nil {
		return nil, err
	}
	s.gid = tbl[0].GID
	for _, g := range tbl {
		if g.GID.IsIPv4Mapped() {
			s.gid = g.GID
			break
		}
	}
	return s, nil
}

func (s *childSide) endpoint(mr *verbsio.MR) verbsio.Endpoint {
	return verbsio.Endpoint{LID: s.lid, QPN: s.qp.QPN(), GID: s.gid, RKey: mr.RKey(), VAddr: mr.Addr(), PSN: 0x777}
}

// runChild runs a child role; its exit status is the process's.
func runChild(role string) int {
	in := bufio.NewReader(os.Stdin)
	line := func() string {
		s, err := in.ReadString('\n')
		if err != nil {
			os.Exit(3)
		}
		return strings.TrimSpace(s)
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	if role == "udpsink" || role == "udpsink-gro" {
		return udpSink(line, role == "udpsink-gro")
	}
	if role == "manaport" {
		return manaPortChild(line)
	}
	size := 1 << 20
	if v := os.Getenv("RPERF_SOFT_SIZE"); v != "" {
		size, _ = strconv.Atoi(v)
	}
	s, err := newChildSide(size)
	if err != nil {
		return fail(err)
	}
	defer s.ctx.Close()
	fmt.Println(formatEndpoint(s.endpoint(s.shared)))
	fmt.Println(formatEndpoint(s.endpoint(s.plain)))
	remote, err := parseEndpoint(line())
	if err != nil {
		return fail(err)
	}
	if err := s.qp.Connect(s.endpoint(s.shared), remote, verbsio.ConnectOptions{Access: verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead | verbsio.AccessRemoteAtomic}); err != nil {
		return fail(err)
	}
	fmt.Println("ready")
	switch role {
	case "udpsink", "udpsink-gro":
		// Handled before the context exists (see runChild).
	case "target":
		// A passive target; on a fabric that needs it, the engine runs in
		// the background, as a NIC would.
		stop := s.ctx.StartProgress()
		defer stop()
		// Passive: the parent reads and writes our memory; we only wait.
		line()
		fmt.Printf("%08x %08x\n", crc32.ChecksumIEEE(s.shared.Buf()), crc32.ChecksumIEEE(s.plain.Buf()))
		line()
	case "sink":
		// Receive SENDs for ever, reposting each buffer.
		for i := 0; i < 512; i++ {
			s.qp.PostRecv([]verbsio.RecvWR{{ID: uint64(i), SGL: []verbsio.SGE{s.shared.SGE(i*64%size, 64)}}})
		}
		wcs := make([]verbsio.WC, 64)
		for {
			n, err := s.cq.Poll(wcs)
			if err != nil {
				return fail(err)
			}
			for _, wc := range wcs[:n] {
				s.qp.PostRecv([]verbsio.RecvWR{{ID: wc.ID, SGL: []verbsio.SGE{s.shared.SGE(int(wc.ID)*64%size, 64)}}})
			}
		}
	case "sendpong":
		// perftest's send_lat responder over the engine, interleaved round
		// by round with a raw UDP echo on a plain socket (the reference).
		raw, port, err := busySocket()
		if err != nil {
			return fail(err)
		}
		defer unix.Close(raw)
		fmt.Printf("raw %d\n", port)
		var rounds, m, msg int
		fmt.Sscanf(line(), "%d %d %d", &rounds, &m, &msg)
		for r := 0; r < rounds; r++ {
			if err := busyPong(raw, m); err != nil {
				return fail(err)
			}
			if err := sendPong(s, m, msg, r == 0); err != nil {
				return fail(err)
			}
		}
		fmt.Println("done")
		line()
	case "pingpong":
		// perftest's write_lat responder, interleaved round by round with a
		// bare shared-memory counter ping-pong over fd 3 (the reference).
		rounds, _ := strconv.Atoi(line())
		m, _ := strconv.Atoi(line())
		msg, _ := strconv.Atoi(line())
		pin(1)
		bare, err := mapBare()
		if err != nil {
			return fail(err)
		}
		for r := 0; r < rounds; r++ {
			if err := barePong(bare, r*m, m); err != nil {
				return fail(err)
			}
			if err := writePong(s, remote, r*m, m, msg); err != nil {
				return fail(err)
			}
		}
		fmt.Println("done")
		line()
	default:
		return fail(fmt.Errorf("unknown role %q", role))
	}
	return 0
}

// pin binds the calling goroutine's thread to cpu (modulo the CPUs
// present), so that two spinning processes do not share a core.
func pin(cpu int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu % runtime.NumCPU())
	unix.SchedSetaffinity(0, &set)
}

func mapBare() ([]byte, error) {
	return unix.Mmap(3, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// barePong answers m rounds of the bare ping-pong: the parent writes
// counter values into the first word, we echo them into the second.
func barePong(mem []byte, base, m int) error {
	ping := (*atomic.Uint64)(unsafe.Pointer(&mem[0]))
	pong := (*atomic.Uint64)(unsafe.Pointer(&mem[64]))
	deadline := time.Now().Add(time.Minute)
	for i := base + 1; i <= base+m; i++ {
		for spins := 0; ping.Load() != uint64(i); spins++ {
			if spins&0xfffff == 0 && time.Now().After(deadline) {
				return fmt.Errorf("bare ping-pong stalled at %d", i)
			}
		}
		pong.Store(uint64(i))
	}
	return nil
}

// writePong is perftest's write_lat loop on the passive side for m
// iterations: wait until the last byte of our buffer holds the iteration
// counter, then write our counter into the peer's buffer.
func writePong(s *childSide, remote verbsio.Endpoint, base, m, size int) error {
	buf := s.shared.Buf()
	wr := []verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{s.shared.SGE(size, size)},
		Remote: verbsio.RemoteAddr{Addr: remote.VAddr, RKey: remote.RKey}}}
	if size <= 64 {
		wr[0].Flags |= verbsio.SendInline
	}
	out := s.shared.Buf()[size : 2*size]
	wcs := make([]verbsio.WC, 16)
	deadline := time.Now().Add(time.Minute)
	for i := base + 1; i <= base+m; i++ {
		want := byte(i)
		for spins := 0; atomicLoadByte(&buf[size-1]) != want; spins++ {
			if spins&0xfffff == 0 && time.Now().After(deadline) {
				return fmt.Errorf("write ping-pong stalled at %d", i)
			}
		}
		out[size-1] = want
		if i%64 == 0 {
			wr[0].Flags |= verbsio.SendSignaled
		}
		if _, err := s.qp.PostSend(wr); err != nil {
			return err
		}
		if wr[0].Flags&verbsio.SendSignaled != 0 {
			wr[0].Flags &^= verbsio.SendSignaled
			if _, err := s.cq.Poll(wcs); err != nil {
				return err
			}
		}
	}
	return nil
}

// udpSink counts the bytes of datagrams it receives, with GRO (as the
// engine receives) when gro is set. On "reset" it starts over (answering
// "ok") and busy polls, as rperf baseline's stream receiver does; on
// "report" it prints the bytes, the datagrams and the time from the first
// to the last, and sleeps between reads again (so that it takes no CPU
// from the engine's runs); on "exit" it ends.
func udpSink(line func() string, gro bool) int {
	c, err := udp.Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	if err == nil && gro {
		err = c.EnableGRO()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	fmt.Printf("%d\n", c.LocalAddr().Port())
	cmds := make(chan string)
	go func() {
		for {
			cmds <- line()
		}
	}()
	var bytes, dgrams int64
	var first, last time.Time
	armed := false
	for {
		in, _ := c.Recv()
		if len(in) == 0 {
			select {
			case cmd := <-cmds:
				switch cmd {
				case "reset":
					bytes, dgrams, first, last = 0, 0, time.Time{}, time.Time{}
					armed = true
					fmt.Println("ok")
				case "report":
					armed = false
					fmt.Printf("%d %d %d\n", bytes, dgrams, last.Sub(first).Nanoseconds())
				default:
					return 0
				}
			default:
			}
			if !armed {
				c.Wait(time.Millisecond)
			}
			continue
		}
		if first.IsZero() {
			first = time.Now()
		}
		for _, d := range in {
			bytes += int64(d.N)
			dgrams++
			if d.Seg > 0 {
				dgrams += int64((d.N - 1) / d.Seg)
			}
		}
		last = time.Now()
	}
}

// busySocket returns a non-blocking UDP socket on 127.0.0.1 and its port.
func busySocket() (int, int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	return fd, sa.(*unix.SockaddrInet4).Port, nil
}

// busyPong echoes m datagrams the way rperf baseline's UDP ping-pong does
// (tests/baseline): recvfrom with MSG_DONTWAIT in a loop, one sendto
// back, both raw system calls (neither can block, so the Go scheduler's
// hand-off is not needed).
func busyPong(fd, m int) error {
	var buf [1 << 16]byte
	var from unix.RawSockaddrAny
	deadline := time.Now().Add(time.Minute)
	for got, spins := 0, 0; got < m; {
		fromLen := uint32(unix.SizeofSockaddrAny)
		n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
			unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(&from)), uintptr(unsafe.Pointer(&fromLen)))
		if e == unix.EAGAIN {
			if spins++; spins&4095 == 0 && time.Now().After(deadline) {
				return fmt.Errorf("raw ping-pong stalled")
			}
			continue
		}
		if e != 0 {
			return e
		}
		if _, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), n,
			0, uintptr(unsafe.Pointer(&from)), uintptr(fromLen)); e != 0 {
			return e
		}
		got++
	}
	return nil
}

// sendPong answers m SENDs with a SEND of msg bytes each, busy polling.
func sendPong(s *childSide, m, msg int, first bool) error {
	recv := []verbsio.RecvWR{{SGL: []verbsio.SGE{s.shared.SGE(0, max(msg, 64))}}}
	if first {
		for i := 0; i < 256; i++ {
			if _, err := s.qp.PostRecv(recv); err != nil {
				return err
			}
		}
	}
	wr := []verbsio.SendWR{{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{s.shared.SGE(4096, msg)}}}
	if msg <= 64 {
		wr[0].Flags |= verbsio.SendInline
	}
	wcs := make([]verbsio.WC, 16)
	deadline := time.Now().Add(time.Minute)
	for got := 0; got < m; {
		n, err := s.cq.Poll(wcs)
		if err != nil {
			return err
		}
		for _, wc := range wcs[:n] {
			if wc.Status != verbsio.StatusSuccess {
				return fmt.Errorf("completion %s", wc.Status)
			}
			if !wc.Opcode.IsRecv() {
				continue
			}
			got++
			if _, err := s.qp.PostRecv(recv); err != nil {
				return err
			}
			wr[0].Flags &^= verbsio.SendSignaled
			if got%64 == 0 {
				wr[0].Flags |= verbsio.SendSignaled
			}
			if _, err := s.qp.PostSend(wr); err != nil {
				return err
			}
		}
		if n == 0 && time.Now().After(deadline) {
			return fmt.Errorf("send ping-pong stalled at %d", got)
		}
		if os.Getenv("RPERF_DEBUG") != "" && time.Since(deadline.Add(-time.Minute)) > 300*time.Millisecond {
			fmt.Fprintf(os.Stderr, "child counters: %v\n", s.ctx.Impl().(interface{ Counters() map[string]uint64 }).Counters())
			deadline = deadline.Add(time.Hour)
		}
	}
	return nil
}

// atomicLoadByte reads a byte that another process writes.
func atomicLoadByte(b *byte) byte {
	p := (*atomic.Uint32)(unsafe.Pointer(uintptr(unsafe.Pointer(b)) &^ 3))
	return byte(p.Load() >> (8 * (uintptr(unsafe.Pointer(b)) & 3)))
}
