package soft

import (
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"golang.org/x/sys/unix"
)

// A context's verbs objects and their rules are the same on every fabric:
// the QP state machine and attributes (qp.go), work request validation and
// the local side of every request (wr.go), completion queues (cq.go),
// memory regions, protection domains and the access checks (mr.go), SRQs,
// address handles, device memory, the interface families and direct verbs.
// What moves the bytes is the context's fabric, chosen when the context
// opens: shm0 has an shmFabric (shm_*.go), udp_<netdev> a udpFabric
// (udp_*.go). A new fabric is a new set of files implementing fabric and
// qpTransport, and a case in Provider.OpenWith.

// fabric is what a context's fabric supplies to the verbs objects.
type fabric interface {
	// deviceAttr, portAttr and gidTable answer the device queries.
	deviceAttr() verbsio.DeviceAttr
	portAttr() verbsio.PortAttr
	gidTable() []verbsio.GIDEntry

	// checkQP refuses a QP the fabric cannot carry (c.mu is not held).
	checkQP(attr *verbsio.QPInitAttr) error
	// newQP returns the fabric's side of a new QP (c.mu is held).
	newQP(q *qp) qpTransport
	// newAH resolves an address handle's destination into a (c.mu is held).
	newAH(a *ah, attr verbsio.AHAttr) error
	// queueMemory is which queues an application's allocator may supply
	// (dv.SetAllocator): those no peer maps.
	queueMemory() dv.Resource

	// progress is the work polling q owes the fabric (CQ.Poll, the
	// interface families and direct verbs call it).
	progress(q *cq)
	// wait is CQ.Wait: it returns when q is ready (cq.ready) or with
	// verbsio.ErrTimeout at deadline (engine clock, see now).
	wait(q *cq, deadline int64) error

	// close releases the fabric's resources (c.mu is held; the QPs are
	// destroyed already).
	close()
	// counters are the transport's counters by name, nil when it has none
	// (Context.Counters).
	counters() map[string]uint64
}

// qpTransport is a QP's side on its fabric: how its send queue reaches the
// peer and how the peer reaches it. The qp owns the queues, the attributes
// and the state; the transport owns the connection and what is in flight.
// Its methods run on the goroutine driving the QP (under the context's
// progress lock, Context.lock) unless they say otherwise.
type qpTransport interface {
	// modify applies the fabric's part of a transition to next (RTR: the
	// path to the peer; RTS: sequence numbers and timers). It runs after
	// the transition was checked and before the attributes are stored;
	// an error leaves the QP as it was.
	modify(next verbsio.QPState, attr *verbsio.QPAttr, mask verbsio.QPAttrMask) error
	// execute is the doorbell: it moves the WQEs from sqExec up to sqPI
	// (flushing them in ERR).
	execute()
	// paceChanged drops a pacing hold made under the QP's previous rate;
	// q.pace is the new rate's bucket (nil: unlimited).
	paceChanged()
	// reset forgets the connection and what was in flight (to RESET).
	reset()
	// flush abandons the transport's work in flight after the QP's
	// queues were flushed (to ERR, or sqExec jumped to sqPI).
	flush()
	// release detaches the transport from its peer and its fabric (the
	// QP is being destroyed; c.mu is not held).
	release()
}

// progressor is a fabric whose transport moves only when driven: a target
// that does not poll needs background progress (Context.StartProgress).
// The udp fabric is one; on shm the initiator does all the work.
type progressor interface {
	// round runs the fabric's progress once, sends what it queued and
	// fills fds with the descriptors whose input should wake the next
	// round, returning how many it filled and how long the next round
	// may wait at most. The caller holds the progress lock.
	round(fds []unix.PollFd) (n int, wait time.Duration)
}
