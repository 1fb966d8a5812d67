package dv

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// InitObj is manadv_init_obj (and the object part of mlx5dv_init_obj):
// one call that hands out the queues and doorbells of several objects at
// once. The built-in engine answers it on every device; its mana profile
// (verbsio.OpenOptions.RawProfile "mana") is a device whose applications
// must use it, as manadv(7) says. The WQE and CQE layouts are the engine's
// (SendWQE, CQE; docs/verbsio.md), not mana's GDMA format.

// ObjType selects the objects InitObj describes (enum manadv_obj_type).
type ObjType uint64

// Object types, with manadv's values.
const (
	ObjQP  ObjType = 1 << 0 // MANADV_OBJ_QP: the send queue
	ObjCQ  ObjType = 1 << 1 // MANADV_OBJ_CQ
	ObjRWQ ObjType = 1 << 2 // MANADV_OBJ_RWQ: the receive queue
	ObjPD  ObjType = 1 << 3 // MANADV_OBJ_PD

	objKnown = ObjQP | ObjCQ | ObjRWQ | ObjPD
)

// QPObj is a QP's send queue (struct manadv_qp).
type QPObj struct {
	SQBuf      []byte // the send ring
	SQCount    uint32 // WQE slots
	SQSize     uint32 // bytes of the ring
	SQID       uint32 // the queue's number: the QPN
	TxVPOffset uint32 // the virtual port offset: 0, one port per device
	// DBPage is the doorbell record: store the producer index, then
	// Ring (the engine's doorbell, as on QPRing).
	DBPage *atomic.Uint32
	Ring   func() error
}

// CQObj is a CQ's completion ring (struct manadv_cq).
type CQObj struct {
	Buf   []byte // the ring: CQHeaderSize bytes, then Count slots of CQSlotSize
	Count uint32
	CQID  uint32 // the CQ's number in its context
}

// RWQObj is a receive queue (struct manadv_rwq). verbsio has no separate
// work queue objects: it is the RAW_PACKET QP's own receive queue. Its WQE
// layout is not part of the ABI: post receives with verbsio.QP.PostRecv.
type RWQObj struct {
	Buf   []byte // the receive ring
	Count uint32 // WQE slots
	Size  uint32 // bytes of the ring
	WQID  uint32 // the queue's number: the QPN
	// DBPage is the receive ring's producer index, which PostRecv
	// advances.
	DBPage *atomic.Uint32
}

// PDObj is a protection domain (struct manadv_pd).
type PDObj struct {
	PDN uint32
}

// Obj names the objects to describe and where (struct manadv_obj).
type Obj struct {
	QP struct {
		In  *verbsio.QP
		Out *QPObj
	}
	CQ struct {
		In  *verbsio.CQ
		Out *CQObj
	}
	RWQ struct {
		In  *verbsio.QP // the QP whose receive queue is described
		Out *RWQObj
	}
	PD struct {
		In  *verbsio.PD
		Out *PDObj
	}
}

// RQRing is what a provider hands out for a receive queue.
type RQRing struct {
	Buf    []byte
	Depth  uint32
	DBRec  *atomic.Uint32
	Number uint32
}

// RQProvider is implemented by QPs whose receive queue can be described.
type RQProvider interface {
	DVRQ() (RQRing, error)
}

// PDProvider is implemented by PDs that have a number.
type PDProvider interface {
	DVPD() uint32
}

// CQNumberer is implemented by CQs that have a number in their context.
type CQNumberer interface {
	DVCQNumber() uint32
}

// InitObj fills the Out of every object types names from its In. An
// unknown type, or a named object without In or Out, is EINVAL; an object
// of a provider without direct verbs is ErrNoDV. Nothing is filled unless
// every named object succeeds.
func InitObj(obj *Obj, types ObjType) error {
	if types&^objKnown != 0 || types == 0 {
		return verbsio.Errorf("init_obj", unix.EINVAL, "object types %#x: want a non-empty set of QP, CQ, RWQ, PD", uint64(types))
	}
	missing := func(name string) error {
		return verbsio.Errorf("init_obj", unix.EINVAL, "obj.%s: In and Out must both be set when %s is asked for", name, name)
	}
	var qp QPObj
	var cq CQObj
	var rwq RWQObj
	var pd PDObj
	if types&ObjQP != 0 {
		if obj.QP.In == nil || obj.QP.Out == nil {
			return missing("QP")
		}
		p, ok := obj.QP.In.Impl().(Provider)
		if !ok {
			return fmt.Errorf("init_obj QP: %w", ErrNoDV)
		}
		r, err := p.DVQP()
		if err != nil {
			return err
		}
		qp = QPObj{SQBuf: r.Buf, SQCount: r.Depth, SQSize: uint32(len(r.Buf)), SQID: r.QPN, DBPage: r.DBRec, Ring: r.RingDB}
	}
	if types&ObjCQ != 0 {
		if obj.CQ.In == nil || obj.CQ.Out == nil {
			return missing("CQ")
		}
		p, ok := obj.CQ.In.Impl().(CQProvider)
		n, ok2 := obj.CQ.In.Impl().(CQNumberer)
		if !ok || !ok2 {
			return fmt.Errorf("init_obj CQ: %w", ErrNoDV)
		}
		r, err := p.DVCQ()
		if err != nil {
			return err
		}
		cq = CQObj{Buf: r.Buf, Count: r.Depth, CQID: n.DVCQNumber()}
	}
	if types&ObjRWQ != 0 {
		if obj.RWQ.In == nil || obj.RWQ.Out == nil {
			return missing("RWQ")
		}
		p, ok := obj.RWQ.In.Impl().(RQProvider)
		if !ok {
			return fmt.Errorf("init_obj RWQ: %w", ErrNoDV)
		}
		r, err := p.DVRQ()
		if err != nil {
			return err
		}
		rwq = RWQObj{Buf: r.Buf, Count: r.Depth, Size: uint32(len(r.Buf)), WQID: r.Number, DBPage: r.DBRec}
	}
	if types&ObjPD != 0 {
		if obj.PD.In == nil || obj.PD.Out == nil {
			return missing("PD")
		}
		p, ok := obj.PD.In.Impl().(PDProvider)
		if !ok {
			return fmt.Errorf("init_obj PD: %w", ErrNoDV)
		}
		pd = PDObj{PDN: p.DVPD()}
	}
	if types&ObjQP != 0 {
		*obj.QP.Out = qp
	}
	if types&ObjCQ != 0 {
		*obj.CQ.Out = cq
	}
	if types&ObjRWQ != 0 {
		*obj.RWQ.Out = rwq
	}
	if types&ObjPD != 0 {
		*obj.PD.Out = pd
	}
	return nil
}

// ErrNoRQ is returned (wrapped) for the RWQ of a QP that receives
// through an SRQ.
var ErrNoRQ = errors.New("dv: the QP receives through an SRQ and has no receive queue of its own")
