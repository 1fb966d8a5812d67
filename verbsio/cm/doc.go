// Package cm is rdma_cm for verbsio: connection management by IP address,
// spoken on the wire as the InfiniBand CM protocol exactly as Linux does
// (management datagrams to QP1; see docs/cm.md and package mad), so that
// its peers may be Linux rdma_cm applications (rping, perftest -R) or other
// rperf engines.
//
//	ibcm := cm.Open(ctx, cm.Options{})            // the CM agent of ctx's port 1
//	ch := cm.NewEventChannel()                    // rdma_create_event_channel
//	id, _ := ch.CreateID(nil, cm.PortSpaceTCP, verbsio.QPTypeRC)
//	id.ResolveAddr(src, dst, time.Second)         // -> ADDR_RESOLVED
//	id.ResolveRoute(time.Second)                  // -> ROUTE_RESOLVED
//	qp, _ := id.CreateQP(pd, attr)                // rdma_create_qp: QP in INIT
//	id.Connect(&cm.ConnParam{PrivateData: pd})    // REQ -> ESTABLISHED
//	ev, err := ch.GetEvent(5 * time.Second)       // bounded wait
//
// The passive side binds, listens, takes CONNECT_REQUEST (whose ID is the
// new connection), creates its QP on that ID and accepts. Events are
// rdma_cm's: ADDR_RESOLVED, ROUTE_RESOLVED, CONNECT_REQUEST,
// CONNECT_RESPONSE, ESTABLISHED, REJECTED (Status: the REJ reason),
// UNREACHABLE (-ETIMEDOUT after the CM's retries, or a SIDR status),
// DISCONNECTED, TIMEWAIT_EXIT, plus ADDR_ERROR and CONNECT_ERROR.
//
// # QPs the application moves itself
//
// An ID without a QP (no CreateQP) connects the QP named in
// ConnParam.QPNum; the application moves it with InitQPAttr, which gives
// the attributes of INIT, RTR and RTS from what the handshake negotiated
// (rdma_init_qp_attr). On the active side the REP is then reported as
// CONNECT_RESPONSE instead of ESTABLISHED: the application moves its QP to
// RTR and RTS and calls Establish (rdma_establish), which sends the RTU;
// only then does the passive side report ESTABLISHED.
//
// OptionACKTimeout (rdma_set_option RDMA_OPTION_ID_ACK_TIMEOUT) replaces
// the QP ACK timeout the CM computes from the path and the peer's ACK
// delay; its value t means 4.096 us * 2^t, 0 infinite, as the QP attribute
// does.
//
// # UD
//
// A UDP port space ID resolves the peer's UD QP with SIDR: Connect sends a
// SIDR_REQ, the passive side's Accept answers with its QPN and Q_Key
// (0x01234567 by default), and the active side's ESTABLISHED carries them
// with the address vector (Event.UD).
//
// # Transport
//
// A Device needs its port's QP1: verbsio.Context.OpenMADPort, which
// providers implement for their fabric (the RoCEv2 udp fabric: UD packets
// to QP1 on UDP 4791), or a MADPort given in Options. Loopback connects
// the devices of one process; UnixMADPort connects processes on one host
// through Unix datagram sockets, the way for the shared-memory fabric.
package cm
