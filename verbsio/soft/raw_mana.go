package soft

import (
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/soft/internal/portlock"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"golang.org/x/sys/unix"
)

// The mana profile (verbsio.OpenOptions.RawProfile "mana"): a raw device
// that behaves as manadv(7) describes Microsoft's MANA. It offers
// RAW_PACKET QPs only (other types: EOPNOTSUPP, before any resource is
// taken); a RAW_PACKET QP needs the application's queue allocators on the
// context first (dv.SetAllocator, manadv_set_context_attr): without them
// it is EINVAL with mana's reason, with them its send and receive queues
// (and CQs) live in the application's buffers; dv.InitObj
// (manadv_init_obj) hands out the queues and doorbells; and a RAW_PACKET
// QP takes the Ethernet port for itself: while it lives, creating another
// one on the port, in this process or any other, fails with EBUSY
// (portlock), and the first keeps working.

// Microsoft's PCI vendor ID and the MANA VF's device ID.
const (
	manaVendorID     = 0x1414
	manaVendorPartID = 0x00ba
)

// manaCheckQP is checkQP in the mana profile.
func (f *rawFabric) manaCheckQP(attr *verbsio.QPInitAttr) error {
	switch {
	case attr.Type != verbsio.QPTypeRawPacket:
		return &verbsio.UnsupportedError{Feature: attr.Type.String() + " QPs on " + f.c.info.Name + " (mana profile)", Provider: ProviderName,
			Reason: "a mana device offers RAW_PACKET QPs only (manadv(7))", Fix: "create a RAW_PACKET QP"}
	case f.queryOnly:
		return verbsio.Errorf("create_qp", unix.EPERM, "%s was opened for queries only (OpenOptions.QueryOnly); open it without", f.c.info.Name)
	case f.c.extAlloc.Load() == nil:
		return verbsio.Errorf("create_qp", unix.EINVAL, "RAW QP requires extern alloc for buffers: install queue allocators with dv.SetAllocator (manadv_set_context_attr, MANADV_CTX_ATTR_BUF_ALLOCATORS) before creating it")
	}
	return nil
}

// attach takes the port for a new RAW_PACKET QP of the mana profile, in
// the device's network namespace: EBUSY while another raw QP of any
// process holds it.
func (r *rawQP) attach() error {
	f := r.f
	if f.profile != rawMana {
		return nil
	}
	err := f.netns.Do(func() error {
		l, err := portlock.Acquire(f.dev.name)
		r.lock = l
		return err
	})
	if err != nil {
		return verbsio.Errorf("create_qp", unix.EBUSY, "%v", err)
	}
	return nil
}

// manaAttr makes the device's attributes mana's: Microsoft's IDs, one raw
// QP per port.
func (f *rawFabric) manaAttr(a *verbsio.DeviceAttr) {
	a.VendorID, a.VendorPartID = manaVendorID, manaVendorPartID
	a.FWVer = FWVersion + " (mana profile)"
	a.Ext.MaxRawEthyQP = 1
}

// DVRQ implements dv.RQProvider: the QP's receive ring, for
// dv.InitObj's RWQ.
func (q *qp) DVRQ() (dv.RQRing, error) {
	if q.ctx.qps[q.idx].Load() != q {
		return dv.RQRing{}, verbsio.Errorf("init_obj", unix.EINVAL, "queue pair destroyed")
	}
	if !q.rq.Valid() {
		return dv.RQRing{}, dv.ErrNoRQ
	}
	n := ring.RQSize(int(q.rq.Depth()), q.cap.MaxRecvSGE)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(q.rq.Header())), n)
	return dv.RQRing{Buf: buf, Depth: q.rq.Depth(), DBRec: &q.rq.Header().PI, Number: q.qpn}, nil
}

// DVPD implements dv.PDProvider.
func (p *pd) DVPD() uint32 { return p.id }

// DVCQNumber implements dv.CQNumberer: the CQ's index in its context.
func (q *cq) DVCQNumber() uint32 { return q.idx }
