package cm

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
)

// EventType is an rdma_cm event (enum rdma_cm_event_type, same numbers).
type EventType uint8

// Events.
const (
	EventAddrResolved    EventType = 0
	EventAddrError       EventType = 1
	EventRouteResolved   EventType = 2
	EventRouteError      EventType = 3
	EventConnectRequest  EventType = 4
	EventConnectResponse EventType = 5
	EventConnectError    EventType = 6
	EventUnreachable     EventType = 7
	EventRejected        EventType = 8
	EventEstablished     EventType = 9
	EventDisconnected    EventType = 10
	EventDeviceRemoval   EventType = 11
	EventTimewaitExit    EventType = 15
)

var eventNames = map[EventType]string{
	EventAddrResolved: "ADDR_RESOLVED", EventAddrError: "ADDR_ERROR", EventRouteResolved: "ROUTE_RESOLVED",
	EventRouteError: "ROUTE_ERROR", EventConnectRequest: "CONNECT_REQUEST", EventConnectResponse: "CONNECT_RESPONSE",
	EventConnectError: "CONNECT_ERROR", EventUnreachable: "UNREACHABLE", EventRejected: "REJECTED",
	EventEstablished: "ESTABLISHED", EventDisconnected: "DISCONNECTED", EventDeviceRemoval: "DEVICE_REMOVAL",
	EventTimewaitExit: "TIMEWAIT_EXIT",
}

// String returns the event's name without librdmacm's RDMA_CM_EVENT_ prefix.
func (e EventType) String() string {
	if s, ok := eventNames[e]; ok {
		return s
	}
	return fmt.Sprintf("event %d", uint8(e))
}

// ConnParam are the parameters of a connection (struct rdma_conn_param):
// what Connect and Accept send, and what CONNECT_REQUEST, CONNECT_RESPONSE
// and REJECTED report of the peer's message.
type ConnParam struct {
	// PrivateData travels in the REQ (at most 56 bytes after rdma_cm's
	// header), REP (196), REJ (148), SIDR_REQ (180) or SIDR_REP (136). An
	// event's PrivateData is the whole area of the message: the peer's
	// bytes, then zeros.
	PrivateData []byte
	// ResponderResources is how many READ/atomic requests this side
	// accepts at once as responder; InitiatorDepth how many it issues.
	// In an event they are the peer's, already swapped to this side's view.
	// MaxResources asks for the device's maximum.
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        bool
	RetryCount         uint8 // transport retries on timeout, at most 7
	RNRRetryCount      uint8 // retries on receiver not ready, 7 = forever
	SRQ                bool
	// QPNum is the QP to connect when the ID has none attached (the
	// application moves its QP itself with InitQPAttr).
	QPNum uint32
	// QKey is the Q_Key a UD Accept hands out (default 0x01234567).
	QKey uint32
}

// MaxResources in ConnParam's ResponderResources or InitiatorDepth asks
// for the device's maximum (librdmacm's RDMA_MAX_RESP_RES and
// RDMA_MAX_INIT_DEPTH).
const MaxResources = 0xff

// UDParam is what a UD connection learns (struct rdma_ud_param): on the
// active side's ESTABLISHED the peer's QP and how to reach it; on the
// passive side's CONNECT_REQUEST the private data.
type UDParam struct {
	PrivateData []byte
	AH          verbsio.AHAttr
	QPNum       uint32
	QKey        uint32
}

// Event is an rdma_cm event.
type Event struct {
	Type EventType
	// ID is the identifier the event is about; for CONNECT_REQUEST a new
	// one, for the connection being requested.
	ID *ID
	// ListenID is the listening identifier of a CONNECT_REQUEST.
	ListenID *ID
	// Status is rdma_cm's: 0; for REJECTED the REJ's reason (8 is
	// "invalid service ID", 28 "consumer defined") or a UD request's SIDR
	// status; for UNREACHABLE -ETIMEDOUT (-110) or a SIDR status; for
	// DISCONNECTED -ETIMEDOUT when the peer never answered the DREQ.
	Status int
	Conn   ConnParam
	UD     UDParam
}

// String summarizes the event.
func (e *Event) String() string {
	return fmt.Sprintf("%s status %d", e.Type, e.Status)
}

// EventChannel delivers the events of the identifiers created on it
// (struct rdma_event_channel). It is safe for concurrent use.
type EventChannel struct {
	mu     sync.Mutex
	queue  []*Event
	wake   chan struct{}
	closed bool
}

// NewEventChannel returns an empty event channel.
func NewEventChannel() *EventChannel {
	return &EventChannel{wake: make(chan struct{}, 1)}
}

func (ch *EventChannel) post(e *Event) {
	ch.mu.Lock()
	if !ch.closed {
		ch.queue = append(ch.queue, e)
	}
	ch.mu.Unlock()
	select {
	case ch.wake <- struct{}{}:
	default:
	}
}

// GetEvent returns the next event, waiting at most timeout for one
// (rdma_get_cm_event). It returns verbsio.ErrTimeout when none came, and
// an error wrapping EBADF once the channel is closed.
func (ch *EventChannel) GetEvent(timeout time.Duration) (*Event, error) {
	deadline := time.Now().Add(timeout)
	for {
		ch.mu.Lock()
		if ch.closed {
			ch.mu.Unlock()
			return nil, fmt.Errorf("get CM event: the channel is closed: %w", unix.EBADF)
		}
		if len(ch.queue) > 0 {
			e := ch.queue[0]
			ch.queue[0] = nil
			ch.queue = ch.queue[1:]
			ch.mu.Unlock()
			return e, nil
		}
		ch.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return nil, verbsio.ErrTimeout
		}
		t := time.NewTimer(left)
		select {
		case <-ch.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// Pending returns how many events wait to be read.
func (ch *EventChannel) Pending() int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return len(ch.queue)
}

// Close discards the queued events; GetEvent fails from now on. The
// identifiers of the channel are not destroyed (rdma_destroy_event_channel
// requires them gone first; here they simply stop reporting).
func (ch *EventChannel) Close() {
	ch.mu.Lock()
	ch.closed = true
	ch.queue = nil
	ch.mu.Unlock()
	select {
	case ch.wake <- struct{}{}:
	default:
	}
}
