//go:build linux && cgo && ibverbs

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

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

uint64_t rperf_post_send_poll(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct ibv_send_wr *bad = NULL;
	int ret = ibv_post_send(qp, wr, &bad);

	if (ret != 0)
		return post_result(ret, bad, wr, sizeof(*wr));
	ret = ibv_poll_cq(cq, n, wc);
	return ret > 0 ? (uint64_t)ret << 32 : 0;
}

int rperf_turns(const volatile uint8_t *wait, uint8_t want, uint64_t spins, uint8_t *mark_at, uint8_t mark,
		int64_t *stamps, int n, struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_cq *cq, struct ibv_wc *wc,
		int *owed, uint64_t *post_err)
{
	struct timespec ts;
	struct ibv_send_wr *bad;
	uint64_t i;
	int k, ret;

	*owed = 0;
	*post_err = 0;
	for (k = 0; k < n; k++) {
		if (wait == NULL && k > 0)
			return k; /* nothing to wait on: one turn */
		if (wait != NULL)
			for (i = 0; *wait != (uint8_t)(want + k);)
				if (++i >= spins)
					return k;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		stamps[k] = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		*mark_at = (uint8_t)(mark + k);
		/* The marker is in memory before the request that carries it is posted. */
		__atomic_thread_fence(__ATOMIC_RELEASE);
		bad = NULL;
		ret = ibv_post_send(qp, wr, &bad);
		if (ret != 0) {
			*post_err = post_result(ret, bad, wr, sizeof(*wr));
			return k;
		}
		if (cq == NULL) {
			*owed = 1;
			return k + 1;
		}
		for (i = 0;;) {
			ret = ibv_poll_cq(cq, 1, wc);
			if (ret != 0)
				break;
			if (++i >= spins)
				break;
		}
		if (ret <= 0) {
			*owed = 1; /* not yet there, or a poll error the next poll reports */
			return k + 1;
		}
		if (wc->status != IBV_WC_SUCCESS || wc->wr_id != wr->wr_id) {
			*owed = 2;
			return k + 1;
		}
	}
	return n;
}

static void *turn_job_main(void *arg)
{
	struct rperf_turn_job *j = arg;
	char b = 1;

	/* Started on the caller's CPU (see rperf_turns_start); from here on
	 * the scheduler may move it as any thread. */
	if (j->cpus_size > 0)
		pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t), (cpu_set_t *)j->cpus);
	j->ret = rperf_turns(j->wait, j->want, j->spins, j->mark_at, j->mark, j->stamps, j->n, j->qp, j->wr, j->cq,
			     j->wc, &j->owed, &j->post_err);
	while (write(j->fd, &b, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

/* start_job runs fn(arg) on a new detached thread started on the caller's
 * CPU, storing the caller's affinity in cpus (cpus_size 0 when it could
 * not), which the thread takes back once started. */
static int start_job(void *(*fn)(void *), void *arg, uint64_t *cpus, int *cpus_size)
{
	pthread_attr_t attr;
	pthread_t t;
	int ret, cpu;

	ret = pthread_attr_init(&attr);
	if (ret != 0)
		return ret;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* The thread starts on the CPU of the caller, which then sleeps until
	 * it is done: it takes the caller's place, as the turns did when they
	 * ran on the caller's thread. Left to the scheduler, a new thread may
	 * start on the CPU where the peer's spinner runs, and two spinners
	 * then take turns on one CPU, a tick (4 ms) each, until the load
	 * balancer parts them. */
	*cpus_size = 0;
	cpu = sched_getcpu();
	if (cpu >= 0 && cpu < CPU_SETSIZE &&
	    pthread_getaffinity_np(pthread_self(), sizeof(cpu_set_t), (cpu_set_t *)cpus) == 0) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (pthread_attr_setaffinity_np(&attr, sizeof(one), &one) == 0)
			*cpus_size = sizeof(cpu_set_t);
	}
	ret = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return ret;
}

int rperf_turns_start(struct rperf_turn_job *j)
{
	return start_job(turn_job_main, j, j->cpus, &j->cpus_size);
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void rperf_stream(struct rperf_stream_job *j)
{
	struct ibv_send_wr *wr = j->wr, *bad;
	int64_t start = mono_ns(), idle = 0, t, k, cnt, c;
	int n, i, ret;

	j->left_from = j->left_to = 0;
	j->post_err = 0;
	while (j->completed < j->target) {
		int progressed = 0;

		while (j->posted < j->target && j->posted - j->completed < j->depth) {
			k = j->posted;
			if ((k + 1) % j->cq_mod == 0 || k == j->target - 1) {
				wr->send_flags |= IBV_SEND_SIGNALED;
				wr->wr_id = j->tag << 32 | (uint32_t)(k + 1 - j->last_sig);
				j->last_sig = k + 1;
			} else {
				wr->send_flags &= ~IBV_SEND_SIGNALED;
			}
			if (j->post_stamps != NULL)
				j->post_stamps[k] = mono_ns();
			else if (k == 0)
				j->first = mono_ns();
			bad = NULL;
			ret = ibv_post_send(j->qp, wr, &bad);
			if (ret != 0) {
				j->post_err = post_result(ret, bad, wr, sizeof(*wr));
				return;
			}
			j->posted++;
			progressed = 1;
		}
		n = ibv_poll_cq(j->cq, j->nwc, j->wc);
		if (n < 0)
			return; /* the caller's poll reports it */
		if (n > 0) {
			progressed = 1;
			t = mono_ns();
			for (i = 0; i < n; i++) {
				struct ibv_wc *wc = &j->wc[i];

				if (wc->status != IBV_WC_SUCCESS || wc->wr_id >> 32 != j->tag) {
					j->left_from = i;
					j->left_to = n;
					return;
				}
				cnt = (uint32_t)wc->wr_id;
				if (j->comp_stamps != NULL)
					for (c = 0; c < cnt && j->completed + c < j->target; c++)
						j->comp_stamps[j->completed + c] = t;
				j->completed += cnt;
				if (j->completed >= j->target)
					j->last = t;
			}
		}
		if (j->completed >= j->target)
			return;
		t = mono_ns();
		if (t - start >= j->budget_ns)
			return;
		if (progressed)
			idle = 0;
		else if (idle == 0)
			idle = t;
		else if (t - idle >= j->idle_ns)
			return;
	}
}

static void *stream_job_main(void *arg)
{
	struct rperf_stream_job *j = arg;
	char b = 1;

	if (j->cpus_size > 0)
		pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t), (cpu_set_t *)j->cpus);
	rperf_stream(j);
	while (write(j->fd, &b, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

int rperf_stream_start(struct rperf_stream_job *j)
{
	return start_job(stream_job_main, j, j->cpus, &j->cpus_size);
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

static int lib_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_device_ex);

	if (!vctx)
		return EOPNOTSUPP;
	return vctx->query_device_ex(ctx, input, attr, attr_size);
}

static int lib_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	return ibv_query_device(ctx, attr);
}

static int lib_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

static ssize_t lib_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries, size_t max)
{
	return ibv_query_gid_table(ctx, entries, max, 0);
}

static struct ibv_pd *lib_alloc_pd(struct ibv_context *ctx)
{
	return ibv_alloc_pd(ctx);
}

static int lib_dealloc_pd(struct ibv_pd *pd)
{
	return ibv_dealloc_pd(pd);
}

static struct ibv_cq *lib_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				    struct ibv_comp_channel *channel, int comp_vector)
{
	return ibv_create_cq(ctx, cqe, cq_context, channel, comp_vector);
}

static int lib_destroy_cq(struct ibv_cq *cq)
{
	return ibv_destroy_cq(cq);
}

static struct ibv_qp *lib_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	return ibv_create_qp(pd, attr);
}

static int lib_destroy_qp(struct ibv_qp *qp)
{
	return ibv_destroy_qp(qp);
}

static int lib_close_device(struct ibv_context *ctx)
{
	return ibv_close_device(ctx);
}

const struct rperf_verbs rperf_libibverbs = {
	.query_device_ex = lib_query_device_ex,
	.query_device = lib_query_device,
	.query_port = lib_query_port,
	.query_gid_table = lib_query_gid_table,
	.alloc_pd = lib_alloc_pd,
	.dealloc_pd = lib_dealloc_pd,
	.create_cq = lib_create_cq,
	.destroy_cq = lib_destroy_cq,
	.create_qp = lib_create_qp,
	.destroy_qp = lib_destroy_qp,
	.close_device = lib_close_device,
};

int rperf_close_device(const struct rperf_verbs *v, struct ibv_context *ctx)
{
	return v->close_device(ctx);
}

int rperf_query_port(const struct rperf_verbs *v, struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	return v->query_port(ctx, port, attr);
}

int rperf_query_device(const struct rperf_verbs *v, struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	return v->query_device(ctx, attr);
}

ssize_t rperf_query_gid_table(const struct rperf_verbs *v, struct ibv_context *ctx, struct ibv_gid_entry *entries, size_t max)
{
	return v->query_gid_table(ctx, entries, max);
}

int rperf_query_device_ex(const struct rperf_verbs *v, struct ibv_context *ctx, struct ibv_device_attr_ex *attr, int *extended)
{
	int ret;

	*extended = 0;
	memset(attr, 0, sizeof(*attr));
	ret = v->query_device_ex(ctx, NULL, attr, sizeof(*attr));
	if (ret != EOPNOTSUPP && ret != ENOSYS) {
		*extended = ret == 0;
		return ret;
	}
	memset(attr, 0, sizeof(*attr));
	return v->query_device(ctx, &attr->orig_attr);
}

static int errno_or(int def)
{
	return errno ? errno : def;
}

int rperf_probe_open(const struct rperf_verbs *v, struct ibv_context *ctx, struct ibv_pd **pd, struct ibv_cq **cq)
{
	int ret;

	errno = 0;
	*pd = v->alloc_pd(ctx);
	if (*pd == NULL)
		return errno_or(ENOMEM);
	errno = 0;
	*cq = v->create_cq(ctx, 1, NULL, NULL, 0);
	if (*cq == NULL) {
		ret = errno_or(ENOMEM);
		v->dealloc_pd(*pd);
		*pd = NULL;
		return ret;
	}
	return 0;
}

int rperf_probe_close(const struct rperf_verbs *v, struct ibv_pd *pd, struct ibv_cq *cq)
{
	int ret = v->destroy_cq(cq);
	int ret2 = v->dealloc_pd(pd);

	return ret ? ret : ret2;
}

int rperf_probe_inline(const struct rperf_verbs *v, struct ibv_pd *pd, struct ibv_cq *cq, uint32_t want, uint32_t *granted)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 1;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = want;
	errno = 0;
	qp = v->create_qp(pd, &ia);
	if (qp == NULL)
		return errno_or(EINVAL);
	*granted = ia.cap.max_inline_data;
	return v->destroy_qp(qp);
}

struct ibv_cq_ex *rperf_create_cq_ex(struct ibv_context *ctx, int cqe, struct ibv_comp_channel *channel, uint64_t wc_flags)
{
	struct ibv_cq_init_attr_ex attr = {
		.cqe = (uint32_t)cqe,
		.channel = channel,
		.comp_vector = 0,
		.wc_flags = wc_flags,
	};

	return ibv_create_cq_ex(ctx, &attr);
}

struct ibv_cq *rperf_cq_ex_to_cq(struct ibv_cq_ex *cq)
{
	return ibv_cq_ex_to_cq(cq);
}

/* read_one fills wc[0], ts[0] and tag[0] from the CQ's current entry. */
static void read_one(struct ibv_cq_ex *cq, struct ibv_wc *wc, uint64_t *ts, uint32_t *tag, uint64_t flags)
{
	memset(wc, 0, sizeof(*wc));
	*ts = 0;
	*tag = 0;
	wc->wr_id = cq->wr_id;
	wc->status = cq->status;
	wc->vendor_err = ibv_wc_read_vendor_err(cq);
	if (cq->status != IBV_WC_SUCCESS)
		return;
	wc->opcode = ibv_wc_read_opcode(cq);
	wc->wc_flags = ibv_wc_read_wc_flags(cq);
	if (flags & IBV_WC_EX_WITH_BYTE_LEN)
		wc->byte_len = ibv_wc_read_byte_len(cq);
	if ((flags & IBV_WC_EX_WITH_IMM) && (wc->wc_flags & IBV_WC_WITH_IMM))
		wc->imm_data = ibv_wc_read_imm_data(cq);
	if (flags & IBV_WC_EX_WITH_QP_NUM)
		wc->qp_num = ibv_wc_read_qp_num(cq);
	if (flags & IBV_WC_EX_WITH_SRC_QP)
		wc->src_qp = ibv_wc_read_src_qp(cq);
	if (flags & IBV_WC_EX_WITH_SLID)
		wc->slid = (uint16_t)ibv_wc_read_slid(cq);
	if (flags & IBV_WC_EX_WITH_SL)
		wc->sl = ibv_wc_read_sl(cq);
	if (flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		wc->dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
	if (flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		*ts = ibv_wc_read_completion_ts(cq);
	if (flags & IBV_WC_EX_WITH_FLOW_TAG)
		*tag = ibv_wc_read_flow_tag(cq);
}

int rperf_poll_cq_ex(struct ibv_cq_ex *cq, int n, struct ibv_wc *wc, uint64_t *ts, uint32_t *tag, uint64_t wc_flags)
{
	struct ibv_poll_cq_attr attr = {0};
	int i = 0, ret;

	if (n <= 0)
		return 0;
	ret = ibv_start_poll(cq, &attr);
	if (ret == ENOENT)
		return 0;
	if (ret != 0)
		return -ret;
	for (;;) {
		read_one(cq, &wc[i], &ts[i], &tag[i], wc_flags);
		if (++i == n)
			break;
		ret = ibv_next_poll(cq);
		if (ret != 0)
			break; /* ENOENT: empty; an error shows at the next start_poll */
	}
	ibv_end_poll(cq);
	return i;
}
