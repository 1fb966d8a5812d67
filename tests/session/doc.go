// Package session is the core of rperf's test families: what every test
// is (the test table, Test), what every test's configuration shares
// (Config, embedded by latency.Config and bw.Config, with Check and its
// FieldErrors), how a test runs (Run, with a Measurer per family), and
// the connected queue pairs it runs on (Session).
//
// # A family
//
// A family (tests/latency, tests/bw) adds its own knobs to Config and a
// Measurer: its checks, its part of the session's shape, and the
// measurement of one message size. Run does the rest: the checks, the
// session, the send path's ends (OpenPath), the callbacks, the loop over
// the sizes, and the closing handshake. A new test is a row of the test
// table; a new family a package with a Config and a Measurer.
//
// # Setup
//
// [Open] runs the steps of a perftest program's main() in order: the
// out-of-band handshake (versions, MTU, and for rperf peers the parameter
// check), the creation of a PD, CQs, one registered buffer and the QPs,
// one key exchange per QP, the move of every QP to RTS, the initial
// receives of SEND tests, and a barrier, so that neither side sends
// before the other is ready.
//
// That is rperf's own sequence, which two rperfs run. Against perftest
// (a peer whose version has no rperf suffix) the session follows instead
// the sequence of the peer's program and release (oob.Release.Sequence,
// script.go): its key exchanges, barriers, reports and close in perftest's
// counts and places; Run walks it, calling Measure for each run with no
// exchange of its own, a Reporter for reports and a Preparer before the
// exchanges that lead to a run (Scripted tells a family which applies).
//
// Each QP owns two regions of the buffer, each rounded up to the page
// size: a send region (the local side of every WRITE, SEND, READ or
// atomic) and a receive region, whose address and key the peer learns in
// the key exchange and targets. As in perftest, every message of a QP uses
// the same addresses.
//
// # Posting
//
// The measurement loops post by the send path (package sendpath) through
// a Sender, take completions through Completions and repost receives
// through a Receiver (OpenPath); none of them allocates, locks or logs
// per operation.
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
