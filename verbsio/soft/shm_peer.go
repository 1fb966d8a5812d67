package soft

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"github.com/rperf/rperf/verbsio/soft/internal/shm"
	"golang.org/x/sys/unix"
)

type peerID struct{ pid, nonce uint32 }

// peer is another context (in another process, or in this one) that this
// context sends to: its control segment mapped, and its regions mapped on
// first use.
type peer struct {
	fab   *shmFabric
	id    peerID
	gid   verbsio.GID
	proc  *shm.Proc
	ctrl  ctrlView
	local *Context // the peer context when it lives in this process

	mu   sync.Mutex
	maps []atomic.Pointer[regionMap]
	old  [][]byte // superseded mappings, unmapped at release
	refs int
}

type regionMap struct {
	gen uint32
	mem []byte
}

// attachPeerLocked returns the peer addressed by gid, mapping its control
// segment on first use. c.mu is held.
func (f *shmFabric) attachPeerLocked(gid verbsio.GID) (*peer, error) {
	pid, fd, nonce, ok := parseGID(gid)
	if !ok {
		return nil, verbsio.Errorf("modify_qp", unix.EINVAL,
			"GID %s is not an address of the built-in shm fabric (its GIDs start with fd72:7066); the peer must use the shm device too", gid)
	}
	id := peerID{pid, nonce}
	if p, ok := f.peers[id]; ok {
		p.refs++
		return p, nil
	}
	proc, err := shm.OpenProc(int(pid))
	if err != nil {
		return nil, verbsio.Errorf("modify_qp", unix.EHOSTUNREACH, "peer %s: %v", gid, err)
	}
	nfd, err := proc.GetFD(int(fd))
	if err != nil {
		proc.Close()
		return nil, verbsio.Errorf("modify_qp", unix.EHOSTUNREACH, "peer %s: %v", gid, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(nfd, &st); err != nil || st.Size < ctrlSize {
		unix.Close(nfd)
		proc.Close()
		return nil, verbsio.Errorf("modify_qp", unix.EHOSTUNREACH, "peer %s: descriptor %d of process %d is not an engine context", gid, fd, pid)
	}
	mem, err := shm.MapFD(nfd, st.Ino, ctrlSize)
	if err != nil {
		proc.Close()
		return nil, verbsio.Errorf("modify_qp", unix.EHOSTUNREACH, "peer %s: %v", gid, err)
	}
	v := ctrlView{mem: mem}
	h := v.header()
	if h.magic != ctrlMagic || h.version != ctrlVersion || h.nonce != nonce || h.pid != pid {
		shm.Unmap(mem)
		proc.Close()
		return nil, verbsio.Errorf("modify_qp", unix.EHOSTUNREACH, "peer %s: context is gone (process %d no longer has it open)", gid, pid)
	}
	if h.state.Load() != ctxOpen {
		shm.Unmap(mem)
		proc.Close()
		return nil, verbsio.Errorf("modify_qp", unix.EHOSTUNREACH, "peer %s: context was closed", gid)
	}
	p := &peer{fab: f, id: id, gid: gid, proc: proc, ctrl: v, maps: make([]atomic.Pointer[regionMap], maxRegion), refs: 1}
	if proc.IsSelf() {
		if lc, ok := localContexts.Load(nonce); ok {
			p.local = lc.(*Context)
		}
	}
	f.peers[id] = p
	f.watcher.Watch(proc, func() { f.deadGen.Add(1) })
	return p, nil
}

// releaseLocked drops one reference; the last one unmaps everything.
// c.mu is held.
func (p *peer) releaseLocked() {
	p.refs--
	if p.refs > 0 {
		return
	}
	delete(p.fab.peers, p.id)
	p.closeLocked()
}

func (p *peer) closeLocked() {
	p.fab.watcher.Unwatch(p.proc)
	p.mu.Lock()
	for i := range p.maps {
		if m := p.maps[i].Load(); m != nil {
			shm.Unmap(m.mem)
			p.maps[i].Store(nil)
		}
	}
	for _, m := range p.old {
		shm.Unmap(m)
	}
	p.old = nil
	p.mu.Unlock()
	shm.Unmap(p.ctrl.mem)
	p.proc.Close()
}

// gone reports whether the peer's process exited or its context closed.
func (p *peer) gone() bool {
	return p.proc.Dead() || p.ctrl.header().state.Load() != ctxOpen
}

// regionMem returns the peer's region idx (index + 1 as tables store it)
// mapped into this process.
func (p *peer) regionMem(ref uint32) ([]byte, bool) {
	if ref == 0 || ref > maxRegion {
		return nil, false
	}
	idx := ref - 1
	e := p.ctrl.region(idx)
	g := e.gen.Load()
	if g == 0 {
		return nil, false
	}
	if m := p.maps[idx].Load(); m != nil && m.gen == g {
		return m.mem, true
	}
	return p.mapRegion(idx, g)
}

// mapRegion maps a region on first use (slow path, once per region).
func (p *peer) mapRegion(idx, gen uint32) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.maps[idx].Load(); m != nil && m.gen == gen {
		return m.mem, true
	}
	e := p.ctrl.region(idx)
	fd, ino, size := int(e.fd.Load()), e.ino.Load(), e.size.Load()
	if size == 0 || size > 1<<40 {
		return nil, false
	}
	nfd, err := p.proc.GetFD(fd)
	if err != nil {
		return nil, false
	}
	mem, err := shm.MapFD(nfd, ino, int(size))
	if err != nil {
		return nil, false
	}
	if e.gen.Load() != gen {
		shm.Unmap(mem)
		return nil, false
	}
	if m := p.maps[idx].Load(); m != nil {
		p.old = append(p.old, m.mem)
	}
	p.maps[idx].Store(&regionMap{gen: gen, mem: mem})
	return mem, true
}

// remoteQP returns the peer's record of QP qpn if it exists.
func (p *peer) remoteQP(qpn uint32) (*qpRecord, bool) {
	rec := p.ctrl.qp(qpIndex(qpn))
	return rec, qpn != 0 && rec.qpn.Load() == qpn
}

// recvTarget is where a peer QP receives: its receive ring (own or SRQ) and
// its receive completion ring.
type recvTarget struct {
	rq ring.RQ
	cq ring.CQ
	pd uint32
}

// resolveRecv maps the receive ring and completion ring of the peer QP rec.
func (p *peer) resolveRecv(rec *qpRecord) (recvTarget, bool) {
	var t recvTarget
	t.pd = rec.pd.Load()
	if s := rec.srq.Load(); s != 0 {
		if s > maxSRQ {
			return t, false
		}
		sr := p.ctrl.srq(s - 1)
		if sr.tag.Load() != rec.srqTag.Load() || sr.tag.Load() == 0 {
			return t, false
		}
		mem, ok := p.regionMem(sr.region.Load())
		if !ok {
			return t, false
		}
		rq, err := ring.ViewRQ(mem, int(sr.depth.Load()), int(sr.maxSGE.Load()))
		if err != nil {
			return t, false
		}
		t.rq = rq
	} else {
		mem, ok := p.regionMem(rec.ringRegion.Load())
		if !ok {
			return t, false
		}
		rq, err := ring.ViewRQ(mem, int(rec.rqDepth.Load()), int(rec.rqMaxSGE.Load()))
		if err != nil {
			return t, false
		}
		t.rq = rq
	}
	c := rec.recvCQ.Load()
	if c == 0 || c > maxCQ {
		return t, false
	}
	cr := p.ctrl.cq(c - 1)
	if cr.tag.Load() != rec.recvCQTag.Load() || cr.tag.Load() == 0 {
		return t, false
	}
	mem, ok := p.regionMem(cr.region.Load())
	if !ok {
		return t, false
	}
	cqr, err := ring.AttachCQ(mem, int(cr.depth.Load()))
	if err != nil {
		return t, false
	}
	t.cq = cqr
	return t, true
}

func (p *peer) String() string { return fmt.Sprintf("peer(pid %d)", p.id.pid) }
