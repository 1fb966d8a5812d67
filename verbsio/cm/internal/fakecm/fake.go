//go:build linux && cgo && ibverbs

package fakecm

/*
#include <stdlib.h>
#include <string.h>
#include "fake.h"

static struct rdma_cm_event *fakecm_event(void) { return calloc(1, sizeof(struct rdma_cm_event) + 256); }
static void *fakecm_event_pd(struct rdma_cm_event *ev) { return ev + 1; }
static void fakecm_set_conn(struct rdma_cm_event *ev, uint8_t len, uint8_t resp, uint8_t init, uint32_t qpn, uint8_t srq)
{
	ev->param.conn.private_data = len ? fakecm_event_pd(ev) : NULL;
	ev->param.conn.private_data_len = len;
	ev->param.conn.responder_resources = resp;
	ev->param.conn.initiator_depth = init;
	ev->param.conn.qp_num = qpn;
	ev->param.conn.srq = srq;
}
static void fakecm_set_ud(struct rdma_cm_event *ev, uint8_t len, uint32_t qpn, uint32_t qkey, const void *dgid)
{
	ev->param.ud.private_data = len ? fakecm_event_pd(ev) : NULL;
	ev->param.ud.private_data_len = len;
	ev->param.ud.qp_num = qpn;
	ev->param.ud.qkey = qkey;
	ev->param.ud.ah_attr.is_global = 1;
	ev->param.ud.ah_attr.port_num = 1;
	ev->param.ud.ah_attr.grh.hop_limit = 64;
	memcpy(ev->param.ud.ah_attr.grh.dgid.raw, dgid, 16);
}
static const void *fakecm_table_ptr(void) { return &fakecm_table; }
*/
import "C"

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"syscall"
	"unsafe"
)

// Fake is the fake librdmacm; one exists at a time.
type Fake struct{}

// New makes the fake; its identifiers sit on a device named device.
func New(device string) *Fake {
	cs := C.CString(device)
	defer C.free(unsafe.Pointer(cs))
	if C.fakecm_new(cs) == nil {
		panic("fakecm: out of memory")
	}
	return &Fake{}
}

// Free releases the fake and the events still queued.
func (*Fake) Free() { C.fakecm_free() }

// Table returns the struct rperf_rdmacm * of the fake.
func (*Fake) Table() unsafe.Pointer { return unsafe.Pointer(C.fakecm_table_ptr()) }

// Calls returns the calls made so far, in order.
func (*Fake) Calls() []string {
	s := strings.TrimSuffix(C.GoString(&C.fakecm.calls[0]), ";")
	if s == "" {
		return nil
	}
	return strings.Split(s, ";")
}

// Fail makes the call op ("connect", "resolve_addr", ...) fail with errno
// from now on; "" fails none.
func (*Fake) Fail(op string, errno syscall.Errno) {
	cs := C.CString(op)
	defer C.free(unsafe.Pointer(cs))
	C.strncpy(&C.fakecm.fail_op[0], cs, 31)
	C.fakecm.fail_errno = C.int(errno)
}

// LiveIDs is how many identifiers exist; Acks how many events were acked.
func (*Fake) LiveIDs() int { return int(C.fakecm.live_ids) }

// Acks is how many events were acknowledged.
func (*Fake) Acks() int { return int(C.fakecm.acks) }

// Conn is what the last connect or accept handed the library.
type Conn struct {
	Accept             bool
	PrivateData        []byte
	ResponderResources uint8
	InitiatorDepth     uint8
	RetryCount         uint8
	RNRRetryCount      uint8
	SRQ                bool
	QPNum              uint32
}

// LastConn returns the last connect's or accept's parameters.
func (*Fake) LastConn() Conn {
	c := &C.fakecm.conn
	return Conn{Accept: C.fakecm.accepted != 0, PrivateData: C.GoBytes(unsafe.Pointer(&C.fakecm.conn_pd[0]), C.int(c.private_data_len)),
		ResponderResources: uint8(c.responder_resources), InitiatorDepth: uint8(c.initiator_depth),
		RetryCount: uint8(c.retry_count), RNRRetryCount: uint8(c.rnr_retry_count), SRQ: c.srq != 0, QPNum: uint32(c.qp_num)}
}

// Rejected returns the private data of the last reject.
func (*Fake) Rejected() []byte {
	return C.GoBytes(unsafe.Pointer(&C.fakecm.reject_pd[0]), C.fakecm.reject_len)
}

// Option returns the last option set: its name, value and size in bytes.
func (*Fake) Option() (name, val, size int) {
	return int(C.fakecm.opt_name), int(C.fakecm.opt_val), int(C.fakecm.opt_len)
}

// Path is a path record given with RDMA_OPTION_IB_PATH, decoded from
// network order.
type Path struct {
	Flags            uint32
	ServiceID        uint64
	DGID, SGID       [16]byte
	FlowLabel        uint32
	HopLimit, TClass uint8
	Reversible       bool
	NumPath          uint8
	PKey             uint16
	MTU, MTUSelector uint8
	PacketLifeTime   uint8
}

// PathSet returns the last path record set, and whether one was.
func (*Fake) PathSet() (Path, bool) {
	pd := &C.fakecm.path_data
	b := C.GoBytes(unsafe.Pointer(&pd.path), C.int(unsafe.Sizeof(pd.path)))
	be := binary.BigEndian
	p := Path{Flags: uint32(pd.flags), ServiceID: be.Uint64(b[0:]), FlowLabel: be.Uint32(b[44:]) >> 8, HopLimit: uint8(be.Uint32(b[44:])),
		TClass: b[48], Reversible: b[49]&0x80 != 0, NumPath: b[49] & 0x7f, PKey: be.Uint16(b[50:]),
		MTU: b[54] & 0x3f, MTUSelector: b[54] >> 6, PacketLifeTime: b[56] & 0x3f}
	copy(p.DGID[:], b[8:24])
	copy(p.SGID[:], b[24:40])
	return p, C.fakecm.path_set != 0
}

// QPAttr is what init_qp_attr answers for one state.
type QPAttr struct {
	Mask            int
	PathMTU         int
	DestQPN, RQPSN  uint32
	SQPSN           uint32
	Timeout         uint8
	RetryCnt        uint8
	RNRRetry        uint8
	MinRNRTimer     uint8
	MaxRdAtomic     uint8
	MaxDestRdAtomic uint8
	QKey            uint32
	PortNum         uint8
	DGID            [16]byte
}

// SetQPAttr sets init_qp_attr's answer for state (1 INIT, 2 RTR, 3 RTS).
func (*Fake) SetQPAttr(state int, a QPAttr) {
	q := &C.fakecm.qp_attr[state]
	q.path_mtu = C.enum_ibv_mtu(a.PathMTU)
	q.dest_qp_num = C.uint32_t(a.DestQPN)
	q.rq_psn = C.uint32_t(a.RQPSN)
	q.sq_psn = C.uint32_t(a.SQPSN)
	q.timeout = C.uint8_t(a.Timeout)
	q.retry_cnt = C.uint8_t(a.RetryCnt)
	q.rnr_retry = C.uint8_t(a.RNRRetry)
	q.min_rnr_timer = C.uint8_t(a.MinRNRTimer)
	q.max_rd_atomic = C.uint8_t(a.MaxRdAtomic)
	q.max_dest_rd_atomic = C.uint8_t(a.MaxDestRdAtomic)
	q.qkey = C.uint32_t(a.QKey)
	q.port_num = C.uint8_t(a.PortNum)
	q.ah_attr.is_global = 1
	q.ah_attr.port_num = C.uint8_t(a.PortNum)
	q.ah_attr.grh.hop_limit = 64
	*(*[16]byte)(unsafe.Pointer(&q.ah_attr.grh.dgid)) = a.DGID
	C.fakecm.qp_mask[state] = C.int(a.Mask)
}

// Event is an event to queue, as the kernel would report it.
type Event struct {
	Type, Status int
	// ID and Listen are struct rdma_cm_id * (ID of the cm package's
	// handle, or of Child).
	ID, Listen         unsafe.Pointer
	UD                 bool
	PrivateData        []byte
	ResponderResources uint8
	InitiatorDepth     uint8
	QPNum, QKey        uint32
	SRQ                bool
	DGID               [16]byte // UD: the address handle's
}

// Push queues e; the channel's fd becomes readable.
func (*Fake) Push(e Event) {
	ev := C.fakecm_event()
	ev.id = (*C.struct_rdma_cm_id)(e.ID)
	ev.listen_id = (*C.struct_rdma_cm_id)(e.Listen)
	ev.event = C.enum_rdma_cm_event_type(e.Type)
	ev.status = C.int(e.Status)
	n := min(len(e.PrivateData), 255)
	if n > 0 {
		C.memcpy(C.fakecm_event_pd(ev), unsafe.Pointer(&e.PrivateData[0]), C.size_t(n))
	}
	if e.UD {
		dg := e.DGID
		C.fakecm_set_ud(ev, C.uint8_t(n), C.uint32_t(e.QPNum), C.uint32_t(e.QKey), unsafe.Pointer(&dg[0]))
	} else {
		srq := C.uint8_t(0)
		if e.SRQ {
			srq = 1
		}
		C.fakecm_set_conn(ev, C.uint8_t(n), C.uint8_t(e.ResponderResources), C.uint8_t(e.InitiatorDepth), C.uint32_t(e.QPNum), srq)
	}
	C.fakecm_push(ev)
}

// Child makes the identifier of a request from src to dst on listen, as
// the kernel does before CONNECT_REQUEST.
func (*Fake) Child(listen unsafe.Pointer, src, dst netip.AddrPort) unsafe.Pointer {
	s, d := sockaddr(src), sockaddr(dst)
	return unsafe.Pointer(C.fakecm_child((*C.struct_rdma_cm_id)(listen), unsafe.Pointer(&s[0]), unsafe.Pointer(&d[0])))
}

// sockaddr is an IPv4 address as struct sockaddr_in bytes.
func sockaddr(a netip.AddrPort) [128]byte {
	var b [128]byte
	binary.NativeEndian.PutUint16(b[0:], syscall.AF_INET)
	binary.BigEndian.PutUint16(b[2:], a.Port())
	v4 := a.Addr().As4()
	copy(b[4:8], v4[:])
	return b
}
