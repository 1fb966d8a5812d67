//go:build linux && cgo && ibverbs

// C side of the ibverbs provider: one function per fast-path crossing, and
// wrappers for the libibverbs entry points that are macros or inline
// functions with ABI-compat tricks.

#ifndef RPERF_HW_SHIM_H
#define RPERF_HW_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

// Post calls take the head of a chain of work requests that lie in one C
// array, linked through next. They return 0 when the whole chain was
// accepted, else the errno in the low 32 bits and the array index of the
// first request not posted (bad_wr) in the high 32 bits.
uint64_t rperf_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr);
uint64_t rperf_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr);
uint64_t rperf_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr);

// rperf_post_send_poll is rperf_post_send followed, when the whole chain
// was accepted, by one ibv_poll_cq of up to n completions of cq into wc:
// a device that completes work while it is posted (rxe, siw) has them
// ready, and taking them in the same crossing saves one. On success it
// returns their number shifted left by 32 (the low 32 bits zero); on
// failure what rperf_post_send returns, and polls nothing. A failed poll
// counts as none: the next rperf_poll_cq reports it.
uint64_t rperf_post_send_poll(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_cq *cq, int n, struct ibv_wc *wc);

// rperf_turns runs up to n turns of a write_lat ping-pong in one crossing.
// Turn k (from 0) reads *wait until it equals want+k, at most spins times
// (wait NULL: one turn, which does not wait), stores CLOCK_MONOTONIC
// in ns in stamps[k], stores mark+k at *mark_at, posts wr (one signaled
// request) and polls cq, at most spins times, for its completion; a
// success carrying wr's wr_id is consumed and the next turn begins. It
// returns the turns posted and sets *owed when the last one's completion
// was not consumed: with cq NULL, or when it did not come within spins
// polls (nothing in wc[0]; *owed 1), or when the completion found is
// another (left in wc[0]; *owed 2). A refused post ends the turns too:
// *post_err is then what rperf_post_send returns (else 0). Fewer turns
// than n with nothing owed and no error mean the awaited byte did not
// come within spins reads.
int rperf_turns(const volatile uint8_t *wait, uint8_t want, uint64_t spins, uint8_t *mark_at, uint8_t mark,
		int64_t *stamps, int n, struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_cq *cq, struct ibv_wc *wc,
		int *owed, uint64_t *post_err);

// rperf_turn_job is one rperf_turns call run on a thread of its own by
// rperf_turns_start; everything it points to is C or pinned memory.
struct rperf_turn_job {
	const volatile uint8_t *wait;
	uint8_t want, mark;
	uint64_t spins;
	uint8_t *mark_at;
	int64_t *stamps;
	int n;
	struct ibv_qp *qp;
	struct ibv_send_wr *wr;
	struct ibv_cq *cq;
	struct ibv_wc *wc;
	int fd;
	int ret, owed;
	uint64_t post_err;
	/* The caller's CPU affinity (a cpu_set_t), which the thread takes
	 * back once started; cpus_size 0: keep what it started with. */
	uint64_t cpus[16];
	int cpus_size;
};

// rperf_turns_start runs rperf_turns with j's arguments on a new detached
// thread, which stores the results in j and then writes one byte to j->fd.
// The thread starts on the caller's CPU and then takes the caller's CPU
// affinity. It returns 0, or pthread_create's error (nothing started).
int rperf_turns_start(struct rperf_turn_job *j);

// rperf_stream_job is a bandwidth sender's post/poll loop on one QP
// (rperf_stream), run on a thread of its own by rperf_stream_start.
// Everything it points to is C memory.
struct rperf_stream_job {
	struct ibv_qp *qp;
	struct ibv_send_wr *wr; /* one request; its SIGNALED flag and wr_id are set per message */
	struct ibv_cq *cq;
	struct ibv_wc *wc; /* nwc entries */
	int nwc;
	uint64_t tag; /* the high half of a signaled request's wr_id */
	int64_t target, depth, cq_mod;
	int64_t idle_ns, budget_ns;
	int64_t posted, completed, last_sig; /* in and out */
	int64_t *post_stamps, *comp_stamps; /* by message number; NULL: none */
	int64_t first, last;                /* out */
	int left_from, left_to;             /* out */
	uint64_t post_err;                  /* out */
	int fd;
	uint64_t cpus[16];
	int cpus_size;
};

// rperf_stream posts j->wr until j->target messages are posted, at most
// j->depth outstanding; message k (from 0) is signaled when (k+1) is a
// multiple of cq_mod or it is the last, with wr_id tag<<32 | the messages
// since the previous signaled one. It polls the CQ into wc and counts the
// messages each completion covers into completed. Post stamps (or first,
// for message 0, without them) and completion stamps are CLOCK_MONOTONIC
// ns; last is the stamp of the completion that reached target. It returns
// when target messages completed, after budget_ns, after idle_ns without
// progress, on a refused post (post_err as rperf_post_send returns it), a
// poll error (left to the caller's next poll), or a completion that is not
// a success of this tag: wc[left_from:left_to] are then left for the
// caller.
void rperf_stream(struct rperf_stream_job *j);

// rperf_stream_start runs rperf_stream(j) on a new detached thread started
// on the caller's CPU (as rperf_turns_start), which then writes one byte
// to j->fd.
int rperf_stream_start(struct rperf_stream_job *j);

// rperf_poll_cq polls up to n completions into wc; it returns their number
// or a negative value on error.
int rperf_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);

// rperf_create_cq_ex is ibv_create_cq_ex: a CQ of cqe entries on channel
// that delivers the fields wc_flags names (enum ibv_create_cq_wc_flags).
struct ibv_cq_ex *rperf_create_cq_ex(struct ibv_context *ctx, int cqe, struct ibv_comp_channel *channel, uint64_t wc_flags);

// rperf_cq_ex_to_cq is ibv_cq_ex_to_cq (an inline function in verbs.h).
struct ibv_cq *rperf_cq_ex_to_cq(struct ibv_cq_ex *cq);

// rperf_poll_cq_ex polls up to n completions of an extended CQ with
// ibv_start_poll, ibv_next_poll and ibv_end_poll: the standard fields
// into wc (as ibv_poll_cq fills them, those of wc_flags), and, when
// wc_flags has them, the completion timestamp into ts[i] and the flow
// tag into tag[i] (else 0). A completion in error has only its wr_id,
// status and vendor error read, as verbs allows. It returns the number
// polled, or a negative errno when the first poll failed.
int rperf_poll_cq_ex(struct ibv_cq_ex *cq, int n, struct ibv_wc *wc, uint64_t *ts, uint32_t *tag, uint64_t wc_flags);

// rperf_req_notify_cq arms the CQ's completion channel.
int rperf_req_notify_cq(struct ibv_cq *cq, int solicited_only);

// rperf_reg_mr is ibv_reg_mr (a macro in verbs.h).
struct ibv_mr *rperf_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);

// struct rperf_verbs holds the control-path calls the provider makes
// through a table rather than by name: the device, port and GID queries,
// the PD, CQ and QPs of the inline probe, and closing the device. rperf_libibverbs points at
// libibverbs; the tests point a context at the fake provider's table
// (internal/fakeverbs), whose functions take the same arguments and refuse
// what libibverbs and the kernel refuse. query_device_ex is the
// provider's op (verbs_context's query_device_ex): EOPNOTSUPP means "no
// extended query", and query_device answers instead.
struct rperf_verbs {
	int (*query_device_ex)(struct ibv_context *ctx, const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	ssize_t (*query_gid_table)(struct ibv_context *ctx, struct ibv_gid_entry *entries, size_t max);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
				    struct ibv_comp_channel *channel, int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*close_device)(struct ibv_context *ctx);
};

// rperf_libibverbs is the table of the real library.
extern const struct rperf_verbs rperf_libibverbs;

// rperf_close_device is ibv_close_device through v.
int rperf_close_device(const struct rperf_verbs *v, struct ibv_context *ctx);

// rperf_query_port is ibv_query_port through v.
int rperf_query_port(const struct rperf_verbs *v, struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);

// rperf_query_device is ibv_query_device through v.
int rperf_query_device(const struct rperf_verbs *v, struct ibv_context *ctx, struct ibv_device_attr *attr);

// rperf_query_gid_table is ibv_query_gid_table through v.
ssize_t rperf_query_gid_table(const struct rperf_verbs *v, struct ibv_context *ctx, struct ibv_gid_entry *entries, size_t max);

// rperf_query_device_ex is ibv_query_device_ex through v, except that it
// says whether the extended query answered (*extended = 1) or the legacy
// one did, leaving the extended fields zero.
int rperf_query_device_ex(const struct rperf_verbs *v, struct ibv_context *ctx, struct ibv_device_attr_ex *attr, int *extended);

// rperf_probe_open creates what an inline probe needs through v: a PD
// and one CQ of a single entry. It returns 0 or the errno.
int rperf_probe_open(const struct rperf_verbs *v, struct ibv_context *ctx, struct ibv_pd **pd, struct ibv_cq **cq);

// rperf_probe_close destroys them again; it returns 0 or the first errno.
int rperf_probe_close(const struct rperf_verbs *v, struct ibv_pd *pd, struct ibv_cq *cq);

// rperf_probe_inline creates an RC QP with one send and one receive WR and
// SGE and max_inline_data = want through v, stores the max_inline_data the
// device granted in *granted, and destroys the QP. It returns 0 or the
// errno of the creation (or of the destruction).
int rperf_probe_inline(const struct rperf_verbs *v, struct ibv_pd *pd, struct ibv_cq *cq, uint32_t want, uint32_t *granted);

#endif
