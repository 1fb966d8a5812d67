//go:build linux && cgo && ibverbs

#include <errno.h>
#include <string.h>

#include "shim.h"

static uint64_t post_result(int ret, const void *bad, const void *first, size_t size)
{
	uint64_t idx = 0;

	if (ret == 0)
		return 0;
	if (ret < 0)
		ret = -ret;
	if (bad != NULL && bad >= first)
		idx = ((const char *)bad - (const char *)first) / size;
	return (idx << 32) | (uint32_t)ret;
}

uint64_t rperf_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int ret = ibv_post_send(qp, wr, &bad);

	return post_result(ret, bad, wr, sizeof(*wr));
}

uint64_t rperf_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr *bad = NULL;
	int ret = ibv_post_recv(qp, wr, &bad);

	return post_result(ret, bad, wr, sizeof(*wr));
}

uint64_t rperf_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr *bad = NULL;
	int ret = ibv_post_srq_recv(srq, wr, &bad);

	return post_result(ret, bad, wr, sizeof(*wr));
}

int rperf_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, n, wc);
}

int rperf_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return ibv_req_notify_cq(cq, solicited_only);
}

struct ibv_mr *rperf_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr(pd, addr, length, access);
}

int rperf_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

ssize_t rperf_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries, size_t max)
{
	return ibv_query_gid_table(ctx, entries, max, 0);
}

int rperf_query_device_ex(struct ibv_context *ctx, struct ibv_device_attr_ex *attr, int *extended)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_device_ex);
	int ret;

	*extended = 0;
	memset(attr, 0, sizeof(*attr));
	if (vctx) {
		ret = vctx->query_device_ex(ctx, NULL, attr, sizeof(*attr));
		if (ret != EOPNOTSUPP && ret != ENOSYS) {
			*extended = ret == 0;
			return ret;
		}
		memset(attr, 0, sizeof(*attr));
	}
	return ibv_query_device(ctx, &attr->orig_attr);
}
