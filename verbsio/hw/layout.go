package hw

import (
	"unsafe"

	"github.com/rperf/rperf/verbsio"
)

// This file holds pure-Go mirrors of the libibverbs structs the fast path
// fills (struct ibv_send_wr, ibv_recv_wr, ibv_sge, ibv_wc) and the code that
// converts verbsio batches to and from them. It has no cgo, so the packing is
// tested in every build; the ibverbs build checks at compile time that each
// mirror has the size and field offsets of its C struct (layout_cgo.go), and
// its tests compare the union members too.
//
// In the ibverbs build the mirror arrays live in C memory (calloc'd when the
// QP, SRQ or CQ is created), so the next and sg_list pointers the packing
// writes are C pointers to C memory and no Go pointer crosses into C. The
// layouts are those of LP64 Linux (amd64, arm64, ppc64le, riscv64, s390x...).

// SGEs: verbsio.SGE {Addr uint64; Length, LKey uint32} has the layout of
// struct ibv_sge, so an SGL is copied into C memory with copy().

// cSendWR mirrors struct ibv_send_wr.
type cSendWR struct {
	wrID   uint64
	next   uintptr // struct ibv_send_wr *
	sgList uintptr // struct ibv_sge *
	numSGE int32
	opcode uint32 // enum ibv_wr_opcode
	flags  uint32 // send_flags
	imm    uint32 // imm_data (network order) / invalidate_rkey
	wr     cAtomicWR
	qpType uint32 // union qp_type: xrc.remote_srqn
	_      uint32
	ext    [6]uint64 // union of bind_mw and tso, unused
}

// cRDMAWR, cAtomicWR and cUDWR are the members of the wr union of struct
// ibv_send_wr; cAtomicWR is the largest and stands for the union in cSendWR.
type cRDMAWR struct {
	remoteAddr uint64
	rkey       uint32
	_          uint32
	_          [2]uint64
}

type cAtomicWR struct {
	remoteAddr uint64
	compareAdd uint64
	swap       uint64
	rkey       uint32
	_          uint32
}

type cUDWR struct {
	ah         uintptr // struct ibv_ah *
	remoteQPN  uint32
	remoteQKey uint32
	_          [2]uint64
}

// cRecvWR mirrors struct ibv_recv_wr.
type cRecvWR struct {
	wrID   uint64
	next   uintptr // struct ibv_recv_wr *
	sgList uintptr // struct ibv_sge *
	numSGE int32
	_      int32
}

// cWC mirrors struct ibv_wc.
type cWC struct {
	wrID         uint64
	status       uint32 // enum ibv_wc_status
	opcode       uint32 // enum ibv_wc_opcode
	vendorErr    uint32
	byteLen      uint32
	imm          uint32 // imm_data (network order) / invalidated_rkey
	qpNum        uint32
	srcQP        uint32
	wcFlags      uint32
	pkeyIndex    uint16
	slid         uint16
	sl           uint8
	dlidPathBits uint8
	_            [2]byte
}

// libibverbs values that differ from verbsio's or that verbsio lacks.
const (
	cWCRecv            = 128 // IBV_WC_RECV
	cWCRecvRDMAWithImm = 129 // IBV_WC_RECV_RDMA_WITH_IMM

	// wcOpcodeOther is what Poll reports for a completion opcode verbsio has
	// no name for (BIND_MW, LOCAL_INV, TSO, ...: rperf never posts them).
	wcOpcodeOther verbsio.WCOpcode = 0xff
)

// ahHandle is implemented by the provider's address handles: handle
// returns the struct ibv_ah * to put in a UD work request.
type ahHandle interface {
	handle() uintptr
}

// sendRing is a QP's send scratch: room for one batch of cap(wrs) work
// requests with up to maxSGE SGEs each, chained through next pointers.
type sendRing struct {
	wrs    []cSendWR
	sges   []verbsio.SGE // len(wrs) * maxSGE entries
	maxSGE int
	ud     bool // the QP is UD: every request needs an address handle
}

// pack converts wrs into the ring, from its first slot, and chains the
// converted requests. It stops when the ring is full or at the first request
// it cannot convert, and returns how many it converted and, in the second
// case, that request's error. It does not allocate.
func (r *sendRing) pack(wrs []verbsio.SendWR) (n int, err error) {
	k := 0
	for n < len(wrs) && n < len(r.wrs) {
		wr := &wrs[n]
		ns := len(wr.SGL)
		if ns > r.maxSGE {
			return n, errSendTooManySGE
		}
		if !wr.Opcode.Valid() {
			return n, errBadOpcode
		}
		w := &r.wrs[n]
		var sgl uintptr
		if ns > 0 {
			copy(r.sges[k:k+ns], wr.SGL)
			sgl = uintptr(unsafe.Pointer(&r.sges[k]))
			k += ns
		}
		*w = cSendWR{
			wrID:   wr.ID,
			sgList: sgl,
			numSGE: int32(ns),
			opcode: uint32(wr.Opcode),
			flags:  uint32(wr.Flags),
			imm:    wr.Imm,
		}
		switch {
		case r.ud:
			if wr.UD.AH == nil {
				return n, errNoAH
			}
			h, ok := wr.UD.AH.Impl().(ahHandle)
			if !ok {
				return n, errForeignAH
			}
			*(*cUDWR)(unsafe.Pointer(&w.wr)) = cUDWR{ah: h.handle(), remoteQPN: wr.UD.RemoteQPN, remoteQKey: wr.UD.RemoteQKey}
		case wr.Opcode.IsAtomic():
			w.wr = cAtomicWR{remoteAddr: wr.Remote.Addr, compareAdd: wr.Atomic.CompareAdd, swap: wr.Atomic.Swap, rkey: wr.Remote.RKey}
		case wr.Opcode == verbsio.OpRDMAWrite || wr.Opcode == verbsio.OpRDMAWriteImm || wr.Opcode == verbsio.OpRDMARead:
			*(*cRDMAWR)(unsafe.Pointer(&w.wr)) = cRDMAWR{remoteAddr: wr.Remote.Addr, rkey: wr.Remote.RKey}
		}
		if n > 0 {
			r.wrs[n-1].next = uintptr(unsafe.Pointer(w))
		}
		n++
	}
	return n, nil
}

// recvRing is the receive scratch of a QP or SRQ, like sendRing.
type recvRing struct {
	wrs    []cRecvWR
	sges   []verbsio.SGE
	maxSGE int
}

// pack converts wrs into the ring with sendRing.pack's contract.
func (r *recvRing) pack(wrs []verbsio.RecvWR) (n int, err error) {
	k := 0
	for n < len(wrs) && n < len(r.wrs) {
		wr := &wrs[n]
		ns := len(wr.SGL)
		if ns > r.maxSGE {
			return n, errRecvTooManySGE
		}
		w := &r.wrs[n]
		var sgl uintptr
		if ns > 0 {
			copy(r.sges[k:k+ns], wr.SGL)
			sgl = uintptr(unsafe.Pointer(&r.sges[k]))
			k += ns
		}
		*w = cRecvWR{wrID: wr.ID, sgList: sgl, numSGE: int32(ns)}
		if n > 0 {
			r.wrs[n-1].next = uintptr(unsafe.Pointer(w))
		}
		n++
	}
	return n, nil
}

// convertWCs converts the completions in src into dst[:len(src)].
func convertWCs(dst []verbsio.WC, src []cWC) {
	_ = dst[:len(src)]
	for i := range src {
		s := &src[i]
		dst[i] = verbsio.WC{
			ID:        s.wrID,
			Status:    verbsio.Status(s.status),
			Opcode:    wcOpcodeFromC(s.opcode),
			VendorErr: s.vendorErr,
			ByteLen:   s.byteLen,
			Imm:       s.imm,
			QPN:       s.qpNum,
			SrcQP:     s.srcQP,
			Flags:     verbsio.WCFlags(s.wcFlags) & (verbsio.WCWithGRH | verbsio.WCWithImm),
			PkeyIndex: s.pkeyIndex,
			SLID:      s.slid,
			SL:        s.sl,
		}
	}
}

// wcOpcodeFromC maps enum ibv_wc_opcode to verbsio.WCOpcode: the send side
// values are equal, the receive side starts at 128 in libibverbs.
func wcOpcodeFromC(op uint32) verbsio.WCOpcode {
	switch {
	case op <= uint32(verbsio.WCFetchAdd):
		return verbsio.WCOpcode(op)
	case op == cWCRecv:
		return verbsio.WCRecv
	case op == cWCRecvRDMAWithImm:
		return verbsio.WCRecvRDMAWithImm
	}
	return wcOpcodeOther
}
