//go:build linux && cgo && ibverbs

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake.h"

struct fakecm *fakecm;

static int called(const char *op)
{
	size_t n = strlen(fakecm->calls);

	if (n + strlen(op) + 2 < sizeof(fakecm->calls)) {
		strcat(fakecm->calls, op);
		strcat(fakecm->calls, ";");
	}
	if (strcmp(fakecm->fail_op, op) == 0) {
		errno = fakecm->fail_errno;
		return -1;
	}
	return 0;
}

struct fakecm *fakecm_new(const char *device)
{
	struct fakecm *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	if (pipe(f->pipe)) {
		free(f);
		return NULL;
	}
	strncpy(f->dev.name, device, sizeof(f->dev.name) - 1);
	f->ctx.device = &f->dev;
	f->ch.fd = f->pipe[0];
	f->path.mtu = IBV_MTU_1024;
	f->path.hop_limit = 64;
	f->path.packet_life_time = 18;
	f->path.flow_label = __builtin_bswap32(0x5a5a5);
	fakecm = f;
	return f;
}

void fakecm_free(void)
{
	struct fakecm *f = fakecm;

	if (!f)
		return;
	while (f->n > 0) {
		free(f->queue[f->head]);
		f->head = (f->head + 1) % FAKECM_MAX;
		f->n--;
	}
	close(f->pipe[0]);
	close(f->pipe[1]);
	free(f);
	fakecm = NULL;
}

void fakecm_push(struct rdma_cm_event *ev)
{
	struct fakecm *f = fakecm;
	char b = 1;

	if (f->n == FAKECM_MAX) {
		free(ev);
		return;
	}
	f->queue[(f->head + f->n) % FAKECM_MAX] = ev;
	f->n++;
	if (write(f->pipe[1], &b, 1) != 1)
		abort();
}

static void push(struct rdma_cm_id *id, enum rdma_cm_event_type type)
{
	struct rdma_cm_event *ev = calloc(1, sizeof(*ev));

	if (!ev)
		abort();
	ev->id = id;
	ev->event = type;
	fakecm_push(ev);
}

static struct rdma_event_channel *f_create_event_channel(void)
{
	if (called("create_event_channel"))
		return NULL;
	return &fakecm->ch;
}

static void f_destroy_event_channel(struct rdma_event_channel *ch)
{
	(void)ch;
	called("destroy_event_channel");
}

static struct rdma_cm_id *new_id(struct rdma_event_channel *ch, enum rdma_port_space ps)
{
	struct rdma_cm_id *id = calloc(1, sizeof(*id));

	if (!id)
		abort();
	id->channel = ch;
	id->ps = ps;
	id->qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
	fakecm->live_ids++;
	return id;
}

static int f_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx, enum rdma_port_space ps)
{
	(void)ctx;
	if (called("create_id"))
		return -1;
	if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP) {
		errno = EINVAL;
		return -1;
	}
	*id = new_id(ch, ps);
	return 0;
}

static int f_destroy_id(struct rdma_cm_id *id)
{
	if (called("destroy_id"))
		return -1;
	fakecm->live_ids--;
	free(id);
	return 0;
}

static void attach(struct rdma_cm_id *id)
{
	id->verbs = &fakecm->ctx;
	id->port_num = 1;
}

static int f_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&id->route.addr.src_storage;

	if (called("bind_addr"))
		return -1;
	if (id->route.addr.src_storage.ss_family != 0) {
		errno = EINVAL; /* the kernel binds an IDLE identifier only */
		return -1;
	}
	memcpy(&id->route.addr.src_storage, addr, sizeof(struct sockaddr_storage));
	if (sin->sin_port == 0)
		sin->sin_port = htons(40000);
	if (!(addr->sa_family == AF_INET && sin->sin_addr.s_addr == 0))
		attach(id);
	return 0;
}

static void mapped_gid(uint8_t *gid, const struct sockaddr_storage *a)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)a;

	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, &sin->sin_addr, 4);
}

static int f_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst, int timeout_ms)
{
	(void)timeout_ms;
	if (called("resolve_addr"))
		return -1;
	if (src)
		memcpy(&id->route.addr.src_storage, src, sizeof(struct sockaddr_storage));
	if (((struct sockaddr_in *)&id->route.addr.src_storage)->sin_port == 0)
		((struct sockaddr_in *)&id->route.addr.src_storage)->sin_port = htons(40001);
	memcpy(&id->route.addr.dst_storage, dst, sizeof(struct sockaddr_storage));
	mapped_gid(id->route.addr.addr.ibaddr.sgid.raw, &id->route.addr.src_storage);
	mapped_gid(id->route.addr.addr.ibaddr.dgid.raw, &id->route.addr.dst_storage);
	attach(id);
	push(id, RDMA_CM_EVENT_ADDR_RESOLVED);
	return 0;
}

static int f_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	(void)timeout_ms;
	if (called("resolve_route"))
		return -1;
	fakecm->path.sgid = id->route.addr.addr.ibaddr.sgid;
	fakecm->path.dgid = id->route.addr.addr.ibaddr.dgid;
	id->route.path_rec = &fakecm->path;
	id->route.num_paths = 1;
	push(id, RDMA_CM_EVENT_ROUTE_RESOLVED);
	return 0;
}

static int f_listen(struct rdma_cm_id *id, int backlog)
{
	(void)id;
	(void)backlog;
	return called("listen");
}

static int conn(struct rdma_cm_id *id, struct rdma_conn_param *p, int accept)
{
	(void)id;
	if (called(accept ? "accept" : "connect"))
		return -1;
	fakecm->conn = *p;
	memset(fakecm->conn_pd, 0, sizeof(fakecm->conn_pd));
	if (p->private_data)
		memcpy(fakecm->conn_pd, p->private_data, p->private_data_len);
	fakecm->conn.private_data = fakecm->conn_pd;
	fakecm->accepted = accept;
	return 0;
}

static int f_connect(struct rdma_cm_id *id, struct rdma_conn_param *p) { return conn(id, p, 0); }
static int f_accept(struct rdma_cm_id *id, struct rdma_conn_param *p) { return conn(id, p, 1); }

static int f_reject(struct rdma_cm_id *id, const void *pd, uint8_t len)
{
	(void)id;
	if (called("reject"))
		return -1;
	fakecm->reject_len = len;
	if (pd)
		memcpy(fakecm->reject_pd, pd, len);
	return 0;
}

static int f_establish(struct rdma_cm_id *id)
{
	(void)id;
	return called("establish");
}

static int f_notify(struct rdma_cm_id *id, enum ibv_event_type ev)
{
	(void)id;
	if (ev != IBV_EVENT_COMM_EST) {
		errno = EINVAL;
		return -1;
	}
	return called("notify");
}

static int f_disconnect(struct rdma_cm_id *id)
{
	(void)id;
	return called("disconnect");
}

static int f_set_option(struct rdma_cm_id *id, int level, int name, void *val, size_t len)
{
	if (called("set_option"))
		return -1;
	if (level == RDMA_OPTION_IB && name == RDMA_OPTION_IB_PATH) {
		// As the kernel: one record, then the route is resolved.
		struct ibv_path_data *pd = val;
		struct ibv_path_record *r = &pd->path;

		if (len != sizeof(*pd) || pd->flags != (IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL)) {
			errno = EINVAL;
			return -1;
		}
		fakecm->path_data = *pd;
		fakecm->path_set = 1;
		memcpy(fakecm->path.dgid.raw, r->dgid.raw, 16);
		memcpy(fakecm->path.sgid.raw, r->sgid.raw, 16);
		fakecm->path.mtu = r->mtu & 0x3f;
		fakecm->path.hop_limit = be32toh(r->flowlabel_hoplimit) & 0xff;
		fakecm->path.flow_label = htobe32(be32toh(r->flowlabel_hoplimit) >> 8);
		fakecm->path.traffic_class = r->tclass;
		fakecm->path.packet_life_time = r->packetlifetime & 0x3f;
		id->route.path_rec = &fakecm->path;
		id->route.num_paths = 1;
		push(id, RDMA_CM_EVENT_ROUTE_RESOLVED);
		return 0;
	}
	if (level != RDMA_OPTION_ID) {
		errno = EINVAL;
		return -1;
	}
	fakecm->opt_name = name;
	fakecm->opt_len = (int)len;
	fakecm->opt_val = len == 1 ? *(uint8_t *)val : *(int *)val;
	return 0;
}

static int f_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *attr, int *mask)
{
	int s = attr->qp_state;

	(void)id;
	if (called("init_qp_attr"))
		return -1;
	if (s < 1 || s > 3) {
		errno = EINVAL;
		return -1;
	}
	*attr = fakecm->qp_attr[s];
	attr->qp_state = s;
	*mask = fakecm->qp_mask[s];
	return 0;
}

static int f_get_cm_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev)
{
	struct fakecm *f = fakecm;
	char b;

	if (called("get_cm_event"))
		return -1;
	if (read(ch->fd, &b, 1) != 1 || f->n == 0) {
		errno = EAGAIN;
		return -1;
	}
	*ev = f->queue[f->head];
	f->head = (f->head + 1) % FAKECM_MAX;
	f->n--;
	return 0;
}

static int f_ack_cm_event(struct rdma_cm_event *ev)
{
	fakecm->acks++;
	free(ev);
	return 0;
}

struct rdma_cm_id *fakecm_child(struct rdma_cm_id *listen, const void *src, const void *dst)
{
	struct rdma_cm_id *id = new_id(listen->channel, listen->ps);

	memcpy(&id->route.addr.src_storage, src, sizeof(struct sockaddr_storage));
	memcpy(&id->route.addr.dst_storage, dst, sizeof(struct sockaddr_storage));
	mapped_gid(id->route.addr.addr.ibaddr.sgid.raw, &id->route.addr.src_storage);
	mapped_gid(id->route.addr.addr.ibaddr.dgid.raw, &id->route.addr.dst_storage);
	attach(id);
	return id;
}

const struct rperf_rdmacm fakecm_table = {
	.create_event_channel = f_create_event_channel,
	.destroy_event_channel = f_destroy_event_channel,
	.create_id = f_create_id,
	.destroy_id = f_destroy_id,
	.bind_addr = f_bind_addr,
	.resolve_addr = f_resolve_addr,
	.resolve_route = f_resolve_route,
	.listen = f_listen,
	.connect = f_connect,
	.accept = f_accept,
	.reject = f_reject,
	.establish = f_establish,
	.notify = f_notify,
	.disconnect = f_disconnect,
	.set_option = f_set_option,
	.init_qp_attr = f_init_qp_attr,
	.get_cm_event = f_get_cm_event,
	.ack_cm_event = f_ack_cm_event,
};
