package ibcm

import (
	"bytes"
	"math/bits"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/internal/capture"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// The replay tests put this CM in the place of one of the two Linux
// machines of a captured conversation: the other machine's MADs are fed to
// it in order, the owner reacts as rdma_cm did, and every MAD the CM sends
// must equal, byte for byte, the one Linux sent at that point. The CM is
// configured with the Linux machine's CA GUID and ACK delay and, to get
// the same communication IDs and transaction IDs, the same ID operand.

var (
	server = netip.MustParseAddr("10.77.0.1")
	client = netip.MustParseAddr("10.77.0.2")
)

const (
	serverGUID = 0x505400fffe770001
	clientGUID = 0x505400fffe770002
)

func gid(a netip.Addr) verbsio.GID { return verbsio.GIDFromAddr(a) }

// frames reads a capture's MADs by frame number.
func frames(t *testing.T, name string) map[int]capture.Packet {
	t.Helper()
	m, err := capture.Frames(filepath.Join("..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func decodeFrame(t *testing.T, f map[int]capture.Packet, n int) mad.MAD {
	t.Helper()
	m, err := capture.Decode(f, n)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// linuxLike returns a CM configured as the Linux machine with CA GUID guid
// whose n-th communication ID (from 0) was commID.
func linuxLike(guid uint64, commID uint32, n uint32) *CM {
	return New(Config{CAGUID: guid, ACKDelay: 15, HiTID: 2, IDOperand: bits.ReverseBytes32(commID) ^ n})
}

// replayer drives one CM through a captured conversation.
type replayer struct {
	t    *testing.T
	c    *CM
	f    map[int]capture.Packet
	now  time.Time
	self netip.Addr // the machine the CM replaces
	// peerGID is the other machine's; zero: the other of client and server
	peerGID verbsio.GID
	events  []Event
}

func (r *replayer) peerAddr() verbsio.MADAddr {
	if !r.peerGID.IsZero() {
		return verbsio.MADAddr{GID: r.peerGID}
	}
	if r.self == server {
		return verbsio.MADAddr{GID: gid(client)}
	}
	return verbsio.MADAddr{GID: gid(server)}
}

// feed gives the CM the peer's MAD of frame n, at the frame's time.
func (r *replayer) feed(n int) {
	r.t.Helper()
	p, ok := r.f[n]
	if !ok {
		r.t.Fatalf("no MAD in frame %d", n)
	}
	if p.Src.Addr() == r.self {
		r.t.Fatalf("frame %d was sent by the machine the CM replaces", n)
	}
	r.now = p.Time
	r.c.Receive(r.now, gid(r.self), r.peerAddr(), p.Payload)
	out, ev := r.c.Take()
	r.events = append(r.events, ev...)
	if len(out) > 0 {
		r.t.Fatalf("frame %d: the CM answered at once with %d MADs (first %s)", n, len(out), out[0].Attr)
	}
}

// feedExpect feeds frame n and expects the CM to answer with frame want.
func (r *replayer) feedExpect(n, want int) {
	r.t.Helper()
	p := r.f[n]
	r.now = p.Time
	r.c.Receive(r.now, gid(r.self), r.peerAddr(), p.Payload)
	out, ev := r.c.Take()
	r.events = append(r.events, ev...)
	r.match(out, want)
}

// expect checks that the CM's output (after an owner action) is frame n.
func (r *replayer) expect(n int) {
	r.t.Helper()
	out, ev := r.c.Take()
	r.events = append(r.events, ev...)
	r.match(out, n)
}

// quiet checks that the CM sent nothing.
func (r *replayer) quiet() {
	r.t.Helper()
	out, ev := r.c.Take()
	r.events = append(r.events, ev...)
	if len(out) != 0 {
		r.t.Fatalf("the CM sent %d MADs (first %s), want none", len(out), out[0].Attr)
	}
}

func (r *replayer) match(out []Packet, n int) {
	r.t.Helper()
	p, ok := r.f[n]
	if !ok {
		r.t.Fatalf("no MAD in frame %d", n)
	}
	if len(out) != 1 {
		r.t.Fatalf("want frame %d, the CM sent %d MADs", n, len(out))
	}
	if out[0].To != r.peerAddr() || out[0].From != gid(r.self) {
		r.t.Errorf("frame %d: sent from %v to %+v", n, out[0].From, out[0].To)
	}
	if !bytes.Equal(out[0].MAD[:], p.Payload) {
		got, _ := mad.Decode(out[0].MAD[:])
		want, _ := mad.Decode(p.Payload)
		r.t.Errorf("frame %d differs:\n got %s\nwant %s\n got %x\nwant %x", n, got.String(), want.String(), out[0].MAD, p.Payload)
	}
}

// event pops the next event and checks its type.
func (r *replayer) event(want EventType) Event {
	r.t.Helper()
	if len(r.events) == 0 {
		r.t.Fatalf("no event, want %s", want)
	}
	e := r.events[0]
	r.events = r.events[1:]
	if e.Type != want {
		r.t.Fatalf("event %s, want %s", e.Type, want)
	}
	return e
}

// disconnect plays a captured disconnect: with ours the CM sends the DREQ
// of frame dreq and takes the DREP, otherwise it answers the peer's.
func (r *replayer) disconnect(id *ID, dreq, drep int, ours bool) {
	r.t.Helper()
	if ours {
		r.now = r.f[dreq].Time
		if err := r.c.SendDREQ(r.now, id, nil); err != nil {
			r.t.Fatal(err)
		}
		r.expect(dreq)
		r.feed(drep)
		r.event(DREPReceived)
		return
	}
	r.feed(dreq)
	r.event(DREQReceived)
	if err := r.c.SendDREP(r.now, id, nil); err != nil {
		r.t.Fatal(err)
	}
	r.expect(drep)
}

// reqParam rebuilds the parameters rdma_cm passed for a captured REQ.
func reqParam(q *mad.REQ, self, peer netip.Addr) REQParam {
	return REQParam{
		Local: gid(self), Peer: verbsio.MADAddr{GID: gid(peer)},
		AH: verbsio.AHAttr{DGID: q.Primary.RemoteGID, FlowLabel: q.Primary.FlowLabel, HopLimit: q.Primary.HopLimit,
			TrafficClass: q.Primary.TrafficClass, SL: q.Primary.SL, IsGlobal: true, PortNum: 1},
		PacketLifeTime: 18, ServiceID: q.ServiceID, QPN: q.LocalQPN, QPType: verbsio.QPTypeRC,
		StartingPSN: q.StartingPSN, ResponderResources: q.ResponderResources, InitiatorDepth: q.InitiatorDepth,
		RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20, RetryCount: q.RetryCount,
		RNRRetryCount: q.RNRRetryCount, MaxCMRetries: 15, PathMTU: verbsio.MTU(q.PathMTU), PKey: 0xffff,
		PrivateData: q.PrivateData[:mad.CMAHeaderLen],
	}
}

func repParam(p *mad.REP) REPParam {
	return REPParam{QPN: p.LocalQPN, StartingPSN: p.StartingPSN, ResponderResources: p.ResponderResources,
		InitiatorDepth: p.InitiatorDepth, RNRRetryCount: p.RNRRetryCount}
}

// TestReplayTimewait: the CM as perftest's client (the active side) of
// ib_send_bw -R's first connection: REQ, REP, RTU, the server's DREQ
// answered with a DREP, then TIMEWAIT for the QP's ACK timeout.
func TestReplayTimewait(t *testing.T) {
	f := frames(t, "rxe-cm1.pcap")
	q := decodeFrame(t, f, 9).Msg.(*mad.REQ)
	r := &replayer{t: t, f: f, self: client, c: linuxLike(clientGUID, q.LocalCommID, 0)}
	id := r.c.CreateID(nil)
	r.now = f[9].Time
	if err := r.c.SendREQ(r.now, id, reqParam(q, client, server)); err != nil {
		t.Fatal(err)
	}
	r.expect(9)
	r.feed(10) // REP
	e := r.event(REPReceived)
	if e.ID != id || id.State() != REPRcvd {
		t.Fatalf("REP: id %p state %s", e.ID, id.State())
	}
	if err := r.c.SendRTU(r.now, id, nil); err != nil {
		t.Fatal(err)
	}
	r.expect(11)
	if id.State() != Established {
		t.Fatalf("after RTU: %s", id.State())
	}
	r.feed(77) // the server's DREQ
	r.event(DREQReceived)
	if err := r.c.SendDREP(r.now, id, nil); err != nil {
		t.Fatal(err)
	}
	r.expect(78)
	if id.State() != Timewait {
		t.Fatalf("after DREP: %s", id.State())
	}
	// TIMEWAIT lasts the QP's ACK timeout: the REP's target ACK delay 15
	// and RoCE's packet life time 18 give 19, 2^(19-8) ms in Linux.
	if id.ACKTimeout() != 19 {
		t.Errorf("ACK timeout %d, want 19", id.ACKTimeout())
	}
	r.c.Advance(r.now.Add(2047 * time.Millisecond))
	if _, ev := r.c.Take(); len(ev) != 0 {
		t.Fatalf("left TIMEWAIT early: %v", ev[0].Type)
	}
	r.c.Advance(r.now.Add(2048 * time.Millisecond))
	_, ev := r.c.Take()
	if len(ev) != 1 || ev[0].Type != TimewaitExit || id.State() != Idle {
		t.Fatalf("TIMEWAIT exit: %v, state %s", ev, id.State())
	}
}

// conversation is one captured connection: its frames, and which side
// disconnected.
type conversation struct {
	name                      string
	capture                   string
	self, peer                netip.Addr
	req, rep, rtu, dreq, drep int
	activeDisconnects         bool
}

var conversations = []conversation{
	{"send_bw_R message QP", "rxe-cm1.pcap", client, server, 9, 10, 11, 77, 78, false},
	{"send_bw_R data QP", "rxe-cm1.pcap", client, server, 32, 33, 34, 75, 76, true},
	{"send_lat_R data QP", "rxe-cm1.pcap", client, server, 104, 105, 106, 163, 164, true},
	{"ucmatose", "rxe-cm1.pcap", client, server, 230, 231, 232, 237, 238, false},
	{"rping", "rxe-cm2.pcap", client, server, 1, 2, 3, 40, 41, true},
	{"rping -q", "rxe-cm2.pcap", client, server, 44, 45, 46, 83, 84, true},
	{"rping IPv6", "rxe-cm2.pcap", netip.MustParseAddr("fe80::5054:ff:fe77:2"), netip.MustParseAddr("fe80::5054:ff:fe77:1"), 87, 88, 89, 102, 103, true},
	{"read_lat_R data QP", "rxe-cm2.pcap", client, server, 129, 130, 131, 172, 173, false},
}

// TestReplayConversations plays both sides of every captured connection.
func TestReplayConversations(t *testing.T) {
	for _, cv := range conversations {
		t.Run(cv.name+"/active", func(t *testing.T) {
			f := frames(t, cv.capture)
			q := decodeFrame(t, f, cv.req).Msg.(*mad.REQ)
			r := &replayer{t: t, f: f, self: cv.self, c: linuxLike(clientGUID, q.LocalCommID, 0)}
			r.peerGID = gid(cv.peer)
			id := r.c.CreateID(nil)
			r.now = f[cv.req].Time
			if err := r.c.SendREQ(r.now, id, reqParam(q, cv.self, cv.peer)); err != nil {
				t.Fatal(err)
			}
			r.expect(cv.req)
			r.feed(cv.rep)
			r.event(REPReceived)
			if err := r.c.SendRTU(r.now, id, nil); err != nil {
				t.Fatal(err)
			}
			r.expect(cv.rtu)
			r.disconnect(id, cv.dreq, cv.drep, cv.activeDisconnects)
			if id.State() != Timewait {
				t.Errorf("after the disconnect: %s", id.State())
			}
		})
		t.Run(cv.name+"/passive", func(t *testing.T) {
			f := frames(t, cv.capture)
			p := decodeFrame(t, f, cv.rep).Msg.(*mad.REP)
			q := decodeFrame(t, f, cv.req).Msg.(*mad.REQ)
			r := &replayer{t: t, f: f, self: cv.peer, c: linuxLike(serverGUID, p.LocalCommID, 1)}
			r.peerGID = gid(cv.self)
			l := r.c.CreateID(nil)
			if err := r.c.Listen(l, q.ServiceID); err != nil {
				t.Fatal(err)
			}
			r.feed(cv.req)
			id := r.event(REQReceived).ID
			if err := r.c.SendMRA(r.now, id, 24, true, nil); err != nil {
				t.Fatal(err)
			}
			r.quiet()
			if err := r.c.SendREP(r.now, id, repParam(p)); err != nil {
				t.Fatal(err)
			}
			r.expect(cv.rep)
			r.feed(cv.rtu)
			r.event(RTUReceived)
			r.disconnect(id, cv.dreq, cv.drep, !cv.activeDisconnects)
		})
	}
}

// TestReplayReject: a REQ and a SIDR_REQ for services nobody listens on
// are answered as Linux answered them.
func TestReplayReject(t *testing.T) {
	f := frames(t, "rxe-cm1.pcap")
	r := &replayer{t: t, f: f, self: server, c: linuxLike(serverGUID, 1, 0)}
	r.feedExpect(1, 2) // REQ -> REJ 8
	r.feedExpect(3, 4) // SIDR_REQ -> SIDR_REP unsupported
	if len(r.events) != 0 {
		t.Errorf("events for rejected requests: %v", r.events[0].Type)
	}
	if c := r.c.Counters(); c.Rejected != 2 || r.c.IDs() != 0 {
		t.Errorf("rejected %d, %d IDs left", c.Rejected, r.c.IDs())
	}
}

// TestReplaySIDR: udaddy's and perftest's service ID resolutions, from
// both sides.
func TestReplaySIDR(t *testing.T) {
	for _, c := range []struct {
		name     string
		req, rep int
	}{{"ud_bw_R", 192, 193}, {"udaddy", 241, 242}} {
		f := frames(t, "rxe-cm1.pcap")
		sreq := decodeFrame(t, f, c.req).Msg.(*mad.SIDRREQ)
		srep := decodeFrame(t, f, c.rep).Msg.(*mad.SIDRREP)
		t.Run(c.name+"/active", func(t *testing.T) {
			r := &replayer{t: t, f: f, self: client, c: linuxLike(clientGUID, sreq.RequestID, 0)}
			id := r.c.CreateID(nil)
			r.now = f[c.req].Time
			err := r.c.SendSIDRREQ(r.now, id, SIDRREQParam{Local: gid(client), Peer: verbsio.MADAddr{GID: gid(server)},
				ServiceID: sreq.ServiceID, PKey: 0xffff, Timeout: 4096 * time.Millisecond, MaxCMRetries: 15,
				PrivateData: sreq.PrivateData[:mad.CMAHeaderLen]})
			if err != nil {
				t.Fatal(err)
			}
			r.expect(c.req)
			r.feed(c.rep)
			e := r.event(SIDRREPReceived)
			if m := e.Msg.(*mad.SIDRREP); m.QPN != srep.QPN || m.QKey != 0x01234567 || id.State() != Idle {
				t.Errorf("SIDR_REP %s, state %s", m, id.State())
			}
		})
		t.Run(c.name+"/passive", func(t *testing.T) {
			r := &replayer{t: t, f: f, self: server, c: linuxLike(serverGUID, 1, 0)}
			l := r.c.CreateID(nil)
			if err := r.c.Listen(l, sreq.ServiceID); err != nil {
				t.Fatal(err)
			}
			r.feed(c.req)
			e := r.event(SIDRREQReceived)
			if e.Listen != l {
				t.Fatal("SIDR_REQ event for another listener")
			}
			if err := r.c.SendSIDRREP(r.now, e.ID, SIDRREPParam{QPN: srep.QPN, QKey: srep.QKey}); err != nil {
				t.Fatal(err)
			}
			r.expect(c.rep)
			r.c.Destroy(r.now, e.ID)
			r.quiet()
		})
	}
}

// TestReplayMRA: the REQ to a stopped server. Active side: the REQ goes
// again after 2 * 2^(18-8) + 2^(20-8) ms, the MRA extends the wait, the
// REP is answered. Passive side: the repeated REQ is answered with the
// MRA rdma_cm asked for (service timeout 24), then the REP.
func TestReplayMRA(t *testing.T) {
	f := frames(t, "rxe-cm2.pcap")
	q := decodeFrame(t, f, 178).Msg.(*mad.REQ)
	p := decodeFrame(t, f, 181).Msg.(*mad.REP)
	t.Run("active", func(t *testing.T) {
		r := &replayer{t: t, f: f, self: client, c: linuxLike(clientGUID, q.LocalCommID, 0)}
		id := r.c.CreateID(nil)
		t0 := f[178].Time
		r.now = t0
		if err := r.c.SendREQ(r.now, id, reqParam(q, client, server)); err != nil {
			t.Fatal(err)
		}
		r.expect(178)
		if d, ok := r.c.NextDeadline(); !ok || d != t0.Add(6144*time.Millisecond) {
			t.Fatalf("REQ deadline %v after sending, want 6144 ms", d.Sub(t0))
		}
		r.c.Advance(t0.Add(6143 * time.Millisecond))
		r.quiet()
		r.c.Advance(t0.Add(6144 * time.Millisecond))
		out, _ := r.c.Take()
		if len(out) != 1 || !out[0].Retry || !bytes.Equal(out[0].MAD[:], f[179].Payload) {
			t.Fatalf("the repeat at 6144 ms: %d MADs", len(out))
		}
		if c := r.c.Counters(); c.TxRetries[0] != 1 || c.Tx[0] != 2 {
			t.Errorf("REQ counters tx %d retries %d", c.Tx[0], c.TxRetries[0])
		}
		r.feed(180) // MRA
		r.event(MRAReceived)
		if id.State() != MRAREQRcvd {
			t.Fatalf("after the MRA: %s", id.State())
		}
		// The wait is now the MRA's service timeout plus the path's ACK
		// timeout: 2^(24-8) + 2^(19-8) ms.
		if d, _ := r.c.NextDeadline(); d != r.now.Add(65536*time.Millisecond+2048*time.Millisecond) {
			t.Errorf("deadline after MRA: %v", d.Sub(r.now))
		}
		r.feed(181) // REP
		r.event(REPReceived)
		if err := r.c.SendRTU(r.now, id, nil); err != nil {
			t.Fatal(err)
		}
		r.expect(182)
		r.now = f[195].Time
		if err := r.c.SendDREQ(r.now, id, nil); err != nil {
			t.Fatal(err)
		}
		r.expect(195)
		r.feed(196)
		r.event(DREPReceived)
	})
	t.Run("passive", func(t *testing.T) {
		r := &replayer{t: t, f: f, self: server, c: linuxLike(serverGUID, p.LocalCommID, 1)}
		l := r.c.CreateID(nil)
		if err := r.c.Listen(l, q.ServiceID); err != nil {
			t.Fatal(err)
		}
		r.feed(178)
		id := r.event(REQReceived).ID
		if err := r.c.SendMRA(r.now, id, 24, true, nil); err != nil {
			t.Fatal(err)
		}
		r.quiet()
		r.feedExpect(179, 180) // the repeat: MRA
		if c := r.c.Counters(); c.RxDuplicates[0] != 1 || len(r.events) != 0 {
			t.Errorf("duplicate REQs counted %d, events %d", c.RxDuplicates[0], len(r.events))
		}
		r.now = f[181].Time
		if err := r.c.SendREP(r.now, id, repParam(p)); err != nil {
			t.Fatal(err)
		}
		r.expect(181)
		r.feed(182)
		r.event(RTUReceived)
		r.feed(195)
		r.event(DREQReceived)
		if err := r.c.SendDREP(r.now, id, nil); err != nil {
			t.Fatal(err)
		}
		r.expect(196)
	})
}
