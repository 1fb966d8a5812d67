//go:build linux && cgo && ibverbs

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

static struct fake *fake_of(struct ibv_context *ctx)
{
	return (struct fake *)ctx;
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

static int fake_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)solicited_only;
	fake_of(cq->context)->notify_calls++;
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
	f->srq.context = &f->ctx;
	return f;
}
