package soft

import (
	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// ah is an address handle: where a UD send goes, as its fabric resolved
// it (newAH).
type ah struct {
	ctx  *Context
	pd   *pd
	idx  uint32
	peer *peer    // shm fabric
	ud   *udpPath // udp fabric
}

var _ verbsio.AHImpl = (*ah)(nil)

// CreateAH implements verbsio.PDImpl.
func (p *pd) CreateAH(attr verbsio.AHAttr) (verbsio.AHImpl, error) {
	c := p.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkOpen("create_ah"); err != nil {
		return nil, err
	}
	if err := c.checkSGID("create_ah", attr.SGIDIndex); err != nil {
		return nil, err
	}
	idx := -1
	for i := range c.ahs {
		if c.ahs[i].Load() == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, verbsio.Errorf("create_ah", unix.ENOMEM, "more than %d address handles", maxAH)
	}
	a := &ah{ctx: c, pd: p, idx: uint32(idx)}
	if err := c.fab.newAH(a, attr); err != nil {
		return nil, err
	}
	c.ahs[idx].Store(a)
	p.users++
	return a, nil
}

// Destroy implements verbsio.AHImpl.
func (a *ah) Destroy() error {
	c := a.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ahs[a.idx].Load() != a {
		return verbsio.Errorf("destroy_ah", unix.EINVAL, "address handle already destroyed")
	}
	a.releaseLocked()
	return nil
}

func (a *ah) releaseLocked() {
	a.ctx.ahs[a.idx].Store(nil)
	if a.peer != nil {
		a.peer.releaseLocked()
	}
	a.pd.users--
}
