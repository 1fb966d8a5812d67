package verbsio

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// ErrTimeout is returned by waits that ran out of time.
var ErrTimeout = errors.New("timed out")

// Context is an open device (struct ibv_context).
type Context struct {
	Device DeviceInfo
	impl   ContextImpl
}

// NewContext wraps a provider's context; it is meant for providers and tests.
func NewContext(info DeviceInfo, impl ContextImpl) *Context {
	return &Context{Device: info, impl: impl}
}

// Impl returns the provider's implementation, for providers and extensions
// (such as direct verbs) that need it.
func (c *Context) Impl() ContextImpl { return c.impl }

// QueryDevice returns the device's attributes and limits.
func (c *Context) QueryDevice() (DeviceAttr, error) { return c.impl.QueryDevice() }

// QueryPort returns a port's attributes; ports are numbered from 1.
func (c *Context) QueryPort(port uint8) (PortAttr, error) { return c.impl.QueryPort(port) }

// QueryGIDTable returns a port's non-empty GID table entries.
func (c *Context) QueryGIDTable(port uint8) ([]GIDEntry, error) { return c.impl.QueryGIDTable(port) }

// QueryGID returns the GID at index of port.
func (c *Context) QueryGID(port uint8, index int) (GIDEntry, error) {
	tbl, err := c.impl.QueryGIDTable(port)
	if err != nil {
		return GIDEntry{}, err
	}
	for _, e := range tbl {
		if e.Index == index {
			return e, nil
		}
	}
	return GIDEntry{}, Errorf("query_gid", unix.EINVAL, "port %d has no GID at index %d (rdiag gids lists the table)", port, index)
}

// Alloc returns length bytes of memory suited to registration. With the
// built-in engine this memory is shared, so peers on the same host reach it
// directly; ordinary Go memory can be registered too, at some cost.
func (c *Context) Alloc(length int) ([]byte, error) { return c.impl.Alloc(length) }

// Free releases memory returned by Alloc. It fails with EBUSY while memory
// regions are registered on it.
func (c *Context) Free(buf []byte) error { return c.impl.Free(buf) }

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (*PD, error) {
	impl, err := c.impl.AllocPD()
	if err != nil {
		return nil, err
	}
	return &PD{ctx: c, impl: impl}, nil
}

// CreateCQ creates a completion queue with at least cqe entries.
func (c *Context) CreateCQ(cqe int) (*CQ, error) {
	impl, err := c.impl.CreateCQ(CQInitAttr{CQE: cqe})
	if err != nil {
		return nil, err
	}
	return &CQ{ctx: c, impl: impl}, nil
}

// Close releases the context and every resource created from it.
func (c *Context) Close() error { return c.impl.Close() }

// PD is a protection domain (struct ibv_pd).
type PD struct {
	ctx  *Context
	impl PDImpl
}

// Context returns the context the PD belongs to.
func (pd *PD) Context() *Context { return pd.ctx }

// Impl returns the provider's implementation.
func (pd *PD) Impl() PDImpl { return pd.impl }

// RegMR registers buf with the given access rights. Remote write and remote
// atomic access require local write access (EINVAL otherwise), as in verbs.
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	if len(buf) == 0 {
		return nil, Errorf("reg_mr", unix.EINVAL, "empty buffer")
	}
	if access&^accessKnown != 0 {
		return nil, Errorf("reg_mr", unix.EINVAL, "unknown access flags %s", access)
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return nil, Errorf("reg_mr", unix.EINVAL, "%s needs LOCAL_WRITE too", access)
	}
	impl, err := pd.impl.RegMR(buf, access)
	if err != nil {
		return nil, err
	}
	return &MR{pd: pd, impl: impl, buf: buf, access: access}, nil
}

// CreateQP creates a queue pair in the RESET state.
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	if attr.SendCQ == nil || (attr.RecvCQ == nil && attr.SRQ == nil && attr.Type != QPTypeRawPacket) {
		return nil, Errorf("create_qp", unix.EINVAL, "a send CQ and a receive CQ are required")
	}
	if attr.RecvCQ == nil {
		attr.RecvCQ = attr.SendCQ
	}
	impl, err := pd.impl.CreateQP(attr)
	if err != nil {
		return nil, err
	}
	return &QP{pd: pd, impl: impl, typ: attr.Type, sendCQ: attr.SendCQ, recvCQ: attr.RecvCQ, srq: attr.SRQ}, nil
}

// CreateSRQ creates a shared receive queue.
func (pd *PD) CreateSRQ(attr SRQInitAttr) (*SRQ, error) {
	impl, err := pd.impl.CreateSRQ(attr)
	if err != nil {
		return nil, err
	}
	return &SRQ{pd: pd, impl: impl}, nil
}

// CreateAH creates an address handle for UD sends.
func (pd *PD) CreateAH(attr AHAttr) (*AH, error) {
	impl, err := pd.impl.CreateAH(attr)
	if err != nil {
		return nil, err
	}
	return &AH{impl: impl, attr: attr}, nil
}

// Dealloc releases the PD; it fails with EBUSY while objects use it.
func (pd *PD) Dealloc() error { return pd.impl.Dealloc() }

// MR is a registered memory region (struct ibv_mr).
type MR struct {
	pd        *PD
	impl      MRImpl
	buf       []byte
	access    Access
	zeroBased bool // addresses in the region count from 0 (device memory)
}

// Impl returns the provider's implementation.
func (mr *MR) Impl() MRImpl { return mr.impl }

// LKey is the local key, used in SGEs.
func (mr *MR) LKey() uint32 { return mr.impl.LKey() }

// RKey is the remote key, handed to peers for RDMA and atomics.
func (mr *MR) RKey() uint32 { return mr.impl.RKey() }

// Buf is the registered memory. For device memory it is nil: reach it
// with DM.CopyTo and DM.CopyFrom.
func (mr *MR) Buf() []byte { return mr.buf }

// Addr is the address of the region's first byte as SGEs and peers use
// it: its virtual address, or 0 for a zero-based (device memory) region.
func (mr *MR) Addr() uint64 {
	if mr.zeroBased {
		return 0
	}
	return addrOf(mr.buf)
}

// Len is the region's length in bytes.
func (mr *MR) Len() int {
	if l, ok := mr.impl.(interface{ Len() int }); ok {
		return l.Len()
	}
	return len(mr.buf)
}

// Access is the region's access rights.
func (mr *MR) Access() Access { return mr.access }

// SGE returns the SGE for length bytes at offset off in the region.
func (mr *MR) SGE(off, length int) SGE {
	return SGE{Addr: mr.Addr() + uint64(off), Length: uint32(length), LKey: mr.impl.LKey()}
}

// Dereg deregisters the region.
func (mr *MR) Dereg() error { return mr.impl.Dereg() }

// CQ is a completion queue (struct ibv_cq).
type CQ struct {
	ctx     *Context
	impl    CQImpl
	wcFlags CQWCFlags
}

// Impl returns the provider's implementation.
func (cq *CQ) Impl() CQImpl { return cq.impl }

// Poll writes up to len(wcs) completions into wcs and returns how many;
// 0, nil means the queue is empty. It never blocks and never allocates.
// A CQ overrun is reported as an error after the completions that were
// kept, never as silent loss.
func (cq *CQ) Poll(wcs []WC) (int, error) { return cq.impl.Poll(wcs) }

// Wait blocks until the queue holds a completion or timeout passes, in
// which case it returns ErrTimeout. It spins briefly, then sleeps.
func (cq *CQ) Wait(timeout time.Duration) error { return cq.impl.Wait(timeout) }

// Depth is the number of entries the queue holds.
func (cq *CQ) Depth() int { return cq.impl.Depth() }

// Destroy destroys the CQ; it fails with EBUSY while QPs use it.
func (cq *CQ) Destroy() error { return cq.impl.Destroy() }

// QP is a queue pair (struct ibv_qp).
type QP struct {
	pd     *PD
	impl   QPImpl
	typ    QPType
	sendCQ *CQ
	recvCQ *CQ
	srq    *SRQ
}

// Impl returns the provider's implementation.
func (qp *QP) Impl() QPImpl { return qp.impl }

// QPN is the queue pair number.
func (qp *QP) QPN() uint32 { return qp.impl.QPN() }

// Type is the transport type.
func (qp *QP) Type() QPType { return qp.typ }

// Cap returns the queue sizes granted at creation.
func (qp *QP) Cap() QPCap { return qp.impl.Cap() }

// SendCQ is the CQ of send completions.
func (qp *QP) SendCQ() *CQ { return qp.sendCQ }

// RecvCQ is the CQ of receive completions.
func (qp *QP) RecvCQ() *CQ { return qp.recvCQ }

// Modify changes the attributes selected by mask, checking the transition
// and the attributes it requires as verbs does (EINVAL otherwise).
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error { return qp.impl.Modify(attr, mask) }

// Query returns the QP's current attributes.
func (qp *QP) Query() (QPAttr, error) { return qp.impl.Query() }

// PostSend posts wrs in order and returns how many were accepted. When err
// is not nil, wrs[n] is the first request not posted (libibverbs' bad_wr).
// It never allocates.
func (qp *QP) PostSend(wrs []SendWR) (int, error) { return qp.impl.PostSend(wrs) }

// PostRecv posts receive requests, with PostSend's contract.
func (qp *QP) PostRecv(wrs []RecvWR) (int, error) { return qp.impl.PostRecv(wrs) }

// Destroy destroys the QP; outstanding requests are flushed.
func (qp *QP) Destroy() error { return qp.impl.Destroy() }

// SRQ is a shared receive queue (struct ibv_srq).
type SRQ struct {
	pd   *PD
	impl SRQImpl
}

// Impl returns the provider's implementation.
func (s *SRQ) Impl() SRQImpl { return s.impl }

// PostRecv posts receive requests, with QP.PostSend's contract.
func (s *SRQ) PostRecv(wrs []RecvWR) (int, error) { return s.impl.PostRecv(wrs) }

// Destroy destroys the SRQ; it fails with EBUSY while QPs use it.
func (s *SRQ) Destroy() error { return s.impl.Destroy() }

// AH is an address handle (struct ibv_ah) for UD sends.
type AH struct {
	impl AHImpl
	attr AHAttr
}

// Impl returns the provider's implementation.
func (ah *AH) Impl() AHImpl { return ah.impl }

// Attr returns the address vector the AH was created with.
func (ah *AH) Attr() AHAttr { return ah.attr }

// Destroy destroys the AH.
func (ah *AH) Destroy() error { return ah.impl.Destroy() }

// Progresser is implemented by contexts whose transport needs the target's
// engine to run (such as the built-in udp fabric, where a target answers
// READs, acknowledges writes and places SENDs).
type Progresser interface {
	StartProgress() (stop func())
}

// StartProgress makes the context's engine run in the background, as a NIC
// would, for a side that does not poll: the passive target of one-sided
// operations, or a server waiting on something else. While it runs, the
// context's calls serialize on a mutex (calls from several goroutines are
// then safe). stop ends it and waits for it. Fabrics whose initiators do
// all the work (the shm fabric, hardware) need no background progress and
// return at once.
func (c *Context) StartProgress() (stop func()) {
	if p, ok := c.impl.(Progresser); ok {
		return p.StartProgress()
	}
	return func() {}
}
