package hw

import (
	"errors"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// errnoOf returns the errno inside err, or def when there is none.
func errnoOf(err error, def unix.Errno) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return def
}

// opErrors are the preallocated errors of one fast-path verb. The fast path
// must not allocate or format, so each errno a provider is known to return
// has its *verbsio.Error built once, with a detail that says what it means
// for that verb.
type opErrors struct {
	op    string
	known map[unix.Errno]*verbsio.Error
}

func newOpErrors(op string, details map[unix.Errno]string) *opErrors {
	o := &opErrors{op: op, known: make(map[unix.Errno]*verbsio.Error, len(details))}
	for e, d := range details {
		o.known[e] = &verbsio.Error{Op: op, Errno: e, Detail: d}
	}
	return o
}

// errno returns the error for a verbs return value: libibverbs' post and
// poll calls return the errno itself (some providers return it negated).
// Errnos outside the table allocate one *verbsio.Error; they are not
// expected on a healthy device.
func (o *opErrors) errno(ret int) error {
	if ret < 0 {
		ret = -ret
	}
	e := unix.Errno(ret)
	if err, ok := o.known[e]; ok {
		return err
	}
	return &verbsio.Error{Op: o.op, Errno: e, Detail: "the provider returned " + unix.ErrnoName(e)}
}

// The fast-path error tables.
var (
	postSendErrs = newOpErrors("post_send", map[unix.Errno]string{
		unix.ENOMEM:     "send queue full: more outstanding work requests than max_send_wr; poll the send CQ first",
		unix.EINVAL:     "the device rejected the work request (opcode for this QP type, SGE count, inline size, QP state)",
		unix.EAGAIN:     "the device is busy; retry",
		unix.EIO:        "device error: the QP or device is in a fatal state",
		unix.EFAULT:     "the device could not read the work request",
		unix.EOPNOTSUPP: "the device does not support this operation on this QP",
		unix.ENETDOWN:   "the port is down",
	})
	postRecvErrs = newOpErrors("post_recv", map[unix.Errno]string{
		unix.ENOMEM: "receive queue full: more outstanding receives than max_recv_wr",
		unix.EINVAL: "the device rejected the receive request (SGE count or QP state)",
		unix.EAGAIN: "the device is busy; retry",
		unix.EIO:    "device error: the QP or device is in a fatal state",
		unix.EFAULT: "the device could not read the receive request",
	})
	postSRQRecvErrs = newOpErrors("post_srq_recv", map[unix.Errno]string{
		unix.ENOMEM: "shared receive queue full: more outstanding receives than its max_wr",
		unix.EINVAL: "the device rejected the receive request (SGE count)",
		unix.EAGAIN: "the device is busy; retry",
		unix.EIO:    "device error: the SRQ or device is in a fatal state",
	})
	pollErrs = newOpErrors("poll_cq", map[unix.Errno]string{
		unix.EIO:    "the CQ is in error (overrun or device failure); the completions returned before it are valid",
		unix.EINVAL: "the CQ is in error (overrun or device failure)",
	})
)

// Errors that the packing of work requests reports, before anything is
// handed to libibverbs.
var (
	errSendTooManySGE = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "work request has more SGEs than the QP's max_send_sge"}
	errRecvTooManySGE = &verbsio.Error{Op: "post_recv", Errno: unix.EINVAL, Detail: "receive request has more SGEs than the queue's max_recv_sge"}
	errBadOpcode      = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "unknown opcode"}
	errNoAH           = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "UD work request without an address handle (SendWR.UD.AH)"}
	errForeignAH      = &verbsio.Error{Op: "post_send", Errno: unix.EINVAL, Detail: "the address handle was not created by the ibverbs provider"}
	errSendClosed     = &verbsio.Error{Op: "post_send", Errno: unix.EBADF, Detail: "the QP was destroyed or its context closed"}
	errRecvClosed     = &verbsio.Error{Op: "post_recv", Errno: unix.EBADF, Detail: "the queue was destroyed or its context closed"}
	errPollClosed     = &verbsio.Error{Op: "poll_cq", Errno: unix.EBADF, Detail: "the CQ was destroyed or its context closed"}
)

// postChunks posts wrs in the chunks the C scratch ring holds: pack fills
// the ring from the first request not yet posted and says how many it
// took (and why it stopped short); post hands the chunk to the provider in
// one call and returns 0, or the index of the request it refused in the
// high 32 bits and the errno in the low ones, which errs names. full is the
// error when pack takes nothing. It returns how many requests were posted.
func postChunks[W any](wrs []W, pack func([]W) (int, error), post func(n int) uint64, errs *opErrors, full error) (int, error) {
	done := 0
	for done < len(wrs) {
		n, perr := pack(wrs[done:])
		if n > 0 {
			if r := post(n); r != 0 {
				return done + min(int(r>>32), n), errs.errno(int(uint32(r)))
			}
			done += n
		}
		if perr != nil {
			return done, perr
		}
		if n == 0 {
			return done, full
		}
	}
	return done, nil
}
