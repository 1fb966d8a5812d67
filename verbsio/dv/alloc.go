package dv

import (
	"fmt"
	"strings"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// Resource names a kind of queue buffer; Resources combine with |.
type Resource uint32

// Queue buffers an allocator may be asked for.
const (
	ResSendQueue Resource = 1 << iota // a QP's send ring and its doorbell record
	ResRecvQueue                      // a QP's receive ring
	ResCQ                             // a completion ring
)

var resNames = []string{"send queue", "receive queue", "CQ"}

func (r Resource) String() string {
	if r == 0 {
		return "none"
	}
	var s []string
	for i, n := range resNames {
		if r&(1<<i) != 0 {
			s = append(s, n)
		}
	}
	if rest := r &^ (1<<len(resNames) - 1); rest != 0 {
		s = append(s, fmt.Sprintf("%#x", uint32(rest)))
	}
	return strings.Join(s, "|")
}

// QueueAlign is the alignment the engine asks of queue buffers (a cache
// line: the rings keep words written by different parties on separate
// lines).
const QueueAlign = 64

// Allocator supplies queue memory (docs/verbsio.md, "Queue memory from the application").
type Allocator struct {
	// Alloc returns at least size bytes whose address is a multiple of
	// align, for a queue buffer of kind r.
	Alloc func(r Resource, size, align int) ([]byte, error)
	// Free gives back a buffer Alloc returned, once, as Alloc returned it.
	Free func(r Resource, buf []byte)
}

// AllocatorSetter is implemented by the contexts of providers that take
// queue memory from the application.
type AllocatorSetter interface {
	DVSetAllocator(a Allocator) (Resource, error)
}

// SetAllocator installs a on ctx (the zero Allocator removes it) and
// returns the queue buffers the provider will take from it on this
// context's fabric (docs/verbsio.md says which and why).
func SetAllocator(ctx *verbsio.Context, a Allocator) (Resource, error) {
	s, ok := ctx.Impl().(AllocatorSetter)
	if !ok {
		return 0, ErrNoDV
	}
	return s.DVSetAllocator(a)
}

// AllocError says that a queue buffer could not be taken from the
// application's allocator. It matches Errno and Err with errors.Is.
type AllocError struct {
	Op       string // the verb: create_qp or create_cq
	Resource Resource
	Size     int
	Align    int
	Errno    unix.Errno // ENOMEM: Alloc failed; EINVAL: the buffer was too small or misaligned
	Err      error      // what Alloc returned, or what was wrong with the buffer
}

func (e *AllocError) Error() string {
	return fmt.Sprintf("%s: the application's allocator (dv.SetAllocator) did not supply a %s buffer of %d bytes aligned to %d: %v",
		e.Op, e.Resource, e.Size, e.Align, e.Err)
}

// Unwrap returns Errno and Err.
func (e *AllocError) Unwrap() []error { return []error{e.Errno, e.Err} }
