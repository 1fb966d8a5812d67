//go:build linux && cgo && ibverbs

package cm

/*
#cgo LDFLAGS: -lrdmacm -libverbs
#include <stdlib.h>
#include "rdmacm.h"
*/
import "C"

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
)

func init() {
	openKernelChannel = func() (kernelChannel, error) { return newCChannel(unsafe.Pointer(&C.rperf_librdmacm)) }
}

// cChannel is a librdmacm event channel behind a struct rperf_rdmacm
// table (the library's, or a test's fake).
type cChannel struct {
	v   *C.struct_rperf_rdmacm
	ch  *C.struct_rdma_event_channel
	mu  sync.Mutex
	ids map[*C.struct_rdma_cm_id]*cHandle
	ev  *C.struct_rperf_cm_event // next's scratch in C memory; one reader
}

// cHandle is one struct rdma_cm_id *.
type cHandle struct {
	c  *cChannel
	id *C.struct_rdma_cm_id
}

// cmErr is a librdmacm call's failure as verbsio reports verbs errors.
func cmErr(op string, errno C.int, format string, args ...any) error {
	return verbsio.Errorf(op, unix.Errno(errno), format, args...)
}

func newCChannel(v unsafe.Pointer) (*cChannel, error) {
	c := &cChannel{v: (*C.struct_rperf_rdmacm)(v), ids: map[*C.struct_rdma_cm_id]*cHandle{}}
	ch, err := C.rperf_cm_channel(c.v)
	if ch == nil {
		errno := C.int(unix.EIO)
		if e, ok := err.(syscall.Errno); ok && e != 0 {
			errno = C.int(e)
		}
		return nil, cmErr("rdma_create_event_channel", errno, "is the rdma_ucm module loaded and /dev/infiniband/rdma_cm there?")
	}
	c.ch = ch
	c.ev = (*C.struct_rperf_cm_event)(C.calloc(1, C.sizeof_struct_rperf_cm_event))
	return c, nil
}

func (c *cChannel) handle(id *C.struct_rdma_cm_id) *cHandle {
	if id == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.ids[id]
	if h == nil {
		h = &cHandle{c: c, id: id}
		c.ids[id] = h
	}
	return h
}

var portSpaces = map[PortSpace]C.int{PortSpaceTCP: C.RDMA_PS_TCP, PortSpaceUDP: C.RDMA_PS_UDP}

func (c *cChannel) createID(ps PortSpace) (kernelHandle, error) {
	cps, ok := portSpaces[ps]
	if !ok {
		return nil, cmErr("rdma_create_id", C.int(unix.EINVAL), "port space %s", ps)
	}
	var id *C.struct_rdma_cm_id
	if e := C.rperf_cm_create_id(c.v, c.ch, &id, cps); e != 0 {
		return nil, cmErr("rdma_create_id", e, "port space %s", ps)
	}
	return c.handle(id), nil
}

func (c *cChannel) next(timeout time.Duration) (kernelEvent, bool, error) {
	if r := C.rperf_cm_wait(c.ch, C.int(timeout.Milliseconds())); r < 0 {
		return kernelEvent{}, false, cmErr("rdma_get_cm_event", -r, "poll the event channel")
	} else if r == 0 {
		return kernelEvent{}, false, nil
	}
	e := c.ev
	if r := C.rperf_cm_take(c.v, c.ch, e); r == C.int(unix.EAGAIN) {
		return kernelEvent{}, false, nil
	} else if r != 0 {
		return kernelEvent{}, false, cmErr("rdma_get_cm_event", r, "")
	}
	return c.translate(e), true, nil
}

// translate turns the C copy of an event into a kernelEvent.
func (c *cChannel) translate(e *C.struct_rperf_cm_event) kernelEvent {
	ke := kernelEvent{typ: EventType(e.event), status: int(e.status), id: c.handle(e.id), isUD: e.ud != 0}
	if e.listen_id != nil {
		ke.listen = c.handle(e.listen_id)
	}
	var pd []byte
	if n := int(e.private_data_len); n > 0 {
		pd = C.GoBytes(unsafe.Pointer(&e.private_data[0]), C.int(n))
	}
	if ke.isUD {
		ke.ud = UDParam{PrivateData: pd, AH: ahFromC(&e.ah_attr), QPNum: uint32(e.qp_num), QKey: uint32(e.qkey)}
		return ke
	}
	ke.conn = ConnParam{PrivateData: pd, ResponderResources: uint8(e.responder_resources), InitiatorDepth: uint8(e.initiator_depth),
		FlowControl: e.flow_control != 0, RetryCount: uint8(e.retry_count), RNRRetryCount: uint8(e.rnr_retry_count),
		SRQ: e.srq != 0, QPNum: uint32(e.qp_num)}
	return ke
}

func (c *cChannel) close() {
	C.rperf_cm_close_channel(c.v, c.ch)
	C.free(unsafe.Pointer(c.ev))
	c.ev = nil
}

func (h *cHandle) call(op string, code, arg C.int, what string) error {
	if e := C.rperf_cm_call(h.c.v, h.id, code, arg); e != 0 {
		return cmErr(op, e, "%s", what)
	}
	return nil
}

func (h *cHandle) bind(a netip.AddrPort) error {
	sa := sockaddr(a)
	if e := C.rperf_cm_bind(h.c.v, h.id, unsafe.Pointer(&sa[0])); e != 0 {
		return cmErr("rdma_bind_addr", e, "%v", a)
	}
	return nil
}

func (h *cHandle) resolveAddr(src netip.Addr, dst netip.AddrPort, timeout time.Duration) error {
	d := sockaddr(dst)
	var sp unsafe.Pointer
	var s [128]byte
	if src.IsValid() {
		s = sockaddr(netip.AddrPortFrom(src, 0))
		sp = unsafe.Pointer(&s[0])
	}
	if e := C.rperf_cm_resolve_addr(h.c.v, h.id, sp, unsafe.Pointer(&d[0]), C.int(timeout.Milliseconds())); e != 0 {
		return cmErr("rdma_resolve_addr", e, "%v from %v", dst, src)
	}
	return nil
}

func (h *cHandle) resolveRoute(timeout time.Duration) error {
	return h.call("rdma_resolve_route", 1, C.int(timeout.Milliseconds()), "")
}

func (h *cHandle) setPath(p pathRecord) error {
	if e := C.rperf_cm_set_path(h.c.v, h.id, C.uint64_t(p.serviceID), (*C.uint8_t)(unsafe.Pointer(&p.dgid[0])),
		(*C.uint8_t)(unsafe.Pointer(&p.sgid[0])), C.uint32_t(p.flowLabel), C.uint8_t(p.hopLimit), C.uint8_t(p.trafficClass),
		C.uint16_t(p.pkey), C.uint8_t(p.mtu), C.uint8_t(p.packetLifeTime)); e != 0 {
		return cmErr("rdma_set_option", e, "RDMA_OPTION_IB_PATH: %v to %v, MTU %d", p.sgid, p.dgid, p.mtu.Bytes())
	}
	return nil
}

func (h *cHandle) listen(backlog int) error { return h.call("rdma_listen", 2, C.int(backlog), "") }
func (h *cHandle) establish() error         { return h.call("rdma_establish", 3, 0, "") }
func (h *cHandle) notify() error            { return h.call("rdma_notify", 4, 0, "COMM_EST") }
func (h *cHandle) disconnect() error        { return h.call("rdma_disconnect", 5, 0, "") }

func (h *cHandle) destroy() error {
	h.c.mu.Lock()
	delete(h.c.ids, h.id)
	h.c.mu.Unlock()
	return h.call("rdma_destroy_id", 0, 0, "")
}

func b2c(b bool) C.uint8_t {
	if b {
		return 1
	}
	return 0
}

func (h *cHandle) connect(p *ConnParam, qpn uint32, accept bool) error {
	var pd unsafe.Pointer
	if len(p.PrivateData) > 255 {
		return cmErr("rdma_connect", C.int(unix.EINVAL), "%d bytes of private data", len(p.PrivateData))
	}
	if len(p.PrivateData) > 0 {
		pd = unsafe.Pointer(&p.PrivateData[0])
	}
	acc, op := C.int(0), "rdma_connect"
	if accept {
		acc, op = 1, "rdma_accept"
	}
	if e := C.rperf_cm_conn(h.c.v, h.id, acc, pd, C.uint8_t(len(p.PrivateData)), C.uint8_t(p.ResponderResources),
		C.uint8_t(p.InitiatorDepth), b2c(p.FlowControl), C.uint8_t(p.RetryCount), C.uint8_t(p.RNRRetryCount),
		b2c(p.SRQ), C.uint32_t(qpn)); e != 0 {
		return cmErr(op, e, "QP %#x, %d bytes of private data", qpn, len(p.PrivateData))
	}
	return nil
}

func (h *cHandle) reject(pd []byte) error {
	var p unsafe.Pointer
	if len(pd) > 255 {
		return cmErr("rdma_reject", C.int(unix.EINVAL), "%d bytes of private data", len(pd))
	}
	if len(pd) > 0 {
		p = unsafe.Pointer(&pd[0])
	}
	if e := C.rperf_cm_reject(h.c.v, h.id, p, C.uint8_t(len(pd))); e != 0 {
		return cmErr("rdma_reject", e, "")
	}
	return nil
}

func (h *cHandle) setOption(o Option, v int) error {
	if e := C.rperf_cm_set_option(h.c.v, h.id, C.int(o), C.int(v)); e != 0 {
		return cmErr("rdma_set_option", e, "option %d = %d", o, v)
	}
	return nil
}

func (h *cHandle) initQPAttr(s verbsio.QPState) (verbsio.QPAttr, verbsio.QPAttrMask, error) {
	var a C.struct_ibv_qp_attr
	var m C.int
	if e := C.rperf_cm_init_qp_attr(h.c.v, h.id, C.int(s), &a, &m); e != 0 {
		return verbsio.QPAttr{}, 0, cmErr("rdma_init_qp_attr", e, "%s", s)
	}
	return qpAttrFromC(&a), verbsio.QPAttrMask(m), nil
}

func (h *cHandle) info() kernelInfo {
	var in C.struct_rperf_cm_info
	C.rperf_cm_info(h.id, &in)
	k := kernelInfo{
		src: addrPort((*[128]byte)(unsafe.Pointer(&in.src[0]))), dst: addrPort((*[128]byte)(unsafe.Pointer(&in.dst[0]))),
		device: C.GoString(&in.device[0]), port: uint8(in.port_num), qpType: verbsio.QPType(in.qp_type),
		routeKnow: in.num_paths > 0,
	}
	k.route = Route{SGID: *(*verbsio.GID)(unsafe.Pointer(&in.sgid[0])), DGID: *(*verbsio.GID)(unsafe.Pointer(&in.dgid[0])),
		PathMTU: verbsio.MTU(in.mtu), HopLimit: uint8(in.hop_limit), TrafficClass: uint8(in.traffic_class),
		FlowLabel: uint32(in.flow_label), PacketLifeTime: uint8(in.packet_life_time)}
	return k
}

// sockaddr is a as struct sockaddr_storage bytes.
func sockaddr(a netip.AddrPort) [128]byte {
	var b [128]byte
	ip := a.Addr()
	if ip.Is4() || ip.Is4In6() {
		binary.NativeEndian.PutUint16(b[0:], unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:], a.Port())
		v4 := ip.Unmap().As4()
		copy(b[4:8], v4[:])
		return b
	}
	binary.NativeEndian.PutUint16(b[0:], unix.AF_INET6)
	binary.BigEndian.PutUint16(b[2:], a.Port())
	v6 := ip.As16()
	copy(b[8:24], v6[:])
	return b
}

// addrPort reads struct sockaddr_storage bytes; the zero AddrPort for
// another family.
func addrPort(b *[128]byte) netip.AddrPort {
	port := binary.BigEndian.Uint16(b[2:])
	switch binary.NativeEndian.Uint16(b[0:]) {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), port)
	}
	return netip.AddrPort{}
}

func ahFromC(c *C.struct_ibv_ah_attr) verbsio.AHAttr {
	a := verbsio.AHAttr{DLID: uint16(c.dlid), SL: uint8(c.sl), PortNum: uint8(c.port_num), IsGlobal: c.is_global != 0}
	if a.IsGlobal {
		a.DGID = *(*verbsio.GID)(unsafe.Pointer(&c.grh.dgid))
		a.SGIDIndex = uint8(c.grh.sgid_index)
		a.HopLimit = uint8(c.grh.hop_limit)
		a.TrafficClass = uint8(c.grh.traffic_class)
		a.FlowLabel = uint32(c.grh.flow_label)
	}
	return a
}

func qpAttrFromC(c *C.struct_ibv_qp_attr) verbsio.QPAttr {
	return verbsio.QPAttr{
		State: verbsio.QPState(c.qp_state), PathMTU: verbsio.MTU(c.path_mtu), QKey: uint32(c.qkey),
		RQPSN: uint32(c.rq_psn), SQPSN: uint32(c.sq_psn), DestQPN: uint32(c.dest_qp_num),
		AccessFlags: verbsio.Access(c.qp_access_flags), AH: ahFromC(&c.ah_attr), PkeyIndex: uint16(c.pkey_index),
		PortNum: uint8(c.port_num), Timeout: uint8(c.timeout), RetryCnt: uint8(c.retry_cnt), RNRRetry: uint8(c.rnr_retry),
		MinRNRTimer: uint8(c.min_rnr_timer), MaxRdAtomic: uint8(c.max_rd_atomic), MaxDestRdAtomic: uint8(c.max_dest_rd_atomic),
	}
}
