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

// rperf_poll_cq polls up to n completions into wc; it returns their number
// or a negative value on error.
int rperf_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);

// rperf_req_notify_cq arms the CQ's completion channel.
int rperf_req_notify_cq(struct ibv_cq *cq, int solicited_only);

// rperf_reg_mr is ibv_reg_mr (a macro in verbs.h).
struct ibv_mr *rperf_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);

// rperf_query_port is ibv_query_port (a macro in verbs.h).
int rperf_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);

// rperf_query_gid_table is ibv_query_gid_table (inline in verbs.h).
ssize_t rperf_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries, size_t max);

// rperf_query_device_ex is ibv_query_device_ex (inline in verbs.h), except
// that it says whether the extended query answered (*extended = 1) or the
// legacy one did, leaving the extended fields zero.
int rperf_query_device_ex(struct ibv_context *ctx, struct ibv_device_attr_ex *attr, int *extended);

#endif
