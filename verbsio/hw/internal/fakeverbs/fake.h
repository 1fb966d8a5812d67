//go:build linux && cgo && ibverbs

#ifndef RPERF_FAKEVERBS_H
#define RPERF_FAKEVERBS_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "../../shim.h"

#define FAKE_MAX 64
#define FAKE_SGE 4
#define FAKE_PORTS 2
#define FAKE_GIDS 8

// One work request as the fake provider read it from the chain.
struct fake_send {
	uint64_t wr_id;
	uint32_t opcode;
	uint32_t flags;
	uint32_t imm;
	int num_sge;
	struct ibv_sge sge[FAKE_SGE];
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add;
	uint64_t swap;
	uintptr_t ah;
	uint32_t remote_qpn;
	uint32_t remote_qkey;
};

struct fake_recv {
	uint64_t wr_id;
	int num_sge;
	struct ibv_sge sge[FAKE_SGE];
};

// The control path's objects: what a PD, CQ or QP created through the
// fake's struct rperf_verbs table is, with what uses it.
struct fake_pd {
	struct ibv_pd pd; // first: the struct ibv_pd * handed out
	int users;        // QPs on it
};

struct fake_cq {
	struct ibv_cq cq;
	int users; // QPs that complete into it
};

struct fake_qp {
	struct ibv_qp qp;
	struct fake_pd *pd;
	struct fake_cq *scq, *rcq;
};

struct fake {
	struct ibv_context ctx; // first, so that obj->context casts back
	struct ibv_qp qp;
	struct ibv_cq cq;
	struct ibv_srq srq;
	int fail_at;    // index in a chain to refuse, -1: none
	int fail_errno; // the errno to return then
	int null_bad;   // refuse without setting bad_wr
	int post_calls;
	int nsend;
	struct fake_send send[FAKE_MAX];
	int nrecv;
	struct fake_recv recv[FAKE_MAX];
	int nwc, wcpos;
	struct ibv_wc wc[FAKE_MAX];
	// The extended CQ (ibv_create_cq_ex's), over the same queued
	// completions: each one's timestamp and flow tag beside it; cur is
	// the entry start_poll or next_poll made current.
	struct ibv_cq_ex cqx;
	uint64_t ts[FAKE_MAX];
	uint32_t tag[FAKE_MAX];
	int cur;
	int start_calls;
	int poll_calls;
	int poll_err;
	int notify_calls;

	// execute: post_send completes each accepted request at once, as
	// rdma_rxe does (its requester, responder and completer run inside
	// the post): a signaled request completes with SUCCESS; inline data
	// on an RDMA READ or an atomic completes with LOC_PROT_ERR (signaled
	// or not) and moves the QP to the error state, after which every
	// request completes with WR_FLUSH_ERR. qp_err is that state.
	int execute;
	int qp_err;

	// The control path (struct rperf_verbs): what the device reports and
	// what it grants, modelled on rdma_rxe.
	struct rperf_verbs verbs;
	struct ibv_device_attr_ex attr; // query_device_ex answers this
	int legacy;                      // no extended query: query_device_ex says EOPNOTSUPP
	struct ibv_port_attr port[FAKE_PORTS];
	struct ibv_gid_entry gid[FAKE_GIDS];
	int ngid;
	uint32_t max_inline;  // the largest max_inline_data create_qp accepts
	int fail_alloc_pd;    // alloc_pd fails with this errno
	int fail_create_qp;   // every create_qp fails with this errno
	int npd, ncq, nqp;    // live control-path objects
	int qps_created;      // QPs created in all
	int closed;           // close_device was called
};

struct fake *fake_new(void);

enum {
	fake_off_send_imm = offsetof(struct ibv_send_wr, imm_data),
	fake_off_send_rdma_addr = offsetof(struct ibv_send_wr, wr.rdma.remote_addr),
	fake_off_send_rdma_rkey = offsetof(struct ibv_send_wr, wr.rdma.rkey),
	fake_off_send_atomic_addr = offsetof(struct ibv_send_wr, wr.atomic.remote_addr),
	fake_off_send_atomic_compare = offsetof(struct ibv_send_wr, wr.atomic.compare_add),
	fake_off_send_atomic_swap = offsetof(struct ibv_send_wr, wr.atomic.swap),
	fake_off_send_atomic_rkey = offsetof(struct ibv_send_wr, wr.atomic.rkey),
	fake_off_send_ud_ah = offsetof(struct ibv_send_wr, wr.ud.ah),
	fake_off_send_ud_qpn = offsetof(struct ibv_send_wr, wr.ud.remote_qpn),
	fake_off_send_ud_qkey = offsetof(struct ibv_send_wr, wr.ud.remote_qkey),
	fake_off_wc_imm = offsetof(struct ibv_wc, imm_data),
	fake_off_wc_dlid_path_bits = offsetof(struct ibv_wc, dlid_path_bits),
};

#endif
