// Package hw is rperf's verbsio provider for kernel RDMA devices (mlx5,
// irdma, bnxt_re, efa, rxe, siw, ...), named "ibverbs". Importing it
// registers the provider.
//
// # Two builds
//
// The default build (no tag, CGO_ENABLED=0) stays pure Go and static. In it
// the provider lists the devices the kernel shows in /sys/class/infiniband
// (read-only, best effort; an empty list without error where there are
// none), and Open fails with a *verbsio.UnsupportedError that names the
// device and says how to get a build that can open it.
//
// Built with the ibverbs tag on Linux with cgo (make build-ibverbs, which
// needs libibverbs-dev), the provider drives the devices through rdma-core's
// libibverbs. That binary links libibverbs dynamically, and the device's
// user-space driver (libmlx5, librxe, ...) must be installed where it runs.
// Built reports which build this is.
//
// cgo, not purego: ibv_post_send, ibv_post_recv and ibv_poll_cq are static
// inline functions in verbs.h that jump through the context's ops table, so
// no symbol exists to dlopen; and purego would make the default binary
// dynamic.
//
// # One crossing per batch
//
// Posting one work request per cgo call costs about 260-300 ns per request
// in other Go verbs bindings (gordma's measurement, crossing plus the
// provider's doorbell); the bare crossing measured 30-40 ns here (Go 1.26,
// BenchmarkFakePostSend: 54 ns for a batch of 1, 22 ns per request in
// batches of 64, provider work excluded). Both costs are per call, so the
// fast path crosses once per batch, never once per work request, and
// providers such as mlx5 ring one doorbell per chain. Each QP (and SRQ) owns
// a block of C memory, calloc'd at creation, with room for min(max_send_wr,
// 4096) struct ibv_send_wr and their max_send_sge SGEs each (likewise for
// receives). PostSend writes the []verbsio.SendWR into that block through
// pure-Go mirrors of the C structs, chains the requests with next pointers
// inside the block, and calls one small C function that runs ibv_post_send
// on the chain and returns the errno and the index of bad_wr. Each CQ owns a
// C array of struct ibv_wc; Poll fills it with one ibv_poll_cq and converts.
// Neither allocates. The mirrors are checked against the C structs at
// compile time (layout_cgo.go) and the packing is unit-tested in every
// build, and in the ibverbs build against a fake libibverbs provider
// (internal/fakeverbs) whose post and poll functions read and write the real
// C structs.
//
// # A write_lat turn in one crossing
//
// The provider offers two interface families (QueryInterface on an RC
// or UC QP): verbsio.FamilyWriteTurn, below, and verbsio.FamilySendStream. Its Turns packs the request in Go and
// then, in one C call (rperf_turns in shim.c), spins on the byte the peer's
// RDMA WRITE lands in, reads CLOCK_MONOTONIC, stores this side's marker,
// posts and polls the send CQ as PostSend does. A write_lat iteration
// then crosses once, as it did with PostSend's poll, but what lies
// between seeing the peer's marker and the post is what perftest has
// there (a clock read and a store), not the return from a Go spin, the
// loop's bookkeeping and the cgo entry: under TCG an empty poll through
// cgo cost 1.1-1.8 us (BenchmarkDevicePollEmpty), which a ping-pong paid
// on each side of every round trip. tests/latency uses the family for
// write_lat in iterations mode on the generic and inline paths.
//
// The turns of a call run on a thread the provider starts for the call
// (rperf_turns_start), while the calling goroutine sleeps on a pipe the
// thread writes when it is done: the Go runtime, which treated a long
// cgo call as a running P to watch, preempt and hand off, then has every
// P idle and parks its threads, and the measured loop is one spinning
// thread, as perftest's (docs/interop.md, interop-bench). The job and
// its stamps are in mmap'd memory, outside the Go heap, since a thread
// that is not the caller's reads and writes them.
//
// # A bandwidth sender's loop in one call
//
// verbsio.FamilySendStream runs the bw sender's loop (rperf_stream:
// post up to the window, signal every cq_mod-th message, poll the send
// CQ, count and stamp) on a thread of its own the same way. On rxe each
// post of a large message is a system call that does the message's work,
// a long cgo call; made from the goroutine's thread, a 2,000-message
// write_bw cost thousands of voluntary context switches and 0.67-0.69x
// perftest's bandwidth, against about 1.0x through the family
// (docs/interop.md). tests/bw uses it for one QP in iterations mode.
//
// # Queries and the inline probe
//
// QueryDevice answers with ibv_query_device_ex (ibv_query_device for
// providers without it, naming the extended fields in Unknown), including
// everything ibv_devinfo -v prints (DeviceAttr.Ext, PortAttr.Ext).
// libibverbs reports no device-wide inline limit, so the first QueryDevice
// of a context finds MaxInlineData as rdma-core users do: it creates RC
// QPs with growing max_inline_data (doubling from 64 bytes, then
// bisecting, at most 64 KiB) and reports what the device granted for the
// largest request it accepted (rxe: 512 bytes), destroying each QP at
// once. The control-path calls (queries, the probe's PD, CQ and QPs,
// closing) go through a table of function pointers (struct rperf_verbs in
// shim.h) that points at libibverbs, and in the tests at fakeverbs, which
// refuses what libibverbs and rdma_rxe refuse.
//
// # Memory
//
// cgo forbids C from keeping a pointer to Go memory after a call returns,
// unless the memory is pinned. A memory region is exactly that: the kernel
// and the NIC keep the address and DMA to it until deregistration. So:
//
//   - (*verbsio.Context).Alloc returns anonymous mmap'd memory, page-aligned
//     and outside the Go heap. It is the memory to register: RegMR uses it
//     as it is. Free unmaps it (EBUSY while a region covers it), and Close
//     unmaps whatever is left, after which it must not be touched.
//   - Any other buffer (ordinary Go memory) is pinned by RegMR with a
//     runtime.Pinner held by the region until Dereg or Close, so the
//     garbage collector can neither free nor reuse it while the device may
//     write into it. Pinning holds the whole Go allocation the buffer
//     belongs to.
//
// Work requests and SGLs are copied into C memory at post time; no Go
// pointer is ever handed to libibverbs on the fast path. SGE addresses are
// plain integers that the device checks against the region's lkey.
//
// # Extended CQs
//
// CreateCQEx (verbsio.CQInitAttr.WCFlags) creates the CQ with
// ibv_create_cq_ex, asking for the fields the flags name; a device that
// cannot give one refuses (EOPNOTSUPP). Such a CQ is polled only through
// its own API, ibv_start_poll, ibv_next_poll and ibv_end_poll, in one
// crossing per batch (rperf_poll_cq_ex in shim.c), which reads each
// completion's standard fields the flags name, its completion timestamp
// (ibv_wc_read_completion_ts: WC.Timestamp, in ticks of the device's
// hca_core_clock) and its flow tag (WC.FlowTag); a completion in error has
// only its ID, status and vendor error. A signaled post does not poll an
// extended send CQ in its crossing. fakeverbs implements the same poll API
// over its queued completions.
//
// # Waiting
//
// Every CQ gets its own completion channel (one file descriptor). Wait arms
// the CQ with ibv_req_notify_cq, polls once to catch a completion that
// arrived before the arming, then sleeps in poll(2) on the channel's fd
// until an event or the timeout; it does not busy-poll. A completion that
// Wait takes out of the CQ is returned first by the next Poll.
//
// # Ownership and errors
//
// As everywhere in verbsio, a QP, SRQ or CQ belongs to one goroutine at a
// time; setup calls lock the context. Verbs calls that fail return
// *verbsio.Error with the errno libibverbs reported and a detail; on the
// fast path these errors are preallocated. Remote faults arrive as
// completion statuses, as in verbs.
package hw
