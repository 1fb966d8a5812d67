//go:build linux && cgo && ibverbs

package hw

/*
#cgo LDFLAGS: -libverbs
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"unsafe"

	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// Built is true in this build: the provider opens devices through
// libibverbs.
const Built = true

// Devices implements verbsio.Provider with ibv_get_device_list: name, node
// GUID and transport from libibverbs, port count and netdev from sysfs.
// Without kernel RDMA support (no uverbs) the list is empty and the error
// nil, as on a machine with no RDMA device.
func (Provider) Devices() ([]verbsio.DeviceInfo, error) {
	devs, free, err := deviceList()
	if err != nil {
		return []verbsio.DeviceInfo{}, err
	}
	defer free()
	out := make([]verbsio.DeviceInfo, 0, len(devs))
	for _, d := range devs {
		out = append(out, deviceInfo(d))
	}
	return out, nil
}

// deviceList returns ibv_get_device_list's devices and the function that
// frees the list. No kernel RDMA support (ENOSYS: no uverbs) is an empty
// list, not an error.
func deviceList() ([]*C.struct_ibv_device, func(), error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		e := errnoOf(err, unix.EIO)
		if e == unix.ENOSYS || e == unix.ENOENT {
			return nil, func() {}, nil
		}
		return nil, nil, verbsio.Errorf("get_device_list", e, "libibverbs could not list the RDMA devices")
	}
	return unsafe.Slice(list, int(n)), func() { C.ibv_free_device_list(list) }, nil
}

func deviceInfo(d *C.struct_ibv_device) verbsio.DeviceInfo {
	name := C.GoString(C.ibv_get_device_name(d))
	info := verbsio.DeviceInfo{
		Name:      name,
		Provider:  ProviderName,
		Transport: transportName(int(d.transport_type)),
		NodeGUID:  be64(uint64(C.ibv_get_device_guid(d))),
		Netdev:    sysfsNetdev(sysfsRoot, name),
		Ports:     len(sysfsPortNumbers(sysfsRoot, name)),
	}
	if info.Ports == 0 {
		// sysfs unreadable: ask the device.
		if ctx := C.ibv_open_device(d); ctx != nil {
			var a C.struct_ibv_device_attr
			if C.ibv_query_device(ctx, &a) == 0 {
				info.Ports = int(a.phys_port_cnt)
			}
			C.ibv_close_device(ctx)
		}
	}
	return info
}

// transportName names enum ibv_transport_type as DeviceInfo.Transport does,
// with ibv_devinfo's words.
func transportName(t int) string {
	switch t {
	case C.IBV_TRANSPORT_IB:
		return "InfiniBand"
	case C.IBV_TRANSPORT_IWARP:
		return "iWARP"
	case C.IBV_TRANSPORT_USNIC:
		return "usNIC"
	case C.IBV_TRANSPORT_USNIC_UDP:
		return "usNIC UDP"
	case C.IBV_TRANSPORT_UNSPECIFIED:
		return "unspecified"
	}
	return "invalid transport"
}

// be64 converts a __be64 as read from a C struct to host order.
func be64(v uint64) uint64 {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

// Open implements verbsio.Provider with ibv_open_device.
func (Provider) Open(name string) (verbsio.ContextImpl, error) {
	devs, free, err := deviceList()
	if err != nil {
		return nil, err
	}
	defer free()
	var names []string
	for _, d := range devs {
		dn := C.GoString(C.ibv_get_device_name(d))
		if dn != name {
			names = append(names, dn)
			continue
		}
		ctx, err := C.ibv_open_device(d)
		if ctx == nil {
			e := errnoOf(err, unix.EIO)
			detail := "ibv_open_device failed"
			if e == unix.EACCES || e == unix.EPERM {
				detail += "; check the permissions of /dev/infiniband/" + C.GoString(&d.dev_name[0])
			}
			return nil, verbsio.Errorf("open_device", e, "%s: %s", name, detail)
		}
		return newContext(name, unsafe.Pointer(ctx), unsafe.Pointer(&C.rperf_libibverbs)), nil
	}
	detail := "no RDMA device named " + name
	if len(devs) == 0 {
		detail += "; libibverbs sees no RDMA device on this machine"
	} else {
		detail += "; libibverbs lists: " + strings.Join(names, ", ")
	}
	return nil, &verbsio.Error{Op: "open_device", Errno: unix.ENODEV, Detail: detail}
}

// openContexts keeps every open context reachable until Close, so that
// the runtime.Pinner of a registered Go buffer is never collected while
// it still pins (the runtime panics on such a leak).
var openContexts struct {
	sync.Mutex
	set map[*hwContext]struct{}
}

// hwContext is an open device. Setup methods lock mu; the objects it
// created are tracked so that Close can release them in dependency order.
type hwContext struct {
	name string

	mu     sync.Mutex
	ctx    *C.struct_ibv_context // nil once closed
	verbs  *C.struct_rperf_verbs // the control-path calls: libibverbs, or a test's fake
	inline *inlineProbe          // the inline probe's answer, once QueryDevice ran it
	pds    map[*hwPD]struct{}
	mrs    map[*hwMR]struct{}
	cqs    map[*hwCQ]struct{}
	qps    map[*hwQP]struct{}
	srqs   map[*hwSRQ]struct{}
	ahs    map[*hwAH]struct{}
	allocs map[uintptr][]byte // Alloc'd mappings by first address
}

// newContext wraps an open struct ibv_context * whose control-path calls
// go through the struct rperf_verbs * verbs (rperf_libibverbs, or a fake
// provider's table in tests).
func newContext(name string, ctx, verbs unsafe.Pointer) *hwContext {
	c := &hwContext{
		name:   name,
		ctx:    (*C.struct_ibv_context)(ctx),
		verbs:  (*C.struct_rperf_verbs)(verbs),
		pds:    map[*hwPD]struct{}{},
		mrs:    map[*hwMR]struct{}{},
		cqs:    map[*hwCQ]struct{}{},
		qps:    map[*hwQP]struct{}{},
		srqs:   map[*hwSRQ]struct{}{},
		ahs:    map[*hwAH]struct{}{},
		allocs: map[uintptr][]byte{},
	}
	openContexts.Lock()
	if openContexts.set == nil {
		openContexts.set = map[*hwContext]struct{}{}
	}
	openContexts.set[c] = struct{}{}
	openContexts.Unlock()
	return c
}

// errClosedCtx is the error of a setup call on a closed context.
func errClosedCtx(op string) error {
	return &verbsio.Error{Op: op, Errno: unix.EBADF, Detail: "the device context is closed"}
}

// cerr turns the result of a libibverbs call that returns 0 or an errno
// (or -1 with errno set) into an *verbsio.Error.
func cerr(op string, ret C.int, err error, format string, args ...any) *verbsio.Error {
	e := unix.Errno(ret)
	if ret < 0 {
		e = errnoOf(err, unix.EIO)
	}
	return verbsio.Errorf(op, e, format, args...)
}

// QueryDevice implements verbsio.ContextImpl with ibv_query_device_ex,
// falling back to ibv_query_device for providers without the extended
// query, in which case the extended fields are listed in Unknown. A device
// that answers the extended query and reports zero for a capability does
// not have it. MaxMsgSize is port 1's max_msg_sz. MaxInlineData, which
// verbs reports per QP and not per device, is what the device grants an RC
// QP: the first QueryDevice of a context probes it by creating QPs (see
// probeInline); if even a QP without inline data cannot be created it stays
// in Unknown.
func (c *hwContext) QueryDevice() (verbsio.DeviceAttr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return verbsio.DeviceAttr{}, errClosedCtx("query_device")
	}
	var ax C.struct_ibv_device_attr_ex
	var extended C.int
	if ret, err := C.rperf_query_device_ex(c.verbs, c.ctx, &ax, &extended); ret != 0 {
		return verbsio.DeviceAttr{}, cerr("query_device", ret, err, "%s", c.name)
	}
	attr := deviceAttrFromC(&ax, extended != 0, int(c.ctx.num_comp_vectors))
	var pa C.struct_ibv_port_attr
	if attr.PhysPortCnt > 0 && C.rperf_query_port(c.verbs, c.ctx, 1, &pa) == 0 {
		attr.MaxMsgSize = uint64(pa.max_msg_sz)
	} else {
		attr.Unknown = append(attr.Unknown, "MaxMsgSize")
	}
	if c.inline == nil {
		c.inline = c.probeInlineLocked()
	}
	if c.inline.err == nil {
		attr.MaxInlineData = c.inline.max
	} else {
		attr.Unknown = append(attr.Unknown, "MaxInlineData")
	}
	return attr, nil
}

// deviceAttrFromC converts what ibv_query_device_ex answered; extended
// says whether the extended query did (else only orig_attr is filled).
func deviceAttrFromC(ax *C.struct_ibv_device_attr_ex, extended bool, numCompVectors int) verbsio.DeviceAttr {
	a := &ax.orig_attr
	attr := verbsio.DeviceAttr{
		FWVer:           C.GoString(&a.fw_ver[0]),
		NodeGUID:        be64(uint64(a.node_guid)),
		SysImageGUID:    be64(uint64(a.sys_image_guid)),
		VendorID:        uint32(a.vendor_id),
		VendorPartID:    uint32(a.vendor_part_id),
		HWVer:           uint32(a.hw_ver),
		MaxMRSize:       uint64(a.max_mr_size),
		PageSizeCap:     uint64(a.page_size_cap),
		MaxQP:           int(a.max_qp),
		MaxQPWR:         int(a.max_qp_wr),
		DeviceCapFlags:  uint64(a.device_cap_flags),
		MaxSGE:          int(a.max_sge),
		MaxSGERD:        int(a.max_sge_rd),
		MaxCQ:           int(a.max_cq),
		MaxCQE:          int(a.max_cqe),
		MaxMR:           int(a.max_mr),
		MaxPD:           int(a.max_pd),
		MaxQPRdAtom:     int(a.max_qp_rd_atom),
		MaxQPInitRdAtom: int(a.max_qp_init_rd_atom),
		MaxResRdAtom:    int(a.max_res_rd_atom),
		AtomicCap:       verbsio.AtomicCap(a.atomic_cap),
		MaxSRQ:          int(a.max_srq),
		MaxSRQWR:        int(a.max_srq_wr),
		MaxSRQSGE:       int(a.max_srq_sge),
		MaxAH:           int(a.max_ah),
		MaxPkeys:        int(a.max_pkeys),
		LocalCAAckDelay: uint8(a.local_ca_ack_delay),
		PhysPortCnt:     int(a.phys_port_cnt),
		SendPaths:       []string{"generic", "inline"},
		Ext: &verbsio.DeviceAttrEx{
			MaxEERdAtom:           int(a.max_ee_rd_atom),
			MaxEEInitRdAtom:       int(a.max_ee_init_rd_atom),
			MaxEE:                 int(a.max_ee),
			MaxRDD:                int(a.max_rdd),
			MaxMW:                 int(a.max_mw),
			MaxRawIPv6QP:          int(a.max_raw_ipv6_qp),
			MaxRawEthyQP:          int(a.max_raw_ethy_qp),
			MaxMcastGrp:           int(a.max_mcast_grp),
			MaxMcastQPAttach:      int(a.max_mcast_qp_attach),
			MaxTotalMcastQPAttach: int(a.max_total_mcast_qp_attach),
			MaxFMR:                int(a.max_fmr),
			MaxMapPerFMR:          int(a.max_map_per_fmr),
			NumCompVectors:        numCompVectors,
		},
	}
	if !extended {
		attr.Unknown = append(attr.Unknown, "TSO", "PacketPacing", "MaxDMSize", "RawPacketCaps",
			"ODPCaps", "CompletionTimestampMask", "HCACoreClock", "DeviceCapFlagsEx", "RSSCaps",
			"MaxWQTypeRQ", "TMCaps", "CQModCaps")
		return attr
	}
	// device_cap_flags_ex repeats device_cap_flags in its low 32 bits.
	attr.DeviceCapFlags |= uint64(ax.device_cap_flags_ex)
	attr.TSO = verbsio.TSOCaps{
		MaxTSO:      uint32(ax.tso_caps.max_tso),
		SupportedQP: qpTypesFromMask(uint32(ax.tso_caps.supported_qpts)),
	}
	attr.PacketPacing = verbsio.PacingCaps{
		RateLimitMinKbps: uint32(ax.packet_pacing_caps.qp_rate_limit_min),
		RateLimitMaxKbps: uint32(ax.packet_pacing_caps.qp_rate_limit_max),
		SupportedQP:      qpTypesFromMask(uint32(ax.packet_pacing_caps.supported_qpts)),
	}
	attr.MaxDMSize = uint64(ax.max_dm_size)
	attr.RawPacketCaps = verbsio.RawPacketCaps(ax.raw_packet_caps)
	if ax.phys_port_cnt_ex > 0 {
		attr.PhysPortCnt = int(ax.phys_port_cnt_ex)
	}
	x := attr.Ext
	x.ODP = verbsio.ODPCaps{
		General: uint64(ax.odp_caps.general_caps),
		RC:      uint32(ax.odp_caps.per_transport_caps.rc_odp_caps),
		UC:      uint32(ax.odp_caps.per_transport_caps.uc_odp_caps),
		UD:      uint32(ax.odp_caps.per_transport_caps.ud_odp_caps),
		XRC:     uint32(ax.xrc_odp_caps),
	}
	x.CompletionTimestampMask = uint64(ax.completion_timestamp_mask)
	x.HCACoreClock = uint64(ax.hca_core_clock)
	x.DeviceCapFlagsEx = uint64(ax.device_cap_flags_ex)
	x.RSS = verbsio.RSSCaps{
		SupportedQP:                qpTypesFromMask(uint32(ax.rss_caps.supported_qpts)),
		MaxRWQIndirectionTables:    uint32(ax.rss_caps.max_rwq_indirection_tables),
		MaxRWQIndirectionTableSize: uint32(ax.rss_caps.max_rwq_indirection_table_size),
		RxHashFieldsMask:           uint64(ax.rss_caps.rx_hash_fields_mask),
		RxHashFunction:             uint8(ax.rss_caps.rx_hash_function),
	}
	x.MaxWQTypeRQ = uint32(ax.max_wq_type_rq)
	x.TM = verbsio.TMCaps{
		MaxRndvHdrSize: uint32(ax.tm_caps.max_rndv_hdr_size),
		MaxNumTags:     uint32(ax.tm_caps.max_num_tags),
		Flags:          uint32(ax.tm_caps.flags),
		MaxOps:         uint32(ax.tm_caps.max_ops),
		MaxSGE:         uint32(ax.tm_caps.max_sge),
	}
	x.CQMod = verbsio.CQModCaps{
		MaxCQCount:  uint16(ax.cq_mod_caps.max_cq_count),
		MaxCQPeriod: uint16(ax.cq_mod_caps.max_cq_period),
	}
	return attr
}

// QueryPort implements verbsio.ContextImpl with ibv_query_port. Netdev
// comes from sysfs (the netdev of GID 0, else the device's).
func (c *hwContext) QueryPort(port uint8) (verbsio.PortAttr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return verbsio.PortAttr{}, errClosedCtx("query_port")
	}
	var pa C.struct_ibv_port_attr
	if ret, err := C.rperf_query_port(c.verbs, c.ctx, C.uint8_t(port), &pa); ret != 0 {
		return verbsio.PortAttr{}, cerr("query_port", ret, err, "%s port %d (ports are numbered from 1)", c.name, port)
	}
	return portAttrFromC(&pa, sysfsPortNetdev(sysfsRoot, c.name, int(port))), nil
}

func portAttrFromC(pa *C.struct_ibv_port_attr, netdev string) verbsio.PortAttr {
	return verbsio.PortAttr{
		State:        verbsio.PortState(pa.state),
		MaxMTU:       verbsio.MTU(pa.max_mtu),
		ActiveMTU:    verbsio.MTU(pa.active_mtu),
		GIDTblLen:    int(pa.gid_tbl_len),
		PortCapFlags: uint32(pa.port_cap_flags),
		MaxMsgSize:   uint64(pa.max_msg_sz),
		LID:          uint16(pa.lid),
		SMLID:        uint16(pa.sm_lid),
		LMC:          uint8(pa.lmc),
		SMSL:         uint8(pa.sm_sl),
		MaxVLNum:     uint8(pa.max_vl_num),
		PkeyTblLen:   int(pa.pkey_tbl_len),
		ActiveWidth:  uint8(pa.active_width),
		ActiveSpeed:  uint8(pa.active_speed),
		PhysState:    uint8(pa.phys_state),
		LinkLayer:    verbsio.LinkLayer(pa.link_layer),
		Netdev:       netdev,
		Ext: &verbsio.PortAttrEx{
			PortCapFlags2: uint16(pa.port_cap_flags2),
			BadPkeyCntr:   uint32(pa.bad_pkey_cntr),
			QKeyViolCntr:  uint32(pa.qkey_viol_cntr),
			SubnetTimeout: uint8(pa.subnet_timeout),
			InitTypeReply: uint8(pa.init_type_reply),
		},
	}
}

// QueryGIDTable implements verbsio.ContextImpl with ibv_query_gid_table
// (rdma-core 32 and later; it returns the valid entries of every port with
// their type and netdev). Where the kernel lacks that query it falls back to
// ibv_query_gid per index, with the type and netdev from sysfs gid_attrs.
func (c *hwContext) QueryGIDTable(port uint8) ([]verbsio.GIDEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return nil, errClosedCtx("query_gid")
	}
	var da C.struct_ibv_device_attr
	if ret, err := C.rperf_query_device(c.verbs, c.ctx, &da); ret != 0 {
		return nil, cerr("query_gid", ret, err, "%s: query device", c.name)
	}
	if port == 0 || int(port) > int(da.phys_port_cnt) {
		return nil, verbsio.Errorf("query_gid", unix.EINVAL, "%s has no port %d (ports are 1..%d)", c.name, port, da.phys_port_cnt)
	}
	// The table query wants room for every port's entries.
	total := 0
	var linkLayer verbsio.LinkLayer
	var tblLen int
	for p := 1; p <= int(da.phys_port_cnt); p++ {
		var pa C.struct_ibv_port_attr
		if ret, err := C.rperf_query_port(c.verbs, c.ctx, C.uint8_t(p), &pa); ret != 0 {
			return nil, cerr("query_gid", ret, err, "%s: query port %d", c.name, p)
		}
		total += int(pa.gid_tbl_len)
		if p == int(port) {
			linkLayer, tblLen = verbsio.LinkLayer(pa.link_layer), int(pa.gid_tbl_len)
		}
	}
	if total == 0 {
		return []verbsio.GIDEntry{}, nil
	}
	mem := C.calloc(C.size_t(total), C.sizeof_struct_ibv_gid_entry)
	if mem == nil {
		return nil, verbsio.Errorf("query_gid", unix.ENOMEM, "GID table of %d entries", total)
	}
	defer C.free(mem)
	ents := unsafe.Slice((*C.struct_ibv_gid_entry)(mem), total)
	got, err := C.rperf_query_gid_table(c.verbs, c.ctx, &ents[0], C.size_t(total))
	if got < 0 {
		e := unix.Errno(-got)
		if got == -1 {
			e = errnoOf(err, unix.EIO)
		}
		if e != unix.EOPNOTSUPP && e != unix.ENOSYS {
			return nil, verbsio.Errorf("query_gid", e, "%s: ibv_query_gid_table", c.name)
		}
		return c.gidTableLegacy(port, tblLen, linkLayer)
	}
	out := []verbsio.GIDEntry{}
	for _, e := range ents[:got] {
		if uint8(e.port_num) != port {
			continue
		}
		ent := verbsio.GIDEntry{
			Index: int(e.gid_index),
			GID:   *(*verbsio.GID)(unsafe.Pointer(&e.gid)),
			Type:  verbsio.GIDType(e.gid_type),
		}
		if e.ndev_ifindex != 0 {
			if ifi, err := net.InterfaceByIndex(int(e.ndev_ifindex)); err == nil {
				ent.Netdev = ifi.Name
			}
		}
		out = append(out, ent)
	}
	return out, nil
}

// gidTableLegacy reads a port's GIDs with ibv_query_gid, and their types and
// netdevs from sysfs gid_attrs. c.mu is held.
func (c *hwContext) gidTableLegacy(port uint8, tblLen int, ll verbsio.LinkLayer) ([]verbsio.GIDEntry, error) {
	out := []verbsio.GIDEntry{}
	sysLL := sysfs.LinkLayerInfiniBand
	if ll == verbsio.LinkLayerEthernet {
		sysLL = sysfs.LinkLayerEthernet
	}
	for i := 0; i < tblLen; i++ {
		var g C.union_ibv_gid
		if ret, err := C.ibv_query_gid(c.ctx, C.uint8_t(port), C.int(i), &g); ret != 0 {
			return nil, cerr("query_gid", ret, err, "%s port %d index %d", c.name, port, i)
		}
		gid := *(*verbsio.GID)(unsafe.Pointer(&g))
		if gid.IsZero() {
			continue
		}
		ent := verbsio.GIDEntry{Index: i, GID: gid, Type: gidTypeFromSysfs(sysfsGIDType(sysfsRoot, c.name, int(port), i, sysLL))}
		ent.Netdev = sysfsGIDNetdev(sysfsRoot, c.name, int(port), i)
		out = append(out, ent)
	}
	return out, nil
}

// Alloc implements verbsio.ContextImpl: anonymous, page-aligned memory
// mapped with mmap, outside the Go heap. It is the memory to register:
// RegMR uses it as it is, while Go memory has to be pinned.
func (c *hwContext) Alloc(length int) ([]byte, error) {
	if length <= 0 {
		return nil, verbsio.Errorf("alloc", unix.EINVAL, "length %d", length)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return nil, errClosedCtx("alloc")
	}
	m, err := mmapAnon(length)
	if err != nil {
		return nil, err
	}
	c.allocs[uintptr(unsafe.Pointer(unsafe.SliceData(m)))] = m
	return m[:length:length], nil
}

// Free implements verbsio.ContextImpl: it unmaps memory returned by Alloc,
// and fails with EBUSY while a memory region covers part of it.
func (c *hwContext) Free(buf []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	m, ok := c.allocs[base]
	if !ok || len(buf) == 0 {
		return verbsio.Errorf("free", unix.EINVAL, "the buffer was not returned by this context's Alloc")
	}
	end := base + uintptr(len(m))
	for r := range c.mrs {
		if r.addr < end && base < r.addr+uintptr(r.length) {
			return verbsio.Errorf("free", unix.EBUSY, "memory region lkey %#x is registered on the buffer; deregister it first", r.lkey)
		}
	}
	delete(c.allocs, base)
	if err := unix.Munmap(m); err != nil {
		return verbsio.Errorf("free", errnoOf(err, unix.EINVAL), "munmap")
	}
	return nil
}

// AllocPD implements verbsio.ContextImpl with ibv_alloc_pd.
func (c *hwContext) AllocPD() (verbsio.PDImpl, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return nil, errClosedCtx("alloc_pd")
	}
	pd, err := C.ibv_alloc_pd(c.ctx)
	if pd == nil {
		return nil, verbsio.Errorf("alloc_pd", errnoOf(err, unix.ENOMEM), "%s", c.name)
	}
	p := &hwPD{c: c, pd: pd}
	c.pds[p] = struct{}{}
	return p, nil
}

// Close implements verbsio.ContextImpl. It destroys what the context
// created, in dependency order (QPs, SRQs, AHs, MRs, CQs with their
// completion channels, PDs), unmaps Alloc'd memory, which must no longer
// be touched, and closes the device. It returns the first error; the rest
// is still released.
func (c *hwContext) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return nil
	}
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for q := range c.qps {
		keep(q.destroyLocked())
	}
	for s := range c.srqs {
		keep(s.destroyLocked())
	}
	for a := range c.ahs {
		keep(a.destroyLocked())
	}
	for r := range c.mrs {
		keep(r.deregLocked())
	}
	for q := range c.cqs {
		keep(q.destroyLocked())
	}
	for p := range c.pds {
		keep(p.deallocLocked())
	}
	for base, m := range c.allocs {
		delete(c.allocs, base)
		keep(unix.Munmap(m))
	}
	if ret, err := C.rperf_close_device(c.verbs, c.ctx); ret != 0 {
		keep(cerr("close_device", ret, err, "%s", c.name))
	}
	c.ctx = nil
	openContexts.Lock()
	delete(openContexts.set, c)
	openContexts.Unlock()
	return first
}
