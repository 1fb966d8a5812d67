//go:build linux && cgo && ibverbs

#ifndef RPERF_FAKECM_H
#define RPERF_FAKECM_H

#include <stdint.h>
#include <infiniband/sa.h>
#include <rdma/rdma_cma.h>

#include "../../rdmacm.h"

#define FAKECM_MAX 64

// The fake's state: one at a time (fakecm_new replaces it).
struct fakecm {
	int pipe[2]; // a byte per queued event: the channel's fd is pipe[0]
	struct ibv_device dev;
	struct ibv_context ctx;
	struct rdma_event_channel ch;
	struct rdma_cm_event *queue[FAKECM_MAX];
	int head, n;
	int live_ids, acks;
	char calls[2048]; // the calls made, "name;" each
	char fail_op[32]; // the call to fail, with fail_errno
	int fail_errno;
	// The last connect or accept.
	struct rdma_conn_param conn;
	uint8_t conn_pd[256];
	int accepted;
	uint8_t reject_pd[256];
	int reject_len;
	int opt_name, opt_val, opt_len;
	// What init_qp_attr answers per state (index: the state).
	struct ibv_qp_attr qp_attr[4];
	int qp_mask[4];
	struct ibv_sa_path_rec path;
	// The last path record set (RDMA_OPTION_IB_PATH), as given.
	struct ibv_path_data path_data;
	int path_set;
};

extern struct fakecm *fakecm;
extern const struct rperf_rdmacm fakecm_table;

struct fakecm *fakecm_new(const char *device);
void fakecm_free(void);
// fakecm_push queues ev (malloc'd; ack frees it) and wakes the channel.
void fakecm_push(struct rdma_cm_event *ev);
// fakecm_child makes the identifier of an incoming request on listen.
struct rdma_cm_id *fakecm_child(struct rdma_cm_id *listen, const void *src, const void *dst);

#endif
