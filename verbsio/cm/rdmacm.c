//go:build linux && cgo && ibverbs

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include <infiniband/sa.h>

#include "rdmacm.h"

const struct rperf_rdmacm rperf_librdmacm = {
	.create_event_channel = rdma_create_event_channel,
	.destroy_event_channel = rdma_destroy_event_channel,
	.create_id = rdma_create_id,
	.destroy_id = rdma_destroy_id,
	.bind_addr = rdma_bind_addr,
	.resolve_addr = rdma_resolve_addr,
	.resolve_route = rdma_resolve_route,
	.listen = rdma_listen,
	.connect = rdma_connect,
	.accept = rdma_accept,
	.reject = rdma_reject,
	.establish = rdma_establish,
	.notify = rdma_notify,
	.disconnect = rdma_disconnect,
	.set_option = rdma_set_option,
	.init_qp_attr = rdma_init_qp_attr,
	.get_cm_event = rdma_get_cm_event,
	.ack_cm_event = rdma_ack_cm_event,
};

static int err_of(int ret)
{
	if (ret == 0)
		return 0;
	return errno ? errno : EIO;
}

struct rdma_event_channel *rperf_cm_channel(const struct rperf_rdmacm *v)
{
	struct rdma_event_channel *ch = v->create_event_channel();
	int fl;

	if (!ch)
		return NULL;
	fl = fcntl(ch->fd, F_GETFL);
	if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = errno;
		v->destroy_event_channel(ch);
		errno = e;
		return NULL;
	}
	return ch;
}

int rperf_cm_wait(struct rdma_event_channel *ch, int timeout_ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	int n = poll(&p, 1, timeout_ms);

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n > 0;
}

int rperf_cm_take(const struct rperf_rdmacm *v, struct rdma_event_channel *ch, struct rperf_cm_event *out)
{
	struct rdma_cm_event *ev;
	const void *pd;
	int len;

	errno = 0;
	if (v->get_cm_event(ch, &ev))
		return errno ? errno : EIO;
	memset(out, 0, sizeof(*out));
	out->id = ev->id;
	out->listen_id = ev->listen_id;
	out->event = ev->event;
	out->status = ev->status;
	out->ud = ev->id && (ev->id->ps == RDMA_PS_UDP || ev->id->ps == RDMA_PS_IPOIB);
	if (out->ud) {
		pd = ev->param.ud.private_data;
		len = ev->param.ud.private_data_len;
		out->qp_num = ev->param.ud.qp_num;
		out->qkey = ev->param.ud.qkey;
		out->ah_attr = ev->param.ud.ah_attr;
	} else {
		pd = ev->param.conn.private_data;
		len = ev->param.conn.private_data_len;
		out->responder_resources = ev->param.conn.responder_resources;
		out->initiator_depth = ev->param.conn.initiator_depth;
		out->flow_control = ev->param.conn.flow_control;
		out->retry_count = ev->param.conn.retry_count;
		out->rnr_retry_count = ev->param.conn.rnr_retry_count;
		out->srq = ev->param.conn.srq;
		out->qp_num = ev->param.conn.qp_num;
	}
	if (pd && len > 0) {
		if (len > (int)sizeof(out->private_data))
			len = sizeof(out->private_data);
		memcpy(out->private_data, pd, len);
		out->private_data_len = len;
	}
	return err_of(v->ack_cm_event(ev));
}

void rperf_cm_info(struct rdma_cm_id *id, struct rperf_cm_info *out)
{
	struct ibv_sa_path_rec *p;

	memset(out, 0, sizeof(*out));
	memcpy(out->src, &id->route.addr.src_storage, sizeof(out->src));
	memcpy(out->dst, &id->route.addr.dst_storage, sizeof(out->dst));
	if (id->verbs && id->verbs->device)
		strncpy(out->device, id->verbs->device->name, sizeof(out->device) - 1);
	out->port_num = id->port_num;
	out->qp_type = id->qp_type;
	memcpy(out->sgid, id->route.addr.addr.ibaddr.sgid.raw, 16);
	memcpy(out->dgid, id->route.addr.addr.ibaddr.dgid.raw, 16);
	out->num_paths = id->route.num_paths;
	if (id->route.num_paths > 0 && id->route.path_rec) {
		p = id->route.path_rec;
		memcpy(out->sgid, p->sgid.raw, 16);
		memcpy(out->dgid, p->dgid.raw, 16);
		out->mtu = p->mtu;
		out->hop_limit = p->hop_limit;
		out->traffic_class = p->traffic_class;
		out->packet_life_time = p->packet_life_time;
		out->flow_label = __builtin_bswap32(p->flow_label);
	}
}

int rperf_cm_conn(const struct rperf_rdmacm *v, struct rdma_cm_id *id, int accept, const void *pd, uint8_t pdlen,
		  uint8_t resp, uint8_t init, uint8_t fc, uint8_t retry, uint8_t rnr, uint8_t srq, uint32_t qpn)
{
	struct rdma_conn_param p = {
		.private_data = pdlen ? pd : NULL,
		.private_data_len = pdlen,
		.responder_resources = resp,
		.initiator_depth = init,
		.flow_control = fc,
		.retry_count = retry,
		.rnr_retry_count = rnr,
		.srq = srq,
		.qp_num = qpn,
	};

	errno = 0;
	return err_of(accept ? v->accept(id, &p) : v->connect(id, &p));
}

int rperf_cm_init_qp_attr(const struct rperf_rdmacm *v, struct rdma_cm_id *id, int state, struct ibv_qp_attr *attr, int *mask)
{
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = state;
	*mask = 0;
	errno = 0;
	return err_of(v->init_qp_attr(id, attr, mask));
}

int rperf_cm_call(const struct rperf_rdmacm *v, struct rdma_cm_id *id, int op, int arg)
{
	errno = 0;
	switch (op) {
	case 0:
		return err_of(v->destroy_id(id));
	case 1:
		return err_of(v->resolve_route(id, arg));
	case 2:
		return err_of(v->listen(id, arg));
	case 3:
		return err_of(v->establish(id));
	case 4:
		return err_of(v->notify(id, IBV_EVENT_COMM_EST));
	case 5:
		return err_of(v->disconnect(id));
	}
	return EINVAL;
}

int rperf_cm_create_id(const struct rperf_rdmacm *v, struct rdma_event_channel *ch, struct rdma_cm_id **id, int ps)
{
	errno = 0;
	return err_of(v->create_id(ch, id, NULL, (enum rdma_port_space)ps));
}

int rperf_cm_bind(const struct rperf_rdmacm *v, struct rdma_cm_id *id, const void *addr)
{
	struct sockaddr_storage a;

	memcpy(&a, addr, sizeof(a));
	errno = 0;
	return err_of(v->bind_addr(id, (struct sockaddr *)&a));
}

int rperf_cm_resolve_addr(const struct rperf_rdmacm *v, struct rdma_cm_id *id, const void *src, const void *dst, int timeout_ms)
{
	struct sockaddr_storage s, d;

	if (src)
		memcpy(&s, src, sizeof(s));
	memcpy(&d, dst, sizeof(d));
	errno = 0;
	return err_of(v->resolve_addr(id, src ? (struct sockaddr *)&s : NULL, (struct sockaddr *)&d, timeout_ms));
}

int rperf_cm_reject(const struct rperf_rdmacm *v, struct rdma_cm_id *id, const void *pd, uint8_t len)
{
	errno = 0;
	return err_of(v->reject(id, len ? pd : NULL, len));
}

int rperf_cm_set_option(const struct rperf_rdmacm *v, struct rdma_cm_id *id, int name, int val)
{
	uint8_t b = (uint8_t)val;

	errno = 0;
	if (name == RDMA_OPTION_ID_REUSEADDR)
		return err_of(v->set_option(id, RDMA_OPTION_ID, name, &val, sizeof(val)));
	return err_of(v->set_option(id, RDMA_OPTION_ID, name, &b, sizeof(b)));
}

int rperf_cm_set_path(const struct rperf_rdmacm *v, struct rdma_cm_id *id, uint64_t service_id, const uint8_t *dgid,
		      const uint8_t *sgid, uint32_t flow_label, uint8_t hop_limit, uint8_t tclass, uint16_t pkey, uint8_t mtu,
		      uint8_t packet_life_time)
{
	struct ibv_path_data pd;
	struct ibv_path_record *r = &pd.path;

	memset(&pd, 0, sizeof(pd));
	// The kernel takes the one record flagged GMP, primary and
	// bidirectional (ucma_set_ib_path).
	pd.flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
	r->service_id = htobe64(service_id);
	memcpy(r->dgid.raw, dgid, 16);
	memcpy(r->sgid.raw, sgid, 16);
	r->flowlabel_hoplimit = htobe32((flow_label & 0xfffff) << 8 | hop_limit);
	r->tclass = tclass;
	r->reversible_numpath = 0x80 | 1;
	r->pkey = htobe16(pkey);
	r->mtu = 2 << 6 | (mtu & 0x3f);		      // selector 2: exactly
	r->packetlifetime = 2 << 6 | (packet_life_time & 0x3f);
	errno = 0;
	return err_of(v->set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &pd, sizeof(pd)));
}

void rperf_cm_close_channel(const struct rperf_rdmacm *v, struct rdma_event_channel *ch)
{
	v->destroy_event_channel(ch);
}
