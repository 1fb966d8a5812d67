// Package ibcm is the InfiniBand Communication Manager protocol (IBTA Vol 1
// chapter 12) as Linux's ib_cm (drivers/infiniband/core/cm.c) runs it: the
// connection state machine of each communication ID, the listen table, the
// tables that find duplicate requests and stale connections, the response
// timeouts and retries of the MAD layer, MRA, TIMEWAIT, and service ID
// resolution (SIDR) for UD.
//
// A CM is deterministic and has no goroutines, clock or I/O: its owner
// calls it with the current time (Receive with a MAD that arrived, Advance
// when NextDeadline has passed, and the Send*/Establish/Destroy operations),
// and takes the MADs it wants sent and the events it produced with Take. It
// is not safe for concurrent use; the owner serializes the calls.
//
// What it does, as Linux does:
//
//   - A REQ for a service nobody listens on is rejected with reason 8
//     (invalid service ID), from communication ID 0, with the REQ's TID.
//   - A REQ repeated while the first is being served (same remote
//     communication ID and CA GUID) is not a new connection: in MRA_REQ_SENT
//     it is answered with an MRA, otherwise dropped and counted.
//   - A REQ or REP from a QP (QPN and CA GUID) that already has a live
//     connection is a stale connection: REJ reason 10, and the old
//     connection, if established, is sent a DREQ.
//   - A REP for no connection is ignored; a repeated REP is answered with
//     the RTU again (established) or the MRA (MRA_REP_SENT).
//   - A DREQ for no connection is answered with a DREP.
//   - A message that expects an answer (REQ, REP, DREQ, SIDR_REQ) is sent
//     again after its timeout, up to the peer's or the caller's CM retries;
//     then the connection fails (REQ, REP: back to idle; DREQ: TIMEWAIT).
//     An MRA extends the wait to its service timeout plus the path's ACK
//     timeout. Timeouts use Linux's approximation of 4.096 us * 2^t
//     (mad.LinuxTimeout).
//   - A connection leaves TIMEWAIT after the QP's ACK timeout.
//   - MADs that do not decode (truncated, not CM class version 2 Send,
//     unknown attribute) are dropped and counted, as are messages for
//     unknown connections or in the wrong state.
package ibcm
