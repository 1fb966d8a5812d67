//go:build linux && cgo && ibverbs

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

static struct fake *fake_of(struct ibv_context *ctx)
{
	return (struct fake *)ctx;
}

/* fake_complete queues a completion for wr as rdma_rxe reports it. */
static void fake_complete(struct fake *f, struct ibv_qp *qp, struct ibv_send_wr *wr, enum ibv_wc_status status)
{
	struct ibv_wc *wc;
	uint32_t len = 0;
	int i;

	if (f->wcpos > 0 && f->nwc == FAKE_MAX) {
		memmove(f->wc, f->wc + f->wcpos, (f->nwc - f->wcpos) * sizeof(f->wc[0]));
		f->nwc -= f->wcpos;
		f->wcpos = 0;
	}
	if (f->nwc == FAKE_MAX)
		return; /* a CQ overrun: the completion is lost */
	wc = &f->wc[f->nwc++];
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = wr->wr_id;
	wc->status = status;
	wc->qp_num = qp->qp_num;
	if (status != IBV_WC_SUCCESS)
		return; /* rxe leaves the opcode of an error completion 0 */
	for (i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	wc->byte_len = len;
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		wc->opcode = IBV_WC_RDMA_WRITE;
		break;
	case IBV_WR_RDMA_READ:
		wc->opcode = IBV_WC_RDMA_READ;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		wc->opcode = IBV_WC_COMP_SWAP;
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		wc->opcode = IBV_WC_FETCH_ADD;
		break;
	default:
		wc->opcode = IBV_WC_SEND;
	}
}

/* fake_execute completes an accepted request in execute mode. */
static void fake_execute(struct fake *f, struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	int one_sided_in = wr->opcode == IBV_WR_RDMA_READ || wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
			   wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;

	if (f->qp_err) {
		fake_complete(f, qp, wr, IBV_WC_WR_FLUSH_ERR);
	} else if (one_sided_in && (wr->send_flags & IBV_SEND_INLINE)) {
		/* The responder's data has no local buffer to land in. */
		fake_complete(f, qp, wr, IBV_WC_LOC_PROT_ERR);
		f->qp_err = 1;
	} else if (wr->send_flags & IBV_SEND_SIGNALED) {
		fake_complete(f, qp, wr, IBV_WC_SUCCESS);
	}
}

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct fake *f = fake_of(qp->context);
	int i, j;

	f->post_calls++;
	for (i = 0; wr != NULL; wr = wr->next, i++) {
		struct fake_send *s;

		if (i == f->fail_at || f->nsend == FAKE_MAX) {
			if (!f->null_bad)
				*bad = wr;
			return i == f->fail_at ? f->fail_errno : ENOMEM;
		}
		s = &f->send[f->nsend++];
		memset(s, 0, sizeof(*s));
		s->wr_id = wr->wr_id;
		s->opcode = wr->opcode;
		s->flags = wr->send_flags;
		s->imm = wr->imm_data;
		s->num_sge = wr->num_sge;
		for (j = 0; j < wr->num_sge && j < FAKE_SGE; j++)
			s->sge[j] = wr->sg_list[j];
		if (f->execute)
			fake_execute(f, qp, wr);
		if (qp->qp_type == IBV_QPT_UD) {
			s->ah = (uintptr_t)wr->wr.ud.ah;
			s->remote_qpn = wr->wr.ud.remote_qpn;
			s->remote_qkey = wr->wr.ud.remote_qkey;
			continue;
		}
		switch (wr->opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
		case IBV_WR_RDMA_READ:
			s->remote_addr = wr->wr.rdma.remote_addr;
			s->rkey = wr->wr.rdma.rkey;
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			s->remote_addr = wr->wr.atomic.remote_addr;
			s->rkey = wr->wr.atomic.rkey;
			s->compare_add = wr->wr.atomic.compare_add;
			s->swap = wr->wr.atomic.swap;
			break;
		default:
			break;
		}
	}
	return 0;
}

static int fake_record_recv(struct fake *f, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int i, j;

	f->post_calls++;
	for (i = 0; wr != NULL; wr = wr->next, i++) {
		struct fake_recv *r;

		if (i == f->fail_at || f->nrecv == FAKE_MAX) {
			if (!f->null_bad)
				*bad = wr;
			return i == f->fail_at ? f->fail_errno : ENOMEM;
		}
		r = &f->recv[f->nrecv++];
		memset(r, 0, sizeof(*r));
		r->wr_id = wr->wr_id;
		r->num_sge = wr->num_sge;
		for (j = 0; j < wr->num_sge && j < FAKE_SGE; j++)
			r->sge[j] = wr->sg_list[j];
	}
	return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return fake_record_recv(fake_of(qp->context), wr, bad);
}

static int fake_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return fake_record_recv(fake_of(srq->context), wr, bad);
}

static int fake_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct fake *f = fake_of(cq->context);
	int k = 0;

	f->poll_calls++;
	if (f->poll_err)
		return -1;
	while (k < n && f->wcpos < f->nwc)
		wc[k++] = f->wc[f->wcpos++];
	return k;
}

/* The extended CQ's poll API over the same completions. */
static struct fake *fake_of_cqx(struct ibv_cq_ex *cq)
{
	return fake_of(cq->context);
}

static void fake_cqx_load(struct fake *f)
{
	f->cur = f->wcpos++;
	f->cqx.wr_id = f->wc[f->cur].wr_id;
	f->cqx.status = f->wc[f->cur].status;
}

static int fake_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr)
{
	struct fake *f = fake_of_cqx(cq);

	(void)attr;
	f->start_calls++;
	if (f->poll_err)
		return EIO;
	if (f->wcpos >= f->nwc)
		return ENOENT;
	fake_cqx_load(f);
	return 0;
}

static int fake_next_poll(struct ibv_cq_ex *cq)
{
	struct fake *f = fake_of_cqx(cq);

	if (f->wcpos >= f->nwc)
		return ENOENT;
	fake_cqx_load(f);
	return 0;
}

static void fake_end_poll(struct ibv_cq_ex *cq) { (void)cq; }

#define FAKE_CUR(cq) (fake_of_cqx(cq)->wc[fake_of_cqx(cq)->cur])
static enum ibv_wc_opcode fake_read_opcode(struct ibv_cq_ex *cq) { return FAKE_CUR(cq).opcode; }
static uint32_t fake_read_vendor_err(struct ibv_cq_ex *cq) { return FAKE_CUR(cq).vendor_err; }
static uint32_t fake_read_byte_len(struct ibv_cq_ex *cq) { return FAKE_CUR(cq).byte_len; }
static __be32 fake_read_imm_data(struct ibv_cq_ex *cq) { return FAKE_CUR(cq).imm_data; }
static uint32_t fake_read_qp_num(struct ibv_cq_ex *cq) { return FAKE_CUR(cq).qp_num; }
static uint32_t fake_read_src_qp(struct ibv_cq_ex *cq) { return FAKE_CUR(cq).src_qp; }
static unsigned int fake_read_wc_flags(struct ibv_cq_ex *cq) { return FAKE_CUR(cq).wc_flags; }
static uint32_t fake_read_slid(struct ibv_cq_ex *cq) { return FAKE_CUR(cq).slid; }
static uint8_t fake_read_sl(struct ibv_cq_ex *cq) { return FAKE_CUR(cq).sl; }
static uint8_t fake_read_dlid_path_bits(struct ibv_cq_ex *cq) { return FAKE_CUR(cq).dlid_path_bits; }
static uint64_t fake_read_completion_ts(struct ibv_cq_ex *cq) { return fake_of_cqx(cq)->ts[fake_of_cqx(cq)->cur]; }
static uint32_t fake_read_flow_tag(struct ibv_cq_ex *cq) { return fake_of_cqx(cq)->tag[fake_of_cqx(cq)->cur]; }

static int fake_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)solicited_only;
	fake_of(cq->context)->notify_calls++;
	return 0;
}

/* The control path, as libibverbs and rdma_rxe answer it. */

static int fake_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *input,
				struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct fake *f = fake_of(ctx);

	if (input && input->comp_mask)
		return EINVAL;
	if (f->legacy)
		return EOPNOTSUPP;
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	if (attr_size > sizeof(*attr))
		attr_size = sizeof(*attr);
	memcpy(attr, &f->attr, attr_size);
	return 0;
}

static int fake_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	*attr = fake_of(ctx)->attr.orig_attr;
	return 0;
}

static int fake_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	struct fake *f = fake_of(ctx);

	if (port < 1 || port > f->attr.orig_attr.phys_port_cnt || port > FAKE_PORTS)
		return EINVAL;
	*attr = f->port[port - 1];
	return 0;
}

static ssize_t fake_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries, size_t max)
{
	struct fake *f = fake_of(ctx);

	if (max < (size_t)f->ngid)
		return -EINVAL;
	memcpy(entries, f->gid, f->ngid * sizeof(*entries));
	return f->ngid;
}

static struct ibv_pd *fake_alloc_pd(struct ibv_context *ctx)
{
	struct fake *f = fake_of(ctx);
	struct fake_pd *p;

	if (f->fail_alloc_pd) {
		errno = f->fail_alloc_pd;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	p->pd.context = ctx;
	f->npd++;
	return &p->pd;
}

static int fake_dealloc_pd(struct ibv_pd *pd)
{
	struct fake_pd *p = (struct fake_pd *)pd;

	if (p->users)
		return EBUSY;
	fake_of(pd->context)->npd--;
	free(p);
	return 0;
}

static struct ibv_cq *fake_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				     struct ibv_comp_channel *channel, int comp_vector)
{
	struct fake *f = fake_of(ctx);
	struct fake_cq *c;

	if (cqe < 1 || cqe > f->attr.orig_attr.max_cqe ||
	    comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	c->cq.context = ctx;
	c->cq.cq_context = cq_context;
	c->cq.channel = channel;
	c->cq.cqe = cqe;
	f->ncq++;
	return &c->cq;
}

static int fake_destroy_cq(struct ibv_cq *cq)
{
	struct fake_cq *c = (struct fake_cq *)cq;

	if (c->users)
		return EBUSY;
	fake_of(cq->context)->ncq--;
	free(c);
	return 0;
}

/*
 * create_qp checks what rdma_rxe checks (rxe_qp_chk_init, rxe_qp_chk_cap)
 * and grants what it grants: a send queue entry holds max_send_sge SGEs of
 * 16 bytes or the inline data, whichever is larger, so max_inline_data is
 * rounded up to 16 bytes per send SGE, and max_send_sge up to what the
 * inline data leaves room for.
 */
static struct ibv_qp *fake_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	struct fake *f = fake_of(pd->context);
	const struct ibv_device_attr *da = &f->attr.orig_attr;
	struct fake_qp *q;
	uint32_t wqe;

	if (f->fail_create_qp) {
		errno = f->fail_create_qp;
		return NULL;
	}
	if (ia->send_cq == NULL || ia->recv_cq == NULL ||
	    ia->send_cq->context != pd->context || ia->recv_cq->context != pd->context) {
		errno = EINVAL;
		return NULL;
	}
	switch (ia->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		break;
	default:
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (ia->cap.max_send_wr > (uint32_t)da->max_qp_wr || ia->cap.max_send_sge > (uint32_t)da->max_sge ||
	    ia->cap.max_inline_data > f->max_inline ||
	    (ia->srq == NULL && (ia->cap.max_recv_wr > (uint32_t)da->max_qp_wr ||
				 ia->cap.max_recv_sge > (uint32_t)da->max_sge))) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (q == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	wqe = ia->cap.max_send_sge * sizeof(struct ibv_sge);
	if (ia->cap.max_inline_data > wqe)
		wqe = ia->cap.max_inline_data;
	ia->cap.max_inline_data = wqe;
	ia->cap.max_send_sge = wqe / sizeof(struct ibv_sge);
	q->qp.context = pd->context;
	q->qp.pd = pd;
	q->qp.send_cq = ia->send_cq;
	q->qp.recv_cq = ia->recv_cq;
	q->qp.srq = ia->srq;
	q->qp.qp_type = ia->qp_type;
	q->qp.qp_num = 0x100 + f->qps_created;
	q->qp.state = IBV_QPS_RESET;
	q->pd = (struct fake_pd *)pd;
	q->scq = (struct fake_cq *)ia->send_cq;
	q->rcq = (struct fake_cq *)ia->recv_cq;
	q->pd->users++;
	q->scq->users++;
	q->rcq->users++;
	f->nqp++;
	f->qps_created++;
	return &q->qp;
}

static int fake_destroy_qp(struct ibv_qp *qp)
{
	struct fake_qp *q = (struct fake_qp *)qp;

	q->pd->users--;
	q->scq->users--;
	q->rcq->users--;
	fake_of(qp->context)->nqp--;
	free(q);
	return 0;
}

static int fake_close_device(struct ibv_context *ctx)
{
	fake_of(ctx)->closed++;
	return 0;
}

struct fake *fake_new(void)
{
	struct fake *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return NULL;
	f->fail_at = -1;
	f->ctx.ops.post_send = fake_post_send;
	f->ctx.ops.post_recv = fake_post_recv;
	f->ctx.ops.post_srq_recv = fake_post_srq_recv;
	f->ctx.ops.poll_cq = fake_poll_cq;
	f->ctx.ops.req_notify_cq = fake_req_notify_cq;
	f->qp.context = &f->ctx;
	f->qp.qp_type = IBV_QPT_RC;
	f->qp.qp_num = 0x1234;
	f->cq.context = &f->ctx;
	f->cq.cqe = FAKE_MAX;
	f->cqx.context = &f->ctx;
	f->cqx.cqe = FAKE_MAX;
	f->cqx.start_poll = fake_start_poll;
	f->cqx.next_poll = fake_next_poll;
	f->cqx.end_poll = fake_end_poll;
	f->cqx.read_opcode = fake_read_opcode;
	f->cqx.read_vendor_err = fake_read_vendor_err;
	f->cqx.read_byte_len = fake_read_byte_len;
	f->cqx.read_imm_data = fake_read_imm_data;
	f->cqx.read_qp_num = fake_read_qp_num;
	f->cqx.read_src_qp = fake_read_src_qp;
	f->cqx.read_wc_flags = fake_read_wc_flags;
	f->cqx.read_slid = fake_read_slid;
	f->cqx.read_sl = fake_read_sl;
	f->cqx.read_dlid_path_bits = fake_read_dlid_path_bits;
	f->cqx.read_completion_ts = fake_read_completion_ts;
	f->cqx.read_flow_tag = fake_read_flow_tag;
	f->srq.context = &f->ctx;

	f->verbs.query_device_ex = fake_query_device_ex;
	f->verbs.query_device = fake_query_device;
	f->verbs.query_port = fake_query_port;
	f->verbs.query_gid_table = fake_query_gid_table;
	f->verbs.alloc_pd = fake_alloc_pd;
	f->verbs.dealloc_pd = fake_dealloc_pd;
	f->verbs.create_cq = fake_create_cq;
	f->verbs.destroy_cq = fake_destroy_cq;
	f->verbs.create_qp = fake_create_qp;
	f->verbs.destroy_qp = fake_destroy_qp;
	f->verbs.close_device = fake_close_device;
	f->ctx.num_comp_vectors = 1;
	f->attr.orig_attr.phys_port_cnt = 1;
	f->attr.orig_attr.max_qp_wr = 1 << 20;
	f->attr.orig_attr.max_sge = 32;
	f->attr.orig_attr.max_cqe = 32767;
	f->max_inline = 0;
	return f;
}
