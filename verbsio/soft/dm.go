package soft

import (
	"sort"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// Device memory: a small region the engine owns (DMSize bytes per
// context, a shared segment so peers on the shm fabric reach it as they
// reach any region), handed out in aligned pieces, reached with CopyTo and
// CopyFrom at 4-byte aligned offsets, and registered zero-based. On this
// engine it is ordinary memory; what it models is the verbs contract, so
// that code written for on-NIC memory runs and its latency can be measured
// against host memory honestly.

// DMSize is the device memory of a built-in context.
const DMSize = 256 << 10

type dmPool struct {
	reg  *region
	used []dmSpan // sorted by off
}

type dmSpan struct{ off, n int }

// dm is one device memory allocation.
type dm struct {
	ctx   *Context
	off   int
	n     int
	mrs   int
	freed bool
}

var _ verbsio.DMImpl = (*dm)(nil)

// AllocDM implements verbsio.DMProvider.
func (c *Context) AllocDM(length int, logAlign uint) (verbsio.DMImpl, error) {
	if logAlign > 16 {
		return nil, verbsio.Errorf("alloc_dm", unix.EINVAL, "alignment 2^%d is above 64 KiB", logAlign)
	}
	n := (length + 3) &^ 3
	align := max(1<<logAlign, 8)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkOpen("alloc_dm"); err != nil {
		return nil, err
	}
	if c.dmPool.reg == nil {
		reg, err := c.newRegion("rperf-dm", DMSize, false)
		if err != nil {
			return nil, err
		}
		c.dmPool.reg = reg
	}
	p := &c.dmPool
	off, inUse := 0, 0
	for _, s := range p.used {
		inUse += s.n
	}
	found := -1
	for i := 0; i <= len(p.used); i++ {
		off = (off + align - 1) &^ (align - 1)
		end := DMSize
		if i < len(p.used) {
			end = p.used[i].off
		}
		if off+n <= end {
			found = off
			break
		}
		if i < len(p.used) {
			off = p.used[i].off + p.used[i].n
		}
	}
	if found < 0 {
		return nil, verbsio.Errorf("alloc_dm", unix.ENOMEM,
			"device memory exhausted: %d bytes asked, %d of %d in use (rdiag info shows max_dm_size)", length, inUse, DMSize)
	}
	p.used = append(p.used, dmSpan{found, n})
	sort.Slice(p.used, func(i, j int) bool { return p.used[i].off < p.used[j].off })
	return &dm{ctx: c, off: found, n: n}, nil
}

// Len implements verbsio.DMImpl.
func (d *dm) Len() int { return d.n }

func (d *dm) bytes() []byte { return d.ctx.dmPool.reg.seg.Bytes()[d.off : d.off+d.n] }

func (d *dm) check(op string, off, n int) error {
	if d.freed {
		return verbsio.Errorf(op, unix.EINVAL, "device memory was freed")
	}
	if off%4 != 0 || n%4 != 0 {
		return verbsio.Errorf(op, unix.EINVAL, "offset %d and length %d must be multiples of 4 (device memory is copied in 4-byte words)", off, n)
	}
	if off < 0 || n < 0 || off+n > d.n {
		return verbsio.Errorf(op, unix.EINVAL, "%d bytes at offset %d do not fit the %d-byte allocation", n, off, d.n)
	}
	return nil
}

// CopyTo implements verbsio.DMImpl.
func (d *dm) CopyTo(off int, src []byte) error {
	if err := d.check("memcpy_to_dm", off, len(src)); err != nil {
		return err
	}
	copy(d.bytes()[off:], src)
	return nil
}

// CopyFrom implements verbsio.DMImpl.
func (d *dm) CopyFrom(dst []byte, off int) error {
	if err := d.check("memcpy_from_dm", off, len(dst)); err != nil {
		return err
	}
	copy(dst, d.bytes()[off:])
	return nil
}

// Free implements verbsio.DMImpl.
func (d *dm) Free() error {
	c := d.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if d.freed {
		return verbsio.Errorf("free_dm", unix.EINVAL, "device memory already freed")
	}
	if d.mrs > 0 {
		return verbsio.Errorf("free_dm", unix.EBUSY, "%d memory regions are registered on this device memory; deregister them first", d.mrs)
	}
	p := &c.dmPool
	for i, s := range p.used {
		if s.off == d.off {
			p.used = append(p.used[:i], p.used[i+1:]...)
			break
		}
	}
	d.freed = true
	return nil
}

// RegDMMR implements verbsio.DMRegistrar: the region is zero-based (SGE
// and remote addresses are offsets into it).
func (p *pd) RegDMMR(dmi verbsio.DMImpl, off, length int, access verbsio.Access) (verbsio.MRImpl, error) {
	d, ok := dmi.(*dm)
	if !ok || d.ctx != p.ctx {
		return nil, verbsio.Errorf("reg_dm_mr", unix.EINVAL, "device memory of another context")
	}
	if d.freed || off < 0 || length <= 0 || off+length > d.n {
		return nil, verbsio.Errorf("reg_dm_mr", unix.EINVAL, "%d bytes at offset %d do not fit the %d-byte allocation", length, off, d.n)
	}
	c := p.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := d.bytes()[off : off+length : off+length]
	return p.registerLocked(buf, 0, access, c.dmPool.reg, uint64(d.off+off), d)
}
