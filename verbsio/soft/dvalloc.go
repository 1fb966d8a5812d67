package soft

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"golang.org/x/sys/unix"
)

// Queue memory from the application's allocator (dv.SetAllocator).
//
// On the shm fabric only send queues are the creating process's alone:
// receive rings and SRQs are claimed from by the engine of a sender in
// another process, and CQs receive that engine's completions, so they stay
// in memfd segments that peers map. On the udp fabric peers reach nothing
// but this process's sockets, and send queues, receive queues and CQs come
// from the allocator (SRQ rings stay in the engine's memory).

var _ dv.AllocatorSetter = (*Context)(nil)

// DVSetAllocator implements dv.AllocatorSetter.
func (c *Context) DVSetAllocator(a dv.Allocator) (dv.Resource, error) {
	if (a.Alloc == nil) != (a.Free == nil) {
		return 0, verbsio.Errorf("set_context_attr", unix.EINVAL, "an allocator needs both Alloc and Free (the zero Allocator removes one)")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.checkOpen("set_context_attr"); err != nil {
		return 0, err
	}
	if a.Alloc == nil {
		c.extAlloc.Store(nil)
		return 0, nil
	}
	c.extAlloc.Store(&a)
	return c.allocatable(), nil
}

// allocatable is what the allocator may supply on this context's fabric.
func (c *Context) allocatable() dv.Resource { return c.fab.queueMemory() }

// extBuf is a queue buffer from an application's allocator.
type extBuf struct {
	a   *dv.Allocator
	res dv.Resource
	buf []byte // as Alloc returned it: what Free gets back
	mem []byte // the size bytes the queue uses, zeroed
}

var (
	errAllocShort = errors.New("the buffer is shorter than asked for")
	errAllocAlign = errors.New("the buffer is not aligned as asked")
)

// allocQueue takes size bytes for res from the installed allocator. It
// returns nil, nil when there is none or it does not apply to res. It is
// called without c.mu held (the allocator may call into the context).
func (c *Context) allocQueue(op string, res dv.Resource, size int) (*extBuf, error) {
	a := c.extAlloc.Load()
	if a == nil || c.allocatable()&res == 0 {
		return nil, nil
	}
	buf, err := a.Alloc(res, size, dv.QueueAlign)
	if err != nil {
		return nil, &dv.AllocError{Op: op, Resource: res, Size: size, Align: dv.QueueAlign, Errno: unix.ENOMEM, Err: err}
	}
	bad := error(nil)
	switch {
	case len(buf) < size:
		bad = fmt.Errorf("%w: %d bytes", errAllocShort, len(buf))
	case uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%dv.QueueAlign != 0:
		bad = fmt.Errorf("%w: address %#x", errAllocAlign, uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	}
	if bad != nil {
		if buf != nil {
			a.Free(res, buf)
		}
		return nil, &dv.AllocError{Op: op, Resource: res, Size: size, Align: dv.QueueAlign, Errno: unix.EINVAL, Err: bad}
	}
	mem := buf[:size:size]
	clear(mem)
	return &extBuf{a: a, res: res, buf: buf, mem: mem}, nil
}

// free gives the buffer back; nil is a no-op.
func (b *extBuf) free() {
	if b != nil {
		b.a.Free(b.res, b.buf)
	}
}

// freeAll frees bufs (called without c.mu held).
func freeAll(bufs []*extBuf) {
	for _, b := range bufs {
		b.free()
	}
}
