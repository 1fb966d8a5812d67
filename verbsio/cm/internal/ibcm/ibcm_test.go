package ibcm

import (
	"bytes"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// wire connects CMs by GID on a fake clock. run delivers every queued MAD
// (drop decides which are lost) until nothing moves.
type wire struct {
	t      *testing.T
	now    time.Time
	cms    map[verbsio.GID]*CM
	port   map[*CM]uint16 // the UDP port a CM's MADs come from (0: 4791)
	events map[*CM][]Event
	log    []Packet
	drop   func(Packet) bool
}

var (
	gidA = gid(netip.MustParseAddr("192.0.2.1"))
	gidB = gid(netip.MustParseAddr("192.0.2.2"))
	t0   = time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
)

func newWire(t *testing.T) *wire {
	return &wire{t: t, now: t0, cms: map[verbsio.GID]*CM{}, port: map[*CM]uint16{}, events: map[*CM][]Event{}}
}

func (w *wire) add(g verbsio.GID, cfg Config) *CM {
	c := New(cfg)
	w.cms[g] = c
	return c
}

func (w *wire) addr(c *CM) verbsio.MADAddr {
	for g, x := range w.cms {
		if x == c {
			return verbsio.MADAddr{GID: g, Port: w.port[c]}
		}
	}
	w.t.Fatal("CM not on the wire")
	return verbsio.MADAddr{}
}

func (w *wire) run() {
	w.t.Helper()
	for i := 0; ; i++ {
		if i > 1000 {
			w.t.Fatal("the CMs keep talking")
		}
		moved := false
		for _, g := range sortedGIDs(w.cms) {
			c := w.cms[g]
			out, ev := c.Take()
			w.events[c] = append(w.events[c], ev...)
			for _, p := range out {
				w.log = append(w.log, p)
				moved = true
				if w.drop != nil && w.drop(p) {
					continue
				}
				dst := w.cms[p.To.GID]
				if dst == nil {
					continue
				}
				dst.Receive(w.now, p.To.GID, verbsio.MADAddr{GID: p.From, Port: w.port[c]}, p.MAD[:])
			}
		}
		if !moved {
			return
		}
	}
}

func sortedGIDs(m map[verbsio.GID]*CM) []verbsio.GID {
	var gs []verbsio.GID
	for g := range m {
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b verbsio.GID) int { return bytes.Compare(a[:], b[:]) })
	return gs
}

// advance moves the clock by d, running every CM's timers on the way.
func (w *wire) advance(d time.Duration) {
	w.t.Helper()
	end := w.now.Add(d)
	for {
		next, ok := time.Time{}, false
		for _, c := range w.cms {
			if t, has := c.NextDeadline(); has && !t.After(end) && (!ok || t.Before(next)) {
				next, ok = t, true
			}
		}
		if !ok {
			break
		}
		w.now = next
		for _, g := range sortedGIDs(w.cms) {
			w.cms[g].Advance(w.now)
		}
		w.run()
	}
	w.now = end
	w.run()
}

// event pops c's next event, which must be of type want.
func (w *wire) event(c *CM, want EventType) Event {
	w.t.Helper()
	evs := w.events[c]
	if len(evs) == 0 {
		w.t.Fatalf("no event, want %s", want)
	}
	w.events[c] = evs[1:]
	if evs[0].Type != want {
		w.t.Fatalf("event %s, want %s", evs[0].Type, want)
	}
	return evs[0]
}

func (w *wire) noEvents(c *CM) {
	w.t.Helper()
	if evs := w.events[c]; len(evs) != 0 {
		w.t.Fatalf("unexpected event %s", evs[0].Type)
	}
}

// sent returns the attributes of the MADs sent since the log was cleared.
func (w *wire) sent() []mad.AttrID {
	var a []mad.AttrID
	for _, p := range w.log {
		a = append(a, p.Attr)
	}
	w.log = nil
	return a
}

func cfgA() Config { return Config{CAGUID: 0xa, ACKDelay: 10, HiTID: 1, FirstID: 1} }
func cfgB() Config { return Config{CAGUID: 0xb, ACKDelay: 20, HiTID: 1, FirstID: 100} }

const sid = 0x0000000001064a69

func req(w *wire, to *CM, qpn, psn uint32) REQParam {
	dst := w.addr(to)
	return REQParam{Local: gidA, Peer: dst, AH: verbsio.AHAttr{DGID: dst.GID, HopLimit: 64, IsGlobal: true, PortNum: 1, FlowLabel: 0x12345},
		PacketLifeTime: 18, ServiceID: sid, QPN: qpn, QPType: verbsio.QPTypeRC, StartingPSN: psn,
		ResponderResources: 4, InitiatorDepth: 2, RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20,
		RetryCount: 6, RNRRetryCount: 5, MaxCMRetries: 15, PathMTU: verbsio.MTU1024, PKey: 0xffff,
		PrivateData: []byte("hello")}
}

// request sends a REQ for QP qpn from a to b, listening on sid if b does
// not yet, and returns both sides' IDs once b reported it.
func request(t *testing.T, w *wire, a, b *CM, qpn uint32) (ida, idb *ID) {
	t.Helper()
	if b.listeners[sid] == nil {
		if err := b.Listen(b.CreateID("listener"), sid); err != nil {
			t.Fatal(err)
		}
	}
	ida = a.CreateID("active")
	if err := a.SendREQ(w.now, ida, req(w, b, qpn, 0x111111)); err != nil {
		t.Fatal(err)
	}
	w.run()
	e := w.event(b, REQReceived)
	if e.Listen != b.listeners[sid] || e.Msg.(*mad.REQ).LocalQPN != qpn {
		t.Fatalf("REQ event %+v", e)
	}
	return ida, e.ID
}

// handshake connects a to b up to b's REP (state REP_SENT on b, REP_RCVD
// on a).
func handshake(t *testing.T, w *wire, a, b *CM) (ida, idb *ID) {
	t.Helper()
	ida, idb = request(t, w, a, b, 0x11)
	if err := b.SendMRA(w.now, idb, 24, true, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.SendREP(w.now, idb, REPParam{QPN: 0x22, StartingPSN: 0x222222, ResponderResources: 2, InitiatorDepth: 3, RNRRetryCount: 7, PrivateData: []byte("welcome")}); err != nil {
		t.Fatal(err)
	}
	w.run()
	e := w.event(a, REPReceived)
	if e.ID != ida || !bytes.HasPrefix(e.Msg.(*mad.REP).PrivateData[:], []byte("welcome")) {
		t.Fatalf("REP event %+v", e)
	}
	return ida, idb
}

func connect(t *testing.T, w *wire, a, b *CM) (ida, idb *ID) {
	t.Helper()
	ida, idb = handshake(t, w, a, b)
	if err := a.SendRTU(w.now, ida, nil); err != nil {
		t.Fatal(err)
	}
	w.run()
	w.event(b, RTUReceived)
	if ida.State() != Established || idb.State() != Established {
		t.Fatalf("states %s %s", ida.State(), idb.State())
	}
	return ida, idb
}

// TestConnectQPAttr: what each side's QP gets for INIT, RTR and RTS, and
// that the two sides agree (PSNs, QPNs, read/atomic depths cross over).
func TestConnectQPAttr(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	w.port[a] = 4801 // a is an engine context on UDP port 4801
	ida, idb := handshake(t, w, a, b)

	// Deferred establish: a's QP can be moved once the REP is in, before
	// the RTU; before the REP only INIT is known.
	type qa struct {
		attr verbsio.QPAttr
		mask verbsio.QPAttrMask
	}
	get := func(c *CM, id *ID, s verbsio.QPState) qa {
		t.Helper()
		at, m, err := c.InitQPAttr(id, s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return qa{at, m}
	}
	ai, ar, as := get(a, ida, verbsio.QPStateInit), get(a, ida, verbsio.QPStateRTR), get(a, ida, verbsio.QPStateRTS)
	bi, br, bs := get(b, idb, verbsio.QPStateInit), get(b, idb, verbsio.QPStateRTR), get(b, idb, verbsio.QPStateRTS)

	for _, x := range []qa{ai, bi} {
		if x.mask != verbsio.QPAttrState|verbsio.QPAttrAccessFlags|verbsio.QPAttrPkeyIndex|verbsio.QPAttrPort ||
			x.attr.AccessFlags != verbsio.AccessRemoteWrite|verbsio.AccessRemoteRead|verbsio.AccessRemoteAtomic || x.attr.PortNum != 1 {
			t.Errorf("INIT %+v %s", x.attr, x.mask)
		}
	}
	rtrMask := verbsio.QPAttrState | verbsio.QPAttrAV | verbsio.QPAttrPathMTU | verbsio.QPAttrDestQPN | verbsio.QPAttrRQPSN |
		verbsio.QPAttrMaxDestRdAtomic | verbsio.QPAttrMinRNRTimer
	rtsMask := verbsio.QPAttrState | verbsio.QPAttrSQPSN | verbsio.QPAttrRetryCnt | verbsio.QPAttrRNRRetry |
		verbsio.QPAttrMaxQPRdAtomic | verbsio.QPAttrTimeout
	if ar.mask != rtrMask || br.mask != rtrMask || as.mask != rtsMask || bs.mask != rtsMask {
		t.Errorf("masks RTR %s %s RTS %s %s", ar.mask, br.mask, as.mask, bs.mask)
	}
	// Each side receives from its own starting PSN and sends from the peer's.
	if ar.attr.RQPSN != 0x111111 || bs.attr.SQPSN != 0x111111 || br.attr.RQPSN != 0x222222 || as.attr.SQPSN != 0x222222 {
		t.Errorf("PSNs: a rq %#x sq %#x, b rq %#x sq %#x", ar.attr.RQPSN, as.attr.SQPSN, br.attr.RQPSN, bs.attr.SQPSN)
	}
	if ar.attr.DestQPN != 0x22 || br.attr.DestQPN != 0x11 || ar.attr.PathMTU != verbsio.MTU1024 || br.attr.PathMTU != verbsio.MTU1024 {
		t.Errorf("dest QPNs %#x %#x, MTUs %v %v", ar.attr.DestQPN, br.attr.DestQPN, ar.attr.PathMTU, br.attr.PathMTU)
	}
	// The REP's responder resources (2) are b's read depth as responder and
	// a's as initiator; its initiator depth (3) the other way.
	if br.attr.MaxDestRdAtomic != 2 || as.attr.MaxRdAtomic != 2 || ar.attr.MaxDestRdAtomic != 3 || bs.attr.MaxRdAtomic != 3 {
		t.Errorf("read depths: a %d/%d b %d/%d", ar.attr.MaxDestRdAtomic, as.attr.MaxRdAtomic, br.attr.MaxDestRdAtomic, bs.attr.MaxRdAtomic)
	}
	// retry_cnt from the REQ on both sides; rnr_retry: a's from the REP,
	// b's from the REQ.
	if as.attr.RetryCnt != 6 || bs.attr.RetryCnt != 6 || as.attr.RNRRetry != 7 || bs.attr.RNRRetry != 5 {
		t.Errorf("retries a %d/%d b %d/%d", as.attr.RetryCnt, as.attr.RNRRetry, bs.attr.RetryCnt, bs.attr.RNRRetry)
	}
	// The ACK timeout: a combines b's ACK delay (20) with the packet life
	// time (18): 21; b takes the REQ's, a's delay (10) with 18: 19.
	if as.attr.Timeout != 21 || bs.attr.Timeout != 19 {
		t.Errorf("timeouts a %d b %d, want 21 and 19", as.attr.Timeout, bs.attr.Timeout)
	}
	// Address vectors: towards the peer's GID; b reaches a's engine on its
	// UDP port through the DLID.
	if ar.attr.AH.DGID != gidB || br.attr.AH.DGID != gidA || br.attr.AH.DLID != 4801 || ar.attr.AH.DLID != 0 ||
		br.attr.AH.FlowLabel != 0x12345 || br.attr.AH.HopLimit != 64 || !br.attr.AH.IsGlobal {
		t.Errorf("AH a %+v b %+v", ar.attr.AH, br.attr.AH)
	}
	if err := a.SendRTU(w.now, ida, nil); err != nil {
		t.Fatal(err)
	}
	w.run()
	w.event(b, RTUReceived)
}

// TestInitQPAttrStates: the attributes exist only once the CM knows them.
func TestInitQPAttrStates(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	id := a.CreateID(nil)
	if _, _, err := a.InitQPAttr(id, verbsio.QPStateInit); !errors.Is(err, unix.EINVAL) {
		t.Errorf("INIT of an idle ID: %v", err)
	}
	if err := a.SendREQ(w.now, id, req(w, b, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.InitQPAttr(id, verbsio.QPStateInit); err != nil {
		t.Errorf("INIT after the REQ: %v", err)
	}
	for _, s := range []verbsio.QPState{verbsio.QPStateRTR, verbsio.QPStateRTS} {
		if _, _, err := a.InitQPAttr(id, s); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s before the REP: %v", s, err)
		}
	}
	if _, _, err := a.InitQPAttr(id, verbsio.QPStateSQD); !errors.Is(err, unix.EINVAL) {
		t.Errorf("SQD: %v", err)
	}
}

// TestUC: a UC connection's REQ says UC; its QP gets no RC attributes.
func TestUC(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	l := b.CreateID(nil)
	if err := b.Listen(l, sid); err != nil {
		t.Fatal(err)
	}
	p := req(w, b, 1, 1)
	p.QPType = verbsio.QPTypeUC
	id := a.CreateID(nil)
	if err := a.SendREQ(w.now, id, p); err != nil {
		t.Fatal(err)
	}
	w.run()
	e := w.event(b, REQReceived)
	if e.Msg.(*mad.REQ).TransportServiceType != mad.TransportUC || e.ID.qpType != verbsio.QPTypeUC {
		t.Fatalf("UC REQ: %+v", e.Msg)
	}
	if err := b.SendREP(w.now, e.ID, REPParam{QPN: 2}); err != nil {
		t.Fatal(err)
	}
	_, m, _ := b.InitQPAttr(e.ID, verbsio.QPStateRTS)
	if m != verbsio.QPAttrState|verbsio.QPAttrSQPSN {
		t.Errorf("UC RTS mask %s", m)
	}
	p.QPType = verbsio.QPTypeUD
	if err := a.SendREQ(w.now, a.CreateID(nil), p); !errors.Is(err, unix.EINVAL) {
		t.Errorf("REQ for UD: %v", err)
	}
}

// TestDisconnectTimewait: DREQ/DREP, both sides in TIMEWAIT for their
// QP's ACK timeout, then TIMEWAIT_EXIT.
func TestDisconnectTimewait(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	ida, idb := connect(t, w, a, b)
	if err := a.SendDREQ(w.now, ida, []byte("bye")); err != nil {
		t.Fatal(err)
	}
	w.run()
	e := w.event(b, DREQReceived)
	if !bytes.HasPrefix(e.Msg.(*mad.DREQ).PrivateData[:], []byte("bye")) {
		t.Error("DREQ private data lost")
	}
	if err := b.SendDREP(w.now, idb, nil); err != nil {
		t.Fatal(err)
	}
	w.run()
	w.event(a, DREPReceived)
	if ida.State() != Timewait || idb.State() != Timewait {
		t.Fatalf("states %s %s", ida.State(), idb.State())
	}
	// a: ACK timeout 21 -> 2^13 ms; b: 19 -> 2^11 ms.
	w.advance(2047 * time.Millisecond)
	w.noEvents(b)
	w.advance(time.Millisecond)
	w.event(b, TimewaitExit)
	w.advance(8192*time.Millisecond - 2048*time.Millisecond - time.Millisecond)
	w.noEvents(a)
	w.advance(time.Millisecond)
	w.event(a, TimewaitExit)
	if ida.State() != Idle || idb.State() != Idle {
		t.Fatalf("after TIMEWAIT: %s %s", ida.State(), idb.State())
	}
}

// TestNoRTU: a peer that never sends the RTU. The passive side sends its
// REP again every 2^(20-8) ms (the REQ's local CM response timeout) as
// often as the REQ's max CM retries (15) allow, then gives up: REP_ERROR,
// the ID idle and out of the duplicate and stale tables, and after
// Destroy nothing of the connection is left.
func TestNoRTU(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	w.drop = func(p Packet) bool { return p.Attr == mad.AttrREP && p.Retry }
	ida, idb := handshake(t, w, a, b)
	w.sent()
	start := w.now
	var times []time.Duration
	w.drop = func(p Packet) bool {
		if p.Attr == mad.AttrREP {
			if !p.Retry {
				t.Errorf("a REP that is not a retry")
			}
			times = append(times, w.now.Sub(start))
		}
		return true
	}
	w.advance(10 * time.Minute)
	if len(times) != 15 {
		t.Fatalf("REP sent again %d times, want 15", len(times))
	}
	for i, d := range times {
		if d != time.Duration(i+1)*4096*time.Millisecond {
			t.Errorf("retry %d at %v, want %v", i+1, d, time.Duration(i+1)*4096*time.Millisecond)
		}
	}
	w.event(b, REPError)
	if idb.State() != Idle {
		t.Fatalf("after REP_ERROR: %s", idb.State())
	}
	if c := b.Counters(); c.TxRetries[attrIndex(mad.AttrREP)] != 15 || c.Tx[attrIndex(mad.AttrREP)] != 16 {
		t.Errorf("REP tx %d retries %d", c.Tx[attrIndex(mad.AttrREP)], c.TxRetries[attrIndex(mad.AttrREP)])
	}
	if len(b.remoteIDs) != 0 || len(b.remoteQPNs) != 0 {
		t.Errorf("tables not freed: %d remote IDs, %d remote QPNs", len(b.remoteIDs), len(b.remoteQPNs))
	}
	b.Destroy(w.now, idb)
	w.run()
	if b.IDs() != 1 { // the listener
		t.Errorf("%d IDs left, want the listener only", b.IDs())
	}
	if _, ok := b.NextDeadline(); ok {
		t.Error("a timer is left")
	}
	// The late RTU is for nobody now.
	w.drop = nil
	if err := a.SendRTU(w.now, ida, nil); err != nil {
		t.Fatal(err)
	}
	w.run()
	w.noEvents(b)
	if c := b.Counters(); c.RxUnmatched != 1 {
		t.Errorf("late RTU: unmatched %d", c.RxUnmatched)
	}
}

// TestREQTimeout: a REQ nobody answers is sent 1 + 15 times, 6144 ms
// apart (2 * 2^(18-8) + 2^(20-8) ms), then REQ_ERROR.
func TestREQTimeout(t *testing.T) {
	w := newWire(t)
	a := w.add(gidA, cfgA())
	id := a.CreateID(nil)
	p := req(w, a, 1, 1)
	p.Peer = verbsio.MADAddr{GID: gidB} // nobody there
	if err := a.SendREQ(w.now, id, p); err != nil {
		t.Fatal(err)
	}
	w.advance(16*6144*time.Millisecond - time.Millisecond)
	if got := w.sent(); len(got) != 16 {
		t.Fatalf("%d REQs, want 16", len(got))
	}
	w.noEvents(a)
	w.advance(time.Millisecond)
	w.event(a, REQError)
	if id.State() != Idle {
		t.Errorf("after REQ_ERROR: %s", id.State())
	}
}

// TestDREQTimeout: an unanswered DREQ is retried, then TIMEWAIT.
func TestDREQTimeout(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	ida, _ := connect(t, w, a, b)
	w.drop = func(p Packet) bool { return p.Attr == mad.AttrDREQ }
	if err := a.SendDREQ(w.now, ida, nil); err != nil {
		t.Fatal(err)
	}
	w.advance(10 * time.Minute)
	w.event(a, DREQError)
	w.event(a, TimewaitExit)
	if c := a.Counters(); c.Tx[attrIndex(mad.AttrDREQ)] != 16 {
		t.Errorf("%d DREQs", c.Tx[attrIndex(mad.AttrDREQ)])
	}
}

// TestUnknownREP: a REP for no connection is ignored, as Linux does.
func TestUnknownREP(t *testing.T) {
	w := newWire(t)
	b := w.add(gidB, cfgB())
	m := mad.MAD{Header: mad.CMHeader(mad.AttrREP, 7), Msg: &mad.REP{LocalCommID: 5, RemoteCommID: 0x1234, LocalQPN: 9, LocalCAGUID: 0xa}}
	buf, err := mad.Append(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	b.Receive(w.now, gidB, verbsio.MADAddr{GID: gidA}, buf)
	out, ev := b.Take()
	if len(out) != 0 || len(ev) != 0 {
		t.Fatalf("answered %d MADs, %d events", len(out), len(ev))
	}
	if c := b.Counters(); c.RxUnmatched != 1 || c.Rx[attrIndex(mad.AttrREP)] != 1 {
		t.Errorf("counters %+v", c)
	}
}

// TestMalformed: MADs that do not decode change nothing and are counted
// by kind.
func TestMalformed(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	ida, idb := connect(t, w, a, b)
	w.sent()
	good, err := mad.Append(nil, &mad.MAD{Header: mad.CMHeader(mad.AttrDREQ, 1),
		Msg: &mad.DREQ{LocalCommID: ida.LocalID(), RemoteCommID: idb.LocalID(), RemoteQPN: 0x22}})
	if err != nil {
		t.Fatal(err)
	}
	mod := func(i int, v byte) []byte { x := slices.Clone(good); x[i] = v; return x }
	cases := []struct {
		name string
		b    []byte
		got  func(Counters) uint64
	}{
		{"truncated to 100 bytes", good[:100], func(c Counters) uint64 { return c.RxTruncated }},
		{"empty", nil, func(c Counters) uint64 { return c.RxTruncated }},
		{"257 bytes", append(slices.Clone(good), 0), func(c Counters) uint64 { return c.RxTruncated }},
		{"base version 2", mod(0, 2), func(c Counters) uint64 { return c.RxBadHeader }},
		{"class 0x04 (performance)", mod(1, 4), func(c Counters) uint64 { return c.RxBadHeader }},
		{"class version 1", mod(2, 1), func(c Counters) uint64 { return c.RxBadHeader }},
		{"method GetResp", mod(3, 0x81), func(c Counters) uint64 { return c.RxBadHeader }},
		{"attribute LAP", mod(17, 0x19), func(c Counters) uint64 { return c.RxUnknownAttr }},
		{"attribute 0xff", mod(17, 0xff), func(c Counters) uint64 { return c.RxUnknownAttr }},
	}
	for _, c := range cases {
		before := c.got(b.Counters())
		b.Receive(w.now, gidB, verbsio.MADAddr{GID: gidA}, c.b)
		w.run()
		if c.got(b.Counters())-before != 1 {
			t.Errorf("%s: not counted", c.name)
		}
		w.noEvents(b)
		if idb.State() != Established {
			t.Fatalf("%s: state %s", c.name, idb.State())
		}
	}
	if got := w.sent(); len(got) != 0 {
		t.Errorf("answers to malformed MADs: %v", got)
	}
	// A DREQ naming another QP is not for this connection.
	other, err := mad.Append(nil, &mad.MAD{Header: mad.CMHeader(mad.AttrDREQ, 1),
		Msg: &mad.DREQ{LocalCommID: ida.LocalID(), RemoteCommID: idb.LocalID(), RemoteQPN: 0x99}})
	if err != nil {
		t.Fatal(err)
	}
	b.Receive(w.now, gidB, verbsio.MADAddr{GID: gidA}, other)
	w.run()
	w.noEvents(b)
	if c := b.Counters(); c.RxUnmatched != 1 {
		t.Errorf("DREQ for QP 0x99: unmatched %d", c.RxUnmatched)
	}
	// The good one still works.
	b.Receive(w.now, gidB, verbsio.MADAddr{GID: gidA}, good)
	w.run()
	w.event(b, DREQReceived)
}

// TestDuplicates: repeated messages are answered once, as Linux does.
func TestDuplicates(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	l := b.CreateID(nil)
	if err := b.Listen(l, sid); err != nil {
		t.Fatal(err)
	}
	ida := a.CreateID(nil)
	if err := a.SendREQ(w.now, ida, req(w, b, 0x11, 1)); err != nil {
		t.Fatal(err)
	}
	reqMAD := a.out[0].MAD
	w.run()
	idb := w.event(b, REQReceived).ID
	w.sent()
	again := func() {
		b.Receive(w.now, gidB, verbsio.MADAddr{GID: gidA}, reqMAD[:])
		w.run()
	}
	// REQ_RCVD: the owner has not answered; the repeat is dropped.
	again()
	w.noEvents(b)
	if got := w.sent(); len(got) != 0 {
		t.Errorf("REQ_RCVD answered a repeat with %v", got)
	}
	// MRA_REQ_SENT (rdma_cm's delayed MRA): the repeat gets the MRA.
	if err := b.SendMRA(w.now, idb, 24, true, nil); err != nil {
		t.Fatal(err)
	}
	again()
	if got := w.sent(); !slices.Equal(got, []mad.AttrID{mad.AttrMRA}) {
		t.Errorf("MRA_REQ_SENT answered a repeat with %v", got)
	}
	w.event(a, MRAReceived)
	// Another MRA is a duplicate for the active side.
	again()
	w.sent()
	w.noEvents(a)
	if c := a.Counters(); c.RxDuplicates[attrIndex(mad.AttrMRA)] != 1 {
		t.Errorf("duplicate MRA not counted: %v", c.RxDuplicates)
	}
	if err := b.SendREP(w.now, idb, REPParam{QPN: 0x22, StartingPSN: 2}); err != nil {
		t.Fatal(err)
	}
	repMAD := b.out[0].MAD
	w.run()
	w.event(a, REPReceived)
	w.sent()
	// REP_SENT: the REP's own retries answer; the REQ repeat is dropped.
	again()
	if got := w.sent(); len(got) != 0 {
		t.Errorf("REP_SENT answered a REQ repeat with %v", got)
	}
	if c := b.Counters(); c.RxDuplicates[attrIndex(mad.AttrREQ)] != 4 {
		t.Errorf("duplicate REQs counted %d, want 4", c.RxDuplicates[attrIndex(mad.AttrREQ)])
	}
	if err := a.SendRTU(w.now, ida, []byte("rtu")); err != nil {
		t.Fatal(err)
	}
	rtuMAD := a.out[0].MAD
	w.run()
	w.event(b, RTUReceived)
	// A repeated REP (the RTU was lost) gets the same RTU again.
	a.Receive(w.now, gidA, verbsio.MADAddr{GID: gidB}, repMAD[:])
	out, _ := a.Take()
	if len(out) != 1 || out[0].MAD != rtuMAD {
		t.Fatalf("repeated REP: %d MADs", len(out))
	}
	// A repeated RTU is counted and dropped.
	b.Receive(w.now, gidB, verbsio.MADAddr{GID: gidA}, rtuMAD[:])
	w.run()
	w.noEvents(b)
	if c := b.Counters(); c.RxDuplicates[attrIndex(mad.AttrRTU)] != 1 {
		t.Errorf("duplicate RTU not counted")
	}
	// DREQ: repeated while DREQ_RCVD is dropped; in TIMEWAIT answered with
	// the DREP again; after the ID is gone answered with a DREP too.
	if err := a.SendDREQ(w.now, ida, nil); err != nil {
		t.Fatal(err)
	}
	dreqMAD := a.out[0].MAD
	w.run()
	w.event(b, DREQReceived)
	b.Receive(w.now, gidB, verbsio.MADAddr{GID: gidA}, dreqMAD[:])
	if out, _ := b.Take(); len(out) != 0 {
		t.Errorf("DREQ_RCVD answered a repeat")
	}
	if err := b.SendDREP(w.now, idb, nil); err != nil {
		t.Fatal(err)
	}
	w.run()
	w.event(a, DREPReceived)
	for _, when := range []string{"TIMEWAIT", "destroyed"} {
		if when == "destroyed" {
			b.Destroy(w.now, idb)
		}
		b.Receive(w.now, gidB, verbsio.MADAddr{GID: gidA}, dreqMAD[:])
		out, _ := b.Take()
		if len(out) != 1 || out[0].Attr != mad.AttrDREP {
			t.Fatalf("%s: repeated DREQ answered with %d MADs", when, len(out))
		}
		d, _ := mad.Decode(out[0].MAD[:])
		if m := d.Msg.(*mad.DREP); m.LocalCommID != idb.LocalID() || m.RemoteCommID != ida.LocalID() {
			t.Errorf("%s: DREP %s", when, m)
		}
	}
}

// TestStale: a REQ from a QP that has a live connection here (the peer
// restarted and reuses its QPN) is rejected as stale, and the old
// connection is disconnected.
func TestStale(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	_, idb := connect(t, w, a, b)
	w.sent()
	// a restarts: same CA GUID, new communication IDs, same QPN 0x11.
	a2 := New(Config{CAGUID: 0xa, ACKDelay: 10, HiTID: 2, FirstID: 5000})
	w.cms[gidA] = a2
	id := a2.CreateID(nil)
	if err := a2.SendREQ(w.now, id, req(w, b, 0x11, 7)); err != nil {
		t.Fatal(err)
	}
	w.run()
	e := w.event(a2, REJReceived)
	if m := e.Msg.(*mad.REJ); m.Reason != mad.RejStaleConn || m.MessageRejected != mad.MsgREQ {
		t.Errorf("REJ %s", m)
	}
	// The stale REJ puts the active ID in TIMEWAIT.
	if id.State() != Timewait {
		t.Errorf("active after stale REJ: %s", id.State())
	}
	if got := w.sent(); !slices.Equal(got, []mad.AttrID{mad.AttrREQ, mad.AttrREJ, mad.AttrDREQ, mad.AttrDREP}) {
		t.Errorf("sent %v", got)
	}
	// The restarted peer knows nothing of the old connection and answers
	// its DREQ with a DREP: the old connection ends.
	w.event(b, DREPReceived)
	if idb.State() != Timewait || b.Counters().Stale != 1 {
		t.Errorf("old connection %s, stale %d", idb.State(), b.Counters().Stale)
	}
}

// TestReject: the passive side refuses with its own private data.
func TestReject(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	ida, idb := request(t, w, a, b, 1)
	if err := b.SendREJ(w.now, idb, mad.RejConsumerDefined, nil, []byte("go away")); err != nil {
		t.Fatal(err)
	}
	w.run()
	e := w.event(a, REJReceived)
	m := e.Msg.(*mad.REJ)
	if m.Reason != mad.RejConsumerDefined || m.LocalCommID != 0 || !bytes.HasPrefix(m.PrivateData[:], []byte("go away")) {
		t.Errorf("REJ %s", m)
	}
	if ida.State() != Idle || idb.State() != Idle {
		t.Errorf("states %s %s", ida.State(), idb.State())
	}
	if _, ok := a.NextDeadline(); ok {
		t.Error("the REQ is still being retried")
	}
	if err := b.SendREJ(w.now, idb, mad.RejConsumerDefined, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("REJ of an idle ID: %v", err)
	}
}

// TestDestroy: what Linux sends when an ID is destroyed in each state.
func TestDestroy(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())

	// REQ_SENT: REJ timeout with the CA GUID as ARI; b's ID goes idle.
	ida, idb := request(t, w, a, b, 1)
	w.sent()
	a.Destroy(w.now, ida)
	w.run()
	e := w.event(b, REJReceived)
	if m := e.Msg.(*mad.REJ); m.Reason != mad.RejTimeout || m.RejectedInfoLength != 8 || m.ARI[7] != 0xa {
		t.Errorf("REJ %s ari % x", m, m.ARI[:8])
	}
	if idb.State() != Idle {
		t.Errorf("b after REJ timeout: %s", idb.State())
	}
	b.Destroy(w.now, idb)

	// ESTABLISHED: one DREQ, no retry, the ID is gone.
	ida, idb = connect(t, w, b2(w, a, b), b)
	w.sent()
	w.drop = func(p Packet) bool { return p.Attr == mad.AttrDREQ }
	a.Destroy(w.now, ida)
	w.advance(time.Minute)
	if got := w.sent(); !slices.Equal(got, []mad.AttrID{mad.AttrDREQ}) {
		t.Errorf("destroying an established ID sent %v", got)
	}
	w.drop = nil
	if a.IDs() != 0 {
		t.Errorf("%d IDs left on a", a.IDs())
	}
	// DREQ_RCVD: the DREP. b's DREQ now finds nobody on a: a DREP anyway.
	if err := b.SendDREQ(w.now, idb, nil); err != nil {
		t.Fatal(err)
	}
	w.run()
	w.event(b, DREPReceived)

	// REQ_RCVD: REJ consumer defined.
	ida, idb = request(t, w, a, b, 5)
	b.Destroy(w.now, idb)
	w.run()
	if m := w.event(a, REJReceived).Msg.(*mad.REJ); m.Reason != mad.RejConsumerDefined {
		t.Errorf("REJ %s", m)
	}
	// Listener: gone from the listen table.
	b2(w, a, b)
	if err := a.SendREQ(w.now, ida, req(w, b, 6, 1)); err != nil {
		t.Fatal(err)
	}
	w.run()
	if m := w.event(a, REJReceived).Msg.(*mad.REJ); m.Reason != mad.RejInvalidServiceID {
		t.Errorf("REQ after the listener left: %s", m)
	}
}

// b2 returns a and clears b's listener so connect can listen again.
func b2(w *wire, a, b *CM) *CM {
	for s, l := range b.listeners {
		b.Destroy(w.now, l)
		delete(b.listeners, s)
	}
	return a
}

// TestEstablish: the passive QP saw the peer's first packet before the
// RTU (rdma_cm's COMM_EST): ESTABLISHED at once, the REP is not repeated.
func TestEstablish(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	_, idb := handshake(t, w, a, b)
	if err := b.Establish(w.now, idb); err != nil {
		t.Fatal(err)
	}
	w.run()
	w.event(b, UserEstablished)
	if idb.State() != Established {
		t.Fatalf("state %s", idb.State())
	}
	if _, ok := b.NextDeadline(); ok {
		t.Error("the REP is still being retried")
	}
	if err := b.Establish(w.now, idb); !errors.Is(err, unix.EISCONN) {
		t.Errorf("second Establish: %v", err)
	}
	if err := a.Establish(w.now, a.CreateID(nil)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Establish of an idle ID: %v", err)
	}
}

// TestSIDR: resolution, repeats while unanswered, timeout, reject.
func TestSIDR(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	usid := mad.ServiceID(mad.PortSpaceUDP, 7174)
	l := b.CreateID(nil)
	if err := b.Listen(l, usid); err != nil {
		t.Fatal(err)
	}
	p := SIDRREQParam{Local: gidA, Peer: w.addr(b), ServiceID: usid, PKey: 0xffff, Timeout: 4096 * time.Millisecond, MaxCMRetries: 3}
	id := a.CreateID(nil)
	if err := a.SendSIDRREQ(w.now, id, p); err != nil {
		t.Fatal(err)
	}
	reqMAD := a.out[0].MAD
	w.run()
	e := w.event(b, SIDRREQReceived)
	// A repeat while the owner has not answered is dropped.
	b.Receive(w.now, gidB, verbsio.MADAddr{GID: gidA}, reqMAD[:])
	w.noEvents(b)
	if b.Counters().RxDuplicates[attrIndex(mad.AttrSIDRREQ)] != 1 {
		t.Error("repeated SIDR_REQ not counted")
	}
	if err := b.SendSIDRREP(w.now, e.ID, SIDRREPParam{QPN: 0x42, QKey: 0x01234567}); err != nil {
		t.Fatal(err)
	}
	w.run()
	if m := w.event(a, SIDRREPReceived).Msg.(*mad.SIDRREP); m.QPN != 0x42 || m.Status != mad.SIDRSuccess {
		t.Errorf("SIDR_REP %s", m)
	}
	if len(b.sidrs) != 0 {
		t.Error("SIDR table not freed")
	}
	b.Destroy(w.now, e.ID)

	// Unanswered: 1 + 3 sends 4096 ms apart, then SIDR_REQ_ERROR.
	w.drop = func(p Packet) bool { return p.Attr == mad.AttrSIDRREQ }
	id2 := a.CreateID(nil)
	if err := a.SendSIDRREQ(w.now, id2, p); err != nil {
		t.Fatal(err)
	}
	w.sent()
	w.advance(4*4096*time.Millisecond - time.Millisecond)
	w.noEvents(a)
	w.advance(time.Millisecond)
	w.event(a, SIDRREQError)
	if got := w.sent(); len(got) != 4 {
		t.Errorf("%d SIDR_REQs", len(got))
	}
	// Destroying the pending request on the passive side rejects it.
	w.drop = nil
	id3 := a.CreateID(nil)
	if err := a.SendSIDRREQ(w.now, id3, p); err != nil {
		t.Fatal(err)
	}
	w.run()
	b.Destroy(w.now, w.event(b, SIDRREQReceived).ID)
	w.run()
	if m := w.event(a, SIDRREPReceived).Msg.(*mad.SIDRREP); m.Status != mad.SIDRReject {
		t.Errorf("SIDR_REP %s", m)
	}
}

// TestParamErrors: bad parameters and states are EINVAL naming the
// problem; a second listener on a service ID is EBUSY.
func TestParamErrors(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	l := b.CreateID(nil)
	if err := b.Listen(l, sid); err != nil {
		t.Fatal(err)
	}
	if err := b.Listen(b.CreateID(nil), sid); !errors.Is(err, unix.EBUSY) {
		t.Errorf("second listener: %v", err)
	}
	if err := b.Listen(l, sid+1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("listening ID listens again: %v", err)
	}
	bad := []func(*REQParam){
		func(p *REQParam) { p.PrivateData = make([]byte, 93) },
		func(p *REQParam) { p.QPN = 1 << 24 },
		func(p *REQParam) { p.StartingPSN = 1 << 24 },
		func(p *REQParam) { p.PathMTU = 0 },
		func(p *REQParam) { p.RetryCount = 8 },
		func(p *REQParam) { p.MaxCMRetries = 16 },
	}
	for i, f := range bad {
		p := req(w, b, 1, 1)
		f(&p)
		if err := a.SendREQ(w.now, a.CreateID(nil), p); !errors.Is(err, unix.EINVAL) {
			t.Errorf("bad REQ %d: %v", i, err)
		}
	}
	id := a.CreateID(nil)
	if err := a.SendREQ(w.now, id, req(w, b, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := a.SendREQ(w.now, id, req(w, b, 1, 1)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("REQ twice: %v", err)
	}
	for name, err := range map[string]error{
		"REP":  a.SendREP(w.now, id, REPParam{}),
		"RTU":  a.SendRTU(w.now, id, nil),
		"DREQ": a.SendDREQ(w.now, id, nil),
		"DREP": a.SendDREP(w.now, id, nil),
		"MRA":  a.SendMRA(w.now, id, 1, false, nil),
	} {
		if !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s in REQ_SENT: %v", name, err)
		}
	}
	w.run()
	idb := w.event(b, REQReceived).ID
	if err := b.SendREP(w.now, idb, REPParam{PrivateData: make([]byte, 197)}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("REP private data 197: %v", err)
	}
	if err := b.SendREJ(w.now, idb, 28, make([]byte, 73), nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("REJ ARI 73: %v", err)
	}
}

// TestStaleREP: a REP from a QP that has a live connection here (the
// passive side restarted and reuses its QPN) is rejected as stale (REJ
// of a REP), and the old connection is disconnected.
func TestStaleREP(t *testing.T) {
	w := newWire(t)
	a, b := w.add(gidA, cfgA()), w.add(gidB, cfgB())
	ida, _ := connect(t, w, a, b)
	w.sent()
	b2 := New(Config{CAGUID: 0xb, ACKDelay: 20, HiTID: 2, FirstID: 7000})
	w.cms[gidB] = b2
	id, idb := request(t, w, a, b2, 0x33)
	if err := b2.SendREP(w.now, idb, REPParam{QPN: 0x22, StartingPSN: 1}); err != nil {
		t.Fatal(err)
	}
	w.run()
	e := w.event(b2, REJReceived)
	if m := e.Msg.(*mad.REJ); m.Reason != mad.RejStaleConn || m.MessageRejected != mad.MsgREP {
		t.Errorf("REJ %s", m)
	}
	if got := w.sent(); !slices.Equal(got, []mad.AttrID{mad.AttrREQ, mad.AttrREP, mad.AttrREJ, mad.AttrDREQ, mad.AttrDREP}) {
		t.Errorf("sent %v", got)
	}
	// The old connection got its DREQ answered by the restarted b2 (which
	// does not know it): a is in TIMEWAIT with it; b2's rejected REP
	// enters TIMEWAIT too (REJ stale).
	w.event(a, DREPReceived)
	if ida.State() != Timewait || idb.State() != Timewait || a.Counters().Stale != 1 {
		t.Errorf("old %s, b2's %s, stale %d", ida.State(), idb.State(), a.Counters().Stale)
	}
	// a's new REQ is still waiting for a REP it can take.
	if id.State() != REQSent {
		t.Errorf("the new connection is %s", id.State())
	}
}
