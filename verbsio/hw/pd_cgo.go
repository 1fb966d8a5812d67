//go:build linux && cgo && ibverbs

package hw

/*
#include <stdlib.h>
#include <string.h>
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// hwPD is a protection domain (struct ibv_pd).
type hwPD struct {
	c  *hwContext
	pd *C.struct_ibv_pd // nil once deallocated
}

// Dealloc implements verbsio.PDImpl with ibv_dealloc_pd; the kernel fails
// it with EBUSY while objects use the PD.
func (p *hwPD) Dealloc() error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.deallocLocked()
}

func (p *hwPD) deallocLocked() error {
	if p.pd == nil {
		return nil
	}
	if ret, err := C.ibv_dealloc_pd(p.pd); ret != 0 {
		return cerr("dealloc_pd", ret, err, "objects still use the protection domain")
	}
	p.pd = nil
	delete(p.c.pds, p)
	return nil
}

// checkLocked returns an error when the PD or its context is gone.
func (p *hwPD) checkLocked(op string) error {
	if p.c.ctx == nil {
		return errClosedCtx(op)
	}
	if p.pd == nil {
		return &verbsio.Error{Op: op, Errno: unix.EBADF, Detail: "the protection domain was deallocated"}
	}
	return nil
}

// hwMR is a memory region (struct ibv_mr).
type hwMR struct {
	c      *hwContext
	mr     *C.struct_ibv_mr // nil once deregistered
	lkey   uint32
	rkey   uint32
	addr   uintptr
	length int
	pin    runtime.Pinner // pins a Go buffer for the region's lifetime
}

// RegMR implements verbsio.PDImpl with ibv_reg_mr.
//
// Memory rules: the device reads and writes the buffer long after RegMR
// returns, so C (the kernel and the NIC) keeps the pointer. cgo allows
// that only for memory outside the Go heap or for Go memory pinned with
// runtime.Pinner. Memory from (*Context).Alloc is mmap'd outside the heap
// and is registered as it is. Any other buffer is pinned here, with a
// runtime.Pinner held by the region until Dereg (or Close): the garbage
// collector cannot free or reuse it while the device may write into it.
// Pinning keeps the whole Go allocation that holds buf alive; a []byte has
// no pointers, so the device writing into it cannot confuse the collector.
// Prefer Alloc'd memory: it is page-aligned and shares no page with the Go
// runtime's own data.
func (p *hwPD) RegMR(buf []byte, access verbsio.Access) (verbsio.MRImpl, error) {
	if len(buf) == 0 {
		return nil, verbsio.Errorf("reg_mr", unix.EINVAL, "empty buffer")
	}
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if err := p.checkLocked("reg_mr"); err != nil {
		return nil, err
	}
	base := unsafe.Pointer(unsafe.SliceData(buf))
	r := &hwMR{c: p.c, addr: uintptr(base), length: len(buf)}
	// Pin is a no-op for memory outside the Go heap (Alloc'd or mmap'd by
	// the caller).
	r.pin.Pin(base)
	mr, err := C.rperf_reg_mr(p.pd, base, C.size_t(len(buf)), C.int(access))
	if mr == nil {
		r.pin.Unpin()
		e := errnoOf(err, unix.EINVAL)
		detail := "registering %d bytes with %s"
		if e == unix.ENOMEM || e == unix.EFAULT {
			detail += "; the locked-memory limit may be too low (ulimit -l unlimited, or LimitMEMLOCK=infinity)"
		}
		return nil, verbsio.Errorf("reg_mr", e, detail, len(buf), access)
	}
	r.mr = mr
	r.lkey, r.rkey = uint32(mr.lkey), uint32(mr.rkey)
	p.c.mrs[r] = struct{}{}
	return r, nil
}

// LKey implements verbsio.MRImpl.
func (r *hwMR) LKey() uint32 { return r.lkey }

// RKey implements verbsio.MRImpl.
func (r *hwMR) RKey() uint32 { return r.rkey }

// Dereg implements verbsio.MRImpl with ibv_dereg_mr, then unpins the
// buffer.
func (r *hwMR) Dereg() error {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.deregLocked()
}

func (r *hwMR) deregLocked() error {
	if r.mr == nil {
		return nil
	}
	if ret, err := C.ibv_dereg_mr(r.mr); ret != 0 {
		return cerr("dereg_mr", ret, err, "lkey %#x", r.lkey)
	}
	r.mr = nil
	r.pin.Unpin()
	delete(r.c.mrs, r)
	return nil
}

// hwAH is an address handle (struct ibv_ah).
type hwAH struct {
	c  *hwContext
	ah *C.struct_ibv_ah // nil once destroyed
}

// CreateAH implements verbsio.PDImpl with ibv_create_ah.
func (p *hwPD) CreateAH(attr verbsio.AHAttr) (verbsio.AHImpl, error) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if err := p.checkLocked("create_ah"); err != nil {
		return nil, err
	}
	ca := ahAttrToC(&attr)
	ah, err := C.ibv_create_ah(p.pd, &ca)
	if ah == nil {
		return nil, verbsio.Errorf("create_ah", errnoOf(err, unix.EINVAL), "port %d dlid %#x gid %s sgid_index %d", attr.PortNum, attr.DLID, attr.DGID, attr.SGIDIndex)
	}
	a := &hwAH{c: p.c, ah: ah}
	p.c.ahs[a] = struct{}{}
	return a, nil
}

// handle implements ahHandle.
func (a *hwAH) handle() uintptr { return uintptr(unsafe.Pointer(a.ah)) }

// Destroy implements verbsio.AHImpl with ibv_destroy_ah.
func (a *hwAH) Destroy() error {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.destroyLocked()
}

func (a *hwAH) destroyLocked() error {
	if a.ah == nil {
		return nil
	}
	if ret, err := C.ibv_destroy_ah(a.ah); ret != 0 {
		return cerr("destroy_ah", ret, err, "")
	}
	a.ah = nil
	delete(a.c.ahs, a)
	return nil
}

// ahAttrToC translates an address vector to struct ibv_ah_attr.
func ahAttrToC(a *verbsio.AHAttr) C.struct_ibv_ah_attr {
	var c C.struct_ibv_ah_attr
	c.dlid = C.uint16_t(a.DLID)
	c.sl = C.uint8_t(a.SL)
	c.port_num = C.uint8_t(a.PortNum)
	if a.IsGlobal {
		c.is_global = 1
		*(*verbsio.GID)(unsafe.Pointer(&c.grh.dgid)) = a.DGID
		c.grh.sgid_index = C.uint8_t(a.SGIDIndex)
		c.grh.hop_limit = C.uint8_t(a.HopLimit)
		c.grh.traffic_class = C.uint8_t(a.TrafficClass)
		c.grh.flow_label = C.uint32_t(a.FlowLabel)
	}
	return c
}

// ahAttrFromC translates struct ibv_ah_attr back.
func ahAttrFromC(c *C.struct_ibv_ah_attr) verbsio.AHAttr {
	a := verbsio.AHAttr{
		DLID:     uint16(c.dlid),
		SL:       uint8(c.sl),
		PortNum:  uint8(c.port_num),
		IsGlobal: c.is_global != 0,
	}
	if a.IsGlobal {
		a.DGID = *(*verbsio.GID)(unsafe.Pointer(&c.grh.dgid))
		a.SGIDIndex = uint8(c.grh.sgid_index)
		a.HopLimit = uint8(c.grh.hop_limit)
		a.TrafficClass = uint8(c.grh.traffic_class)
		a.FlowLabel = uint32(c.grh.flow_label)
	}
	return a
}
