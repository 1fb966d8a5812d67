//go:build linux && cgo && ibverbs

package fakeverbs

/*
#include <stdlib.h>
#include "fake.h"
*/
import "C"

import (
	"syscall"
	"unsafe"
)

// Max is how many work requests and completions the fake holds.
const Max = C.FAKE_MAX

// MaxSGE is how many SGEs per request the fake records.
const MaxSGE = C.FAKE_SGE

// Fake is one fake provider: a context with a QP, a CQ and an SRQ on it.
// It lives in C memory; Free releases it.
type Fake struct {
	f *C.struct_fake
}

// New returns a fake with an RC QP numbered 0x1234 and nothing queued.
func New() *Fake {
	f := C.fake_new()
	if f == nil {
		panic("fakeverbs: out of memory")
	}
	return &Fake{f: f}
}

// Free releases the fake; the pointers it handed out become invalid.
func (f *Fake) Free() { C.free(unsafe.Pointer(f.f)) }

// QP returns the struct ibv_qp *.
func (f *Fake) QP() unsafe.Pointer { return unsafe.Pointer(&f.f.qp) }

// CQ returns the struct ibv_cq *.
func (f *Fake) CQ() unsafe.Pointer { return unsafe.Pointer(&f.f.cq) }

// SRQ returns the struct ibv_srq *.
func (f *Fake) SRQ() unsafe.Pointer { return unsafe.Pointer(&f.f.srq) }

// SetQPType sets the QP's qp_type (an IBV_QPT_* value).
func (f *Fake) SetQPType(t int) { f.f.qp.qp_type = C.enum_ibv_qp_type(t) }

// FailAt makes every post refuse the request at index i of its chain with
// errno; nullBad leaves bad_wr unset, as a sloppy provider might. i < 0
// accepts everything.
func (f *Fake) FailAt(i int, errno syscall.Errno, nullBad bool) {
	f.f.fail_at = C.int(i)
	f.f.fail_errno = C.int(errno)
	f.f.null_bad = 0
	if nullBad {
		f.f.null_bad = 1
	}
}

// PostCalls is the number of post calls (send, receive, SRQ receive) made.
func (f *Fake) PostCalls() int { return int(f.f.post_calls) }

// SGE is a recorded struct ibv_sge.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// Send is a send work request as the fake read it from the C chain.
type Send struct {
	ID         uint64
	Opcode     uint32
	Flags      uint32
	Imm        uint32
	NumSGE     int
	SGL        []SGE
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64
	Swap       uint64
	AH         uintptr
	RemoteQPN  uint32
	RemoteQKey uint32
}

// Recv is a receive work request as the fake read it.
type Recv struct {
	ID     uint64
	NumSGE int
	SGL    []SGE
}

func sgl(s []C.struct_ibv_sge, n C.int) []SGE {
	out := []SGE{}
	for i := 0; i < int(n) && i < len(s); i++ {
		out = append(out, SGE{Addr: uint64(s[i].addr), Length: uint32(s[i].length), LKey: uint32(s[i].lkey)})
	}
	return out
}

// Sent returns the send requests accepted so far.
func (f *Fake) Sent() []Send {
	out := []Send{}
	for _, s := range f.f.send[:f.f.nsend] {
		out = append(out, Send{
			ID: uint64(s.wr_id), Opcode: uint32(s.opcode), Flags: uint32(s.flags), Imm: uint32(s.imm),
			NumSGE: int(s.num_sge), SGL: sgl(s.sge[:], s.num_sge),
			RemoteAddr: uint64(s.remote_addr), RKey: uint32(s.rkey),
			CompareAdd: uint64(s.compare_add), Swap: uint64(s.swap),
			AH: uintptr(s.ah), RemoteQPN: uint32(s.remote_qpn), RemoteQKey: uint32(s.remote_qkey),
		})
	}
	return out
}

// Received returns the receive requests accepted so far (QP and SRQ).
func (f *Fake) Received() []Recv {
	out := []Recv{}
	for _, r := range f.f.recv[:f.f.nrecv] {
		out = append(out, Recv{ID: uint64(r.wr_id), NumSGE: int(r.num_sge), SGL: sgl(r.sge[:], r.num_sge)})
	}
	return out
}

// Reset forgets the recorded requests and the post count.
func (f *Fake) Reset() {
	f.f.nsend, f.f.nrecv, f.f.post_calls = 0, 0, 0
}

// WC is a completion to queue, in libibverbs' terms (IBV_WC_* values).
type WC struct {
	ID           uint64
	Status       uint32
	Opcode       uint32
	VendorErr    uint32
	ByteLen      uint32
	Imm          uint32
	QPNum        uint32
	SrcQP        uint32
	Flags        uint32
	PkeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
}

// PushWC queues a completion for the CQ to return.
func (f *Fake) PushWC(w WC) {
	if f.f.nwc == Max {
		panic("fakeverbs: completion queue full")
	}
	c := &f.f.wc[f.f.nwc]
	*c = C.struct_ibv_wc{}
	c.wr_id = C.uint64_t(w.ID)
	c.status = C.enum_ibv_wc_status(w.Status)
	c.opcode = C.enum_ibv_wc_opcode(w.Opcode)
	c.vendor_err = C.uint32_t(w.VendorErr)
	c.byte_len = C.uint32_t(w.ByteLen)
	*(*uint32)(unsafe.Add(unsafe.Pointer(c), C.fake_off_wc_imm)) = w.Imm
	c.qp_num = C.uint32_t(w.QPNum)
	c.src_qp = C.uint32_t(w.SrcQP)
	c.wc_flags = C.uint(w.Flags)
	c.pkey_index = C.uint16_t(w.PkeyIndex)
	c.slid = C.uint16_t(w.SLID)
	c.sl = C.uint8_t(w.SL)
	c.dlid_path_bits = C.uint8_t(w.DLIDPathBits)
	f.f.nwc++
}

// Pending is the number of queued completions not yet polled.
func (f *Fake) Pending() int { return int(f.f.nwc - f.f.wcpos) }

// PollCalls is the number of poll_cq calls made.
func (f *Fake) PollCalls() int { return int(f.f.poll_calls) }

// NotifyCalls is the number of req_notify_cq calls made.
func (f *Fake) NotifyCalls() int { return int(f.f.notify_calls) }

// SetPollError makes poll_cq fail (return -1).
func (f *Fake) SetPollError(on bool) {
	f.f.poll_err = 0
	if on {
		f.f.poll_err = 1
	}
}

// Offsets of union members, which cgo cannot name, from offsetof.
var Offsets = map[string]uintptr{
	"ibv_send_wr.imm_data":              C.fake_off_send_imm,
	"ibv_send_wr.wr.rdma.remote_addr":   C.fake_off_send_rdma_addr,
	"ibv_send_wr.wr.rdma.rkey":          C.fake_off_send_rdma_rkey,
	"ibv_send_wr.wr.atomic.remote_addr": C.fake_off_send_atomic_addr,
	"ibv_send_wr.wr.atomic.compare_add": C.fake_off_send_atomic_compare,
	"ibv_send_wr.wr.atomic.swap":        C.fake_off_send_atomic_swap,
	"ibv_send_wr.wr.atomic.rkey":        C.fake_off_send_atomic_rkey,
	"ibv_send_wr.wr.ud.ah":              C.fake_off_send_ud_ah,
	"ibv_send_wr.wr.ud.remote_qpn":      C.fake_off_send_ud_qpn,
	"ibv_send_wr.wr.ud.remote_qkey":     C.fake_off_send_ud_qkey,
	"ibv_wc.imm_data":                   C.fake_off_wc_imm,
	"ibv_wc.dlid_path_bits":             C.fake_off_wc_dlid_path_bits,
}
