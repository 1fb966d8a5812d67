//go:build linux && cgo && ibverbs

package hw

/*
#include "shim.h"
*/
import "C"

import (
	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// Bounds of the inline probe: the first request above zero, and the
// largest request it makes (a device that grants this much is reported
// at what it granted for it).
const (
	probeInlineFirst = 64
	probeInlineLimit = 1 << 16
)

// inlineProbe is what probeInlineLocked found.
type inlineProbe struct {
	max   int   // the largest max_inline_data the device granted
	tries int   // QPs the probe created
	err   error // non-nil: not even a QP without inline data could be created
}

// probeInlineLocked finds the inline capacity of the device the way
// rdma-core users learn it: ibv_query_device does not report it, so it
// creates RC QPs (one send and one receive WR and SGE, on a PD and a CQ of
// its own) asking for more and more max_inline_data, doubling from
// probeInlineFirst until the device refuses, then bisecting between the
// last request granted and the first refused. Each QP is destroyed at
// once. The answer is the max_inline_data the device granted for the
// largest request it accepted (devices may round a request up: rxe grants
// at least 16 bytes per send SGE). c.mu is held.
func (c *hwContext) probeInlineLocked() *inlineProbe {
	p := &inlineProbe{}
	var pd *C.struct_ibv_pd
	var cq *C.struct_ibv_cq
	if ret := C.rperf_probe_open(c.verbs, c.ctx, &pd, &cq); ret != 0 {
		p.err = verbsio.Errorf("query_device", unix.Errno(ret), "%s: the max_inline_data probe could not create its PD and CQ", c.name)
		return p
	}
	defer C.rperf_probe_close(c.verbs, pd, cq)
	try := func(want int) (granted int, ret C.int) {
		p.tries++
		var g C.uint32_t
		ret = C.rperf_probe_inline(c.verbs, pd, cq, C.uint32_t(want), &g)
		return int(g), ret
	}
	granted, ret := try(0)
	if ret != 0 {
		p.err = verbsio.Errorf("query_device", unix.Errno(ret), "%s: the max_inline_data probe could not create an RC QP", c.name)
		return p
	}
	good, bad := 0, 0 // the largest request granted, the smallest refused
	for want := probeInlineFirst; want <= probeInlineLimit; want *= 2 {
		g, ret := try(want)
		if ret != 0 {
			bad = want
			break
		}
		good, granted = want, g
	}
	for bad-good > 1 {
		mid := good + (bad-good)/2
		if g, ret := try(mid); ret == 0 {
			good, granted = mid, g
		} else {
			bad = mid
		}
	}
	p.max = granted
	return p
}
