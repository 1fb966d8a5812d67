package soft

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"github.com/rperf/rperf/verbsio/soft/internal/shm"
	"golang.org/x/sys/unix"
)

// Context is an open built-in device.
type Context struct {
	info  verbsio.DeviceInfo
	self  *shm.Proc
	pid   uint32
	nonce uint32
	gid   verbsio.GID

	ctrlSeg *shm.Segment
	ctrl    ctrlView

	mrs     []atomic.Pointer[mr]
	qps     []atomic.Pointer[qp]
	ahs     []atomic.Pointer[ah]
	regions []atomic.Pointer[region]
	ranges  atomic.Pointer[memIndex] // known local memory, for inline sends

	extAlloc atomic.Pointer[dv.Allocator] // queue memory from the application (dv.SetAllocator)

	mu        sync.Mutex // guards everything below
	closed    bool
	mrTag     []uint32
	qpTag     []uint32
	rgTag     []uint32
	cqs       []*cq
	cqTag     []uint32
	srqs      []*srq
	srqTag    []uint32
	pds       map[uint32]*pd
	pdNext    uint32
	allocs    map[uintptr]*region // Alloc'd memory by base address
	rangeList []memRange
	fab       fabric // what moves the bytes (set by the opener; see fabric.go)
	bg        bgProgress
	dmPool    dmPool

	async asyncEvents // asynchronous events (async.go)
}

var _ verbsio.ContextImpl = (*Context)(nil)

// localContexts finds contexts of this process by nonce (for peers in the
// same process).
var localContexts sync.Map // uint32 -> *Context

var epoch = time.Now()

// now is the engine's monotonic clock in nanoseconds, used on slow paths only.
func now() int64 { return int64(time.Since(epoch)) }

// newContext creates a context's verbs state: its control segment and
// object tables. The fabric's opener sets c.fab.
func newContext(info verbsio.DeviceInfo) (*Context, error) {
	seg, err := shm.Create("rperf-ctrl", ctrlSize)
	if err != nil {
		return nil, &verbsio.Error{Op: "open_device", Errno: unix.ENOMEM, Detail: err.Error()}
	}
	c := &Context{
		info:    info,
		self:    shm.Self(),
		pid:     uint32(os.Getpid()),
		ctrlSeg: seg,
		ctrl:    ctrlView{mem: seg.Bytes()},
		mrs:     make([]atomic.Pointer[mr], maxMR),
		qps:     make([]atomic.Pointer[qp], maxQP),
		ahs:     make([]atomic.Pointer[ah], maxAH),
		regions: make([]atomic.Pointer[region], maxRegion),
		mrTag:   make([]uint32, maxMR),
		qpTag:   make([]uint32, maxQP),
		rgTag:   make([]uint32, maxRegion),
		cqs:     make([]*cq, maxCQ),
		cqTag:   make([]uint32, maxCQ),
		srqs:    make([]*srq, maxSRQ),
		srqTag:  make([]uint32, maxSRQ),
		pds:     map[uint32]*pd{},
		allocs:  map[uintptr]*region{},
	}
	for c.nonce == 0 {
		var b [4]byte
		rand.Read(b[:])
		c.nonce = binary.BigEndian.Uint32(b[:])
	}
	h := c.ctrl.header()
	h.magic = ctrlMagic
	h.version = ctrlVersion
	h.pid = c.pid
	h.nonce = c.nonce
	h.state.Store(ctxOpen)
	c.gid = makeGID(c.pid, uint32(seg.FD()), c.nonce)
	c.ranges.Store(&memIndex{})
	localContexts.Store(c.nonce, c)
	return c, nil
}

// gidPrefix marks the GIDs of shm contexts (a unique-local IPv6 prefix).
var gidPrefix = [4]byte{0xfd, 0x72, 0x70, 0x66}

func makeGID(pid, fd, nonce uint32) verbsio.GID {
	var g verbsio.GID
	copy(g[:4], gidPrefix[:])
	binary.BigEndian.PutUint32(g[4:], pid)
	binary.BigEndian.PutUint32(g[8:], fd)
	binary.BigEndian.PutUint32(g[12:], nonce)
	return g
}

func parseGID(g verbsio.GID) (pid, fd, nonce uint32, ok bool) {
	if [4]byte(g[:4]) != gidPrefix {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint32(g[4:]), binary.BigEndian.Uint32(g[8:]), binary.BigEndian.Uint32(g[12:]), true
}

// GID returns the context's address: the GID peers put in their address
// vectors to reach it.
func (c *Context) GID() verbsio.GID { return c.gid }

// QueryDevice implements verbsio.ContextImpl.
func (c *Context) QueryDevice() (verbsio.DeviceAttr, error) { return c.fab.deviceAttr(), nil }

// QueryPort implements verbsio.ContextImpl.
func (c *Context) QueryPort(port uint8) (verbsio.PortAttr, error) {
	if port != 1 {
		return verbsio.PortAttr{}, verbsio.Errorf("query_port", unix.EINVAL, "port %d does not exist; %s has port 1", port, c.info.Name)
	}
	return c.fab.portAttr(), nil
}

// QueryGIDTable implements verbsio.ContextImpl.
func (c *Context) QueryGIDTable(port uint8) ([]verbsio.GIDEntry, error) {
	if port != 1 {
		return nil, verbsio.Errorf("query_gid", unix.EINVAL, "port %d does not exist; %s has port 1", port, c.info.Name)
	}
	return c.fab.gidTable(), nil
}

// checkSGID checks a source GID index against the GID table.
func (c *Context) checkSGID(op string, i uint8) error {
	if n := len(c.fab.gidTable()); int(i) >= n {
		return verbsio.Errorf(op, unix.EINVAL, "sgid_index %d: the GID table of %s has %d entries (rdiag gids)", i, c.info.Name, n)
	}
	return nil
}

// Counters returns the transport counters of the context's fabric (nil on
// shm): what rdiag shows, and what tests check.
func (c *Context) Counters() map[string]uint64 { return c.fab.counters() }

func (c *Context) checkOpen(op string) error {
	if c.closed {
		return verbsio.Errorf(op, unix.EBADF, "context is closed")
	}
	return nil
}

// region is a memfd of this context that peers may map.
type region struct {
	idx  uint32
	gen  uint32
	seg  *shm.Segment
	base uintptr
	size int
	mrs  int  // memory regions registered on it
	user bool // returned by Alloc (not a queue)
}

// memRange is memory this context knows: an Alloc'd buffer or a
// registered region of ordinary memory.
type memRange struct {
	start, end uintptr
	buf        []byte
}

// memIndex is the published, immutable index of known memory: ranges
// sorted by start, and for each position the range with the largest end
// among those up to it.
type memIndex struct {
	rs     []memRange
	maxEnd []int
}

// newRegion creates and publishes a memfd of size bytes. c.mu is held.
func (c *Context) newRegion(name string, size int, user bool) (*region, error) {
	idx := -1
	for i := range c.rgTag {
		if c.regions[i].Load() == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, verbsio.Errorf("alloc", unix.ENOMEM, "more than %d shared segments in one context", maxRegion)
	}
	seg, err := shm.Create(name, size)
	if err != nil {
		return nil, &verbsio.Error{Op: "alloc", Errno: unix.ENOMEM, Detail: err.Error()}
	}
	c.rgTag[idx]++
	if c.rgTag[idx] == 0 {
		c.rgTag[idx] = 1
	}
	mem := seg.Bytes()
	r := &region{idx: uint32(idx), gen: c.rgTag[idx], seg: seg, base: uintptr(unsafe.Pointer(&mem[0])), size: len(mem), user: user}
	e := c.ctrl.region(r.idx)
	e.fd.Store(uint32(seg.FD()))
	e.ino.Store(seg.Ino())
	e.size.Store(uint64(len(mem)))
	e.gen.Store(r.gen)
	c.regions[idx].Store(r)
	return r, nil
}

// dropRegion unpublishes and releases a region. c.mu is held.
func (c *Context) dropRegion(r *region) {
	c.ctrl.region(r.idx).gen.Store(0)
	c.regions[r.idx].Store(nil)
	r.seg.Close()
}

// Alloc implements verbsio.ContextImpl: length bytes of shared memory that
// peers on this host reach directly.
func (c *Context) Alloc(length int) ([]byte, error) {
	if length <= 0 {
		return nil, verbsio.Errorf("alloc", unix.EINVAL, "length %d", length)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkOpen("alloc"); err != nil {
		return nil, err
	}
	r, err := c.newRegion("rperf-mem", length, true)
	if err != nil {
		return nil, err
	}
	c.allocs[r.base] = r
	c.addRangeLocked(r.seg.Bytes())
	return r.seg.Bytes()[:length:length], nil
}

// Free implements verbsio.ContextImpl.
func (c *Context) Free(buf []byte) error {
	if len(buf) == 0 {
		return verbsio.Errorf("free", unix.EINVAL, "empty buffer")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	r, ok := c.allocs[base]
	if !ok {
		return verbsio.Errorf("free", unix.EINVAL, "buffer was not returned by Alloc (pass the slice Alloc returned)")
	}
	if r.mrs > 0 {
		return verbsio.Errorf("free", unix.EBUSY, "%d memory regions are still registered on this buffer; deregister them first", r.mrs)
	}
	delete(c.allocs, base)
	c.removeRangeLocked(r.seg.Bytes())
	c.dropRegion(r)
	return nil
}

// regionOf returns the Alloc'd region holding [p, p+n). c.mu is held.
func (c *Context) regionOf(p uintptr, n int) *region {
	for _, r := range c.allocs {
		if p >= r.base && p+uintptr(n) <= r.base+uintptr(r.size) && p+uintptr(n) >= p {
			return r
		}
	}
	return nil
}

func (c *Context) addRangeLocked(buf []byte) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	c.rangeList = append(c.rangeList, memRange{start, start + uintptr(len(buf)), buf})
	c.publishRangesLocked()
}

func (c *Context) removeRangeLocked(buf []byte) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	for i, r := range c.rangeList {
		if r.start == start && len(r.buf) == len(buf) {
			c.rangeList = append(c.rangeList[:i], c.rangeList[i+1:]...)
			break
		}
	}
	c.publishRangesLocked()
}

func (c *Context) publishRangesLocked() {
	rs := append([]memRange(nil), c.rangeList...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].start < rs[j].start })
	ix := &memIndex{rs: rs, maxEnd: make([]int, len(rs))}
	for i := range rs {
		ix.maxEnd[i] = i
		if i > 0 && rs[ix.maxEnd[i-1]].end > rs[i].end {
			ix.maxEnd[i] = ix.maxEnd[i-1]
		}
	}
	c.ranges.Store(ix)
}

// knownBytes returns the n bytes at addr if they lie inside one piece of
// memory this context allocated or registered. Inline sends use it instead
// of a key lookup, so a bad inline address fails the request instead of
// crashing the process.
func (c *Context) knownBytes(addr uint64, n uint32) ([]byte, bool) {
	ix := c.ranges.Load()
	end := addr + uint64(n)
	if end < addr {
		return nil, false
	}
	lo, hi := 0, len(ix.rs)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if uint64(ix.rs[mid].start) <= addr {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return nil, false
	}
	r := &ix.rs[ix.maxEnd[lo-1]]
	if end > uint64(r.end) || addr < uint64(r.start) {
		return nil, false
	}
	off := addr - uint64(r.start)
	return r.buf[off : off+uint64(n) : off+uint64(n)], true
}

// AllocPD implements verbsio.ContextImpl.
func (c *Context) AllocPD() (verbsio.PDImpl, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkOpen("alloc_pd"); err != nil {
		return nil, err
	}
	if len(c.pds) >= maxPD {
		return nil, verbsio.Errorf("alloc_pd", unix.ENOMEM, "more than %d protection domains", maxPD)
	}
	c.pdNext++
	p := &pd{ctx: c, id: c.pdNext}
	c.pds[p.id] = p
	return p, nil
}

// Close implements verbsio.ContextImpl: it destroys every QP (flushing
// nothing: destroyed QPs produce no completions), releases peers, memory
// and the control segment, and stops the watcher.
func (c *Context) Close() error {
	c.stopProgress()
	c.async.close()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.ctrl.header().state.Store(ctxClosed)
	c.closed = true
	qps := make([]*qp, 0)
	for i := range c.qps {
		if q := c.qps[i].Load(); q != nil {
			qps = append(qps, q)
		}
	}
	c.mu.Unlock()
	var ext []*extBuf
	for _, q := range qps {
		ext = append(ext, q.destroy(true)...)
	}
	c.mu.Lock()
	for i := range c.ahs {
		if a := c.ahs[i].Load(); a != nil {
			a.releaseLocked()
		}
	}
	if c.fab != nil { // nil when the opener failed before choosing it
		c.fab.close()
	}
	for i := range c.mrs {
		if m := c.mrs[i].Load(); m != nil {
			m.ent().key.Store(0)
			c.mrs[i].Store(nil)
		}
	}
	for i := range c.regions {
		if r := c.regions[i].Load(); r != nil {
			c.dropRegion(r)
		}
	}
	for _, q := range c.cqs {
		if q != nil {
			q.cons = nil
			ext = append(ext, q.ext)
			q.ext = nil
		}
	}
	for _, s := range c.srqs {
		if s != nil {
			s.rq = ring.RQ{}
		}
	}
	c.allocs = nil
	c.cqs = nil
	c.srqs = nil
	c.extAlloc.Store(nil)
	localContexts.Delete(c.nonce)
	err := c.ctrlSeg.Close()
	c.mu.Unlock()
	freeAll(ext) // the application's allocator, without the context's locks
	return err
}

func (c *Context) String() string { return fmt.Sprintf("%s(pid %d)", c.info.Name, c.pid) }
