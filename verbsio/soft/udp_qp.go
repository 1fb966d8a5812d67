package soft

import (
	"net/netip"

	"github.com/rperf/rperf/internal/psn"
	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"github.com/rperf/rperf/verbsio/soft/internal/udp"
	"golang.org/x/sys/unix"
)

// udpPath is where a QP's (or an address handle's) packets go: the socket
// they leave by, the destination, and what the ICRC needs of the IP and
// UDP headers.
type udpPath struct {
	conn  *udp.Conn
	to    netip.AddrPort
	v4    bool
	path4 roce.IPv4Path
	path6 roce.IPv6Path
	pre4  roce.IPv4Prefix // the ICRC's part over path4's headers
	pre6  roce.IPv6Prefix
}

// fromPeer reports whether a packet from from comes from the peer a QP
// sends to at to: the same IP address, whatever the source port. RoCEv2
// senders pick their UDP source port per flow (Linux rxe from the flow
// label, 0xc000 and up), not their listening port, so only the address
// identifies the peer; the QPN and the PSN do the rest.
func fromPeer(from, to netip.AddrPort) bool {
	return from.Addr().Unmap().WithZone("") == to.Addr().Unmap().WithZone("")
}

// newUDPPath is the path to a peer at dgid (port dlid, or 4791 when 0)
// from the context's socket for GID sgid. A non-zero sport sends from a
// socket of that source port instead (RoCEv2's per-flow port; see
// udpFabric.sender), or, if it cannot be bound, from the GID's socket.
func newUDPPath(f *udpFabric, sgid int, dgid verbsio.GID, dlid, sport uint16) (udpPath, error) {
	conn, err := f.conn(sgid)
	if err != nil {
		return udpPath{}, err
	}
	port := uint16(RoCEPort)
	if dlid != 0 {
		port = dlid
	}
	dst := dgid.Addr()
	src := conn.LocalAddr().Addr()
	if dst.Is4() != src.Unmap().Is4() {
		return udpPath{}, verbsio.Errorf("modify_qp", unix.EINVAL,
			"destination GID %s and source GID %s are of different IP families; pick a source GID of the same family (-x)", dgid, src)
	}
	if sport != 0 {
		if sc, err := f.sender(netip.AddrPortFrom(conn.LocalAddr().Addr(), sport)); err == nil {
			conn = sc
		}
	}
	p := udpPath{conn: conn, to: netip.AddrPortFrom(dst, port), v4: dst.Is4()}
	if p.v4 {
		p.path4 = roce.IPv4Path{Src: src.Unmap().As4(), Dst: dst.As4(), SrcPort: conn.LocalAddr().Port(), DstPort: port, DontFragment: true}
		p.pre4 = p.path4.Prefix()
	} else {
		p.path6 = roce.IPv6Path{Src: src.As16(), Dst: dst.As16(), SrcPort: conn.LocalAddr().Port(), DstPort: port}
		p.pre6 = p.path6.Prefix()
	}
	return p, nil
}

// icrcBegin starts the ICRC of a packet of size bytes (BTH to ICRC) with
// headers hdr sent on the path as datagram number seg of its send (the
// kernel numbers GSO segments' IPv4 identification from 0 on an
// unconnected DF socket); roce.ICRCUpdate continues it.
func (p *udpPath) icrcBegin(seg, size int, hdr []byte) uint32 {
	if p.v4 {
		return p.pre4.Begin(uint16(seg), size, hdr)
	}
	return p.pre6.Begin(size, hdr)
}

// reqWQE is the requester's record of one send WQE on the wire.
type reqWQE struct {
	started bool
	first   psn.PSN // first packet's PSN
	end     psn.PSN // PSN after the last packet
	total   uint64  // message length
	rdNext  psn.PSN // READ: next response PSN expected
	done    bool
	status  verbsio.Status
	atomic  uint64 // atomic result
}

// readJob is a READ the responder is answering.
type readJob struct {
	first psn.PSN
	data  []byte // the local memory being read
	next  int    // packets sent
	npkt  int
}

// atomEntry remembers an executed atomic for duplicate requests.
type atomEntry struct {
	psn   psn.PSN
	valid bool
	orig  uint64
}

// udpQP is a QP's side on the udp fabric: the path to its peer, the
// requester's sequence numbers, window and timers, and the responder's
// expected PSN, message in progress and READ and atomic state.
type udpQP struct {
	q    *qp
	f    *udpFabric
	path udpPath
	mtu  int

	// Requester.
	req        []reqWQE
	sqPSN      psn.PSN // next PSN to assign
	sendPos    uint32  // next WQE to transmit
	sendOff    uint64  // bytes of sendPos already transmitted
	retryLeft  int
	rnrLeft    int
	rnrUntil   int64
	paceAt     int64 // pacing holds transmission until then
	paceDue    int64 // the paceAt that last fired, until the held packet leaves (pace.TakeDue)
	deadline   int64 // retransmission or probe timer; 0 when off
	ackOut     bool  // a packet that asks for an answer (AckReq, READ, atomic) awaits it
	reqAck     psn.PSN
	sinceAck   int     // messages sent since the last AckReq
	forceAck   bool    // the next message asks for an acknowledgement
	recovering bool    // since a timeout or NAK and until progress: every message asks
	nakPSN     psn.PSN // the PSN of the last sequence NAK acted on
	nakActed   bool    // a sequence NAK was acted on and no progress came since
	cwnd       int     // packets allowed on the wire unacknowledged
	ssthresh   int     // below it the window grows by what is acknowledged (slow start), above by one packet per window
	caAcked    int     // packets acknowledged towards the next one-packet growth above ssthresh
	acked      psn.PSN // the PSN after the highest one acknowledged (inside a message too)
	rdLoss     bool    // a READ response was lost; asking again waits (readLoss)
	backoff    uint    // timeouts in a row (up to maxBackoff): the timeout doubles each
	highPSN    psn.PSN // the PSN after the highest one ever sent (resends are below it)
	rtoHigh    psn.PSN // highPSN when the last timeout resent, while rtoSkip
	rtoSkip    bool    // a timeout resent from the oldest unacknowledged PSN; no acknowledgement past the resend yet
	timeout    int64
	active     bool
	commEst    bool // connected (RTR) and no request received yet: the first raises COMM_EST

	// Responder.
	ePSN    psn.PSN
	msn     uint32
	nakSent bool
	ackDue  bool
	rcv     struct {
		active bool
		id     uint64
		n      int
		sges   [maxSGEs]ring.SGE
		off    uint64
	}
	wr struct {
		active bool
		mem    []byte
		off    int
	}
	rdq   [maxRdAtomic]readJob
	rdSrc [1][]byte
	rdHd  int
	rdN   int
	atoms [maxRdAtomic]atomEntry
	atomI int
}

// busy reports whether the QP has transport work outstanding.
func (u *udpQP) busy() bool {
	return u.deadline != 0 || u.rdN > 0 || u.rnrUntil != 0 || u.paceAt != 0
}

var _ qpTransport = (*udpQP)(nil)

// modify sets up the transport at INIT->RTR (RC/UC: the peer's address)
// and RTR->RTS (PSNs, timers).
func (u *udpQP) modify(next verbsio.QPState, attr *verbsio.QPAttr, mask verbsio.QPAttrMask) error {
	q := u.q
	f := u.f
	switch next {
	case verbsio.QPStateRTR:
		if q.state == verbsio.QPStateRTR {
			break
		}
		if q.typ == verbsio.QPTypeRC || q.typ == verbsio.QPTypeUC {
			// The source port of the flow, as rxe and RoCE NICs pick it
			// (rdma_get_udp_sport): from the flow label, or from both
			// QP numbers when there is none.
			sport := roce.UDPSourcePort(attr.AH.FlowLabel, q.qpn, attr.DestQPN)
			p, err := newUDPPath(f, int(attr.AH.SGIDIndex), attr.AH.DGID, attr.AH.DLID, sport)
			if err != nil {
				return err
			}
			u.path = p
			u.mtu = attr.PathMTU.Bytes()
			u.commEst = true
		} else {
			pa := f.portAttr()
			u.mtu = pa.ActiveMTU.Bytes()
			conn, err := f.conn(f.def)
			if err != nil {
				return err
			}
			u.path.conn = conn
		}
		u.ePSN = psn.PSN(attr.RQPSN)
		if q.typ == verbsio.QPTypeUD {
			u.ePSN = 0
		}
	case verbsio.QPStateRTS:
		if q.state == verbsio.QPStateRTS {
			break
		}
		u.sqPSN = psn.PSN(attr.SQPSN)
		u.highPSN, u.acked = u.sqPSN, u.sqPSN
		u.retryLeft = int(attr.RetryCnt)
		u.rnrLeft = int(attr.RNRRetry)
		u.timeout = verbsio.TimeoutDuration(attr.Timeout)
	}
	return nil
}

// established raises COMM_EST: the first request arrived on the
// connected QP (IBTA's Communication Established, which hardware raises
// in RTR; rdma_cm's passive side is in RTS by then, and its CM needs the
// event all the same, so this engine raises it in either state).
func (u *udpQP) established() {
	u.commEst = false
	u.f.c.async.post(verbsio.AsyncEvent{Type: verbsio.EventCommEst, QPN: u.q.qpn})
}

// reset forgets the transport state (QP to RESET).
func (u *udpQP) reset() {
	*u = udpQP{q: u.q, f: u.f, req: u.req, active: u.active}
	clear(u.req)
}

// paceChanged drops a hold of the old rate: it is no credit under the new
// one.
func (u *udpQP) paceChanged() { u.paceDue = 0 }

// flush stops the requester (everything up to sqPI was flushed) and its
// timers, and flushes the receive WQE a message was being placed into.
func (u *udpQP) flush() {
	q := u.q
	u.sendPos, u.sendOff = q.sqPI, 0
	u.deadline, u.rnrUntil = 0, 0
	if u.rcv.active {
		u.rcv.active = false
		e := ring.CQE{WRID: u.rcv.id, Status: uint8(verbsio.StatusWRFlushErr), Opcode: uint8(verbsio.WCRecv), QPN: q.qpn}
		q.recvCQ.ring.Push(&e, q.ctx.pid)
	}
}

func (u *udpQP) release() { u.f.forget(u) }
