package session

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/rdmacm"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm"
)

// AtomicSize is the size of every atomic operation.
const AtomicSize = 8

// GRHSize is the space a UD receive needs before the payload for the
// Global Routing Header.
const GRHSize = 40

// StopImm is the immediate data of the SEND_WITH_IMM that ends a SEND
// test's stream on a QP: its last message in iterations mode, an extra
// message after the run in duration mode. The receiver counts the QP as
// done when it sees it.
const StopImm uint32 = 0x72706631 // "rpf1"

// ProbeID is the work request ID of liveness probes; loops skip completions
// that carry it.
const ProbeID = ^uint64(0)

// DefaultStallTimeout is the stall timeout used when Spec.StallTimeout is 0.
const DefaultStallTimeout = 60 * time.Second

// Link is how a test reaches its peer: the port, GID and path MTU, the
// ACK timeout, how long to wait for the peer, and the parameters the
// peers check. The test families' configurations embed it (latency.Config,
// bw.Config, pacing.Config) and hand it on in Spec.
type Link struct {
	QPTimeout uint8       // ACK timeout exponent (perftest -u); 0 means 14
	Port      uint8       // device port (perftest -i); 0 means 1
	MTU       verbsio.MTU // path MTU (perftest -m); 0 means the port's active MTU
	// Params describes the test to an rperf peer, which refuses to run
	// if a symmetric parameter differs.
	Params oob.Params
	// StallTimeout bounds every wait for the peer; 0 means
	// DefaultStallTimeout.
	StallTimeout time.Duration
	// GIDIndex is the entry of the port's GID table this side uses
	// (perftest -x); AutoGID, or any negative value, picks perftest's
	// choice (see BestGID). IPv6 makes that choice prefer IPv6 GIDs
	// (perftest --ipv6).
	GIDIndex int
	IPv6     bool
}

// Stall is StallTimeout, or DefaultStallTimeout when it is 0.
func (l *Link) Stall() time.Duration {
	if l.StallTimeout > 0 {
		return l.StallTimeout
	}
	return DefaultStallTimeout
}

// Spec describes the connection a test needs.
type Spec struct {
	Verb    Verb
	Type    verbsio.QPType
	QPs     int // 0 means 1
	MaxSize int // the largest message the test sends
	// TxDepth is the send queue depth per QP; RxDepth the receives kept
	// posted per QP in SEND tests (ignored otherwise).
	TxDepth, RxDepth int
	// Inline is the largest inline payload asked for at QP creation.
	Inline int
	// OutReads is the READ/atomic depth offered as responder and used as
	// initiator (capped by the peer's); 0 means the device's maximum.
	OutReads int
	Link
	// SendSlots and RecvSlots are how many message buffers each QP's send
	// and receive regions hold; 0 means 1, where every message of a QP
	// uses the same addresses, as in perftest. Receives are posted to the
	// receive slots in turn (see QP.RecvSlot).
	SendSlots, RecvSlots int
	// Path is the send path the QPs post by (OpenPath): the dm path puts
	// the message buffers in device memory. Segmenter says who cuts
	// messages into packets; the default leaves it to the path
	// (sendpath.Path.QPSegmenter: the kernel for tso).
	Path      sendpath.Path
	Segmenter verbsio.Segmenter
	// Program is the perftest program of the test ("" for rperf's own
	// tests): against a perftest peer the session follows its sequence
	// (oob.Release.Sequence) with the options below.
	Program oob.Program
	// Sizes are the message sizes run, in order; All says they come from
	// -a; Duplex is -b; Duration is duration mode (-D).
	Sizes            []int
	All              bool
	Duplex, Duration bool
	// PeerSends says that the server sends to the client too (latency
	// tests, bidirectional bandwidth): with -R over UD, perftest's client
	// then tells the server its QP number in a message of its own.
	PeerSends bool
	// CompletionTimestamps creates the CQs with the timestamp flag
	// (verbsio.WCExStandard | verbsio.WCExTS): every completion carries
	// WC.Timestamp in the device's clock. A device that does not stamp
	// completions is refused (CheckTimestamps).
	CompletionTimestamps bool
}

// minRNRTimer is perftest's MIN_RNR_TIMER (0.64 ms).
const minRNRTimer = 12

// AutoGID as Spec.GIDIndex picks the GID perftest would.
const AutoGID = -1

// Info describes an established session, for reports and headers.
type Info struct {
	Device      verbsio.DeviceInfo
	Server      bool
	MTU         int    // path MTU in bytes, the smaller of both sides'
	PeerVersion string // what the peer advertised in the version exchange
	PeerRperf   bool   // the peer is rperf (parameters were checked)
	TxDepth     int
	RxDepth     int // 0 unless SEND
	Inline      int // max inline data granted
	OutReads    int
	// Local and Remote are the key messages exchanged, one per QP.
	Local, Remote []oob.Dest
	// GID is the GID table entry this side uses (its Index is -x).
	GID verbsio.GIDEntry
	// UDPPort is the UDP port this side's engine bound, 0 when it binds
	// none (verbsio.Context.UDPPort).
	UDPPort int
}

// QP is one test queue pair with its regions and its peer's.
type QP struct {
	*verbsio.QP
	Index   int
	SendOff int // offset of the send region in Session.Buf
	RecvOff int // offset of the receive region
	// Remote is the peer's receive region for this QP.
	Remote verbsio.RemoteAddr
	// UD addresses the peer for UD QPs.
	UD verbsio.UDAddr

	recv [RepostBatch]verbsio.RecvWR // identical receives, for batched reposts
	sge  [1]verbsio.SGE
	owed int // receives consumed and not yet reposted (RepostLater)

	// Slots (Spec.SendSlots, RecvSlots): with several receive slots, each
	// receive is posted to the next slot in turn, with its own SGE.
	mr                   *verbsio.MR
	stride               int
	sendSlots, recvSlots int
	nextRecv             int64
	rsges                [RepostBatch]verbsio.SGE
}

// RepostBatch is the most receives Repost and Flush post in one call.
const RepostBatch = 64

// Session is a connected set of QPs and the connection they were set up
// over. Its loops are driven by one goroutine.
type Session struct {
	Dev    *verbsio.Context
	Conn   *oob.Conn
	Spec   Spec
	Server bool
	Peer   oob.Peer
	MTU    verbsio.MTU

	DevAttr  verbsio.DeviceAttr
	PortAttr verbsio.PortAttr

	PD     *verbsio.PD
	MR     *verbsio.MR
	Buf    []byte      // host memory; nil on the dm path
	DM     *verbsio.DM // device memory on the dm path
	dmWord [4]byte     // scratch of StoreByte and PeekByte (devmem.go)
	SendCQ *verbsio.CQ
	RecvCQ *verbsio.CQ // SEND tests; SendCQ otherwise
	QPs    []*QP
	// Region is the size of one message slot: with one slot per region
	// (the default), the size of each send and receive region.
	Region int
	// GIDIndex is the GID table entry this side uses, GID its address.
	GIDIndex int
	GID      verbsio.GIDEntry
	// PollDriven says that the device's engine runs only when it is
	// polled (verbsio.Context.PollDriven): a loop that waits on memory
	// must call Drive, and waits outside the verbs (barriers, exchanges)
	// run the engine in the background (see Serve).
	PollDriven bool

	Local, Remote []oob.Dest
	remoteSet     []bool // Remote[i] was received (script)

	// script is a perftest peer's sequence (script.go); nil between two
	// rperfs.
	script *script

	ahs      []*verbsio.AH
	outReads int
	// cm is the rdma_cm channel the session runs over (-R): the test QPs
	// are created and connected by rdma_cm and belong to it.
	cm *rdmacm.Channel
	// Layout of the buffer: each QP's send and receive regions.
	sendBytes, recvBytes, sendSlots, recvSlots int
	probeWR                                    [1]verbsio.SendWR
	wcs                                        [1]verbsio.WC // send CQ scratch (probes)

	// A liveness probe is outstanding (see Waiter); the next may go at
	// nextProbe.
	probing   bool
	nextProbe int64
}

// SetupError marks an error from connection setup (before any
// measurement), so callers can tell it from a failure mid-run.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// Open sets up a session over conn on dev, as described in the package
// documentation. On error everything created is released and conn is
// closed.
func Open(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, spec Spec) (*Session, error) {
	s := &Session{Dev: dev, Conn: conn, Spec: spec, Server: conn.IsServer()}
	s.cm, _ = conn.NetConn().(*rdmacm.Channel)
	if err := s.open(ctx); err != nil {
		s.Close(ctx, false)
		return nil, err
	}
	return s, nil
}

func (s *Session) open(ctx context.Context) error {
	sp := &s.Spec
	if sp.QPs <= 0 {
		sp.QPs = 1
	}
	if sp.Port == 0 {
		sp.Port = 1
	}
	if sp.QPTimeout == 0 {
		sp.QPTimeout = 14
	}
	if sp.StallTimeout <= 0 {
		sp.StallTimeout = DefaultStallTimeout
	}
	if sp.MaxSize < 1 || sp.TxDepth < 1 || (sp.Verb == Send && sp.RxDepth < 1) {
		return fmt.Errorf("session: invalid spec (size %d, tx depth %d, rx depth %d)", sp.MaxSize, sp.TxDepth, sp.RxDepth)
	}
	var err error
	if s.DevAttr, err = s.Dev.QueryDevice(); err != nil {
		return fmt.Errorf("query device %s: %w", s.Dev.Device.Name, err)
	}
	if s.PortAttr, err = s.Dev.QueryPort(sp.Port); err != nil {
		return fmt.Errorf("query port %d of %s: %w", sp.Port, s.Dev.Device.Name, err)
	}
	if s.PortAttr.State != verbsio.PortActive {
		return fmt.Errorf("port %d of %s is %s, not ACTIVE; bring the link up (rdiag ports shows why)", sp.Port, s.Dev.Device.Name, s.PortAttr.State)
	}
	mtu := s.PortAttr.ActiveMTU
	if sp.MTU.Valid() && sp.MTU < mtu {
		mtu = sp.MTU
	}
	s.outReads = sp.OutReads
	if s.outReads <= 0 || s.outReads > s.DevAttr.MaxQPRdAtom {
		s.outReads = s.DevAttr.MaxQPRdAtom
	}
	s.outReads = min(s.outReads, 255)
	s.PollDriven = s.Dev.PollDriven()
	if err := s.pickGID(); err != nil {
		return err
	}

	// 1. Handshake: versions, page size, MTU, parameters.
	s.Peer, err = s.Conn.Handshake(ctx, oob.Hello{MTU: oob.MTU(mtu), Params: sp.Params})
	if err != nil {
		return &SetupError{Err: err}
	}
	s.MTU = verbsio.MTU(s.Peer.MTU)
	if !s.MTU.Valid() {
		s.MTU = mtu
	}
	if err := s.planScript(); err != nil {
		return &SetupError{Err: err}
	}

	// 2. Resources; with -R the QPs come from rdma_cm, between two syncs.
	if err := s.createResources(); err != nil {
		return &SetupError{Err: err}
	}
	if s.cm != nil {
		if err := s.connectCM(ctx); err != nil {
			return &SetupError{Err: err}
		}
	}

	// 3. Keys, one exchange per QP.
	gid := s.GID
	s.Local = make([]oob.Dest, len(s.QPs))
	s.Remote = make([]oob.Dest, len(s.QPs))
	for i, q := range s.QPs {
		s.Local[i] = oob.Dest{
			LID: s.PortAttr.LID, OutReads: uint16(s.outReads), QPN: q.QPN(), PSN: rand.Uint32() & 0xffffff,
			RKey: s.MR.RKey(), VAddr: s.MR.Addr() + uint64(q.RecvOff), GID: gid.GID, HasGID: true,
		}
	}
	if s.script != nil {
		// A perftest peer: its own sequence up to the connection.
		s.remoteSet = make([]bool, len(s.QPs))
		if err := s.walkOpen(ctx, s.connectAll); err != nil {
			return &SetupError{Err: err}
		}
		return nil
	}
	for i := range s.QPs {
		if s.Remote[i], err = s.Conn.ExchangeKeys(ctx, s.Local[i]); err != nil {
			return &SetupError{Err: err}
		}
	}
	if err := s.connectAll(); err != nil {
		return &SetupError{Err: err}
	}

	// 5. Both sides are at RTS with receives posted before either sends.
	if err := s.Barrier(ctx, 0); err != nil {
		return &SetupError{Err: err}
	}
	return nil
}

// connectAll connects every QP to its peer's (address handles, RTR, RTS)
// and, in SEND tests, posts the receives.
func (s *Session) connectAll() error {
	for i, q := range s.QPs {
		if err := s.connect(q, s.Local[i], s.Remote[i]); err != nil {
			return err
		}
	}
	if s.Spec.Verb == Send {
		for _, q := range s.QPs {
			if err := s.PostRecvs(q, s.Spec.RxDepth); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Session) createResources() error {
	sp := &s.Spec
	name := s.Dev.Device.Name
	var err error
	if s.PD, err = s.Dev.AllocPD(); err != nil {
		return fmt.Errorf("allocate a protection domain on %s: %w", name, err)
	}
	sendCQE := sp.QPs*(sp.TxDepth+1) + 16
	if sendCQE > s.DevAttr.MaxCQE {
		return fmt.Errorf("%d QPs with a send queue of %d need a CQ of %d entries, more than %s's %d: use fewer QPs (-q) or a smaller tx depth (-t)",
			sp.QPs, sp.TxDepth, sendCQE, name, s.DevAttr.MaxCQE)
	}
	if sp.CompletionTimestamps {
		if err := CheckTimestamps(s.DevAttr, name); err != nil {
			return err
		}
	}
	if s.SendCQ, err = s.createCQ(sendCQE); err != nil {
		return fmt.Errorf("create a send CQ of %d entries on %s: %w", sendCQE, name, err)
	}
	s.RecvCQ = s.SendCQ
	if sp.Verb == Send {
		recvCQE := sp.QPs*sp.RxDepth + 16
		if recvCQE > s.DevAttr.MaxCQE {
			return fmt.Errorf("%d QPs with %d receives each need a CQ of %d entries, more than %s's %d: use fewer QPs (-q) or a smaller rx depth (-r)",
				sp.QPs, sp.RxDepth, recvCQE, name, s.DevAttr.MaxCQE)
		}
		if s.RecvCQ, err = s.createCQ(recvCQE); err != nil {
			return fmt.Errorf("create a receive CQ of %d entries on %s: %w", recvCQE, name, err)
		}
	}

	page := os.Getpagesize()
	need := sp.MaxSize
	if sp.Type == verbsio.QPTypeUD {
		need += GRHSize
	}
	sendSlots, recvSlots := max(sp.SendSlots, 1), max(sp.RecvSlots, 1)
	s.Region = roundUp(max(need, 64), page)
	if (sendSlots > 1 || recvSlots > 1) && need < page {
		s.Region = roundUp(max(need, 64), 64) // small slots pack
	}
	sendBytes, recvBytes := roundUp(sendSlots*s.Region, page), roundUp(recvSlots*s.Region, page)
	total := sp.QPs * (sendBytes + recvBytes)
	access := verbsio.AccessLocalWrite | verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead
	if s.DevAttr.AtomicCap != verbsio.AtomicNone {
		access |= verbsio.AccessRemoteAtomic
	}
	if err := s.allocBuffers(total, access); err != nil {
		return err
	}

	s.sendBytes, s.recvBytes, s.sendSlots, s.recvSlots = sendBytes, recvBytes, sendSlots, recvSlots
	if s.cm != nil {
		return nil // connectCM creates the QPs
	}
	for i := 0; i < sp.QPs; i++ {
		qp, err := s.PD.CreateQP(s.qpInitAttr(i))
		if err != nil {
			return fmt.Errorf("create %s QP %d of %d on %s: %w", sp.Type, i+1, sp.QPs, name, err)
		}
		s.addQP(qp)
	}
	return nil
}

// qpInitAttr is how test QP i is created.
func (s *Session) qpInitAttr(int) verbsio.QPInitAttr {
	sp := &s.Spec
	recvWR := 1
	if sp.Verb == Send {
		recvWR = sp.RxDepth
	}
	return verbsio.QPInitAttr{
		Type: sp.Type, SendCQ: s.SendCQ, RecvCQ: s.RecvCQ,
		Cap:       verbsio.QPCap{MaxSendWR: sp.TxDepth + 1, MaxRecvWR: recvWR, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: sp.Inline},
		Segmenter: sp.Path.QPSegmenter(sp.Segmenter),
	}
}

// regionOff is the offset of QP i's send region; its receive region
// follows.
func (s *Session) regionOff(i int) int { return i * (s.sendBytes + s.recvBytes) }

// addQP adds the next test QP with its regions.
func (s *Session) addQP(qp *verbsio.QP) {
	i := len(s.QPs)
	off := s.regionOff(i)
	q := &QP{QP: qp, Index: i, SendOff: off, RecvOff: off + s.sendBytes,
		mr: s.MR, stride: s.Region, sendSlots: s.sendSlots, recvSlots: s.recvSlots}
	q.sge[0] = s.MR.SGE(q.RecvOff, s.Region)
	for j := range q.recv {
		q.recv[j] = verbsio.RecvWR{ID: uint64(i), SGL: q.sge[:]}
		if s.recvSlots > 1 {
			q.recv[j].SGL = q.rsges[j : j+1]
		}
	}
	s.QPs = append(s.QPs, q)
}

// connectCM creates and connects the test QPs through rdma_cm (-R), as
// perftest's create_rdma_cm_connection does: an empty key exchange, the
// connections, another empty key exchange.
func (s *Session) connectCM(ctx context.Context) error {
	sp := &s.Spec
	var reads uint8
	if sp.Verb == Read || sp.Verb == Atomic {
		reads = uint8(s.outReads)
	}
	spec := rdmacm.QPSpec{
		N: sp.QPs, Type: sp.Type, PD: s.PD, Attr: s.qpInitAttr, Reads: reads, ACKTimeout: sp.QPTimeout, PathMTU: s.MTU,
		UDQPNMessage: sp.PeerSends,
		Scratch:      func(i int) verbsio.SGE { return s.MR.SGE(s.regionOff(i)+s.sendBytes, rdmacm.UDQPNMessageSize) },
	}
	// The server listens before the sync, so the client, which connects
	// right after it, is never refused (perftest 4.5 gives up at once).
	if err := s.cm.ListenQPs(spec); err != nil {
		return err
	}
	if err := s.Serve(func() error { return s.Conn.Sync(ctx, "sync before the rdma_cm connection of the test QPs", 0) }); err != nil {
		return err
	}
	dqs, err := s.cm.ConnectQPs(ctx, spec)
	if err != nil {
		return err
	}
	if sp.Type == verbsio.QPTypeRC && len(dqs) > 0 {
		// The QPs' path MTU is the one the client's CM put in its
		// requests (-m where that CM honours it, the route's otherwise):
		// report that one.
		a, err := dqs[0].QP.Query()
		if err != nil {
			return fmt.Errorf("query test QP 1: %w", err)
		}
		if a.PathMTU.Valid() {
			s.MTU = a.PathMTU
		}
	}
	for _, d := range dqs {
		// The CM's RTR leaves the minimum RNR timer at 0, which means
		// 655 ms: a sender that outruns this side's reposts would stall
		// that long. perftest's server sets 12 (0.64 ms) after accepting;
		// both sides do here, as over TCP.
		if sp.Type == verbsio.QPTypeRC {
			if err := d.QP.Modify(&verbsio.QPAttr{MinRNRTimer: minRNRTimer}, verbsio.QPAttrMinRNRTimer); err != nil {
				return fmt.Errorf("set the minimum RNR timer of test QP %d: %w", len(s.QPs)+1, err)
			}
		}
		s.addQP(d.QP)
	}
	return s.Serve(func() error { return s.Conn.Sync(ctx, "sync after the rdma_cm connection of the test QPs", 0) })
}

func roundUp(n, to int) int { return (n + to - 1) / to * to }

// pickGID resolves Spec.GIDIndex against the port's GID table.
func (s *Session) pickGID() error {
	sp := &s.Spec
	name := s.Dev.Device.Name
	tbl, err := s.Dev.QueryGIDTable(sp.Port)
	if err != nil {
		return fmt.Errorf("query the GID table of port %d of %s: %w", sp.Port, name, err)
	}
	idx := sp.GIDIndex
	if idx < 0 {
		idx = BestGID(tbl, s.PortAttr.LinkLayer == verbsio.LinkLayerEthernet, sp.IPv6)
	}
	for _, e := range tbl {
		if e.Index == idx {
			s.GIDIndex, s.GID = idx, e
			return nil
		}
	}
	return fmt.Errorf("GID index %d: port %d of %s has no such GID (%d entries; rdiag gids %s lists them)", idx, sp.Port, name, len(tbl), name)
}

// BestGID returns the index perftest picks from a GID table when -x is
// not given (get_best_gid_index): on Ethernet the entry with the highest
// score, +100 for the wanted family (IPv4-mapped, or IPv6 with ipv6),
// +10 for an address that is not link-local, and +2 for RoCE v2 (+1 for
// v1); zero GIDs are skipped and ties go to the lowest index. Other link
// layers use index 0.
func BestGID(tbl []verbsio.GIDEntry, ethernet, ipv6 bool) int {
	if !ethernet {
		return 0
	}
	best, score := 0, -1
	for _, e := range tbl {
		if e.GID.IsZero() {
			continue
		}
		sc := 0
		if e.GID.IsIPv4Mapped() != ipv6 {
			sc += 100
		}
		if a := e.GID.Addr(); !a.IsLinkLocalUnicast() {
			sc += 10
		}
		switch e.Type {
		case verbsio.GIDTypeRoCEv2:
			sc += 2
		case verbsio.GIDTypeRoCEv1:
			sc++
		}
		if sc > score || sc == score && e.Index < best {
			best, score = e.Index, sc
		}
	}
	return best
}

// mismatchError says that the two sides were set up incompatibly; it
// matches oob.ErrIncompatible.
type mismatchError struct{ msg string }

func (e *mismatchError) Error() string { return e.msg }
func (e *mismatchError) Unwrap() error { return oob.ErrIncompatible }

// family names a GID's IP family.
func family(g verbsio.GID) string {
	if g.IsIPv4Mapped() {
		return "IPv4"
	}
	return "IPv6"
}

func (s *Session) connect(q *QP, local, remote oob.Dest) error {
	sp := &s.Spec
	if remote.QPN == 0 {
		return fmt.Errorf("the peer announced QP number 0 for QP %d; it is not a compatible test", q.Index)
	}
	lg, rg := verbsio.GID(local.GID), verbsio.GID(remote.GID)
	if s.PortAttr.LinkLayer == verbsio.LinkLayerEthernet && remote.HasGID && !rg.IsZero() && lg.IsIPv4Mapped() != rg.IsIPv4Mapped() {
		return &mismatchError{fmt.Sprintf("this side's GID %s (index %d) is %s but the peer's, %s, is %s: both sides must use the same IP family; choose GIDs of one family with -x (rdiag gids %s lists them)",
			lg, s.GIDIndex, family(lg), rg, family(rg), s.Dev.Device.Name)}
	}
	le := verbsio.Endpoint{LID: local.LID, QPN: local.QPN, PSN: local.PSN, GID: local.GID, RKey: local.RKey, VAddr: local.VAddr, OutReads: uint8(local.OutReads)}
	re := verbsio.Endpoint{LID: remote.LID, QPN: remote.QPN, PSN: remote.PSN, GID: remote.GID, RKey: remote.RKey, VAddr: remote.VAddr,
		OutReads: uint8(min(remote.OutReads, uint16(s.outReads)))}
	if re.OutReads == 0 {
		re.OutReads = uint8(s.outReads)
	}
	opts := verbsio.ConnectOptions{
		Port:      sp.Port,
		Access:    verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead,
		PathMTU:   s.MTU,
		Timeout:   sp.QPTimeout,
		SGIDIndex: uint8(s.GIDIndex),
	}
	if s.DevAttr.AtomicCap != verbsio.AtomicNone {
		opts.Access |= verbsio.AccessRemoteAtomic
	}
	var qkey uint32 = verbsio.DefaultQKey
	if s.cm != nil {
		qkey = cm.UDPQKey // rdma_cm moved the QP; UD QPs use its Q_Key
	} else if err := q.Connect(le, re, opts); err != nil {
		return fmt.Errorf("connect QP %d (%s) to the peer's QP %#x: %w", q.Index, sp.Type, remote.QPN, err)
	}
	q.Remote = verbsio.RemoteAddr{Addr: remote.VAddr, RKey: remote.RKey}
	if sp.Type == verbsio.QPTypeUD {
		ah, err := s.PD.CreateAH(verbsio.AHAttr{DLID: remote.LID, PortNum: sp.Port, IsGlobal: true, DGID: remote.GID, SGIDIndex: uint8(s.GIDIndex), HopLimit: 0xff})
		if err != nil {
			return fmt.Errorf("create an address handle to the peer: %w", err)
		}
		s.ahs = append(s.ahs, ah)
		q.UD = verbsio.UDAddr{AH: ah, RemoteQPN: remote.QPN, RemoteQKey: qkey}
	}
	return nil
}

// PostRecvs posts n receives on q, each covering its whole receive region
// (or, with several receive slots, the next slot).
func (s *Session) PostRecvs(q *QP, n int) error {
	if err := q.postRecvs(n); err != nil {
		return fmt.Errorf("post a receive on QP %d: %w", q.Index, err)
	}
	return nil
}

// postRecvs posts n receives in batches. It never allocates.
func (q *QP) postRecvs(n int) error {
	for n > 0 {
		k := min(n, RepostBatch)
		if q.recvSlots > 1 {
			for j := 0; j < k; j++ {
				slot := int(q.nextRecv % int64(q.recvSlots))
				q.nextRecv++
				q.rsges[j] = q.mr.SGE(q.RecvOff+slot*q.stride, q.stride)
				q.recv[j].ID = uint64(q.Index) | uint64(slot)<<32
			}
		}
		if _, err := q.PostRecv(q.recv[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// Repost posts one receive on q again after one was consumed. It never
// allocates.
func (q *QP) Repost() error { return q.postRecvs(1) }

// RecvID splits a receive completion's ID into the QP's index and the
// receive slot the message landed in.
func RecvID(id uint64) (qp, slot int) { return int(uint32(id)), int(id >> 32) }

// SendSlot returns the offset in the buffer of the send slot that message
// k of q uses: slot k modulo Spec.SendSlots.
func (q *QP) SendSlot(k int64) int { return q.SendOff + int(k%int64(q.sendSlots))*q.stride }

// RecvSlot returns the offset in the buffer of receive slot i of q.
func (q *QP) RecvSlot(i int) int { return q.RecvOff + i*q.stride }

// RepostLater counts one consumed receive, to be posted again by Flush, so
// that a poll batch costs one post call per QP.
func (q *QP) RepostLater() { q.owed++ }

// Flush posts the receives counted by RepostLater, in batches. It never
// allocates.
func (q *QP) Flush() error {
	if q.owed == 0 {
		return nil
	}
	err := q.postRecvs(q.owed)
	q.owed = 0
	return err
}

// RecvPayload returns the offset in the buffer where a received message's
// payload starts: after the GRH for UD.
func (s *Session) RecvPayload(q *QP) int { return s.RecvPayloadAt(q, 0) }

// RecvPayloadAt is RecvPayload for receive slot i.
func (s *Session) RecvPayloadAt(q *QP, i int) int {
	if s.Spec.Type == verbsio.QPTypeUD {
		return q.RecvSlot(i) + GRHSize
	}
	return q.RecvSlot(i)
}

// Info describes the session.
func (s *Session) Info() Info {
	in := Info{
		Device: s.Dev.Device, Server: s.Server, MTU: s.MTU.Bytes(),
		PeerVersion: s.Peer.Version, PeerRperf: s.Peer.Rperf,
		TxDepth: s.Spec.TxDepth, OutReads: s.outReads,
		Local: s.Local, Remote: s.Remote, GID: s.GID, UDPPort: s.Dev.UDPPort(),
	}
	if len(s.QPs) > 0 {
		in.Inline = s.QPs[0].Cap().MaxInlineData
	}
	if s.Spec.Verb == Send {
		in.RxDepth = s.Spec.RxDepth
	}
	return in
}

// Barrier synchronises with the peer: a key exchange that waits up to wait
// (0: the connection's I/O timeout). The engine serves the peer meanwhile
// (see Serve).
func (s *Session) Barrier(ctx context.Context, wait time.Duration) error {
	return s.Serve(func() error { return s.Conn.Barrier(ctx, wait) })
}

// Serve runs fn, a wait outside the verbs (an exchange on the connection),
// with the engine running in the background when it is poll-driven, so
// that the peer's traffic is still acknowledged, placed and answered (and
// retransmissions of it re-acknowledged) while this side does not poll.
// Elsewhere it just runs fn.
func (s *Session) Serve(fn func() error) error {
	if !s.PollDriven {
		return fn()
	}
	stop := s.Dev.StartProgress()
	defer stop()
	return fn()
}

// Drive runs a poll-driven engine once without taking a completion: loops
// that spin on memory call it so that the peer's packets are processed.
// Elsewhere it does nothing.
func (s *Session) Drive() error {
	if !s.PollDriven {
		return nil
	}
	if _, err := s.SendCQ.Poll(nil); err != nil {
		return fmt.Errorf("poll the send CQ: %w", err)
	}
	return nil
}

// Close ends the session: with ok, the closing handshake; otherwise the
// connection is just closed, which the peer notices at once. The verbs
// resources are released in both cases; the device context is the
// caller's.
func (s *Session) Close(ctx context.Context, ok bool) error {
	var errs []error
	if ok && (s.script == nil || !s.script.closed) {
		errs = append(errs, s.Serve(func() error { return s.Conn.Finish(ctx) }))
	} else {
		s.Conn.Close()
	}
	for _, ah := range s.ahs {
		errs = append(errs, ah.Destroy())
	}
	if s.cm != nil {
		errs = append(errs, s.cm.CloseQPs(ok))
	} else {
		for _, q := range s.QPs {
			errs = append(errs, q.Destroy())
		}
	}
	if s.RecvCQ != nil && s.RecvCQ != s.SendCQ {
		errs = append(errs, s.RecvCQ.Destroy())
	}
	if s.SendCQ != nil {
		errs = append(errs, s.SendCQ.Destroy())
	}
	if s.MR != nil {
		errs = append(errs, s.MR.Dereg())
	}
	errs = append(errs, s.freeBuffers())
	if s.PD != nil {
		errs = append(errs, s.PD.Dealloc())
	}
	s.ahs, s.QPs, s.RecvCQ, s.SendCQ, s.MR, s.Buf, s.PD = nil, nil, nil, nil, nil, nil, nil
	return errors.Join(errs...)
}

// Progress tells a caller which run is starting, for progress displays.
type Progress struct {
	Index int // 0-based position of the size in the run
	Count int // number of sizes
	Bytes int // message size of this run
	// Duration is the run's length in duration mode, 0 in iterations mode.
	Duration time.Duration
}
