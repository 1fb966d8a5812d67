package verbsio

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// AsyncEventType is an asynchronous event of a device (enum ibv_event_type,
// the same numbers).
type AsyncEventType uint8

// Asynchronous events. The engine raises EventCommEst and EventCQErr; the
// others are libibverbs' and reach an application from providers that
// have them.
const (
	EventCQErr            AsyncEventType = 0  // a CQ overran: completions were lost (IBV_EVENT_CQ_ERR)
	EventQPFatal          AsyncEventType = 1  // IBV_EVENT_QP_FATAL
	EventQPReqErr         AsyncEventType = 2  // IBV_EVENT_QP_REQ_ERR
	EventQPAccessErr      AsyncEventType = 3  // IBV_EVENT_QP_ACCESS_ERR
	EventCommEst          AsyncEventType = 4  // a connected QP received its first packet (IBV_EVENT_COMM_EST)
	EventSQDrained        AsyncEventType = 5  // IBV_EVENT_SQ_DRAINED
	EventPathMig          AsyncEventType = 6  // IBV_EVENT_PATH_MIG
	EventPathMigErr       AsyncEventType = 7  // IBV_EVENT_PATH_MIG_ERR
	EventDeviceFatal      AsyncEventType = 8  // IBV_EVENT_DEVICE_FATAL
	EventPortActive       AsyncEventType = 9  // IBV_EVENT_PORT_ACTIVE
	EventPortErr          AsyncEventType = 10 // IBV_EVENT_PORT_ERR
	EventLIDChange        AsyncEventType = 11 // IBV_EVENT_LID_CHANGE
	EventPKeyChange       AsyncEventType = 12 // IBV_EVENT_PKEY_CHANGE
	EventSMChange         AsyncEventType = 13 // IBV_EVENT_SM_CHANGE
	EventSRQErr           AsyncEventType = 14 // IBV_EVENT_SRQ_ERR
	EventSRQLimitReached  AsyncEventType = 15 // IBV_EVENT_SRQ_LIMIT_REACHED
	EventQPLastWQEReached AsyncEventType = 16 // IBV_EVENT_QP_LAST_WQE_REACHED
	EventClientReregister AsyncEventType = 17 // IBV_EVENT_CLIENT_REREGISTER
	EventGIDChange        AsyncEventType = 18 // IBV_EVENT_GID_CHANGE
	EventWQFatal          AsyncEventType = 19 // IBV_EVENT_WQ_FATAL
)

var asyncEventNames = [...]string{"CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST", "SQ_DRAINED",
	"PATH_MIG", "PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR", "LID_CHANGE", "PKEY_CHANGE", "SM_CHANGE",
	"SRQ_ERR", "SRQ_LIMIT_REACHED", "QP_LAST_WQE_REACHED", "CLIENT_REREGISTER", "GID_CHANGE", "WQ_FATAL"}

// String returns the event's name without libibverbs' IBV_EVENT_ prefix
// (ibv_event_type_str).
func (t AsyncEventType) String() string {
	if int(t) < len(asyncEventNames) {
		return asyncEventNames[t]
	}
	return "AsyncEventType(" + strconv.Itoa(int(t)) + ")"
}

// AsyncEvent is one asynchronous event (struct ibv_async_event): its type
// and the element it is about.
type AsyncEvent struct {
	Type AsyncEventType
	// QPN names the QP of QP events (COMM_EST, QP_FATAL, ...).
	QPN uint32
	// CQ is the provider's CQ of CQ_ERR: compare it with CQ.Impl.
	CQ CQImpl
	// Port is the port of port events.
	Port uint8
}

// String describes the event.
func (e AsyncEvent) String() string {
	switch {
	case e.QPN != 0:
		return e.Type.String() + " qp " + strconv.FormatUint(uint64(e.QPN), 16)
	case e.Port != 0:
		return e.Type.String() + " port " + strconv.Itoa(int(e.Port))
	}
	return e.Type.String()
}

// AsyncEventSource is implemented by contexts that report asynchronous
// events.
type AsyncEventSource interface {
	// SubscribeAsyncEvents registers f, called with every asynchronous
	// event of the context from now on: on a goroutine of the provider,
	// one event at a time, in order, without the provider's locks held
	// (f may call verbs, and should return soon: events that find the
	// provider's queue full are dropped). cancel unregisters f, which is
	// not called once cancel returns; f must not call cancel itself.
	SubscribeAsyncEvents(f func(AsyncEvent)) (cancel func())
}

// SubscribeAsyncEvents registers f for the context's asynchronous events
// (what libibverbs delivers through ibv_get_async_event): for example
// COMM_EST, which a connection manager takes as the passive side's "the
// connection is established" when the RTU is late or lost. See
// AsyncEventSource for how f is called. Providers without asynchronous
// events return an *Error with EOPNOTSUPP.
func (c *Context) SubscribeAsyncEvents(f func(AsyncEvent)) (cancel func(), err error) {
	s, ok := c.impl.(AsyncEventSource)
	if !ok {
		return nil, Errorf("get_async_event", unix.EOPNOTSUPP, "device %s does not report asynchronous events", c.Device.Name)
	}
	if f == nil {
		return nil, Errorf("get_async_event", unix.EINVAL, "nil handler")
	}
	return s.SubscribeAsyncEvents(f), nil
}
