//go:build linux && cgo && ibverbs

// C side of the kernel connection manager (kernel_cgo.go): librdmacm
// through a table of function pointers, which the tests point at a fake
// (internal/fakecm), and helpers that keep unions, sockaddrs and event
// lifetimes on the C side.

#ifndef RPERF_CM_RDMACM_H
#define RPERF_CM_RDMACM_H

#include <stddef.h>
#include <stdint.h>
#include <rdma/rdma_cma.h>

// struct rperf_rdmacm holds the librdmacm calls the kernel CM makes.
// rperf_librdmacm points at librdmacm; the fake's functions take the same
// arguments and return -1 with errno set as librdmacm does.
struct rperf_rdmacm {
	struct rdma_event_channel *(*create_event_channel)(void);
	void (*destroy_event_channel)(struct rdma_event_channel *ch);
	int (*create_id)(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx, enum rdma_port_space ps);
	int (*destroy_id)(struct rdma_cm_id *id);
	int (*bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
	int (*resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst, int timeout_ms);
	int (*resolve_route)(struct rdma_cm_id *id, int timeout_ms);
	int (*listen)(struct rdma_cm_id *id, int backlog);
	int (*connect)(struct rdma_cm_id *id, struct rdma_conn_param *p);
	int (*accept)(struct rdma_cm_id *id, struct rdma_conn_param *p);
	int (*reject)(struct rdma_cm_id *id, const void *pd, uint8_t len);
	int (*establish)(struct rdma_cm_id *id);
	int (*notify)(struct rdma_cm_id *id, enum ibv_event_type ev);
	int (*disconnect)(struct rdma_cm_id *id);
	int (*set_option)(struct rdma_cm_id *id, int level, int name, void *val, size_t len);
	int (*init_qp_attr)(struct rdma_cm_id *id, struct ibv_qp_attr *attr, int *mask);
	int (*get_cm_event)(struct rdma_event_channel *ch, struct rdma_cm_event **ev);
	int (*ack_cm_event)(struct rdma_cm_event *ev);
};

// rperf_librdmacm is the table of the real library.
extern const struct rperf_rdmacm rperf_librdmacm;

// rperf_cm_channel creates an event channel whose fd does not block. It
// returns NULL with errno set on failure.
struct rdma_event_channel *rperf_cm_channel(const struct rperf_rdmacm *v);

// rperf_cm_wait waits up to timeout_ms for the channel's fd to be
// readable: 1 readable, 0 not, -errno on failure.
int rperf_cm_wait(struct rdma_event_channel *ch, int timeout_ms);

// struct rperf_cm_event is one event copied out of librdmacm, so that it
// can be acknowledged at once (rdma_destroy_id waits for the acks).
struct rperf_cm_event {
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	int event;
	int status;
	int ud; // param is the UD one
	uint8_t private_data[256];
	int private_data_len;
	uint8_t responder_resources, initiator_depth, flow_control, retry_count, rnr_retry_count, srq;
	uint32_t qp_num;
	uint32_t qkey;
	struct ibv_ah_attr ah_attr;
};

// rperf_cm_take takes one event from the channel into out and acks it. It
// returns 0, or the errno (EAGAIN: none).
int rperf_cm_take(const struct rperf_rdmacm *v, struct rdma_event_channel *ch, struct rperf_cm_event *out);

// struct rperf_cm_info is what the identifier knows of its addresses,
// device and route.
struct rperf_cm_info {
	uint8_t src[128], dst[128]; // struct sockaddr_storage
	char device[64];            // "" while the identifier has no device
	uint8_t port_num;
	int qp_type;
	uint8_t sgid[16], dgid[16];
	int num_paths;
	uint8_t mtu, hop_limit, traffic_class, packet_life_time;
	uint32_t flow_label; // host order
};

// rperf_cm_info fills out from id.
void rperf_cm_info(struct rdma_cm_id *id, struct rperf_cm_info *out);

// rperf_cm_conn calls connect (accept != 0: accept) with a struct
// rdma_conn_param built from the arguments. It returns 0 or the errno.
int rperf_cm_conn(const struct rperf_rdmacm *v, struct rdma_cm_id *id, int accept, const void *pd, uint8_t pdlen,
		  uint8_t resp, uint8_t init, uint8_t fc, uint8_t retry, uint8_t rnr, uint8_t srq, uint32_t qpn);

// rperf_cm_init_qp_attr is rdma_init_qp_attr for state. It returns 0 or the errno.
int rperf_cm_init_qp_attr(const struct rperf_rdmacm *v, struct rdma_cm_id *id, int state, struct ibv_qp_attr *attr, int *mask);

// rperf_cm_errno runs one of the calls that take only the identifier or
// an int and returns 0 or the errno: op 0 destroy_id, 1 resolve_route(arg),
// 2 listen(arg), 3 establish, 4 notify(COMM_EST), 5 disconnect.
int rperf_cm_call(const struct rperf_rdmacm *v, struct rdma_cm_id *id, int op, int arg);

// rperf_cm_create_id is create_id; 0 or the errno.
int rperf_cm_create_id(const struct rperf_rdmacm *v, struct rdma_event_channel *ch, struct rdma_cm_id **id, int ps);

// rperf_cm_bind and rperf_cm_resolve_addr take struct sockaddr_storage bytes
// (src may be NULL); 0 or the errno.
int rperf_cm_bind(const struct rperf_rdmacm *v, struct rdma_cm_id *id, const void *addr);
int rperf_cm_resolve_addr(const struct rperf_rdmacm *v, struct rdma_cm_id *id, const void *src, const void *dst, int timeout_ms);

// rperf_cm_reject is reject; 0 or the errno.
int rperf_cm_reject(const struct rperf_rdmacm *v, struct rdma_cm_id *id, const void *pd, uint8_t len);

// rperf_cm_set_option sets an RDMA_OPTION_ID option: TOS and ACK_TIMEOUT
// as a uint8_t, REUSEADDR as an int. 0 or the errno.
int rperf_cm_set_option(const struct rperf_rdmacm *v, struct rdma_cm_id *id, int name, int val);

// rperf_cm_set_path hands the identifier one primary, bidirectional path
// record (rdma_set_option RDMA_OPTION_IB, RDMA_OPTION_IB_PATH) built from
// the arguments, which are in host order (the GIDs in network order). 0
// or the errno.
int rperf_cm_set_path(const struct rperf_rdmacm *v, struct rdma_cm_id *id, uint64_t service_id, const uint8_t *dgid,
		      const uint8_t *sgid, uint32_t flow_label, uint8_t hop_limit, uint8_t tclass, uint16_t pkey, uint8_t mtu,
		      uint8_t packet_life_time);

// rperf_cm_close_channel is destroy_event_channel through v.
void rperf_cm_close_channel(const struct rperf_rdmacm *v, struct rdma_event_channel *ch);

#endif
