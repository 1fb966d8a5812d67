package session

import (
	"errors"
	"fmt"

	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
)

// Posting by a send path (package sendpath): a Sender posts a QP's work
// requests, Completions takes a CQ's completions, a Receiver reposts a
// QP's receives, each the path's way; OpenPath prepares them for every QP
// of a session at once.

// Ends are a session's posting by its send path (Spec.Path): a Sender and
// a Receiver for each QP, as far as this side sends and receives, and the
// Completions of the send and the receive CQ.
type Ends struct {
	Senders   []*Sender    // one per QP; nil unless sending
	Receivers []*Receiver  // one per QP; nil unless receiving
	Send      *Completions // the send CQ's (nil unless sending)
	Recv      *Completions // the receive CQ's (nil unless receiving)
}

// OpenPath prepares posting by Spec.Path on every QP: Senders and the send
// CQ's Completions when send is set, Receivers and the receive CQ's
// Completions when recv is set. With burst, the send CQ's completions are
// counted for the first QP's Sender (the burst path runs one QP). The QPs
// must be connected, as Open leaves them. Close releases what it took,
// also after an error.
func (s *Session) OpenPath(send, recv bool) (*Ends, error) {
	p := s.Spec.Path
	e := &Ends{}
	var err error
	if send {
		for _, q := range s.QPs {
			x, err := NewSender(p, s, q)
			if err != nil {
				return e, err
			}
			e.Senders = append(e.Senders, x)
		}
		if e.Send, err = NewCompletions(p, s, s.SendCQ, e.Senders[0]); err != nil {
			return e, err
		}
	}
	if recv {
		if e.Recv, err = NewCompletions(p, s, s.RecvCQ, nil); err != nil {
			return e, err
		}
		for _, q := range s.QPs {
			r, err := NewReceiver(p, s, q)
			if err != nil {
				return e, err
			}
			e.Receivers = append(e.Receivers, r)
		}
	}
	return e, nil
}

// Close gives back what OpenPath took from the provider.
func (e *Ends) Close() {
	for _, x := range e.Senders {
		x.Release()
	}
	for _, r := range e.Receivers {
		r.Release()
	}
	for _, c := range []*Completions{e.Send, e.Recv} {
		if c != nil {
			c.Release()
		}
	}
}

// Sender posts one QP's send requests by a path.
type Sender struct {
	path  sendpath.Path
	s     *Session
	q     *QP
	burst verbsio.QPBurst
	dvq   *dv.QP
	// ids holds, for burst, the IDs of the signaled requests posted and not
	// yet completed, in posting order: cq_poll counts completions, and the
	// sender knows what it asked to be told about.
	ids idFIFO
}

// NewSender returns a Sender for q, which must be connected (RTS): the
// burst family binds to a QP in RTS.
func NewSender(p sendpath.Path, s *Session, q *QP) (*Sender, error) {
	x := &Sender{path: p, s: s, q: q}
	switch p {
	case sendpath.Burst:
		f, st := s.Dev.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilyQPBurst, Version: 1, Object: q.QP})
		if st != verbsio.IntfOK {
			return nil, fmt.Errorf("query the qp_burst family for QP %d on %s: %s", q.Index, s.Dev.Device.Name, st)
		}
		x.burst = f.(verbsio.QPBurst)
		x.ids = newIDFIFO(q.Cap().MaxSendWR + 1)
	case sendpath.DV:
		r, err := dv.InitQP(q.QP)
		if err != nil {
			return nil, fmt.Errorf("take the send ring of QP %d (direct verbs) on %s: %w", q.Index, s.Dev.Device.Name, err)
		}
		x.dvq = r
	}
	return x, nil
}

// Release gives back what the Sender took from the provider.
func (x *Sender) Release() {
	if x.burst != nil {
		x.burst.Release()
		x.burst = nil
	}
}

// Post posts wrs in order and rings the doorbell once. It never
// allocates.
//
// burst stages each single-SGE SEND with SendPending (SendPendingInline
// with SendInline) and flushes once; other requests (the SEND_WITH_IMM
// that ends a stream, or a liveness probe) go through PostSend, after
// what was staged. dv writes each request as a WQE into the send ring
// and rings the doorbell once. Every other path calls PostSend.
func (x *Sender) Post(wrs []verbsio.SendWR) error {
	switch x.path {
	case sendpath.Burst:
		return x.postBurst(wrs)
	case sendpath.DV:
		return x.postDV(wrs)
	}
	_, err := x.q.PostSend(wrs)
	return err
}

func (x *Sender) postBurst(wrs []verbsio.SendWR) error {
	staged := false
	for i := range wrs {
		wr := &wrs[i]
		signaled := wr.Flags&verbsio.SendSignaled != 0
		if wr.Opcode != verbsio.OpSend || len(wr.SGL) != 1 {
			if staged {
				if err := x.burst.SendFlush(); err != nil {
					return err
				}
				staged = false
			}
			if _, err := x.q.PostSend(wrs[i : i+1]); err != nil {
				return err
			}
			if signaled {
				x.ids.push(wr.ID)
			}
			continue
		}
		var flags uint32
		if signaled {
			flags = verbsio.BurstSignaled
		}
		sge := &wr.SGL[0]
		var err error
		if wr.Flags&verbsio.SendInline != 0 {
			b, berr := x.hostBytes(sge)
			if berr != nil {
				return berr
			}
			err = x.burst.SendPendingInline(b, flags)
		} else {
			err = x.burst.SendPending(sge.Addr, sge.Length, sge.LKey, flags)
		}
		if err != nil {
			return err
		}
		if signaled {
			x.ids.push(wr.ID)
		}
		staged = true
	}
	if staged {
		return x.burst.SendFlush()
	}
	return nil
}

var errDVRingFull = errors.New("the send ring has no free slot (more requests outstanding than the QP's depth)")

func (x *Sender) postDV(wrs []verbsio.SendWR) error {
	q := x.dvq
	for i := range wrs {
		wr := &wrs[i]
		w, pos := q.Next()
		if w == nil {
			return errDVRingFull
		}
		*w = dv.SendWQE{
			WRID: wr.ID, Opcode: uint8(wr.Opcode), Flags: uint8(wr.Flags), Imm: wr.Imm,
			RKey: wr.Remote.RKey, RAddr: wr.Remote.Addr, CompareAdd: wr.Atomic.CompareAdd, Swap: wr.Atomic.Swap,
		}
		if wr.Flags&verbsio.SendInline != 0 {
			n := 0
			for j := range wr.SGL {
				b, err := x.hostBytes(&wr.SGL[j])
				if err != nil {
					return err
				}
				n += copy(q.Inline(pos, n+len(b))[n:], b)
			}
			w.InlineLen = uint32(n)
			continue
		}
		w.NumSGE = uint16(len(wr.SGL))
		copy(q.SGEs(pos, len(wr.SGL)), wr.SGL)
	}
	return q.Ring()
}

// hostBytes returns the host memory an SGE of the session's region names,
// for inline copies.
func (x *Sender) hostBytes(sge *verbsio.SGE) ([]byte, error) {
	s := x.s
	if s.Buf == nil {
		return nil, errors.New("inline data must come from host memory, not device memory")
	}
	off := sge.Addr - s.MR.Addr()
	if off > uint64(len(s.Buf)) || uint64(sge.Length) > uint64(len(s.Buf))-off {
		return nil, fmt.Errorf("SGE %#x+%d is outside the message buffers", sge.Addr, sge.Length)
	}
	return s.Buf[off : off+uint64(sge.Length)], nil
}

// Completions takes one CQ's completions by a path: CQ.Poll, or with dv
// the CQ's ring read in place, or with burst on the send CQ of a burst Sender the
// cq_poll family's PollCount.
type Completions struct {
	path  sendpath.Path
	s     *Session
	cq    *verbsio.CQ
	ring  *dv.CQ
	count verbsio.CQPoll
	ids   *idFIFO
	one   [1]verbsio.WC
}

// NewCompletions returns the poller of cq. For burst, sender is the burst
// Sender whose requests complete on cq: the one QP on it (PollCount
// cannot tell QPs apart); nil means cq is polled with CQ.Poll.
func NewCompletions(p sendpath.Path, s *Session, cq *verbsio.CQ, sender *Sender) (*Completions, error) {
	c := &Completions{path: p, s: s, cq: cq}
	switch {
	case p == sendpath.DV:
		r, err := dv.InitCQ(cq)
		if err != nil {
			return nil, fmt.Errorf("take a CQ's ring (direct verbs) on %s: %w", s.Dev.Device.Name, err)
		}
		c.ring = r
	case p == sendpath.Burst && sender != nil:
		f, st := s.Dev.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilyCQPoll, Version: 1, Object: cq})
		if st != verbsio.IntfOK {
			return nil, fmt.Errorf("query the cq_poll family on %s: %s", s.Dev.Device.Name, st)
		}
		c.count = f.(verbsio.CQPoll)
		c.ids = &sender.ids
	}
	return c, nil
}

// Release gives back what the poller took from the provider.
func (c *Completions) Release() {
	if c.count != nil {
		c.count.Release()
		c.count = nil
	}
}

var errCountMismatch = errors.New("cq_poll counted more completions than signaled requests were posted")

// Poll takes up to len(wcs) completions, as CQ.Poll. With PollCount the
// completions carry the IDs of the signaled requests in posting order
// (and status SUCCESS, or the failed completion the family returned);
// while a liveness probe is outstanding CQ.Poll is used instead, so that
// its completion is told from ours. It never allocates.
func (c *Completions) Poll(wcs []verbsio.WC) (int, error) {
	switch {
	case c.ring != nil:
		// Read in place from the ring (dv's CQE layout), the consumer
		// index handed back through the CQ's doorbell record.
		n := 0
		for n < len(wcs) {
			e := c.ring.Next()
			if e == nil {
				break
			}
			e.WC(&wcs[n])
			n++
		}
		return n, c.ring.Err()
	case c.count != nil && len(wcs) > 0 && !c.s.Probing():
		n, err := c.count.PollCount(len(wcs))
		for i := 0; i < n; i++ {
			id, ok := c.ids.pop()
			if !ok {
				return i, errCountMismatch
			}
			wcs[i] = verbsio.WC{ID: id, Status: verbsio.StatusSuccess, Opcode: verbsio.WCSend}
		}
		if err != nil { // only then: errors.As makes its target escape
			var ce *verbsio.CompletionError
			if errors.As(err, &ce) && n < len(wcs) {
				wcs[n] = ce.WC
				c.ids.pop()
				return n + 1, nil
			}
		}
		return n, err
	case c.count != nil:
		n, err := c.cq.Poll(wcs)
		for i := 0; i < n; i++ {
			if wcs[i].ID != ProbeID {
				c.ids.pop()
			}
		}
		return n, err
	}
	return c.cq.Poll(wcs)
}

// Wait polls until a completion other than a liveness probe's arrives
// and returns it, failing on an error status.
func (c *Completions) Wait(w *Waiter, what string) (verbsio.WC, error) {
	w.Begin()
	for {
		n, err := c.Poll(c.one[:])
		if err != nil {
			return verbsio.WC{}, fmt.Errorf("poll the CQ: %w", err)
		}
		if n > 0 {
			wc := c.one[0]
			if wc.Status != verbsio.StatusSuccess {
				return wc, &CompletionError{What: what, WC: wc}
			}
			if wc.ID == ProbeID {
				c.s.ProbeCompleted()
				continue
			}
			return wc, nil
		}
		if err := w.Spin(); err != nil {
			return verbsio.WC{}, err
		}
	}
}

// Receiver reposts one QP's receives by a path: the session's PostRecv,
// or with burst the qp_burst family's RecvBurst.
type Receiver struct {
	q     *QP
	burst verbsio.QPBurst
	sges  []verbsio.SGE
	owed  int
}

// NewReceiver returns the reposter of q's receives.
func NewReceiver(p sendpath.Path, s *Session, q *QP) (*Receiver, error) {
	r := &Receiver{q: q}
	if p != sendpath.Burst {
		return r, nil
	}
	f, st := s.Dev.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilyQPBurst, Version: 1, Object: q.QP})
	if st != verbsio.IntfOK {
		return nil, fmt.Errorf("query the qp_burst family for QP %d on %s: %s", q.Index, s.Dev.Device.Name, st)
	}
	r.burst = f.(verbsio.QPBurst)
	r.sges = make([]verbsio.SGE, RepostBatch)
	for i := range r.sges {
		r.sges[i] = s.MR.SGE(q.RecvOff, s.Region)
	}
	return r, nil
}

// Release gives back what the Receiver took from the provider.
func (r *Receiver) Release() {
	if r.burst != nil {
		r.burst.Release()
		r.burst = nil
	}
}

// Repost posts one receive again after one was consumed.
func (r *Receiver) Repost() error {
	if r.burst == nil {
		return r.q.Repost()
	}
	return r.burst.RecvBurst(r.sges[:1])
}

// RepostLater counts one consumed receive, to be posted again by Flush.
func (r *Receiver) RepostLater() {
	if r.burst == nil {
		r.q.RepostLater()
		return
	}
	r.owed++
}

// Flush posts the receives counted by RepostLater, in batches. It never
// allocates.
func (r *Receiver) Flush() error {
	if r.burst == nil {
		return r.q.Flush()
	}
	for r.owed > 0 {
		k := min(r.owed, len(r.sges))
		if err := r.burst.RecvBurst(r.sges[:k]); err != nil {
			return err
		}
		r.owed -= k
	}
	return nil
}

// idFIFO is a fixed ring of request IDs.
type idFIFO struct {
	ids        []uint64
	head, size int
}

func newIDFIFO(n int) idFIFO { return idFIFO{ids: make([]uint64, max(n, 1))} }

func (f *idFIFO) push(id uint64) {
	if f.size == len(f.ids) { // cannot happen within the QP's depth; keep the newest
		f.head = (f.head + 1) % len(f.ids)
		f.size--
	}
	f.ids[(f.head+f.size)%len(f.ids)] = id
	f.size++
}

func (f *idFIFO) pop() (uint64, bool) {
	if f.size == 0 {
		return 0, false
	}
	id := f.ids[f.head]
	f.head = (f.head + 1) % len(f.ids)
	f.size--
	return id, true
}

// QPFamily asks s's device for family (version 1) bound to q and returns
// it as a T; the zero T when the device has none for q.
func QPFamily[T any](s *Session, family string, q *QP) T {
	var zero T
	f, st := s.Dev.QueryInterface(verbsio.InterfaceQuery{Family: family, Version: 1, Object: q.QP})
	if st != verbsio.IntfOK {
		return zero
	}
	t, ok := f.(T)
	if !ok {
		return zero
	}
	return t
}
