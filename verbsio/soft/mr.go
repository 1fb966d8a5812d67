package soft

import (
	"runtime"
	"time"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// pd is a protection domain.
type pd struct {
	ctx   *Context
	id    uint32
	users int // MRs, QPs, SRQs, AHs
}

var _ verbsio.PDImpl = (*pd)(nil)

// Dealloc implements verbsio.PDImpl.
func (p *pd) Dealloc() error {
	c := p.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.users > 0 {
		return verbsio.Errorf("dealloc_pd", unix.EBUSY, "%d objects still use the protection domain", p.users)
	}
	delete(c.pds, p.id)
	return nil
}

// mr is a registered memory region.
type mr struct {
	ctx    *Context
	pd     *pd
	idx    uint32
	key    uint32
	access verbsio.Access
	addr   uint64
	buf    []byte
	region *region // nil: ordinary memory, peers use process_vm_*
	dm     *dm     // the device memory the region is on, if any
}

var _ verbsio.MRImpl = (*mr)(nil)

func (m *mr) ent() *mrEntry { return m.ctx.ctrl.mr(m.idx) }

// LKey implements verbsio.MRImpl. Keys are index | tag<<14, never 0.
func (m *mr) LKey() uint32 { return m.key }

// RKey implements verbsio.MRImpl; it equals the lkey.
func (m *mr) RKey() uint32 { return m.key }

// RegMR implements verbsio.PDImpl.
func (p *pd) RegMR(buf []byte, access verbsio.Access) (verbsio.MRImpl, error) {
	c := p.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkOpen("reg_mr"); err != nil {
		return nil, err
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	reg := c.regionOf(base, len(buf))
	if reg == nil && access&verbsio.AccessRemoteAtomic != 0 {
		return nil, verbsio.Errorf("reg_mr", unix.EINVAL,
			"REMOTE_ATOMIC needs memory from Context.Alloc: a peer process can update shared memory atomically, not ordinary Go memory")
	}
	var off uint64
	if reg != nil {
		off = uint64(base - reg.base)
	}
	return p.registerLocked(buf, uint64(base), access, reg, off, nil)
}

// registerLocked publishes a memory region over buf, which SGEs and peers
// address from addr, in shared region reg at offset off (or, with reg nil,
// ordinary memory). c.mu is held.
func (p *pd) registerLocked(buf []byte, addr uint64, access verbsio.Access, reg *region, off uint64, d *dm) (*mr, error) {
	c := p.ctx
	idx := -1
	for i := range c.mrs {
		if c.mrs[i].Load() == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, verbsio.Errorf("reg_mr", unix.ENOMEM, "more than %d memory regions", maxMR)
	}
	c.mrTag[idx]++
	if c.mrTag[idx]>>(32-mrIndexBits) != 0 || c.mrTag[idx] == 0 {
		c.mrTag[idx] = 1
	}
	m := &mr{ctx: c, pd: p, idx: uint32(idx), key: c.mrTag[idx]<<mrIndexBits | uint32(idx),
		access: access, addr: addr, buf: buf, region: reg, dm: d}
	e := m.ent()
	e.access.Store(uint32(access))
	e.pd.Store(p.id)
	e.addr.Store(m.addr)
	e.length.Store(uint64(len(buf)))
	if reg != nil {
		e.region.Store(reg.idx + 1)
		e.regOff.Store(off)
		reg.mrs++
	} else {
		e.region.Store(0)
		e.regOff.Store(0)
		c.addRangeLocked(buf)
	}
	if d != nil {
		d.mrs++
	}
	e.key.Store(m.key)
	c.mrs[idx].Store(m)
	p.users++
	return m, nil
}

// Len is the region's length (device-memory regions report it so).
func (m *mr) Len() int { return len(m.buf) }

// Dereg implements verbsio.MRImpl. It waits (boundedly) for peers that are
// inside an access to the region to leave it.
func (m *mr) Dereg() error {
	c := m.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mrs[m.idx].Load() != m {
		return verbsio.Errorf("dereg_mr", unix.EINVAL, "memory region already deregistered")
	}
	e := m.ent()
	e.key.Store(0)
	deadline := time.Now().Add(time.Second)
	for e.users.Load() > 0 && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	// A peer that died inside an access leaves its count behind; after the
	// deadline nobody live can be touching the region.
	e.users.Store(0)
	c.mrs[m.idx].Store(nil)
	if m.region != nil {
		m.region.mrs--
	} else {
		c.removeRangeLocked(m.buf)
	}
	if m.dm != nil {
		m.dm.mrs--
	}
	m.pd.users--
	return nil
}

// lookupLocal returns the local region for key, or nil.
func (c *Context) lookupLocal(key uint32) *mr {
	m := c.mrs[mrIndex(key)].Load()
	if m == nil || m.key != key {
		return nil
	}
	return m
}

// localMR returns the region an lkey of q's own work request names, if it
// is in q's PD and grants need (nothing to read from it, LOCAL_WRITE to
// write into it); nil is LOC_PROT_ERR, as is a range outside it (slice).
func (q *qp) localMR(key uint32, need verbsio.Access) *mr {
	m := q.ctx.lookupLocal(key)
	if m == nil || m.pd != q.pd || m.access&need != need {
		return nil
	}
	return m
}

// localTarget resolves a peer's access to this context's memory, as a
// responder checks it: q's access flags, then the region's key, rights,
// PD and bounds. (On shm the initiator makes the same checks against the
// target's tables: peer.acquire.)
func (q *qp) localTarget(key uint32, va, n uint64, need verbsio.Access) ([]byte, bool) {
	if q.attr.AccessFlags&need != need {
		return nil, false
	}
	m := q.ctx.lookupLocal(key)
	if m == nil || m.pd != q.pd || m.access&need != need || n > 1<<32 {
		return nil, false
	}
	return m.slice(va, uint32(n))
}

// slice returns n bytes at addr inside m, or false if out of bounds.
func (m *mr) slice(addr uint64, n uint32) ([]byte, bool) {
	off := addr - m.addr
	if addr < m.addr || off > uint64(len(m.buf)) || uint64(n) > uint64(len(m.buf))-off {
		return nil, false
	}
	return m.buf[off : off+uint64(n) : off+uint64(n)], true
}
