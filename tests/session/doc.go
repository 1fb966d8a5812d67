// Package session is the part of rperf's test families that latency and
// bandwidth tests share: it turns an open verbs context and an
// out-of-band connection into connected queue pairs, and it provides the
// bounded waiting, peer-failure detection and duration-mode clock the
// measurement loops use.
//
// # Setup
//
// [Open] runs the steps of a perftest program's main() in order: the cm
// handshake (versions, MTU, and for rperf peers the parameter check), the
// creation of a PD, CQs, one registered buffer and the QPs, one key
// exchange per QP, the move of every QP to RTS, the initial receives of
// SEND tests, and a barrier, so that neither side sends before the other
// is ready.
//
// Each QP owns two regions of the buffer, each rounded up to the page
// size: a send region (the local side of every WRITE, SEND, READ or
// atomic) and a receive region, whose address and key the peer learns in
// the key exchange and targets. As in perftest, every message of a QP uses
// the same addresses.
//
// # Waiting
//
// Measurement loops busy-poll: memory or a CQ, without system calls. Every
// wait goes through a [Waiter], which the loop calls every few thousand
// spins. It ends the wait with an error when the context is cancelled,
// when the peer made no progress for the stall timeout, or, on RC, when a
// probe (a zero-length RDMA WRITE) completes with an error, which is how a
// dead peer shows up on a reliable connection. A wait that lasts more than
// [BackoffAfter] naps between checks so that a machine with more busy
// threads than cores can still run the peer.
package session
