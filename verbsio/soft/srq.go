package soft

import (
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"golang.org/x/sys/unix"
)

var errSRQClosed = &verbsio.Error{Op: "post_srq_recv", Errno: unix.EBADF, Detail: "the SRQ's context is closed"}

// srq is a shared receive queue: a receive ring that the senders of every
// QP attached to it consume.
type srq struct {
	ctx    *Context
	pd     *pd
	idx    uint32
	tag    uint32
	reg    *region
	rq     ring.RQ
	pi     uint32
	maxSGE int
	users  int
}

var _ verbsio.SRQImpl = (*srq)(nil)

// CreateSRQ implements verbsio.PDImpl.
func (p *pd) CreateSRQ(attr verbsio.SRQInitAttr) (verbsio.SRQImpl, error) {
	c := p.ctx
	if attr.MaxWR <= 0 || attr.MaxWR > maxQPWR {
		return nil, verbsio.Errorf("create_srq", unix.EINVAL, "max_wr %d is outside 1..%d", attr.MaxWR, maxQPWR)
	}
	if attr.MaxSGE < 0 || attr.MaxSGE > maxSGEs {
		return nil, verbsio.Errorf("create_srq", unix.EINVAL, "max_sge %d is outside 1..%d", attr.MaxSGE, maxSGEs)
	}
	maxSGE := max(attr.MaxSGE, 1)
	depth := pow2(attr.MaxWR)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkOpen("create_srq"); err != nil {
		return nil, err
	}
	idx := -1
	for i, s := range c.srqs {
		if s == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, verbsio.Errorf("create_srq", unix.ENOMEM, "more than %d shared receive queues", maxSRQ)
	}
	reg, err := c.newRegion("rperf-srq", ring.RQSize(depth, maxSGE), false)
	if err != nil {
		return nil, err
	}
	rq, _ := ring.ViewRQ(reg.seg.Bytes(), depth, maxSGE)
	c.srqTag[idx]++
	if c.srqTag[idx] == 0 {
		c.srqTag[idx] = 1
	}
	s := &srq{ctx: c, pd: p, idx: uint32(idx), tag: c.srqTag[idx], reg: reg, rq: rq, maxSGE: maxSGE}
	rec := c.ctrl.srq(s.idx)
	rec.region.Store(reg.idx + 1)
	rec.depth.Store(uint32(depth))
	rec.maxSGE.Store(uint32(maxSGE))
	rec.pd.Store(p.id)
	rec.tag.Store(s.tag)
	c.srqs[idx] = s
	p.users++
	return s, nil
}

// PostRecv implements verbsio.SRQImpl.
func (s *srq) PostRecv(wrs []verbsio.RecvWR) (int, error) {
	if !s.rq.Valid() {
		return 0, errSRQClosed
	}
	s.ctx.lock()
	n, err := postRecv(s.rq, &s.pi, s.maxSGE, wrs)
	s.ctx.unlock()
	return n, err
}

// Destroy implements verbsio.SRQImpl.
func (s *srq) Destroy() error {
	c := s.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.users > 0 {
		return verbsio.Errorf("destroy_srq", unix.EBUSY, "%d queue pairs still use the SRQ; destroy them first", s.users)
	}
	if c.srqs == nil || c.srqs[s.idx] != s {
		return verbsio.Errorf("destroy_srq", unix.EINVAL, "SRQ already destroyed")
	}
	c.ctrl.srq(s.idx).tag.Store(0)
	c.srqs[s.idx] = nil
	c.dropRegion(s.reg)
	s.pd.users--
	return nil
}
