// Package verbsio is rperf's verbs engine API: a Go object model with the
// semantics of libibverbs (devices, contexts, protection domains, memory
// regions, completion queues, queue pairs, work requests and completions),
// with providers behind it.
//
// The object model mirrors libibverbs so that people who know verbs can read
// code written against it:
//
//	ibv_get_device_list  -> Devices
//	ibv_open_device      -> Open / (*Device).Open
//	ibv_query_device     -> (*Context).QueryDevice
//	ibv_alloc_pd         -> (*Context).AllocPD
//	ibv_reg_mr           -> (*PD).RegMR
//	ibv_create_cq        -> (*Context).CreateCQ
//	ibv_create_qp        -> (*PD).CreateQP
//	ibv_modify_qp        -> (*QP).Modify
//	ibv_post_send        -> (*QP).PostSend
//	ibv_post_recv        -> (*QP).PostRecv
//	ibv_poll_cq          -> (*CQ).Poll
//	ibv_create_flow      -> (*QP).CreateFlow
//
// Providers register themselves with Register. The built-in software engine
// lives in package github.com/rperf/rperf/verbsio/soft; import it (a blank
// import is enough) to make its devices appear.
//
// # Fast path contract
//
// PostSend, PostRecv and Poll take caller-owned slices, keep no reference to
// them after they return, never allocate, never take a mutex and never log.
// They make one provider call per batch, never one per request. A QP, an SRQ
// and a CQ are owned by one goroutine at a time: they are not safe for
// concurrent use (the same rule as libibverbs with a thread domain). Setup
// calls (Open, AllocPD, RegMR, CreateCQ, CreateQP, Modify, Close) may
// allocate and are safe to call from any goroutine, but not concurrently on
// the same object.
//
// # Errors
//
// Setup calls return *Error values carrying the verbs errno (EINVAL, ENOMEM,
// EBUSY, EPERM, ...) so that errors.Is(err, unix.EINVAL) works. Remote faults
// (bad rkey, out-of-bounds access, missing access rights, a dead peer) are
// never Go errors: they arrive as completion statuses in WC.Status, as they do
// in verbs.
package verbsio
