// Package oob sets up test connections the way linux-rdma perftest does, so
// that an rperf side can run against an ib_*_bw / ib_*_lat side and vice
// versa. It speaks perftest's default out-of-band protocol ("Data ex.
// method: Ethernet"): a plain TCP connection, by default on port 18515,
// over which the two sides trade fixed-size messages. It does not create or
// modify QPs; callers pass in what to announce and get back what the peer
// announced.
//
// # Transport
//
// The server listens (SO_REUSEADDR), accepts exactly one client and closes
// the listening socket. The client connects, retrying for a bounded time
// while the server refuses because it is not listening yet. There is no
// framing: every message has a size both sides know in advance, and every
// exchange is symmetric and ordered — the client writes its message then
// reads the peer's, the server reads first then writes. Each message goes
// out in one write; perftest treats a short read as an error, so this
// matters to it. Reads here collect the full size (within the deadline)
// whatever the segmentation.
//
// Every message send and receive has a deadline (Options.IOTimeout, or the
// wait given to Barrier) and honours context cancellation, so a peer that
// stops talking or dies ends in an error that names the step in progress
// and matches ErrTimeout or ErrPeerClosed.
//
// # Session
//
// Both sides call the same methods in the same order:
//
//  1. Handshake: the version exchange (16 bytes, NUL-padded ASCII, read
//     by perftest with atof), a rejection of peers older than 5.70, the
//     sys-data exchange for peers from 5.32 on (page size, then cache line
//     size, each a 4-byte big-endian integer; both sides keep the maximum),
//     and the MTU exchange (the ibv_mtu enum value in ASCII decimal plus
//     NUL: 2 bytes for peers from 5.31 on, else 4; both sides keep the
//     minimum). rperf advertises Version, "6.27 rperf/1": perftest 6.28
//     and newer then skip their binary parameter negotiation, whose layout
//     depends on the peer's build; see Version for the reasoning.
//  2. rperf peers only, still inside Handshake: the test-parameter
//     exchange, a 4-byte big-endian length and a JSON document (Params).
//     Symmetric fields that differ make both sides fail with one error
//     that lists them. With a plain perftest peer this step is skipped.
//  3. ExchangeKeys once per QP: the KEY message, ASCII hex fields
//     LID:OUT_READS:QPN:PSN:RKEY:VADDR:SRQN (59 bytes with NUL) or, with a
//     GID, LID:OUT_READS:QPN:PSN:RKEY:VADDR:G0:...:G15:SRQN: (108 bytes).
//     Each side reads the form it writes itself, so both must agree on
//     using a GID.
//  4. Barrier wherever the perftest program being mirrored does one more
//     key exchange to synchronise (after RTR, between sizes, while a
//     passive server waits for the client's run). The number and places of
//     these are per program; an interoperating test must mirror the
//     program's main() exactly.
//  5. ExchangeBWReport in bandwidth tests: size, iterations and three
//     doubles, big-endian, each its own exchange.
//  6. Finish: a last key exchange, "done\0" for older perftest releases,
//     close.
//
// A server side of a write-latency test, for example:
//
//	ln, err := oob.Listen(ctx, ":18515", oob.Options{})
//	conn, err := ln.Accept(ctx)
//	defer conn.Close()
//	peer, err := conn.Handshake(ctx, oob.Hello{MTU: portMTU, Params: params})
//	remote, err := conn.ExchangeKeys(ctx, oob.Dest{QPN: qp.Num(), PSN: psn, ...})
//	// move the QP to RTR/RTS with remote and peer.MTU
//	err = conn.Barrier(ctx, 0)
//	// run the test
//	err = conn.Finish(ctx)
//
// The client is the same with oob.Dial(ctx, "server-host", oob.Options{}) in
// place of Listen and Accept.
//
// Not supported: perftest's rdma_cm variants of the channel (-z) and of QP
// setup (-R), the data-validation key forms (--data_validation), and the
// 6.28+ binary parameter negotiation, which rperf avoids by advertising
// 6.27.
package oob
