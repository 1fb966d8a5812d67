package soft

import (
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/udp"
	"golang.org/x/sys/unix"
)

// receive is the engine's receive side and timer wheel: it sends what the
// previous call left queued, reads what has arrived, acts on it, queues the
// acknowledgements and responses it owes and retransmits what timed out.
//
// What it owes goes out with the next doorbell (a PostSend flushes it in
// the same sendmmsg as its own packets) or at the next progress call;
// callers that are about to sleep or return from a blocking wait call
// flush first, and so does receive itself while background progress runs. A busy-polling
// ping-pong thus sends its acknowledgement and its next SEND in one system
// call, and in one datagram (see flush).
func (f *udpFabric) receive() { f.receiveOn(f.inUse.Load()) }

// receiveOn is receive reading the sockets of the GIDs whose bits are in
// used (gidBit).
func (f *udpFabric) receiveOn(used uint64) {
	f.flush()
	for i, conn := range f.conns {
		if conn == nil || used&gidBit(i) == 0 {
			continue
		}
		for round := 0; round < 4; round++ {
			in, err := conn.Recv()
			if err != nil || len(in) == 0 {
				break
			}
			for i := range in {
				d := &in[i]
				if d.Seg == 0 || d.Seg >= d.N {
					f.input(conn, d.Buf[:d.N], d.From)
					continue
				}
				for off := 0; off < d.N; off += d.Seg {
					f.input(conn, d.Buf[off:min(off+d.Seg, d.N)], d.From)
				}
			}
			if !conn.More() {
				break // another read now would likely find nothing
			}
		}
	}
	if len(f.active) > 0 {
		f.tickActive()
	}
	// While background progress runs, a foreground poll that took the
	// input sends what it owes at once: the background round sleeps until
	// input or its timer, and would hold the peer's acknowledgement that
	// long (up to 20 ms: past a short QP timeout).
	if f.c.bg.on {
		f.flush()
	}
}

// input handles one datagram, b, from from.
func (f *udpFabric) input(conn *udp.Conn, b []byte, from netip.AddrPort) {
	p := &f.rx
	if err := p.Decode(b); err != nil {
		f.cnt.malformed.Add(1)
		return
	}
	if !f.rxCRC.verify(conn.LocalAddr(), from, b) {
		f.cnt.icrcErrors.Add(1)
		return
	}
	if p.BTH.PKey != roce.DefaultPKey && p.BTH.PKey != 0x7fff {
		f.cnt.badPKey.Add(1)
		return
	}
	q := f.c.qps[qpIndex(p.BTH.DestQP)].Load()
	if q == nil || q.qpn != p.BTH.DestQP || q.state == verbsio.QPStateReset {
		if p.BTH.DestQP == 1 { // QP1 (no QP of the engine has number 1; see udp_mad.go)
			f.inputMAD(conn, p, from)
			return
		}
		f.cnt.unknownQP.Add(1)
		return
	}
	f.cnt.received.Add(1)
	u := q.t.(*udpQP)
	if p.BTH.Opcode.IsResponse() {
		u.onResponse(p, from)
	} else {
		u.onRequest(p, from)
	}
}

// rxICRC checks received packets' ICRCs, keeping the ICRC's part over
// the IP and UDP headers of the last path it saw (a QP's peer sends every
// packet on one path).
type rxICRC struct {
	local, from netip.AddrPort
	v4          bool
	pre4        roce.IPv4Prefix // DF set, as the engine and Linux rxe send
	pre6        roce.IPv6Prefix
}

// verify checks the ICRC of packet b from from to local. For IPv4 the
// identification field is not visible to a UDP socket; SolveID finds it
// (see internal/roce).
func (r *rxICRC) verify(local, from netip.AddrPort, b []byte) bool {
	if local != r.local || from != r.from {
		r.local, r.from = local, from
		r.v4 = from.Addr().Unmap().Is4()
		if r.v4 {
			path := roce.IPv4Path{Src: from.Addr().Unmap().As4(), Dst: local.Addr().Unmap().As4(),
				SrcPort: from.Port(), DstPort: local.Port(), DontFragment: true}
			r.pre4 = path.Prefix()
		} else {
			path := roce.IPv6Path{Src: from.Addr().As16(), Dst: local.Addr().As16(), SrcPort: from.Port(), DstPort: local.Port()}
			r.pre6 = path.Prefix()
		}
	}
	if r.v4 {
		if _, ok := r.pre4.SolveID(b); ok {
			return true
		}
		// A sender that does not set DF.
		path := roce.IPv4Path{Src: from.Addr().Unmap().As4(), Dst: local.Addr().Unmap().As4(),
			SrcPort: from.Port(), DstPort: local.Port()}
		_, ok := path.SolveID(b)
		return ok
	}
	if len(b) < roce.MinPacketLen {
		return false
	}
	crc := roce.ICRCUpdate(r.pre6.Begin(len(b), b[:roce.BTHLen]), b[roce.BTHLen:len(b)-roce.ICRCLen])
	return crc == roce.StoredICRC(b)
}

// clockEvery is how many progress rounds in a row may leave the clock
// unread while only retransmission and probe timers run (milliseconds
// long): a busy poll round is a few hundred nanoseconds, and a clock read
// would add a tenth to each. Pacing and RNR timers (microseconds) read it
// every round, and so does the first round after a sleep (CQ.Wait's,
// background progress's), which may be a timer's wake-up.
const clockEvery = 16

// tickActive runs the timers of the active QPs: READ responses owed every
// round, the clock read when a QP's timer needs it (see clockEvery).
func (f *udpFabric) tickActive() {
	f.rounds++
	due := f.rounds%clockEvery == 0
	var t int64
	for i := 0; i < len(f.active); i++ {
		u := f.active[i]
		if due || u.paceAt != 0 || u.rnrUntil != 0 {
			if t == 0 {
				t = now()
			}
			u.tick(t)
		} else if u.rdN > 0 {
			u.sendReadResponses()
		}
	}
	f.prune()
}

// activate puts u on the list of QPs the timer wheel visits.
func (f *udpFabric) activate(u *udpQP) {
	if !u.active {
		u.active = true
		f.active = append(f.active, u)
	}
}

// forget takes a destroyed QP off the timer wheel and the acknowledgement
// queue: its rings and buffers are gone, and nothing may drive it again.
func (f *udpFabric) forget(u *udpQP) {
	f.active = remove(f.active, u)
	f.ackQ = remove(f.ackQ, u)
	*u = udpQP{f: f, q: u.q}
}

// prune drops QPs without transport work from the active list.
func (f *udpFabric) prune() {
	n := 0
	for _, u := range f.active {
		if u.busy() {
			f.active[n] = u
			n++
		} else {
			u.active = false
		}
	}
	clear(f.active[n:])
	f.active = f.active[:n]
}

// nextDeadline is how long until the earliest transport timer fires, or -1.
func (f *udpFabric) nextDeadline() time.Duration {
	best := time.Duration(-1)
	t := now()
	for _, u := range f.active {
		for _, d := range [...]int64{u.deadline, u.paceAt, u.rnrUntil} {
			if d == 0 {
				continue
			}
			w := time.Duration(d - t)
			if w < 0 {
				w = 0
			}
			if best < 0 || w < best {
				best = w
			}
		}
	}
	return best
}

// waitInput blocks until a socket is readable or timeout passes.
func (f *udpFabric) waitInput(timeout time.Duration) {
	var fds [8]unix.PollFd
	n := f.pollFDs(fds[:])
	ts := unix.NsecToTimespec(int64(timeout))
	unix.Ppoll(fds[:n], &ts, nil)
}

// pollFDs fills fds with the sockets in use, waiting for input, and
// returns how many it filled.
func (f *udpFabric) pollFDs(fds []unix.PollFd) int { return f.pollFDsOn(fds, f.inUse.Load()) }

// pollFDsOn is pollFDs for the sockets of the GIDs in used.
func (f *udpFabric) pollFDsOn(fds []unix.PollFd, used uint64) int {
	n := 0
	for i, c := range f.conns {
		if c != nil && used&gidBit(i) != 0 && n < len(fds) {
			fds[n] = unix.PollFd{Fd: int32(c.FD()), Events: unix.POLLIN}
			n++
		}
	}
	return n
}

// sendAcks queues the coalesced acknowledgements owed (flush calls it).
func (f *udpFabric) sendAcks() {
	for _, u := range f.ackQ {
		if u.ackDue {
			u.ackDue = false
			u.sendAck(roce.ACKSyndrome(0x1f), u.ePSN.Add(-1))
		}
	}
	clear(f.ackQ)
	f.ackQ = f.ackQ[:0]
}

// wait is CQ.Wait on the udp fabric: progress until the CQ holds a
// completion, sleeping in ppoll on the sockets between packets and timers.
func (f *udpFabric) wait(q *cq, deadline int64) error {
	c := f.c
	step := func() (bool, time.Duration) {
		c.lock()
		defer c.unlock()
		f.receive()
		if q.ready() {
			// A blocking waiter may go on to anything but a post: what
			// it owes the peer leaves now.
			f.flush()
			return true, 0
		}
		return false, f.nextDeadline()
	}
	for i := 0; i < 200; i++ {
		if ok, _ := step(); ok {
			return nil
		}
	}
	return sleepUntilReady(deadline, step, func(sleep time.Duration) {
		c.lock()
		f.flush()
		f.rounds = clockEvery - 1 // the round after the sleep reads the clock: it may be a timer's wake-up
		c.unlock()
		f.waitInput(sleep)
	})
}

// sleepUntilReady is the sleeping half of a packet fabric's CQ.Wait:
// step makes progress and reports whether the CQ holds a completion and
// when the fabric's next timer is due (negative: none); between steps,
// sleep waits for input for at most 20 ms, never past the deadline or
// that timer. It returns verbsio.ErrTimeout once the deadline passes.
func sleepUntilReady(deadline int64, step func() (bool, time.Duration), sleep func(time.Duration)) error {
	for {
		ok, next := step()
		if ok {
			return nil
		}
		left := time.Duration(deadline - now())
		if left <= 0 {
			return verbsio.ErrTimeout
		}
		d := min(left, 20*time.Millisecond)
		if next >= 0 && next < d {
			d = max(next, time.Microsecond)
		}
		sleep(d)
	}
}

// counters are the transport's counters and its sockets' drops and send
// errors.
func (f *udpFabric) counters() map[string]uint64 {
	vals := unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(f.cnt)), len(counterNames))
	m := make(map[string]uint64, len(counterNames)+2)
	for i, name := range counterNames {
		m[name] = vals[i].Load()
	}
	m["qp1_drops"] = f.madDrops.Load()
	f.sendSockets(func(conn *udp.Conn) {
		m["socket_drops"] += conn.Dropped.Load()
		m["socket_send_errors"] += conn.SendErrors.Load()
	})
	return m
}

// progress is the receive side and the timers, which every poll runs.
func (f *udpFabric) progress(*cq) { f.receive() }

// round is one round of background progress (Context.StartProgress).
// It also reads the sockets QP1 listens on (udp_mad.go).
func (f *udpFabric) round(fds []unix.PollFd) (int, time.Duration) {
	used := f.inUse.Load() | f.madUse.Load()
	f.rounds = clockEvery - 1 // a round follows a sleep: it reads the clock (tickActive)
	f.receiveOn(used)
	f.flush()
	wait := 20 * time.Millisecond
	if d := f.nextDeadline(); d >= 0 && d < wait {
		wait = max(d, 10*time.Microsecond)
	}
	return f.pollFDsOn(fds, used), wait
}
