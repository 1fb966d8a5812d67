package soft

import (
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"golang.org/x/sys/unix"
)

// The accelerated interface families (verbsio.QueryInterface): qp_burst
// stages SENDs straight into the send ring and rings one doorbell per
// flush (one sendmmsg on the udp fabric); cq_poll counts completions
// without copying them out.

// familyVersion is the highest version of each family the engine offers.
var familyVersion = map[string]int{verbsio.FamilyQPBurst: 1, verbsio.FamilyCQPoll: 1}

// QueryInterface implements verbsio.Interfacer.
func (c *Context) QueryInterface(q verbsio.InterfaceQuery) (any, verbsio.InterfaceStatus) {
	if st := verbsio.CheckQuery(q, familyVersion); st != verbsio.IntfOK {
		return nil, st
	}
	checks := q.Flags&verbsio.IntfFlagEnableChecks != 0
	switch q.Family {
	case verbsio.FamilyQPBurst:
		if q.Object == nil {
			return nil, verbsio.IntfOK
		}
		qp, ok := q.Object.(*qp)
		if !ok || qp.ctx != c || (qp.typ != verbsio.QPTypeRC && qp.typ != verbsio.QPTypeUC && qp.typ != verbsio.QPTypeRawPacket) ||
			(qp.state != verbsio.QPStateRTS && qp.state != verbsio.QPStateSQD) {
			return nil, verbsio.IntfInvalObj
		}
		return &qpBurst{q: qp, checks: checks}, verbsio.IntfOK
	default:
		if q.Object == nil {
			return nil, verbsio.IntfOK
		}
		cq, ok := q.Object.(*cq)
		if !ok || cq.ctx != c || cq.cons == nil {
			return nil, verbsio.IntfInvalObj
		}
		return &cqPoll{q: cq}, verbsio.IntfOK
	}
}

var (
	errBurstReleased = &verbsio.Error{Op: "qp_burst", Errno: unix.EINVAL, Detail: "the family was released"}
	errBurstState    = &verbsio.Error{Op: "qp_burst", Errno: unix.EINVAL, Detail: "QP is not in RTS"}
	errBurstLen      = &verbsio.Error{Op: "qp_burst", Errno: unix.EINVAL, Detail: "more SGEs or inline bytes than the QP allows"}
)

// qpBurst is the qp_burst family bound to one QP.
type qpBurst struct {
	q        *qp
	checks   bool
	released bool
	one      [1]ring.SGE
}

var _ verbsio.QPBurst = (*qpBurst)(nil)

func burstFlags(f uint32) uint8 {
	var s verbsio.SendFlags
	if f&verbsio.BurstSignaled != 0 {
		s |= verbsio.SendSignaled
	}
	if f&verbsio.BurstSolicited != 0 {
		s |= verbsio.SendSolicited
	}
	if f&verbsio.BurstFence != 0 {
		s |= verbsio.SendFence
	}
	return uint8(s)
}

// stage writes a SEND WQE at the producer position.
func (b *qpBurst) stage(sges []ring.SGE, inline []byte, flags uint32) error {
	q := b.q
	if b.released {
		return errBurstReleased
	}
	if b.checks && q.state != verbsio.QPStateRTS && q.state != verbsio.QPStateSQD {
		return errBurstState
	}
	if q.sqPI-q.sqDone >= uint32(q.cap.MaxSendWR) {
		return errSQFull
	}
	if len(sges) > q.cap.MaxSendSGE || len(inline) > q.cap.MaxInlineData {
		return errBurstLen
	}
	pos := q.sqPI
	w := q.sq.WQE(pos)
	*w = ring.SendWQE{Opcode: uint8(verbsio.OpSend), Flags: burstFlags(flags), NumSGE: uint16(len(sges))}
	if inline != nil {
		copy(q.sq.Inline(pos, len(inline)), inline)
		w.InlineLen = uint32(len(inline))
		w.Flags |= uint8(verbsio.SendInline)
	} else {
		copy(q.sq.SGEs(pos, len(sges)), sges)
	}
	q.sqPI++
	return nil
}

// SendPending implements verbsio.QPBurst.
func (b *qpBurst) SendPending(addr uint64, length, lkey uint32, flags uint32) error {
	b.q.ctx.lock()
	defer b.q.ctx.unlock()
	b.one[0] = ring.SGE{Addr: addr, Length: length, LKey: lkey}
	return b.stage(b.one[:], nil, flags)
}

// SendPendingInline implements verbsio.QPBurst.
func (b *qpBurst) SendPendingInline(buf []byte, flags uint32) error {
	b.q.ctx.lock()
	defer b.q.ctx.unlock()
	if buf == nil {
		buf = []byte{}
	}
	return b.stage(nil, buf, flags)
}

// SendPendingSGList implements verbsio.QPBurst.
func (b *qpBurst) SendPendingSGList(sges []verbsio.SGE, flags uint32) error {
	b.q.ctx.lock()
	defer b.q.ctx.unlock()
	return b.stage(sgesAsRing(sges), nil, flags)
}

// SendFlush implements verbsio.QPBurst: the doorbell.
func (b *qpBurst) SendFlush() error {
	if b.released {
		return errBurstReleased
	}
	b.q.ctx.lock()
	b.q.execute()
	b.q.ctx.unlock()
	return nil
}

// SendBurst implements verbsio.QPBurst.
func (b *qpBurst) SendBurst(msgs []verbsio.SGE, flags uint32) error {
	b.q.ctx.lock()
	rs := sgesAsRing(msgs)
	var err error
	for i := range rs {
		if err = b.stage(rs[i:i+1], nil, flags); err != nil {
			break
		}
	}
	b.q.execute()
	b.q.ctx.unlock()
	return err
}

// RecvBurst implements verbsio.QPBurst.
func (b *qpBurst) RecvBurst(msgs []verbsio.SGE) error {
	q := b.q
	if b.released {
		return errBurstReleased
	}
	if q.srq != nil {
		return errRecvOnSRQQP
	}
	q.ctx.lock()
	defer q.ctx.unlock()
	rs := sgesAsRing(msgs)
	n := 0
	ci := q.rq.Header().CI.Load()
	for i := range rs {
		if q.rqPI-ci >= q.rq.Depth() {
			break
		}
		q.rq.Write(q.rqPI, 0, rs[i:i+1])
		q.rqPI++
		n++
	}
	if n > 0 {
		q.rq.Publish(q.rqPI)
	}
	if n < len(rs) {
		return errRQFull
	}
	return nil
}

// Release implements verbsio.QPBurst.
func (b *qpBurst) Release() error { b.released = true; return nil }

// cqPoll is the cq_poll family bound to one CQ.
type cqPoll struct {
	q        *cq
	released bool
	e        ring.CQE
	wc       verbsio.WC
}

var _ verbsio.CQPoll = (*cqPoll)(nil)

var errPollReleased = &verbsio.Error{Op: "cq_poll", Errno: unix.EINVAL, Detail: "the family was released"}

// PollCount implements verbsio.CQPoll.
func (p *cqPoll) PollCount(max int) (int, error) {
	if p.released {
		return 0, errPollReleased
	}
	q := p.q
	c := q.ctx
	c.lock()
	defer c.unlock()
	q.reap()
	q.drive()
	n := 0
	for n < max {
		st, pid := q.cons.Poll(&p.e)
		if st == ring.Empty {
			break
		}
		if st == ring.Claimed {
			q.checkClaimed(pid)
			break
		}
		q.deliver(&p.e, &p.wc)
		if p.wc.Status != verbsio.StatusSuccess {
			return n, &verbsio.CompletionError{WC: p.wc}
		}
		n++
	}
	return n, q.ringError()
}

// PollLength implements verbsio.CQPoll.
func (p *cqPoll) PollLength() (uint32, error) {
	if p.released {
		return 0, errPollReleased
	}
	q := p.q
	c := q.ctx
	c.lock()
	defer c.unlock()
	q.reap()
	q.drive()
	st, _ := q.cons.Poll(&p.e)
	if st != ring.Ready {
		return 0, q.ringError()
	}
	q.deliver(&p.e, &p.wc)
	if p.wc.Status != verbsio.StatusSuccess {
		return 0, &verbsio.CompletionError{WC: p.wc}
	}
	return p.wc.ByteLen, nil
}

// Release implements verbsio.CQPoll.
func (p *cqPoll) Release() error { p.released = true; return nil }
