package soft

import (
	"github.com/rperf/rperf/verbsio"
)

// remoteRef is a peer memory range the engine may touch: bytes mapped into
// this process, or (pvm) an address to reach with process_vm_*. It holds a
// use count on the peer's region entry until release.
type remoteRef struct {
	ent   *mrEntry
	mem   []byte // mapped bytes (shared memory)
	addr  uint64 // peer virtual address (process_vm)
	local []byte // same-process peer, memory not shared: the bytes themselves
	n     uint64 // length of the range
	pvm   bool
}

func (r *remoteRef) release() {
	if r.ent != nil {
		r.ent.users.Add(-1)
		r.ent = nil
	}
}

// acquire resolves n bytes at addr under key in peer p for an access of
// kind need, on behalf of a target whose PD is pd. Every check verbs makes
// happens here, and what the peer's table says is checked against this
// process's own mapping before a byte moves.
func (p *peer) acquire(key uint32, addr, n uint64, need verbsio.Access, pd uint32, r *remoteRef) bool {
	e := p.ctrl.mr(mrIndex(key))
	e.users.Add(1)
	r.ent = e
	if key == 0 || e.key.Load() != key {
		r.release()
		return false
	}
	if verbsio.Access(e.access.Load())&need != need || e.pd.Load() != pd {
		r.release()
		return false
	}
	r.n = n
	base, length := e.addr.Load(), e.length.Load()
	off := addr - base
	if addr < base || off > length || n > length-off {
		r.release()
		return false
	}
	if ref := e.region.Load(); ref != 0 {
		mem, ok := p.regionMem(ref)
		if !ok {
			r.release()
			return false
		}
		start := e.regOff.Load() + off
		if start > uint64(len(mem)) || n > uint64(len(mem))-start {
			r.release()
			return false
		}
		r.mem = mem[start : start+n : start+n]
		r.pvm = false
		return true
	}
	if p.local != nil {
		// Same process, memory not shared: use the owner's own slice.
		m := p.local.mrs[mrIndex(key)].Load()
		if m == nil || m.key != key || off+n > uint64(len(m.buf)) {
			r.release()
			return false
		}
		r.local = m.buf[off : off+n : off+n]
		r.mem = nil
		r.pvm = false
		return true
	}
	r.mem = nil
	r.local = nil
	r.addr = addr
	r.pvm = true
	return true
}

// bytes returns the directly addressable bytes of r, or nil for process_vm.
func (r *remoteRef) bytes() []byte {
	if r.mem != nil {
		return r.mem
	}
	return r.local
}

// orderedCopy copies src to dst so that dst's last byte is stored last:
// a peer polling the last byte of a message (perftest's latency tests do)
// sees the whole message once it sees that byte. On amd64 stores become
// visible in program order; the final store is separate from memmove's.
func orderedCopy(dst, src []byte) {
	n := len(src)
	if n == 0 {
		return
	}
	copy(dst[:n-1], src[:n-1])
	storeFence()
	dst[n-1] = src[n-1]
}
