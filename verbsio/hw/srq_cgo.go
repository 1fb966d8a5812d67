//go:build linux && cgo && ibverbs

package hw

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// hwSRQ is a shared receive queue (struct ibv_srq) with its C scratch for
// posting. It is owned by one goroutine at a time.
type hwSRQ struct {
	c   *hwContext
	srq *C.struct_ibv_srq // nil once destroyed
	mem unsafe.Pointer
	rq  recvRing
}

// CreateSRQ implements verbsio.PDImpl with ibv_create_srq; a non-zero
// Limit arms the SRQ limit event with ibv_modify_srq.
func (p *hwPD) CreateSRQ(attr verbsio.SRQInitAttr) (verbsio.SRQImpl, error) {
	if attr.MaxWR <= 0 || attr.MaxSGE < 0 || attr.Limit < 0 {
		return nil, verbsio.Errorf("create_srq", unix.EINVAL, "max_wr %d, max_sge %d, limit %d", attr.MaxWR, attr.MaxSGE, attr.Limit)
	}
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if err := p.checkLocked("create_srq"); err != nil {
		return nil, err
	}
	var ia C.struct_ibv_srq_init_attr
	ia.attr.max_wr = C.uint32_t(attr.MaxWR)
	ia.attr.max_sge = C.uint32_t(attr.MaxSGE)
	csrq, err := C.ibv_create_srq(p.pd, &ia)
	if csrq == nil {
		return nil, verbsio.Errorf("create_srq", errnoOf(err, unix.EINVAL), "max_wr %d, max_sge %d (QueryDevice has MaxSRQWR and MaxSRQSGE)", attr.MaxWR, attr.MaxSGE)
	}
	if attr.Limit > 0 {
		sa := C.struct_ibv_srq_attr{srq_limit: C.uint32_t(attr.Limit)}
		if ret, err := C.ibv_modify_srq(csrq, &sa, C.IBV_SRQ_LIMIT); ret != 0 {
			C.ibv_destroy_srq(csrq)
			return nil, cerr("modify_srq", ret, err, "arm the limit at %d", attr.Limit)
		}
	}
	s, err := newSRQ(p.c, unsafe.Pointer(csrq), int(ia.attr.max_wr), int(ia.attr.max_sge))
	if err != nil {
		C.ibv_destroy_srq(csrq)
		return nil, err
	}
	p.c.srqs[s] = struct{}{}
	return s, nil
}

// newSRQ wraps a struct ibv_srq * and allocates its posting scratch. Tests
// call it with a fake SRQ.
func newSRQ(c *hwContext, csrq unsafe.Pointer, maxWR, maxSGE int) (*hwSRQ, error) {
	s := &hwSRQ{c: c, srq: (*C.struct_ibv_srq)(csrq)}
	var err error
	s.mem, s.rq.wrs, s.rq.sges, err = allocRing[cRecvWR](maxWR, maxSGE)
	if err != nil {
		return nil, err
	}
	s.rq.maxSGE = maxSGE
	return s, nil
}

var errSRQClosed = &verbsio.Error{Op: "post_srq_recv", Errno: unix.EBADF, Detail: "the SRQ was destroyed or its context closed"}

// PostRecv implements verbsio.SRQImpl like (*hwQP).PostRecv, with
// ibv_post_srq_recv.
func (s *hwSRQ) PostRecv(wrs []verbsio.RecvWR) (int, error) {
	if s.srq == nil {
		return 0, errSRQClosed
	}
	return postChunks(wrs, s.rq.pack, func(int) uint64 {
		return uint64(C.rperf_post_srq_recv(s.srq, (*C.struct_ibv_recv_wr)(s.mem)))
	}, postSRQRecvErrs, errRecvNoQueue)
}

// Destroy implements verbsio.SRQImpl with ibv_destroy_srq (EBUSY while QPs
// use it), then frees the scratch.
func (s *hwSRQ) Destroy() error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.destroyLocked()
}

func (s *hwSRQ) destroyLocked() error {
	if s.srq == nil {
		return nil
	}
	if ret, err := C.ibv_destroy_srq(s.srq); ret != 0 {
		return cerr("destroy_srq", ret, err, "queue pairs still use the SRQ")
	}
	s.release()
	delete(s.c.srqs, s)
	return nil
}

// release forgets the SRQ and frees its scratch.
func (s *hwSRQ) release() {
	s.srq = nil
	if s.mem != nil {
		C.free(s.mem)
	}
	s.mem = nil
	s.rq = recvRing{}
}
