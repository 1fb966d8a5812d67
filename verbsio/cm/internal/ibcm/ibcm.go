package ibcm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// State is a communication ID's state (enum ib_cm_state).
type State uint8

// States.
const (
	Idle State = iota
	Listen
	REQSent
	REQRcvd
	MRAREQSent // our MRA answered a REQ (Linux sends it only when the REQ repeats)
	MRAREQRcvd // our REQ got an MRA
	REPSent
	REPRcvd
	MRAREPSent
	MRAREPRcvd
	Established
	DREQSent
	DREQRcvd
	Timewait
	SIDRREQSent
	SIDRREQRcvd
)

var stateNames = [...]string{"IDLE", "LISTEN", "REQ_SENT", "REQ_RCVD", "MRA_REQ_SENT", "MRA_REQ_RCVD",
	"REP_SENT", "REP_RCVD", "MRA_REP_SENT", "MRA_REP_RCVD", "ESTABLISHED", "DREQ_SENT", "DREQ_RCVD",
	"TIMEWAIT", "SIDR_REQ_SENT", "SIDR_REQ_RCVD"}

// String returns Linux's name of the state ("REQ_SENT").
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state %d", uint8(s))
}

// EventType says what happened to a communication ID (enum ib_cm_event_type).
type EventType uint8

// Events.
const (
	REQError EventType = iota + 1 // our REQ was not answered after the retries
	MRAReceived
	REJReceived
	REPReceived
	RTUReceived
	UserEstablished // Establish was called: the QP saw the peer's first packet
	DREQReceived
	DREPReceived
	TimewaitExit
	REQReceived
	REPError  // our REP was not answered after the retries
	DREQError // our DREQ was not answered after the retries
	SIDRREQReceived
	SIDRREPReceived
	SIDRREQError
)

var eventNames = [...]string{"", "REQ_ERROR", "MRA_RECEIVED", "REJ_RECEIVED", "REP_RECEIVED",
	"RTU_RECEIVED", "USER_ESTABLISHED", "DREQ_RECEIVED", "DREP_RECEIVED", "TIMEWAIT_EXIT",
	"REQ_RECEIVED", "REP_ERROR", "DREQ_ERROR", "SIDR_REQ_RECEIVED", "SIDR_REP_RECEIVED", "SIDR_REQ_ERROR"}

// String returns Linux's name of the event without its IB_CM_ prefix.
func (e EventType) String() string {
	if int(e) < len(eventNames) && e != 0 {
		return eventNames[e]
	}
	return fmt.Sprintf("event %d", uint8(e))
}

// Event is something the owner must learn about a communication ID.
type Event struct {
	Type EventType
	ID   *ID
	// Listen is the listening ID a REQ or SIDR_REQ was for.
	Listen *ID
	// Msg is the message that caused the event, nil for REQError,
	// REPError, DREQError, SIDRREQError, UserEstablished and TimewaitExit.
	Msg mad.Message
}

// Packet is a MAD the owner must send.
type Packet struct {
	From  verbsio.GID
	To    verbsio.MADAddr
	Attr  mad.AttrID
	Retry bool // a retransmission of a message that was not answered
	MAD   [mad.Size]byte
}

// Counters count messages per attribute (index: attribute ID - 0x10, REQ
// to APR), as Linux's cm_tx_msgs, cm_tx_retries, cm_rx_msgs and
// cm_rx_duplicates do, and what was dropped.
type Counters struct {
	Tx, TxRetries, Rx, RxDuplicates [11]uint64
	// RxMalformed counts MADs that did not decode, by kind: truncated or
	// too long, not a CM class version 2 Send, unknown attribute.
	RxTruncated, RxBadHeader, RxUnknownAttr uint64
	// RxUnmatched counts messages for no communication ID, or for one in a
	// state that does not take them (dropped).
	RxUnmatched uint64
	// Stale counts REQs and REPs rejected as stale connections.
	Stale uint64
	// Rejected counts REQs rejected because nobody listened, and SIDR_REQs
	// answered "unsupported".
	Rejected uint64
}

func attrIndex(a mad.AttrID) int {
	i := int(a) - int(mad.AttrREQ)
	if i < 0 || i >= 11 {
		return -1
	}
	return i
}

// Config are a CM's fixed parameters.
type Config struct {
	// CAGUID is the channel adapter's node GUID (REQ and REP local CA GUID).
	CAGUID uint64
	// ACKDelay is the CA's local ACK delay (REP target ACK delay; it
	// enters the computed QP timeout).
	ACKDelay uint8
	// Port is the port number QPs are moved to INIT with.
	Port uint8
	// GIDIndex returns the GID table index of a local GID, for the QP's
	// address vector.
	GIDIndex func(verbsio.GID) (uint8, bool)
	// HiTID is the upper half of the transaction IDs of the requests this
	// CM starts (Linux: its MAD agent's hi_tid).
	HiTID uint32
	// IDOperand and FirstID choose the communication IDs: Linux takes a
	// cyclic counter XORed with a random operand. Tests set them.
	IDOperand uint32
	FirstID   uint32
}

// ID is a communication ID (struct ib_cm_id with its private part).
type ID struct {
	cm *CM
	// Context belongs to the owner.
	Context any

	localID, remoteID uint32
	state             State
	serviceID         uint64
	tid               uint64
	local             verbsio.GID     // our GID
	av                verbsio.MADAddr // the peer's QP1
	ah                verbsio.AHAttr
	avTimeout         uint8 // the QP's ACK timeout (Linux av.timeout)
	qpType            verbsio.QPType
	localQPN          uint32
	remoteQPN         uint32
	sqPSN, rqPSN      uint32
	pathMTU           uint8
	pkey              uint16
	respRes           uint8 // responder resources: max_dest_rd_atomic
	initDepth         uint8 // initiator depth: max_rd_atomic
	retryCount        uint8
	rnrRetryCount     uint8
	maxCMRetries      uint8
	timeout           time.Duration // how long to wait for an answer
	serviceTimeout    uint8
	remoteCAGUID      uint64
	privateData       []byte // of the last RTU, MRA or DREP, for repeats
	pending           *pending
	timewaitAt        time.Time
	inRemoteID        bool
	inRemoteQPN       bool
	sidr              *sidrKey
	destroyed         bool
}

// LocalID returns the local communication ID.
func (id *ID) LocalID() uint32 { return id.localID }

// RemoteID returns the peer's communication ID (0 until known).
func (id *ID) RemoteID() uint32 { return id.remoteID }

// State returns the current state.
func (id *ID) State() State { return id.state }

// ServiceID returns the service ID the ID listens on or was connected to.
func (id *ID) ServiceID() uint64 { return id.serviceID }

// Peer returns the peer's QP1 and the local GID the connection uses.
func (id *ID) Peer() (local verbsio.GID, peer verbsio.MADAddr) { return id.local, id.av }

// RemoteQPN returns the peer's QP number (or, for SIDR, 0).
func (id *ID) RemoteQPN() uint32 { return id.remoteQPN }

// ACKTimeout returns the QP ACK timeout the CM computed for the path.
func (id *ID) ACKTimeout() uint8 { return id.avTimeout }

// pending is a sent message waiting for its answer (the MAD layer's send
// with a timeout and retries).
type pending struct {
	pkt      Packet
	state    State // the state it was sent in; a timeout in another is stale
	timeout  time.Duration
	retries  int // left
	deadline time.Time
}

type remoteKey struct {
	id   uint32 // communication ID or QPN
	guid uint64
}

type sidrKey struct {
	id  uint32
	gid verbsio.GID
}

// CM is the communication manager of one port.
type CM struct {
	cfg        Config
	next       uint32
	ids        map[uint32]*ID
	listeners  map[uint64]*ID
	remoteIDs  map[remoteKey]*ID
	remoteQPNs map[remoteKey]*ID
	sidrs      map[sidrKey]*ID
	out        []Packet
	events     []Event
	counters   Counters
}

// New returns a CM with configuration cfg.
func New(cfg Config) *CM {
	if cfg.Port == 0 {
		cfg.Port = 1
	}
	return &CM{cfg: cfg, next: cfg.FirstID, ids: map[uint32]*ID{}, listeners: map[uint64]*ID{},
		remoteIDs: map[remoteKey]*ID{}, remoteQPNs: map[remoteKey]*ID{}, sidrs: map[sidrKey]*ID{}}
}

// Counters returns the message counters.
func (c *CM) Counters() Counters { return c.counters }

// Take returns the MADs to send and the events produced since the last
// call, and forgets them.
func (c *CM) Take() ([]Packet, []Event) {
	out, ev := c.out, c.events
	c.out, c.events = nil, nil
	return out, ev
}

// IDs returns the number of communication IDs in use (listeners included).
func (c *CM) IDs() int { return len(c.ids) + len(c.listeners) }

// Errors of the operations; they wrap unix errnos as verbs does.
var (
	ErrState = errors.New("wrong state")
	ErrBusy  = errors.New("service ID in use")
)

func stateErr(op string, id *ID) error {
	return fmt.Errorf("%s: communication ID %#x is %s: %w", op, id.localID, id.state, errors.Join(ErrState, unix.EINVAL))
}

// CreateID returns a new idle communication ID.
func (c *CM) CreateID(ctx any) *ID {
	for {
		n := c.next
		c.next++
		v := n ^ c.cfg.IDOperand
		// Linux stores the counter in host (little-endian) order in a
		// big-endian field: the wire shows it byte-swapped.
		local := bits.ReverseBytes32(v)
		if local == 0 || c.ids[local] != nil {
			continue
		}
		id := &ID{cm: c, Context: ctx, localID: local}
		c.ids[local] = id
		return id
	}
}

func (c *CM) formTID(id *ID) uint64 {
	return uint64(c.cfg.HiTID)<<32 | uint64(bits.ReverseBytes32(id.localID))
}

// Listen makes id listen on serviceID. Another listener on the same
// service ID is ErrBusy (EBUSY).
func (c *CM) Listen(id *ID, serviceID uint64) error {
	if id.state != Idle {
		return stateErr("listen", id)
	}
	if c.listeners[serviceID] != nil {
		return fmt.Errorf("listen on service ID %#016x: %w", serviceID, errors.Join(ErrBusy, unix.EBUSY))
	}
	// A listening ID receives no MADs: it leaves the ID table.
	delete(c.ids, id.localID)
	id.state = Listen
	id.serviceID = serviceID
	c.listeners[serviceID] = id
	return nil
}

func (c *CM) acquire(local, remote uint32) *ID {
	id := c.ids[local]
	if id == nil || id.remoteID != remote || id.destroyed {
		return nil
	}
	return id
}

func (c *CM) emit(t EventType, id *ID, msg mad.Message) {
	c.events = append(c.events, Event{Type: t, ID: id, Msg: msg})
}

// queue encodes msg and queues it; with wait > 0 it becomes id's pending
// message, sent again every wait up to retries times.
func (c *CM) queue(now time.Time, from verbsio.GID, to verbsio.MADAddr, tid uint64, msg mad.Message) Packet {
	p := Packet{From: from, To: to, Attr: msg.Attr()}
	m := mad.MAD{Header: mad.CMHeader(msg.Attr(), tid), Msg: msg}
	if err := mad.Encode(p.MAD[:], &m); err != nil {
		// Every field was checked by the caller; this is a bug.
		panic(err)
	}
	c.out = append(c.out, p)
	if i := attrIndex(p.Attr); i >= 0 {
		c.counters.Tx[i]++
	}
	return p
}

func (c *CM) queueWait(now time.Time, id *ID, tid uint64, msg mad.Message) {
	p := c.queue(now, id.local, id.av, tid, msg)
	id.pending = &pending{pkt: p, state: id.state, timeout: id.timeout, retries: int(id.maxCMRetries),
		deadline: now.Add(id.timeout)}
}

func (c *CM) cancel(id *ID) { id.pending = nil }

func (c *CM) removeRemote(id *ID) {
	if id.inRemoteID {
		delete(c.remoteIDs, remoteKey{id.remoteID, id.remoteCAGUID})
		id.inRemoteID = false
	}
	if id.inRemoteQPN {
		delete(c.remoteQPNs, remoteKey{id.remoteQPN, id.remoteCAGUID})
		id.inRemoteQPN = false
	}
}

func (c *CM) resetToIdle(id *ID) {
	id.state = Idle
	c.removeRemote(id)
}

// enterTimewait: the connection's QPs may still see packets in flight; the
// ID waits for the QP's ACK timeout before it can be reused.
func (c *CM) enterTimewait(now time.Time, id *ID) {
	c.removeRemote(id)
	id.state = Timewait
	id.timewaitAt = now.Add(mad.LinuxTimeout(id.avTimeout))
}

// NextDeadline returns when Advance must next be called.
func (c *CM) NextDeadline() (time.Time, bool) {
	var t time.Time
	ok := false
	for _, id := range c.ids {
		if id.pending != nil && (!ok || id.pending.deadline.Before(t)) {
			t, ok = id.pending.deadline, true
		}
		if id.state == Timewait && (!ok || id.timewaitAt.Before(t)) {
			t, ok = id.timewaitAt, true
		}
	}
	return t, ok
}

// Advance runs the timers due at now: retransmissions, send errors after
// the last retry, and TIMEWAIT exits.
func (c *CM) Advance(now time.Time) {
	type due struct {
		at time.Time
		id *ID
	}
	var ds []due
	for _, id := range c.ids {
		if id.pending != nil && !id.pending.deadline.After(now) {
			ds = append(ds, due{id.pending.deadline, id})
		} else if id.state == Timewait && !id.timewaitAt.After(now) {
			ds = append(ds, due{id.timewaitAt, id})
		}
	}
	slices.SortFunc(ds, func(a, b due) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return int(int64(a.id.localID) - int64(b.id.localID))
	})
	for _, d := range ds {
		id := d.id
		if p := id.pending; p != nil {
			if p.retries > 0 {
				p.retries--
				p.deadline = now.Add(p.timeout)
				pkt := p.pkt
				pkt.Retry = true
				c.out = append(c.out, pkt)
				if i := attrIndex(pkt.Attr); i >= 0 {
					c.counters.Tx[i]++
					c.counters.TxRetries[i]++
				}
				continue
			}
			c.sendError(now, id, p)
			continue
		}
		// TIMEWAIT exit
		id.state = Idle
		c.emit(TimewaitExit, id, nil)
	}
}

// sendError: a message got no answer after its retries (cm_process_send_error).
func (c *CM) sendError(now time.Time, id *ID, p *pending) {
	id.pending = nil
	if p.state != id.state {
		return
	}
	switch id.state {
	case REQSent, MRAREQRcvd:
		c.resetToIdle(id)
		c.emit(REQError, id, nil)
	case REPSent, MRAREPRcvd:
		c.resetToIdle(id)
		c.emit(REPError, id, nil)
	case DREQSent:
		c.enterTimewait(now, id)
		c.emit(DREQError, id, nil)
	case SIDRREQSent:
		id.state = Idle
		c.emit(SIDRREQError, id, nil)
	}
}

func privateData(op string, pd []byte, max int) error {
	if len(pd) > max {
		return fmt.Errorf("%s: %d bytes of private data, at most %d fit: %w", op, len(pd), max, unix.EINVAL)
	}
	return nil
}

func putBE64(b []byte, v uint64) { binary.BigEndian.PutUint64(b, v) }
