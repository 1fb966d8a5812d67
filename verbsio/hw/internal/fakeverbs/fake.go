//go:build linux && cgo && ibverbs

package fakeverbs

/*
#include <stdlib.h>
#include "fake.h"
*/
import "C"

import (
	"encoding/binary"
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
	Timestamp    uint64 // the extended CQ's completion timestamp
	FlowTag      uint32 // the extended CQ's flow tag
}

// CQEx is the fake's extended CQ (struct ibv_cq_ex *): the same queued
// completions through the start/next/end poll API, with each one's
// Timestamp and FlowTag.
func (f *Fake) CQEx() unsafe.Pointer { return unsafe.Pointer(&f.f.cqx) }

// StartPollCalls is the number of start_poll calls made on CQEx.
func (f *Fake) StartPollCalls() int { return int(f.f.start_calls) }

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
	f.f.ts[f.f.nwc] = C.uint64_t(w.Timestamp)
	f.f.tag[f.f.nwc] = C.uint32_t(w.FlowTag)
	f.f.nwc++
}

// SetExecute makes post_send complete each request it accepts at once,
// as rdma_rxe does: SUCCESS for a signaled request; LOC_PROT_ERR for
// inline data on an RDMA READ or an atomic (rxe accepts the post and
// fails the completion, signaled or not, then moves the QP to ERR, as
// the ibverbs device test TestDeviceInlineOnlyForSendAndWrite checks on
// a real rxe0), and WR_FLUSH_ERR for every request after that. Off,
// post_send only records.
func (f *Fake) SetExecute(on bool) {
	f.f.execute, f.f.qp_err = 0, 0
	if on {
		f.f.execute = 1
	}
}

// QPFailed reports whether execute mode moved the QP to the error state.
func (f *Fake) QPFailed() bool { return f.f.qp_err != 0 }

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

// The control path: the fake's struct rperf_verbs table (verbsio/hw's
// shim.h) answers the device, port and GID queries and creates the PD,
// CQ and QPs of the provider's inline probe, refusing what libibverbs and
// rdma_rxe refuse: a port outside 1..phys_port_cnt, a QP without CQs or
// asking for more than the device allows (max_qp_wr, max_sge,
// MaxInline), destroying a CQ or PD a QP still uses (EBUSY).

// Device is what the fake device reports (struct ibv_device_attr_ex and
// the context's num_comp_vectors) and the largest max_inline_data it
// grants. GUIDs are in host order.
type Device struct {
	FWVer                 string
	NodeGUID              uint64
	SysImageGUID          uint64
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 int
	MaxQPWR               int
	DeviceCapFlags        uint32
	MaxSGE                int
	MaxSGERD              int
	MaxCQ                 int
	MaxCQE                int
	MaxMR                 int
	MaxPD                 int
	MaxQPRdAtom           int
	MaxEERdAtom           int
	MaxResRdAtom          int
	MaxQPInitRdAtom       int
	MaxEEInitRdAtom       int
	AtomicCap             int
	MaxEE                 int
	MaxRDD                int
	MaxMW                 int
	MaxRawIPv6QP          int
	MaxRawEthyQP          int
	MaxMcastGrp           int
	MaxMcastQPAttach      int
	MaxTotalMcastQPAttach int
	MaxAH                 int
	MaxFMR                int
	MaxMapPerFMR          int
	MaxSRQ                int
	MaxSRQWR              int
	MaxSRQSGE             int
	MaxPkeys              int
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8

	ODPGeneral              uint64
	ODPRC, ODPUC, ODPUD     uint32
	ODPXRC                  uint32
	CompletionTimestampMask uint64
	HCACoreClock            uint64
	DeviceCapFlagsEx        uint64
	TSOMax, TSOQPTs         uint32
	RSSQPTs                 uint32
	RSSMaxTables            uint32
	RSSMaxTableSize         uint32
	RSSHashFields           uint64
	RSSHashFunction         uint8
	MaxWQTypeRQ             uint32
	PacingMin, PacingMax    uint32
	PacingQPTs              uint32
	RawPacketCaps           uint32
	TMMaxRndvHdrSize        uint32
	TMMaxNumTags            uint32
	TMFlags                 uint32
	TMMaxOps                uint32
	TMMaxSGE                uint32
	CQModMaxCount           uint16
	CQModMaxPeriod          uint16
	MaxDMSize               uint64
	PhysPortCntEx           uint32

	NumCompVectors int
	MaxInline      uint32 // the largest max_inline_data create_qp accepts
	Legacy         bool   // no extended query: only ibv_query_device answers
}

// Port is what the fake reports for one port (struct ibv_port_attr).
type Port struct {
	State         int
	MaxMTU        int
	ActiveMTU     int
	GIDTblLen     int
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QKeyViolCntr  uint32
	PkeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	PortCapFlags2 uint16
}

// GID is one entry of the fake's GID table (struct ibv_gid_entry).
type GID struct {
	GID         [16]byte
	Index       uint32
	Port        uint32
	Type        uint32 // IBV_GID_TYPE_*
	NdevIfindex uint32
}

// MaxPorts and MaxGIDs bound what the fake holds.
const (
	MaxPorts = C.FAKE_PORTS
	MaxGIDs  = C.FAKE_GIDS
)

// Context returns the fake's struct ibv_context *.
func (f *Fake) Context() unsafe.Pointer { return unsafe.Pointer(&f.f.ctx) }

// Verbs returns the fake's struct rperf_verbs * (see verbsio/hw's shim.h).
func (f *Fake) Verbs() unsafe.Pointer { return unsafe.Pointer(&f.f.verbs) }

// SetDevice sets what the device reports and grants.
func (f *Fake) SetDevice(d Device) {
	ax := &f.f.attr
	*ax = C.struct_ibv_device_attr_ex{}
	a := &ax.orig_attr
	fw := []byte(d.FWVer)
	for i := 0; i < len(a.fw_ver)-1 && i < len(fw); i++ {
		a.fw_ver[i] = C.char(fw[i])
	}
	a.node_guid = C.__be64(bigEndian(d.NodeGUID))
	a.sys_image_guid = C.__be64(bigEndian(d.SysImageGUID))
	a.max_mr_size = C.uint64_t(d.MaxMRSize)
	a.page_size_cap = C.uint64_t(d.PageSizeCap)
	a.vendor_id = C.uint32_t(d.VendorID)
	a.vendor_part_id = C.uint32_t(d.VendorPartID)
	a.hw_ver = C.uint32_t(d.HWVer)
	a.max_qp = C.int(d.MaxQP)
	a.max_qp_wr = C.int(d.MaxQPWR)
	a.device_cap_flags = C.uint(d.DeviceCapFlags)
	a.max_sge = C.int(d.MaxSGE)
	a.max_sge_rd = C.int(d.MaxSGERD)
	a.max_cq = C.int(d.MaxCQ)
	a.max_cqe = C.int(d.MaxCQE)
	a.max_mr = C.int(d.MaxMR)
	a.max_pd = C.int(d.MaxPD)
	a.max_qp_rd_atom = C.int(d.MaxQPRdAtom)
	a.max_ee_rd_atom = C.int(d.MaxEERdAtom)
	a.max_res_rd_atom = C.int(d.MaxResRdAtom)
	a.max_qp_init_rd_atom = C.int(d.MaxQPInitRdAtom)
	a.max_ee_init_rd_atom = C.int(d.MaxEEInitRdAtom)
	a.atomic_cap = C.enum_ibv_atomic_cap(d.AtomicCap)
	a.max_ee = C.int(d.MaxEE)
	a.max_rdd = C.int(d.MaxRDD)
	a.max_mw = C.int(d.MaxMW)
	a.max_raw_ipv6_qp = C.int(d.MaxRawIPv6QP)
	a.max_raw_ethy_qp = C.int(d.MaxRawEthyQP)
	a.max_mcast_grp = C.int(d.MaxMcastGrp)
	a.max_mcast_qp_attach = C.int(d.MaxMcastQPAttach)
	a.max_total_mcast_qp_attach = C.int(d.MaxTotalMcastQPAttach)
	a.max_ah = C.int(d.MaxAH)
	a.max_fmr = C.int(d.MaxFMR)
	a.max_map_per_fmr = C.int(d.MaxMapPerFMR)
	a.max_srq = C.int(d.MaxSRQ)
	a.max_srq_wr = C.int(d.MaxSRQWR)
	a.max_srq_sge = C.int(d.MaxSRQSGE)
	a.max_pkeys = C.uint16_t(d.MaxPkeys)
	a.local_ca_ack_delay = C.uint8_t(d.LocalCAAckDelay)
	a.phys_port_cnt = C.uint8_t(d.PhysPortCnt)

	ax.odp_caps.general_caps = C.uint64_t(d.ODPGeneral)
	ax.odp_caps.per_transport_caps.rc_odp_caps = C.uint32_t(d.ODPRC)
	ax.odp_caps.per_transport_caps.uc_odp_caps = C.uint32_t(d.ODPUC)
	ax.odp_caps.per_transport_caps.ud_odp_caps = C.uint32_t(d.ODPUD)
	ax.xrc_odp_caps = C.uint32_t(d.ODPXRC)
	ax.completion_timestamp_mask = C.uint64_t(d.CompletionTimestampMask)
	ax.hca_core_clock = C.uint64_t(d.HCACoreClock)
	ax.device_cap_flags_ex = C.uint64_t(d.DeviceCapFlagsEx)
	ax.tso_caps.max_tso = C.uint32_t(d.TSOMax)
	ax.tso_caps.supported_qpts = C.uint32_t(d.TSOQPTs)
	ax.rss_caps.supported_qpts = C.uint32_t(d.RSSQPTs)
	ax.rss_caps.max_rwq_indirection_tables = C.uint32_t(d.RSSMaxTables)
	ax.rss_caps.max_rwq_indirection_table_size = C.uint32_t(d.RSSMaxTableSize)
	ax.rss_caps.rx_hash_fields_mask = C.uint64_t(d.RSSHashFields)
	ax.rss_caps.rx_hash_function = C.uint8_t(d.RSSHashFunction)
	ax.max_wq_type_rq = C.uint32_t(d.MaxWQTypeRQ)
	ax.packet_pacing_caps.qp_rate_limit_min = C.uint32_t(d.PacingMin)
	ax.packet_pacing_caps.qp_rate_limit_max = C.uint32_t(d.PacingMax)
	ax.packet_pacing_caps.supported_qpts = C.uint32_t(d.PacingQPTs)
	ax.raw_packet_caps = C.uint32_t(d.RawPacketCaps)
	ax.tm_caps.max_rndv_hdr_size = C.uint32_t(d.TMMaxRndvHdrSize)
	ax.tm_caps.max_num_tags = C.uint32_t(d.TMMaxNumTags)
	ax.tm_caps.flags = C.uint32_t(d.TMFlags)
	ax.tm_caps.max_ops = C.uint32_t(d.TMMaxOps)
	ax.tm_caps.max_sge = C.uint32_t(d.TMMaxSGE)
	ax.cq_mod_caps.max_cq_count = C.uint16_t(d.CQModMaxCount)
	ax.cq_mod_caps.max_cq_period = C.uint16_t(d.CQModMaxPeriod)
	ax.max_dm_size = C.uint64_t(d.MaxDMSize)
	ax.phys_port_cnt_ex = C.uint32_t(d.PhysPortCntEx)

	f.f.ctx.num_comp_vectors = C.int(d.NumCompVectors)
	f.f.max_inline = C.uint32_t(d.MaxInline)
	f.f.legacy = 0
	if d.Legacy {
		f.f.legacy = 1
	}
}

// SetPort sets what port n (1-based, at most MaxPorts) reports.
func (f *Fake) SetPort(n int, p Port) {
	c := &f.f.port[n-1]
	*c = C.struct_ibv_port_attr{}
	c.state = C.enum_ibv_port_state(p.State)
	c.max_mtu = C.enum_ibv_mtu(p.MaxMTU)
	c.active_mtu = C.enum_ibv_mtu(p.ActiveMTU)
	c.gid_tbl_len = C.int(p.GIDTblLen)
	c.port_cap_flags = C.uint32_t(p.PortCapFlags)
	c.max_msg_sz = C.uint32_t(p.MaxMsgSz)
	c.bad_pkey_cntr = C.uint32_t(p.BadPkeyCntr)
	c.qkey_viol_cntr = C.uint32_t(p.QKeyViolCntr)
	c.pkey_tbl_len = C.uint16_t(p.PkeyTblLen)
	c.lid = C.uint16_t(p.LID)
	c.sm_lid = C.uint16_t(p.SMLID)
	c.lmc = C.uint8_t(p.LMC)
	c.max_vl_num = C.uint8_t(p.MaxVLNum)
	c.sm_sl = C.uint8_t(p.SMSL)
	c.subnet_timeout = C.uint8_t(p.SubnetTimeout)
	c.init_type_reply = C.uint8_t(p.InitTypeReply)
	c.active_width = C.uint8_t(p.ActiveWidth)
	c.active_speed = C.uint8_t(p.ActiveSpeed)
	c.phys_state = C.uint8_t(p.PhysState)
	c.link_layer = C.uint8_t(p.LinkLayer)
	c.port_cap_flags2 = C.uint16_t(p.PortCapFlags2)
}

// SetGIDs sets the GID table ibv_query_gid_table returns (at most MaxGIDs
// entries, of every port).
func (f *Fake) SetGIDs(gids []GID) {
	if len(gids) > MaxGIDs {
		panic("fakeverbs: too many GIDs")
	}
	for i, g := range gids {
		e := &f.f.gid[i]
		*e = C.struct_ibv_gid_entry{}
		*(*[16]byte)(unsafe.Pointer(&e.gid)) = g.GID
		e.gid_index = C.uint32_t(g.Index)
		e.port_num = C.uint32_t(g.Port)
		e.gid_type = C.uint32_t(g.Type)
		e.ndev_ifindex = C.uint32_t(g.NdevIfindex)
	}
	f.f.ngid = C.int(len(gids))
}

// FailAllocPD makes alloc_pd fail with errno (0: succeed).
func (f *Fake) FailAllocPD(errno syscall.Errno) { f.f.fail_alloc_pd = C.int(errno) }

// FailCreateQP makes every create_qp fail with errno (0: succeed).
func (f *Fake) FailCreateQP(errno syscall.Errno) { f.f.fail_create_qp = C.int(errno) }

// Live is the number of PDs, CQs and QPs the control path created and has
// not destroyed.
func (f *Fake) Live() (pds, cqs, qps int) { return int(f.f.npd), int(f.f.ncq), int(f.f.nqp) }

// QPsCreated is the number of QPs created through the control path.
func (f *Fake) QPsCreated() int { return int(f.f.qps_created) }

// Closed is the number of close_device calls.
func (f *Fake) Closed() int { return int(f.f.closed) }

// bigEndian returns v's bytes in network order, read as a host integer
// (what a __be64 field holds).
func bigEndian(v uint64) uint64 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return binary.NativeEndian.Uint64(b[:])
}
