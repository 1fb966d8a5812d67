package baseline

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
)

// Socket buffers: the engine's udp fabric asks for the same.
const sockBuf = 8 << 20

// MaxDatagram is the largest UDP payload over IPv4.
const MaxDatagram = 65507

// udpSocket returns a non-blocking UDP socket bound to 127.0.0.1 on a free
// port, with the engine's buffer sizes, and its port.
func udpSocket() (int, int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, fmt.Errorf("udp socket: %w", err)
	}
	for _, opts := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, opts[0], sockBuf) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, opts[1], sockBuf)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, 0, fmt.Errorf("bind a udp socket to 127.0.0.1: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return -1, 0, fmt.Errorf("udp socket: %w", err)
	}
	return fd, sa.(*unix.SockaddrInet4).Port, nil
}

// udpPair returns two sockets on 127.0.0.1 connected to each other; the
// second as a file, for the peer.
func udpPair() (int, *os.File, error) {
	a, pa, err := udpSocket()
	if err != nil {
		return -1, nil, err
	}
	b, pb, err := udpSocket()
	if err != nil {
		unix.Close(a)
		return -1, nil, err
	}
	lo := [4]byte{127, 0, 0, 1}
	if err := unix.Connect(a, &unix.SockaddrInet4{Addr: lo, Port: pb}); err != nil {
		unix.Close(a)
		unix.Close(b)
		return -1, nil, fmt.Errorf("connect a udp socket: %w", err)
	}
	if err := unix.Connect(b, &unix.SockaddrInet4{Addr: lo, Port: pa}); err != nil {
		unix.Close(a)
		unix.Close(b)
		return -1, nil, fmt.Errorf("connect a udp socket: %w", err)
	}
	return a, os.NewFile(uintptr(b), "udp"), nil
}

// send sends buf on a connected socket that cannot block (a datagram that
// finds the send buffer full is refused with EAGAIN, not waited for), so
// the call goes without the Go scheduler's system-call hand-off.
func send(fd int, buf []byte) unix.Errno {
	_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)), unix.MSG_DONTWAIT, 0, 0)
	return e
}

// recv receives one datagram into buf, or EAGAIN when none is there.
func recv(fd int, buf []byte) (int, unix.Errno) {
	n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)), unix.MSG_DONTWAIT, 0, 0)
	return int(n), e
}

// UDPPingPong measures iters round trips of a size-byte datagram between
// this process and a peer process on loopback, both busy polling (after
// [Warmup] round trips not measured). Each sample is one round trip, from
// before the send to after the answer's receive, so the record's
// microsecond figures (divided by its rtt_factor, 2) are one-way.
func UDPPingPong(launch Launcher, size, iters int) (reports.Result, error) {
	if size < 1 || size > MaxDatagram {
		return reports.Result{}, fmt.Errorf("udp ping-pong: size %d: must be 1 to %d bytes", size, MaxDatagram)
	}
	if err := checkCount("udp ping-pong: iterations", iters); err != nil {
		return reports.Result{}, err
	}
	fd, pf, err := udpPair()
	if err != nil {
		return reports.Result{}, fmt.Errorf("udp ping-pong: %w", err)
	}
	defer unix.Close(fd)
	p, err := start(launch, RoleUDPPong, pf)
	pf.Close()
	if err != nil {
		return reports.Result{}, fmt.Errorf("udp ping-pong: %w", err)
	}
	res, err := udpPing(p, fd, size, iters)
	if cerr := p.close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return reports.Result{}, fmt.Errorf("udp ping-pong: %w", err)
	}
	return res, nil
}

func udpPing(p *peer, fd, size, iters int) (reports.Result, error) {
	if err := p.expect("ready", StallTimeout); err != nil {
		return reports.Result{}, err
	}
	rec, err := pings(fd, make([]byte, size), iters)
	if err != nil {
		return reports.Result{}, err
	}
	if e := send(fd, nil); e != 0 { // the end: an empty datagram
		return reports.Result{}, fmt.Errorf("send: %w", e)
	}
	if err := p.expect("done", StallTimeout); err != nil {
		return reports.Result{}, err
	}
	return pingPongResult(NameUDPPingPong, size, iters, rec)
}

// pings sends out on fd Warmup+iters times, each time busy polling for
// an answer of the same length, and records the round trips after
// Warmup.
func pings(fd int, out []byte, iters int) (*reports.Recorder, error) {
	rec, err := reports.NewRecorder(reports.RecorderOptions{Expected: iters})
	if err != nil {
		return nil, err
	}
	in := make([]byte, len(out)+1) // a longer answer is seen as one
	for i := 0; i < Warmup+iters; i++ {
		t0 := clock.Now()
		if e := send(fd, out); e != 0 {
			return nil, fmt.Errorf("send: %w", e)
		}
		for sp := (spinner{}); ; {
			n, e := recv(fd, in)
			if e == 0 {
				if n != len(out) {
					return nil, fmt.Errorf("the answer had %d bytes, not %d", n, len(out))
				}
				break
			}
			if e != unix.EAGAIN {
				return nil, fmt.Errorf("receive: %w", e)
			}
			if !sp.spin() {
				return nil, fmt.Errorf("round trip %d: no answer within %v", i, StallTimeout)
			}
		}
		if i >= Warmup {
			rec.Record(clock.Now() - t0)
		}
	}
	return rec, nil
}

// udpPong echoes every datagram on fd, busy polling, until an empty one.
func udpPong(f *os.File, ctl *bufio.Reader, out io.Writer) error {
	return pong("udp pong", f, ctl, out, make([]byte, MaxDatagram), func(b []byte) (bool, error) { return len(b) == 0, nil })
}

// pong is a ping-pong's peer: it receives into buf on f, busy polling,
// and sends each message back as answer leaves it, until answer says the
// message was the end; then it reports "done" on out and waits for ctl
// to close.
func pong(what string, f *os.File, ctl *bufio.Reader, out io.Writer, buf []byte, answer func(b []byte) (end bool, err error)) error {
	fd := int(f.Fd())
	fmt.Fprintln(out, "ready")
	for sp := (spinner{}); ; {
		n, e := recv(fd, buf)
		switch {
		case e == unix.EAGAIN:
			if !sp.spin() {
				return fmt.Errorf("%s: nothing arrived for %v", what, StallTimeout)
			}
			continue
		case e != 0:
			return fmt.Errorf("%s: receive: %w", what, e)
		}
		end, err := answer(buf[:n])
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if end {
			break
		}
		if e := send(fd, buf[:n]); e != 0 {
			return fmt.Errorf("%s: send: %w", what, e)
		}
		sp = spinner{}
	}
	fmt.Fprintln(out, "done")
	return orders(ctl, func(string) error { return nil })
}

// Stream is a stream's layout: messages of MessageBytes payload bytes,
// cut into packets of SegmentPayload payload bytes that travel with
// SegmentOverhead more bytes each (the headers and trailer of the
// protocol the stream stands in for), at most SegmentsPerSend of them per
// GSO send.
type Stream struct {
	MessageBytes    int
	Messages        int
	SegmentPayload  int
	SegmentOverhead int
}

// StreamSegmentOverhead is what a middle packet of an RDMA WRITE carries
// beside its payload over RoCEv2: the 12-byte base transport header and
// the 4-byte ICRC.
const StreamSegmentOverhead = 16

// segment is a packet's size on the wire (the UDP payload).
func (s Stream) segment() int { return s.SegmentPayload + s.SegmentOverhead }

// perSend is how many packets one GSO send carries: as many as fit in a
// datagram (the kernel refuses more than 64).
func (s Stream) perSend() int { return min(MaxDatagram/s.segment(), 64) }

// check refuses a layout the stream cannot send.
func (s Stream) check() error {
	switch {
	case s.SegmentPayload < 1 || s.SegmentOverhead < 0 || s.segment() > MaxDatagram:
		return fmt.Errorf("udp stream: packets of %d+%d bytes: the payload must be at least 1 byte and the packet at most %d",
			s.SegmentPayload, s.SegmentOverhead, MaxDatagram)
	case s.MessageBytes < s.SegmentPayload || s.MessageBytes%s.SegmentPayload != 0:
		return fmt.Errorf("udp stream: messages of %d bytes: must be a multiple of the %d-byte packet payload", s.MessageBytes, s.SegmentPayload)
	case s.Messages < 2:
		return fmt.Errorf("udp stream: %d messages: at least 2 are needed (the rate runs from the first message's arrival to the last's)", s.Messages)
	}
	return nil
}

// streamWindow is how many messages of distinct memory the sender cycles
// through, as the engine's write-bw does with its 128 outstanding
// messages: one hot buffer would measure the cache, not the path.
const streamWindow = 128

// UDPStream measures a UDP stream with GSO and GRO from a peer process to
// this one on loopback: the peer sends s.Messages messages of the layout
// s, each packet group in one sendmsg that the kernel segments (GSO);
// this process reads with GRO, busy polling, and reports its progress to
// the sender, which keeps at most 64 messages beyond it (loopback has no
// flow control of its own: a sender outruns its receiver and the kernel
// drops what overflows the receive buffer). The rate is the
// receiver's: whole messages from the arrival that completed the first
// to the arrival that completed the last, payload bytes only. Datagrams
// the kernel dropped are lost_messages (in whole messages).
func UDPStream(launch Launcher, s Stream) (reports.Result, error) {
	if err := s.check(); err != nil {
		return reports.Result{}, err
	}
	rfd, rport, err := udpSocket()
	if err != nil {
		return reports.Result{}, fmt.Errorf("udp stream: %w", err)
	}
	defer unix.Close(rfd)
	if err := unix.SetsockoptInt(rfd, unix.IPPROTO_UDP, unix.UDP_GRO, 1); err != nil {
		return reports.Result{}, fmt.Errorf("udp stream: UDP_GRO (Linux 5.0 or later): %w", err)
	}
	sfd, _, err := udpSocket()
	if err != nil {
		return reports.Result{}, fmt.Errorf("udp stream: %w", err)
	}
	sf := os.NewFile(uintptr(sfd), "udp")
	defer sf.Close()
	if err := unix.Connect(sfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: rport}); err != nil {
		return reports.Result{}, fmt.Errorf("udp stream: connect: %w", err)
	}
	if err := unix.SetsockoptInt(sfd, unix.IPPROTO_UDP, unix.UDP_SEGMENT, s.segment()); err != nil {
		return reports.Result{}, fmt.Errorf("udp stream: UDP_SEGMENT (Linux 4.18 or later): %w", err)
	}
	p, err := start(launch, RoleStreamSend, sf)
	if err != nil {
		return reports.Result{}, fmt.Errorf("udp stream: %w", err)
	}
	res, err := streamRecv(p, rfd, s)
	if cerr := p.close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return reports.Result{}, fmt.Errorf("udp stream: %w", err)
	}
	return res, nil
}

// streamIdle is how long the receiver waits for more once the sender has
// sent everything: what has not come by then was dropped.
const streamIdle = 200 * time.Millisecond

func streamRecv(p *peer, fd int, s Stream) (reports.Result, error) {
	if err := p.expect("ready", StallTimeout); err != nil {
		return reports.Result{}, err
	}
	if err := p.send("send %d %d %d %d", s.MessageBytes, s.Messages, s.SegmentPayload, s.SegmentOverhead); err != nil {
		return reports.Result{}, err
	}
	// The sender says "sent" when it has sent everything, or ends with its
	// reason.
	var sent atomic.Bool
	sentErr := make(chan error, 1)
	go func() {
		err := p.expect("sent", 10*StallTimeout)
		sent.Store(true)
		sentErr <- err
	}()
	want := int64(s.MessageBytes) * int64(s.Messages)
	c := streamCount{seg: int64(s.segment()), payload: int64(s.SegmentPayload), msg: int64(s.MessageBytes)}
	buf := make([]byte, 1<<16)
	lastRead := clock.Now()
	var credited int64
	var sp spinner
	for c.total < want {
		n, e := recv(fd, buf)
		if e == unix.EAGAIN {
			if sent.Load() && clock.Now()-lastRead > int64(streamIdle) {
				break
			}
			if !sp.spin() {
				return reports.Result{}, fmt.Errorf("nothing arrived for %v after %d of %d bytes", StallTimeout, c.total, want)
			}
			continue
		}
		if e != 0 {
			return reports.Result{}, fmt.Errorf("receive: %w", e)
		}
		now := clock.Now()
		if err := c.add(n, now); err != nil {
			return reports.Result{}, err
		}
		if c.whole >= credited+streamCredit {
			if err := p.send("got %d", c.whole); err != nil {
				return reports.Result{}, err
			}
			credited = c.whole
		}
		lastRead, sp = now, spinner{}
	}
	if err := <-sentErr; err != nil {
		return reports.Result{}, err
	}
	return c.result(s.Messages)
}

// ErrDropped says that a stream lost so much on the way that too little
// arrived to time: a machine busy elsewhere, which a later run may not
// meet.
var ErrDropped = errors.New("dropped")

// streamCount counts a stream's arrivals in whole messages.
type streamCount struct {
	seg, payload, msg int64 // a packet's bytes and its payload; a message's payload
	total             int64 // payload bytes arrived
	whole             int64 // messages complete
	first, last       int64 // when the first and the last complete message arrived
}

// add counts a read of n bytes (whole packets) at now.
func (c *streamCount) add(n int, now int64) error {
	if int64(n)%c.seg != 0 {
		return fmt.Errorf("a read of %d bytes is not whole %d-byte packets", n, c.seg)
	}
	c.total += int64(n) / c.seg * c.payload
	for (c.whole+1)*c.msg <= c.total {
		c.whole++
		if c.whole == 1 {
			c.first = now
		}
		c.last = now
	}
	return nil
}

// result is the stream's record: the messages completed after the first,
// over the time from its arrival to the last's, and the messages of sent
// that never arrived whole.
func (c *streamCount) result(sent int) (reports.Result, error) {
	if c.whole < 2 || c.last <= c.first {
		return reports.Result{}, fmt.Errorf("%d of %d messages arrived, the last %d ns after the first: too few to time (the kernel dropped the rest: %w)",
			c.whole, sent, c.last-c.first, ErrDropped)
	}
	res, err := reports.NewBandwidthResult(reports.BWSpec{
		Test: NameUDPStream, Bytes: c.msg, Iterations: c.whole - 1, ElapsedNs: c.last - c.first, NoPeak: true,
	})
	if err != nil {
		return reports.Result{}, err
	}
	res.PeakStatus = reports.PeakReceiver
	res.LostMessages = int64(sent) - c.whole
	return res, nil
}

// streamSend sends the stream its order asks for on fd, then says
// "sent"; meanwhile it reads the receiver's credits ("got N": N messages
// have arrived whole).
func streamSend(f *os.File, ctl *bufio.Reader, out io.Writer) error {
	fd := int(f.Fd())
	fmt.Fprintln(out, "ready")
	line, err := ctl.ReadString('\n')
	if err != nil {
		return nil // the measuring process gave up
	}
	var s Stream
	w := strings.Fields(line)
	if len(w) != 5 || w[0] != "send" {
		return fmt.Errorf("udp stream sender: order %q", line)
	}
	for i, p := range []*int{&s.MessageBytes, &s.Messages, &s.SegmentPayload, &s.SegmentOverhead} {
		if *p, err = strconv.Atoi(w[i+1]); err != nil {
			return fmt.Errorf("udp stream sender: order %q", line)
		}
	}
	if err := s.check(); err != nil {
		return err
	}
	cr := newCredits()
	go cr.read(ctl)
	if err := sendStream(fd, s, cr); err != nil {
		return fmt.Errorf("udp stream sender: %w", err)
	}
	fmt.Fprintln(out, "sent")
	<-cr.done
	return nil
}

// Flow control: the receiver reports every streamCredit messages that
// have arrived; the sender keeps at most streamAhead messages beyond the
// last report (4 MiB of payload, half the receive buffer), as the
// engine's window of outstanding WRITEs keeps its receiver from
// overflowing. A report that does not come within streamCreditWait
// (packets lost on the way) lets the sender go on.
const (
	streamCredit     = 8
	streamAhead      = 64
	streamCreditWait = 100 * time.Millisecond
)

// credits is what the sender knows of the receiver's progress.
type credits struct {
	got  atomic.Int64
	more chan struct{} // a report came
	done chan struct{} // the order stream closed
}

func newCredits() *credits {
	return &credits{more: make(chan struct{}, 1), done: make(chan struct{})}
}

// read takes the receiver's reports until ctl closes.
func (c *credits) read(ctl *bufio.Reader) {
	defer close(c.done)
	for {
		line, err := ctl.ReadString('\n')
		if err != nil {
			return
		}
		var n int64
		if _, err := fmt.Sscanf(line, "got %d", &n); err == nil && n > c.got.Load() {
			c.got.Store(n)
			select {
			case c.more <- struct{}{}:
			default:
			}
		}
	}
}

// wait returns when message m may leave.
func (c *credits) wait(m int) {
	for int64(m) >= c.got.Load()+streamAhead {
		select {
		case <-c.more:
		case <-time.After(streamCreditWait):
			c.got.Store(int64(m) - streamAhead + 1) // lost: go on
		}
	}
}

// sendStream sends s's messages, each cut into GSO sends of whole
// packets, within the receiver's credits.
func sendStream(fd int, s Stream, cr *credits) error {
	seg, wire := s.segment(), s.MessageBytes/s.SegmentPayload*s.segment()
	mem := make([]byte, streamWindow*wire)
	for i := range mem {
		mem[i] = byte(i)
	}
	group := s.perSend() * seg
	for m := 0; m < s.Messages; m++ {
		cr.wait(m)
		msg := mem[m%streamWindow*wire:][:wire]
		for off := 0; off < wire; off += group {
			b := msg[off:min(off+group, wire)]
			for {
				_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
				if e == 0 {
					break
				}
				if e != unix.EINTR && e != unix.ENOBUFS && e != unix.EAGAIN {
					return fmt.Errorf("send: %w", e)
				}
			}
		}
	}
	return nil
}
