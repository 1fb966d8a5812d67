package soft

import (
	"errors"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/afpacket"
	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"golang.org/x/sys/unix"
)

// The raw fabric's port I/O: the receive side (ring, steering, delivery
// into receive queues), the socket filter, and the transmit batch that a
// doorbell fills and one system call sends.

// receive takes the frames in the ring, steers each and delivers it to
// every QP its rules name, then resumes paced QPs whose time came.
func (f *rawFabric) receive() {
	if f.rx == nil {
		return
	}
	f.refilter()
	for i := 0; i < rawRecvBatch; i++ {
		fr, ok := f.rx.Next()
		if !ok {
			break
		}
		f.cnt.rxFrames.Add(1)
		f.cnt.rxBytes.Add(uint64(fr.Len))
		switch fr.TSKind {
		case afpacket.TSHardware:
			f.cnt.rxTSHardware.Add(1)
		case afpacket.TSSoftware:
			f.cnt.rxTSSoftware.Add(1)
		default:
			f.cnt.rxTSRing.Add(1)
		}
		if fr.Len > len(fr.Data) {
			f.cnt.rxTruncated.Add(1) // larger than a ring slot: never a whole frame
			continue
		}
		n, v := f.table.Match(fr.Data, fr.Tag, f.hits[:])
		switch v {
		case netpkt.Dropped:
			f.cnt.rxSteerDropped.Add(1)
		case netpkt.Unmatched:
			if n == 0 {
				f.cnt.rxUnmatched.Add(1)
			}
		}
		if n == 0 {
			continue
		}
		frame := fr.Data
		if fr.Tag.Present {
			frame = f.tagBuf[:netpkt.InsertTag(f.tagBuf, fr.Data, fr.Tag)]
		}
		csumOK := netpkt.VerifyChecksums(frame, netpkt.Tag{})
		if csumOK {
			f.cnt.rxCsumOK.Add(1)
		}
		for _, h := range f.hits[:min(n, len(f.hits))] {
			f.deliver(frame, h, uint64(fr.TS), csumOK)
		}
	}
	if len(f.active) > 0 {
		f.resumePaced()
	}
}

// deliver places a frame into the next receive WQE of the QP a rule
// named, and completes it.
func (f *rawFabric) deliver(frame []byte, h netpkt.Hit, ts uint64, csumOK bool) {
	q := f.c.qps[qpIndex(h.Target)].Load()
	if q == nil || q.qpn != h.Target || !receiving(q.rec.state.Load()) {
		return // destroyed or not ready: as a NIC drops for a QP not in RTR
	}
	rq := q.rq
	if q.srq != nil {
		rq = q.srq.rq
	}
	id, nsge, ok := rq.Claim(f.rsges[:])
	if !ok {
		f.cnt.rxNoWQE.Add(1) // raw QPs have no RNR: the frame is dropped
		return
	}
	e := ring.CQE{WRID: id, Opcode: uint8(verbsio.WCRecv), QPN: q.qpn, ByteLen: uint32(len(frame)), FlowTag: h.Tag}
	e.Status = uint8(scatterFrame(q, f.rsges[:nsge], frame))
	if csumOK {
		e.Flags = uint8(verbsio.WCIPCsumOK)
	}
	if q.recvCQ.ring.Header().Flags.Load()&ring.FlagTimestamp != 0 && ts != 0 {
		e.Timestamp = ts // the kernel's stamp of the frame (rx_ts_* counts its kind)
	}
	q.recvCQ.ring.Push(&e, f.c.pid)
	f.cnt.rxDelivered.Add(1)
}

// scatterFrame copies a frame into a receive WQE's buffers, checking each
// buffer's key, bounds, LOCAL_WRITE and PD.
func scatterFrame(q *qp, sges []ring.SGE, b []byte) verbsio.Status {
	for i := range sges {
		if len(b) == 0 {
			break
		}
		s := &sges[i]
		m := q.localMR(s.LKey, verbsio.AccessLocalWrite)
		if m == nil {
			return verbsio.StatusLocProtErr
		}
		dst, ok := m.slice(s.Addr, s.Length)
		if !ok {
			return verbsio.StatusLocProtErr
		}
		b = b[copy(dst, b):]
	}
	if len(b) > 0 {
		return verbsio.StatusLocLenErr
	}
	return verbsio.StatusSuccess
}

// widen installs the pass-everything filter before CreateFlow returns, so
// a rule's frames flow from then on; refilter narrows it at the next
// progress round. It runs on the setup path (any goroutine).
func (f *rawFabric) widen() error {
	f.filter.gen.Add(1)
	if f.rx == nil {
		return nil
	}
	f.filter.mu.Lock()
	defer f.filter.mu.Unlock()
	if f.filter.wide {
		return nil
	}
	if err := f.rx.SetFilter(nil); err != nil {
		return verbsio.Errorf("create_flow", unix.EIO, "%s: %v", f.c.info.Name, err)
	}
	f.filter.wide = true
	f.filter.mode.Store(uint32(netpkt.FilterAll))
	return nil
}

// narrowed records a removal: the filter may pass frames of the removed
// rule until the next round, which steering drops (Table.Match).
func (f *rawFabric) narrowed() { f.filter.gen.Add(1) }

// refilter compiles the table into the socket filter when rules changed
// since the last compilation. A rule added meanwhile bumps the generation
// before it widens, so a compilation that misses it is not installed.
func (f *rawFabric) refilter() {
	g := f.filter.gen.Load()
	if g == f.filter.compiled {
		return
	}
	f.filter.mu.Lock()
	defer f.filter.mu.Unlock()
	if g != f.filter.gen.Load() || g == f.filter.compiled {
		return
	}
	prog, mode := f.table.Filter()
	if err := f.rx.SetFilter(prog); err != nil {
		return // keep the wider filter: steering decides either way
	}
	f.cnt.filterCompiles.Add(1)
	f.filter.compiled, f.filter.wide = g, mode == netpkt.FilterAll
	f.filter.mode.Store(uint32(mode))
}

// queue adds a frame to the transmit batch, sending the batch first when
// it is full.
func (f *rawFabric) queue(b []byte) error {
	if len(f.frames) == cap(f.frames) {
		if err := f.sendBatch(); err != nil {
			return err
		}
	}
	f.frames = append(f.frames, b)
	f.cnt.txBytes.Add(uint64(len(b)))
	return nil
}

// room returns n bytes of the arena for a frame the engine builds,
// sending the batch first when the arena or the batch is full (so that
// queueing the frame afterwards never sends, and reuses, the arena).
func (f *rawFabric) room(n int) ([]byte, error) {
	if f.off+n > len(f.arena) || len(f.frames) == cap(f.frames) {
		if err := f.sendBatch(); err != nil {
			return nil, err
		}
	}
	b := f.arena[f.off : f.off+n : f.off+n]
	f.off += n
	return b, nil
}

// sendBatch hands the batch to the kernel: one sendmmsg (send for one).
// A failure is kept in txErr for the doorbell's completions.
func (f *rawFabric) sendBatch() error {
	if len(f.frames) == 0 {
		return nil
	}
	if f.stampTX {
		f.txStamp = ring.Clock()
	}
	n, err := f.tx.Send(f.frames)
	f.cnt.txFrames.Add(uint64(n))
	if err != nil {
		f.cnt.txErrors.Add(uint64(len(f.frames) - n))
		f.txErr = err
	}
	clear(f.frames)
	f.frames = f.frames[:0]
	f.off = 0
	return err
}

// errnoOf is the errno an I/O error carries, EIO when none.
func errnoOf(err error) uint32 {
	var e unix.Errno
	if errors.As(err, &e) {
		return uint32(e)
	}
	return uint32(unix.EIO)
}

// activate puts a QP the pacer holds on the list progress visits.
func (f *rawFabric) activate(r *rawQP) {
	if !r.active {
		r.active = true
		f.active = append(f.active, r)
	}
}

// resumePaced sends for the held QPs whose time came.
func (f *rawFabric) resumePaced() {
	t := now()
	n := 0
	for _, r := range f.active {
		if r.paceAt != 0 && t >= r.paceAt {
			r.paceAt, r.paceDue = 0, r.paceAt
			r.execute()
		}
		if r.paceAt != 0 {
			f.active[n] = r
			n++
		} else {
			r.active = false
		}
	}
	clear(f.active[n:])
	f.active = f.active[:n]
}

// nextDeadline is how long until the earliest pacing hold ends, or -1.
func (f *rawFabric) nextDeadline() time.Duration {
	best := time.Duration(-1)
	t := now()
	for _, r := range f.active {
		if r.paceAt != 0 {
			if w := max(time.Duration(r.paceAt-t), 0); best < 0 || w < best {
				best = w
			}
		}
	}
	return best
}

// progress is the receive side and the pacer, which every poll runs.
func (f *rawFabric) progress(*cq) { f.receive() }

// wait is CQ.Wait on the raw fabric: progress until the CQ holds a
// completion, sleeping in ppoll on the receive ring between frames and
// pacing deadlines. It does not spin first: with both ends of a
// ping-pong on two loaded CPUs, any spin takes the CPU the peer and the
// kernel's softirq need. In one run at load average 10 (docs/raw.md) the round
// trip's p50 was 11.2-12.1 us with 2 us of polling before the sleep and
// 7.4 us without; 200 polls (20-40 us) had tripled it.
func (f *rawFabric) wait(q *cq, deadline int64) error {
	c := f.c
	step := func() (bool, time.Duration) {
		c.lock()
		defer c.unlock()
		f.receive()
		return q.ready(), f.nextDeadline()
	}
	return sleepUntilReady(deadline, step, func(sleep time.Duration) {
		var fds [1]unix.PollFd
		n := f.pollFDs(fds[:])
		ts := unix.NsecToTimespec(int64(sleep))
		unix.Ppoll(fds[:n], &ts, nil)
	})
}

// pollFDs fills fds with the receive ring's socket.
func (f *rawFabric) pollFDs(fds []unix.PollFd) int {
	if f.rx == nil || len(fds) == 0 {
		return 0
	}
	fds[0] = unix.PollFd{Fd: int32(f.rx.FD()), Events: unix.POLLIN}
	return 1
}

// round is one round of background progress (Context.StartProgress).
func (f *rawFabric) round(fds []unix.PollFd) (int, time.Duration) {
	f.receive()
	wait := 20 * time.Millisecond
	if d := f.nextDeadline(); d >= 0 && d < wait {
		wait = max(d, 10*time.Microsecond)
	}
	return f.pollFDs(fds), wait
}
