package verbsio

import (
	"strconv"
	"time"
)

// The accelerated "query interface" (MLNX_OFED's ibv_exp_query_intf): an
// application asks the context for a family of fast-path functions bound
// to one object (a QP or a CQ) and gets them, or a status saying why not.
// With no object the query only says whether the family exists.

// InterfaceScope says whose namespace a family name is in.
type InterfaceScope uint8

// Interface scopes.
const (
	ScopeGlobal       InterfaceScope = iota // IBV_EXP_INTF_GLOBAL
	ScopeExperimental                       // experimental families
	ScopeVendor                             // vendor families; VendorGUID names the vendor
)

// InterfaceStatus is the answer to a query (enum ibv_exp_query_intf_status).
type InterfaceStatus uint8

// Interface query statuses.
const (
	IntfOK                  InterfaceStatus = iota // IBV_EXP_INTF_STAT_OK
	IntfVendorNotSupported                         // the vendor is not this device's
	IntfNotSupported                               // no such family in the scope
	IntfVersionNotSupported                        // the family exists, not in that version
	IntfInvalParam                                 // bad flags or parameters
	IntfInvalObj                                   // the object is not of the family's kind or state
)

var intfStatusNames = [...]string{"OK", "VENDOR_NOT_SUPPORTED", "INTF_NOT_SUPPORTED", "VERSION_NOT_SUPPORTED", "INVAL_PARAM", "INVAL_OBJ"}

// String returns the status name, e.g. "VERSION_NOT_SUPPORTED".
func (s InterfaceStatus) String() string {
	if int(s) < len(intfStatusNames) {
		return intfStatusNames[s]
	}
	return "InterfaceStatus(" + strconv.Itoa(int(s)) + ")"
}

// Interface family names.
const (
	FamilyQPBurst = "qp_burst" // QPBurst: batched sends and receives
	FamilyCQPoll  = "cq_poll"  // CQPoll: completion counting
	// FamilyWriteTurn is WriteTurn: a write_lat turn in one call. It is
	// rperf's own (no MLNX_OFED family); the ibverbs provider offers it.
	FamilyWriteTurn = "write_turn"
	// FamilySendStream is SendStream: a bandwidth sender's post/poll
	// loop in one call. rperf's own; the ibverbs provider offers it.
	FamilySendStream = "send_stream"
)

// Query flags.
const (
	// IntfFlagEnableChecks asks the family to validate every call (as
	// IBV_EXP_QUERY_INTF_FLAG_ENABLE_CHECKS does).
	IntfFlagEnableChecks uint32 = 1 << 0
)

// InterfaceQuery is a query (struct ibv_exp_query_intf_params). Object is
// nil (capability query), a *QP or a *CQ.
type InterfaceQuery struct {
	Scope      InterfaceScope
	VendorGUID uint64
	Family     string
	Version    int
	Flags      uint32
	Object     any
}

// Interfacer is implemented by contexts with accelerated families.
type Interfacer interface {
	QueryInterface(q InterfaceQuery) (any, InterfaceStatus)
}

// QueryInterface returns the family asked for, bound to q.Object, or nil
// and the reason. With a nil Object it reports only whether the family
// exists (IntfOK and a nil family).
func (c *Context) QueryInterface(q InterfaceQuery) (any, InterfaceStatus) {
	i, ok := c.impl.(Interfacer)
	if !ok {
		if q.Scope == ScopeVendor {
			return nil, IntfVendorNotSupported
		}
		return nil, IntfNotSupported
	}
	switch o := q.Object.(type) {
	case *QP:
		q.Object = o.impl
	case *CQ:
		q.Object = o.impl
	case nil:
	default:
		return nil, IntfInvalObj
	}
	return i.QueryInterface(q)
}

// CheckQuery checks q's scope, family, version and flags against the
// families a provider offers (family name to highest version) and returns
// the status a provider's QueryInterface answers with, or IntfOK when the
// query may go on to its object.
func CheckQuery(q InterfaceQuery, offered map[string]int) InterfaceStatus {
	switch q.Scope {
	case ScopeGlobal:
	case ScopeVendor:
		return IntfVendorNotSupported
	default:
		return IntfNotSupported
	}
	max, ok := offered[q.Family]
	switch {
	case !ok:
		return IntfNotSupported
	case q.Version < 0 || q.Version > max:
		return IntfVersionNotSupported
	case q.Flags&^IntfFlagEnableChecks != 0:
		return IntfInvalParam
	}
	return IntfOK
}

// Burst flags for QPBurst sends.
const (
	BurstSignaled  uint32 = 1 << 0 // produce a completion
	BurstSolicited uint32 = 1 << 1
	BurstFence     uint32 = 1 << 4
)

// QPBurst is the QP burst family (ibv_exp_qp_burst_family): sends are
// staged with SendPending* and leave with SendFlush, one doorbell for the
// batch. All calls are for one goroutine and never allocate.
type QPBurst interface {
	// SendPending stages a SEND of length bytes at addr under lkey.
	SendPending(addr uint64, length, lkey uint32, flags uint32) error
	// SendPendingInline stages a SEND whose payload is copied now.
	SendPendingInline(buf []byte, flags uint32) error
	// SendPendingSGList stages a SEND gathered from sges.
	SendPendingSGList(sges []SGE, flags uint32) error
	// SendFlush rings the doorbell once for everything staged.
	SendFlush() error
	// SendBurst stages one SEND per SGE and flushes.
	SendBurst(msgs []SGE, flags uint32) error
	// RecvBurst posts one receive per SGE.
	RecvBurst(msgs []SGE) error
	// Release gives the family back.
	Release() error
}

// CQPoll is the CQ poll family (ibv_exp_cq_family).
type CQPoll interface {
	// PollCount consumes up to max completions and returns how many;
	// an error completion stops it and is returned as *CompletionError.
	PollCount(max int) (int, error)
	// PollLength consumes one receive completion and returns its byte
	// length; 0, nil means empty.
	PollLength() (uint32, error)
	// Release gives the family back.
	Release() error
}

// WriteTurn is the write ping-pong family, bound to one QP: one call runs
// turns of a write_lat ping-pong on the provider's side of its boundary,
// each waiting for the peer's marker byte in local memory, reading the
// clock, storing this side's marker, posting and taking the post's
// completion. A provider whose calls cross a costly boundary (the ibverbs
// provider's cgo) offers it so that, as in perftest's write_lat loop, only
// the spin lies between seeing the peer's RDMA WRITE land and posting the
// answer, and the crossing is paid once for many iterations. For one
// goroutine; it never allocates.
type WriteTurn interface {
	// Turns runs up to len(stamps) turns. Turn k (from 0) reads *wait
	// until it equals want+k, at most spins times (wait nil: one turn,
	// which does not wait), reads the monotonic clock into stamps[k]
	// (CLOCK_MONOTONIC in ns: only differences between stamps mean
	// something), stores mark+k at *markAt, posts wrs (one signaled
	// request) and takes its completion from the send CQ when it comes
	// within spins polls as a success. It returns the turns posted;
	// owed says that the last one's completion was not taken, and the
	// caller polls the CQ for it (it may be an error, or another
	// request's). Fewer turns than asked, nothing owed and no error mean
	// that the peer's byte did not come within spins reads. An error is
	// the post's, as QP.PostSend reports it.
	Turns(wait *byte, want byte, spins int, markAt *byte, mark byte, wrs []SendWR, stamps []int64) (posted int, owed bool, err error)
	// Release gives the family back.
	Release() error
}

// Stream is the state of a SendStream run, carried from call to call:
// the caller sets the request and the shape once, then calls Stream until
// Completed reaches Target or the call stops for another reason.
type Stream struct {
	// WR is the one request posted for every message; the stream sets
	// its SendSignaled flag and, on a signaled request, its ID.
	WR SendWR
	// Tag is the high half of a signaled request's ID; the low half is
	// the number of messages its completion covers (those since the
	// previous signaled one).
	Tag uint32
	// Target is the number of messages to post in all, Depth the most
	// posted and not completed at once; message k (from 0) is signaled
	// when k+1 is a multiple of CQMod and when it is the last.
	Target       int64
	Depth, CQMod int
	// Idle ends a call when nothing was posted or completed for that
	// long, Budget when the call ran that long (the caller's own checks
	// run between calls).
	Idle, Budget time.Duration
	// Posted, Completed and LastSig (the messages covered by a signaled
	// request) are the progress so far, in and out.
	Posted, Completed, LastSig int64
	// PostStamps[k] and CompStamps[k], when not nil (len at least
	// Target), receive message k's post time and the time its completion
	// was taken. Without PostStamps, First receives message 0's post
	// time; Last receives the time of the completion that reached
	// Target. Times are the monotonic clock in ns: only differences
	// between them mean something.
	PostStamps, CompStamps []int64
	First, Last            int64
}

// SendStream is the bandwidth sender's family, bound to one QP: one call
// posts the stream's request up to the window and polls the QP's send CQ
// for the completions, as perftest's run_iter_bw does, on the provider's
// side of its boundary. A provider whose calls cross a costly boundary
// (the ibverbs provider's cgo, around posts that a software device
// executes inside the call) offers it. For one goroutine; it never
// allocates after its first call.
type SendStream interface {
	// Stream runs s until Completed reaches Target, Idle or Budget
	// passes, a post is refused (the error, as QP.PostSend reports it),
	// or a completion is not a success carrying Tag: that one and those
	// polled after it are left for the caller's next CQ poll, in order.
	Stream(s *Stream) error
	// Release gives the family back.
	Release() error
}

// CompletionError is a completion with an error status met by a family
// call that returns no WC.
type CompletionError struct{ WC WC }

func (e *CompletionError) Error() string {
	return "completion " + strconv.FormatUint(e.WC.ID, 10) + " failed: " + e.WC.Status.Text() + " (" + e.WC.Status.String() + ")"
}
