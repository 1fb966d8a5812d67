package soft

import (
	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// shmQP is a QP's side on the shm fabric: the peer context it is connected
// to (RC, UC; a UD send names its peer through the address handle), and
// the head request's wait.
type shmQP struct {
	q *qp
	f *shmFabric

	// RC/UC connection.
	peer   *peer
	remote *qpRecord // the connected QP's record, in the peer's control segment
	recv   recvTarget
	recvOK bool

	// Head-of-line wait (RNR, no response from the target, pacing).
	blocked    bool
	blockKind  uint8
	blockStart int64
	retryAt    int64
	paceDue    int64 // when the pacer let the held head request go (takePace)
	rnrLeft    int

	// Scratch for the fast path, sized at creation.
	refs []remoteRef
	iov  []unix.Iovec
	riov []unix.RemoteIovec
	grh  [grhSize]byte
}

var _ qpTransport = (*shmQP)(nil)

// modify attaches the peer context at RTR (RC, UC): its control segment
// holds the connected QP's record.
func (s *shmQP) modify(next verbsio.QPState, attr *verbsio.QPAttr, mask verbsio.QPAttrMask) error {
	q := s.q
	if next != verbsio.QPStateRTR || q.state == verbsio.QPStateRTR || (q.typ != verbsio.QPTypeRC && q.typ != verbsio.QPTypeUC) {
		return nil
	}
	c := q.ctx
	c.mu.Lock()
	p, err := s.f.attachPeerLocked(attr.AH.DGID)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	s.dropPeer()
	s.peer = p
	s.remote = p.ctrl.qp(qpIndex(attr.DestQPN))
	s.recvOK = false
	q.rec.destQPN.Store(attr.DestQPN)
	q.rec.destNonce.Store(p.id.nonce)
	return nil
}

func (s *shmQP) paceChanged() { s.paceDue = 0 }

func (s *shmQP) reset() {
	s.unblock()
	s.dropPeer()
	s.paceDue = 0
}

func (s *shmQP) flush() { s.unblock() }

func (s *shmQP) release() {
	s.unblock()
	s.dropPeer()
}

func (s *shmQP) dropPeer() {
	if s.peer == nil {
		return
	}
	c := s.q.ctx
	c.mu.Lock()
	s.peer.releaseLocked()
	c.mu.Unlock()
	s.peer, s.remote, s.recvOK = nil, nil, false
}
