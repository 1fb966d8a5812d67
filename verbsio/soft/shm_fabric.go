package soft

import (
	"sync/atomic"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/soft/internal/shm"
	"golang.org/x/sys/unix"
)

// shmFabric is shm0's fabric: peers are contexts of processes on this host
// whose control segments (and memory) this process maps. The initiator
// does the work: a doorbell executes the requests against the peer's
// memory and rings (shm_exec.go).
type shmFabric struct {
	c       *Context
	peers   map[peerID]*peer // guarded by c.mu
	watcher *shm.Watcher
	deadGen atomic.Uint32 // bumped when a peer process exits
}

var _ fabric = (*shmFabric)(nil)

func openShm(info verbsio.DeviceInfo) (*Context, error) {
	c, err := newContext(info)
	if err != nil {
		return nil, err
	}
	c.fab = &shmFabric{c: c, peers: map[peerID]*peer{}, watcher: shm.NewWatcher()}
	return c, nil
}

// shmPortAttr is shm0's port: always up, one GID, no link layer.
func shmPortAttr() verbsio.PortAttr {
	return verbsio.PortAttr{
		State:      verbsio.PortActive,
		MaxMTU:     verbsio.MTU4096,
		ActiveMTU:  verbsio.MTU4096,
		GIDTblLen:  1,
		MaxMsgSize: maxMsg,
		PkeyTblLen: 1,
		MaxVLNum:   1,
		PhysState:  5, // LINK_UP
		LinkLayer:  verbsio.LinkLayerUnspecified,
	}
}

func (f *shmFabric) deviceAttr() verbsio.DeviceAttr { return engineDeviceAttr() }
func (f *shmFabric) portAttr() verbsio.PortAttr     { return shmPortAttr() }

// gidTable is the context's one GID, which names its control segment.
func (f *shmFabric) gidTable() []verbsio.GIDEntry {
	return []verbsio.GIDEntry{{Index: 0, GID: f.c.gid, Type: verbsio.GIDTypeIB}}
}

func (f *shmFabric) checkQP(attr *verbsio.QPInitAttr) error {
	if attr.Type == verbsio.QPTypeRawPacket {
		return errNoRawPacket(f.c)
	}
	if attr.Segmenter == verbsio.SegmentKernel {
		return verbsio.Errorf("create_qp", unix.EOPNOTSUPP, "%s moves no packets: TSO (kernel segmentation) applies to the udp fabric", f.c.info.Name)
	}
	return nil
}

func (f *shmFabric) newQP(q *qp) qpTransport {
	return &shmQP{q: q, f: f, refs: make([]remoteRef, maxSGEs), iov: make([]unix.Iovec, 1), riov: make([]unix.RemoteIovec, 1)}
}

// newAH attaches the peer context the GID names.
func (f *shmFabric) newAH(a *ah, attr verbsio.AHAttr) error {
	peer, err := f.attachPeerLocked(attr.DGID)
	if err != nil {
		e := err.(*verbsio.Error)
		e.Op = "create_ah"
		return e
	}
	a.peer = peer
	return nil
}

// queueMemory: peer processes map receive queues and CQs, so only send
// queues may live in the application's buffers.
func (f *shmFabric) queueMemory() dv.Resource { return dv.ResSendQueue }

func (f *shmFabric) close() {
	for _, p := range f.peers {
		p.closeLocked()
	}
	f.peers = map[peerID]*peer{}
	f.watcher.Close()
}

func (f *shmFabric) counters() map[string]uint64 { return nil }

// progress retries the sends of q's QPs that wait (RNR, a target not ready)
// and fails the work of QPs whose peer died.
func (f *shmFabric) progress(q *cq) {
	// The watcher learns of a peer's exit from its pidfd, but a watcher
	// goroutine may wait for a CPU behind busy pollers; every few thousand
	// polls the poller asks the kernel itself (one poll(2) per peer).
	if q.shm.liveTick++; q.shm.liveTick&4095 == 0 {
		f.checkPeers(q)
	}
	if q.shm.nblocked > 0 || f.deadGen.Load() != q.shm.deadGen {
		f.retry(q)
	}
}

// shmCQ is the shm fabric's bookkeeping on a CQ, owned by its poller.
type shmCQ struct {
	nblocked int    // QPs with a send blocked at the head (RNR, no response)
	deadGen  uint32 // shmFabric.deadGen when the CQ last looked at its QPs
	liveTick uint32
}

// checkPeers asks the kernel whether the peers of q's QPs live.
func (f *shmFabric) checkPeers(q *cq) {
	for _, p := range q.qps {
		if s := p.t.(*shmQP); s.peer != nil && !s.peer.proc.Dead() && !s.peer.proc.CheckAlive() {
			f.deadGen.Add(1)
		}
	}
}

// retry retries blocked sends and fails the work of QPs whose peer died.
func (f *shmFabric) retry(q *cq) {
	q.shm.deadGen = f.deadGen.Load()
	var t int64
	for _, p := range q.qps {
		if p.sendCQ != q {
			continue
		}
		s := p.t.(*shmQP)
		if s.peerGone() {
			s.execute()
			continue
		}
		if s.blocked {
			if t == 0 {
				t = now()
			}
			if t >= s.retryAt {
				s.execute()
			}
		}
	}
}

// nextRetry returns how long until the earliest blocked send of q retries.
func (f *shmFabric) nextRetry(q *cq) time.Duration {
	best := time.Duration(-1)
	t := now()
	for _, p := range q.qps {
		if s := p.t.(*shmQP); p.sendCQ == q && s.blocked {
			d := time.Duration(s.retryAt - t)
			if d < 0 {
				d = 0
			}
			if best < 0 || d < best {
				best = d
			}
		}
	}
	return best
}

const spinPolls = 2000

// wait spins briefly, then sleeps on the ring's futex (peers wake it when
// they produce into an armed ring), waking for blocked sends' retries.
func (f *shmFabric) wait(q *cq, deadline int64) error {
	for i := 0; i < spinPolls; i++ {
		if q.ready() {
			return nil
		}
		if q.shm.nblocked > 0 || f.deadGen.Load() != q.shm.deadGen {
			f.retry(q)
		}
	}
	h := q.ring.Header()
	for {
		seq := h.Notify.Load()
		h.Armed.Store(1)
		if q.ready() {
			h.Armed.Store(0)
			return nil
		}
		left := time.Duration(deadline - now())
		if left <= 0 {
			h.Armed.Store(0)
			return verbsio.ErrTimeout
		}
		sleep := min(left, 20*time.Millisecond)
		if r := f.nextRetry(q); r >= 0 && r < sleep {
			sleep = max(r, time.Microsecond)
		}
		shm.FutexWait(&h.Notify, seq, sleep)
		f.retry(q)
	}
}
