package mad_test

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/internal/capture"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// captures are the Linux rxe CM captures in verbsio/cm/testdata (see its
// README.md for the programs that made them).
var captures = []string{"rxe-cm1.pcap", "rxe-cm2.pcap"}

func frames(t testing.TB, name string) map[int]capture.Packet {
	t.Helper()
	m, err := capture.Frames(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func decodeFrame(t testing.TB, f map[int]capture.Packet, n int) mad.MAD {
	t.Helper()
	m, err := capture.Decode(f, n)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func captured(t testing.TB, name string) []capture.Packet {
	t.Helper()
	pkts, err := capture.MADs(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if len(pkts) == 0 {
		t.Fatalf("%s: no MADs", name)
	}
	return pkts
}

// TestCaptureRoundTrip decodes every MAD Linux sent in the captures,
// re-encodes it and compares the bytes: the layout of every field of every
// message type seen, and the reserved bits (which Linux leaves zero).
func TestCaptureRoundTrip(t *testing.T) {
	for _, name := range captures {
		seen := map[mad.AttrID]int{}
		for _, p := range captured(t, name) {
			if !p.ICRCOK {
				t.Errorf("%s frame %d: ICRC mismatch", name, p.Frame)
			}
			if p.DETH.QKey != mad.QP1QKey || p.DETH.SrcQP != 1 {
				t.Errorf("%s frame %d: DETH qkey %#x src qp %d, want %#x from QP1", name, p.Frame, p.DETH.QKey, p.DETH.SrcQP, mad.QP1QKey)
			}
			m, err := mad.Decode(p.Payload)
			if err != nil {
				t.Errorf("%s frame %d: %v", name, p.Frame, err)
				continue
			}
			seen[m.AttrID]++
			out := make([]byte, mad.Size)
			if err := mad.Encode(out, &m); err != nil {
				t.Errorf("%s frame %d: encode %s: %v", name, p.Frame, m.AttrID, err)
				continue
			}
			if !bytes.Equal(out, p.Payload) {
				t.Errorf("%s frame %d: %s re-encodes differently:\n got %x\nwant %x", name, p.Frame, m.AttrID, out, p.Payload)
			}
			for i, r := range mad.Reserved(m.AttrID) {
				if p.Payload[mad.HeaderSize+i]&r != 0 {
					t.Errorf("%s frame %d: %s sets reserved bits %#02x of data byte %d", name, p.Frame, m.AttrID, p.Payload[mad.HeaderSize+i]&r, i)
				}
			}
		}
		t.Logf("%s: %v", name, seen)
	}
}

// TestCaptureAllMessages: between them the captures hold every message
// type the CM sends over RoCE.
func TestCaptureAllMessages(t *testing.T) {
	seen := map[mad.AttrID]int{}
	for _, name := range captures {
		for _, p := range captured(t, name) {
			m, err := mad.Decode(p.Payload)
			if err == nil {
				seen[m.AttrID]++
			}
		}
	}
	for _, a := range []mad.AttrID{mad.AttrREQ, mad.AttrMRA, mad.AttrREJ, mad.AttrREP, mad.AttrRTU, mad.AttrDREQ, mad.AttrDREP, mad.AttrSIDRREQ, mad.AttrSIDRREP} {
		if seen[a] == 0 {
			t.Errorf("no %s in the captures", a)
		}
	}
}

// TestCapture2Fields pins the MRA, the repeated REQ, the IPv6 connection
// and perftest's read responder resources of the second capture.
func TestCapture2Fields(t *testing.T) {
	byFrame := frames(t, "rxe-cm2.pcap")
	decode := func(frame int) mad.MAD { return decodeFrame(t, byFrame, frame) }
	// The REQ to the stopped server, its repeat (identical bytes), the MRA.
	if !bytes.Equal(byFrame[178].Payload, byFrame[179].Payload) {
		t.Error("the repeated REQ differs from the first")
	}
	if gap := byFrame[179].Time.Sub(byFrame[178].Time); gap < 6144*time.Millisecond || gap > 7*time.Second {
		t.Errorf("REQ repeated after %v, Linux waits 6144 ms", gap)
	}
	req := decode(178)
	mra := decode(180)
	m := mra.Msg.(*mad.MRA)
	rep := decode(181).Msg.(*mad.REP)
	if m.MessageMRAed != mad.MsgREQ || m.ServiceTimeout != 24 || m.RemoteCommID != req.Msg.(*mad.REQ).LocalCommID ||
		m.LocalCommID != rep.LocalCommID || mra.TID != req.TID {
		t.Errorf("MRA %s tid %#x", m, mra.TID)
	}
	// rping over IPv6: GIDs and the cma header are the link-local addresses.
	q := decode(87).Msg.(*mad.REQ)
	a2, a1 := netip.MustParseAddr("fe80::5054:ff:fe77:2"), netip.MustParseAddr("fe80::5054:ff:fe77:1")
	var h mad.CMAHeader
	if err := h.Unmarshal(q.PrivateData[:]); err != nil || h.IPVersion != 6 || h.Src != a2 || h.Dst != a1 {
		t.Errorf("IPv6 cma header %+v: %v", h, err)
	}
	if q.Primary.LocalGID != verbsio.GIDFromAddr(a2) || q.Primary.RemoteGID != verbsio.GIDFromAddr(a1) {
		t.Errorf("IPv6 REQ GIDs %v -> %v", q.Primary.LocalGID, q.Primary.RemoteGID)
	}
	if q.Primary.FlowLabel != (uint32(h.Port)*31+7174)&0xfffff {
		t.Errorf("IPv6 flow label %#x, port %#x", q.Primary.FlowLabel, h.Port)
	}
	// ib_read_lat -R's data QP: 128 outstanding reads each way.
	rq := decode(129).Msg.(*mad.REQ)
	rp := decode(130).Msg.(*mad.REP)
	if rq.ResponderResources != 128 || rq.InitiatorDepth != 128 || rp.ResponderResources != 128 || rp.InitiatorDepth != 128 {
		t.Errorf("read_lat: REQ %d/%d REP %d/%d", rq.ResponderResources, rq.InitiatorDepth, rp.ResponderResources, rp.InitiatorDepth)
	}
}

// TestCaptureFields pins the fields of individual captured messages to the
// values the programs that sent them reported (perftest's printout, rping's
// and udaddy's errors) and to what Linux's CM computes.
func TestCaptureFields(t *testing.T) {
	byFrame := frames(t, "rxe-cm1.pcap")
	decode := func(frame int) mad.MAD { return decodeFrame(t, byFrame, frame) }
	v4 := func(s string) verbsio.GID { return verbsio.GIDFromAddr(netip.MustParseAddr(s)) }

	// Frame 1: rping's REQ to 10.77.0.1 where nothing listens; frame 2: the
	// kernel's REJ, reason 8, to the REQ's comm ID and TID, from comm ID 0.
	req1 := decode(1)
	rej := decode(2)
	r := rej.Msg.(*mad.REJ)
	if r.Reason != mad.RejInvalidServiceID || r.MessageRejected != mad.MsgREQ || r.LocalCommID != 0 ||
		r.RemoteCommID != req1.Msg.(*mad.REQ).LocalCommID || rej.TID != req1.TID || r.RejectedInfoLength != 0 {
		t.Errorf("REJ to an unknown service: %s tid %#x (REQ tid %#x)", r, rej.TID, req1.TID)
	}

	// Frames 3/4: udaddy's SIDR_REQ to port 7174 of the UDP port space,
	// answered with status 1 (udaddy printed "UNREACHABLE, error: 1").
	sreq := decode(3).Msg.(*mad.SIDRREQ)
	srep := decode(4)
	if sreq.ServiceID != mad.ServiceID(mad.PortSpaceUDP, 7174) || sreq.PKey != 0xffff {
		t.Errorf("SIDR_REQ: %s", sreq)
	}
	if s := srep.Msg.(*mad.SIDRREP); s.Status != mad.SIDRUnsupported || s.RequestID != sreq.RequestID ||
		s.ServiceID != sreq.ServiceID || s.QPN != 0 || srep.TID != decode(3).TID {
		t.Errorf("SIDR_REP to an unknown service: %s", s)
	}
	var h mad.CMAHeader
	if err := h.Unmarshal(sreq.PrivateData[:]); err != nil || h.IPVersion != 4 ||
		h.Src != netip.MustParseAddr("10.77.0.2") || h.Dst != netip.MustParseAddr("10.77.0.1") {
		t.Errorf("SIDR_REQ cma header %+v: %v", h, err)
	}

	// Frames 9-11: ib_send_bw -R's first connection: REQ, REP, RTU, from
	// the client (10.77.0.2, the active side) to port 18515.
	req := decode(9)
	q := req.Msg.(*mad.REQ)
	want := mad.REQ{
		LocalCommID: q.LocalCommID, ServiceID: mad.ServiceID(mad.PortSpaceTCP, 18515),
		LocalCAGUID: 0x505400fffe770002, LocalQPN: q.LocalQPN,
		RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20, StartingPSN: q.StartingPSN,
		RetryCount: 7, RNRRetryCount: 7, MaxCMRetries: 15, PKey: 0xffff, PathMTU: 3,
		Primary: mad.Path{LocalLID: 0xffff, RemoteLID: 0xffff, LocalGID: v4("10.77.0.2"), RemoteGID: v4("10.77.0.1"),
			HopLimit: 64, LocalACKTimeout: mad.ACKTimeout(15, 18),
			// rdma_cm's RoCE flow label: (source port * 31 + destination port) & 0xfffff
			FlowLabel: (0xbe95*31 + 18515) & 0xfffff},
		PrivateData: q.PrivateData,
	}
	if *q != want {
		t.Errorf("REQ\n got %+v\nwant %+v", *q, want)
	}
	if q.Primary.LocalACKTimeout != 19 {
		t.Errorf("REQ local ACK timeout %d, want 19 (rxe ACK delay 15, RoCE packet life time 18)", q.Primary.LocalACKTimeout)
	}
	if err := h.Unmarshal(q.PrivateData[:]); err != nil || h.Port != 0xbe95 ||
		h.Src != netip.MustParseAddr("10.77.0.2") || h.Dst != netip.MustParseAddr("10.77.0.1") {
		t.Errorf("REQ cma header %+v: %v", h, err)
	}
	if !bytes.Equal(q.PrivateData[mad.CMAHeaderLen:], make([]byte, mad.REQPrivateDataSize-mad.CMAHeaderLen)) {
		t.Errorf("REQ: perftest sends no private data after the cma header: %x", q.PrivateData)
	}
	rep := decode(10)
	p := rep.Msg.(*mad.REP)
	if p.RemoteCommID != q.LocalCommID || rep.TID != req.TID || p.LocalCAGUID != 0x505400fffe770001 ||
		p.TargetACKDelay != 15 || p.RNRRetryCount != 7 {
		t.Errorf("REP %+v tid %#x", *p, rep.TID)
	}
	rtu := decode(11)
	if u := rtu.Msg.(*mad.RTU); u.LocalCommID != q.LocalCommID || u.RemoteCommID != p.LocalCommID || rtu.TID != req.TID {
		t.Errorf("RTU %s tid %#x", u, rtu.TID)
	}
}

// TestCapturePerftestQPs checks the REQs and REPs of perftest's data
// connections against the QPNs perftest printed, and their starting PSNs
// against the data packets that followed: each side's starting PSN is the
// PSN its peer's first packet carries. (perftest -R first connects a
// second QP for its own message exchange, and prints a PSN of its own that
// the CM overrides.)
func TestCapturePerftestQPs(t *testing.T) {
	// From results/pair-capture-socket/client/pt-*.client.txt: local is
	// the client (active side, 10.77.0.2), remote the server.
	runs := []struct {
		name                string
		localQPN, remoteQPN uint32
		reqFrame, repFrame  int
		dreqFrame           int
		pingPong            bool
	}{
		{"send_bw_R", 0x16, 0x12, 32, 33, 75, false},
		{"send_lat_R", 0x19, 0x14, 104, 105, 163, true},
	}
	all, err := capture.Read(filepath.Join("..", "testdata", "rxe-cm1.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	byFrame := frames(t, "rxe-cm1.pcap")
	// the first request to destQP between the REP and the connection's DREQ
	firstPSN := func(destQP uint32, after, before int) (uint32, bool) {
		for _, p := range all {
			if p.Frame > after && p.Frame < before && p.BTH.DestQP == destQP && p.BTH.Opcode.IsRequest() {
				return uint32(p.BTH.PSN), true
			}
		}
		return 0, false
	}
	for _, r := range runs {
		req, err := mad.Decode(byFrame[r.reqFrame].Payload)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := mad.Decode(byFrame[r.repFrame].Payload)
		if err != nil {
			t.Fatal(err)
		}
		q, p := req.Msg.(*mad.REQ), rep.Msg.(*mad.REP)
		if q.LocalQPN != r.localQPN || p.LocalQPN != r.remoteQPN {
			t.Errorf("%s: REQ qpn %#x, REP qpn %#x; perftest printed local %#x remote %#x",
				r.name, q.LocalQPN, p.LocalQPN, r.localQPN, r.remoteQPN)
		}
		if psn, ok := firstPSN(p.LocalQPN, r.repFrame, r.dreqFrame); !ok || psn != p.StartingPSN {
			t.Errorf("%s: first request to the passive QP %#x has PSN %#x (found %v), REP starting PSN %#x", r.name, p.LocalQPN, psn, ok, p.StartingPSN)
		}
		// Only the latency test sends requests back to the active side.
		if psn, ok := firstPSN(q.LocalQPN, r.repFrame, r.dreqFrame); r.pingPong && (!ok || psn != q.StartingPSN) {
			t.Errorf("%s: first request to the active QP %#x has PSN %#x (found %v), REQ starting PSN %#x", r.name, q.LocalQPN, psn, ok, q.StartingPSN)
		} else if !r.pingPong && ok {
			t.Errorf("%s: a request to the active QP in a one-way test (PSN %#x)", r.name, psn)
		}
	}
}
