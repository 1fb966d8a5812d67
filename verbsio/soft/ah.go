package soft

import (
	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// ah is an address handle: the peer context a UD send goes to.
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
	if attr.SGIDIndex != 0 && c.udp == nil {
		return nil, verbsio.Errorf("create_ah", unix.EINVAL, "sgid_index %d: the GID table has one entry (index 0)", attr.SGIDIndex)
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
	var a *ah
	if c.udp != nil {
		var err error
		if a, err = c.createUDPAH(p, attr); err != nil {
			return nil, err
		}
		a.idx = uint32(idx)
	} else {
		peer, err := c.attachPeerLocked(attr.DGID)
		if err != nil {
			e := err.(*verbsio.Error)
			e.Op = "create_ah"
			return nil, e
		}
		a = &ah{ctx: c, pd: p, idx: uint32(idx), peer: peer}
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
