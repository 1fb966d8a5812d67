package mad_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// TestReserved checks which bits of each message are reserved against the
// IBTA message tables: every other bit belongs to exactly one field (the
// encoder panics on overlaps when it records the layout).
func TestReserved(t *testing.T) {
	cases := []struct {
		attr mad.AttrID
		want map[int]byte // data byte offset -> reserved bits
	}{
		{mad.AttrREQ, map[int]byte{4: 0xff, 5: 0xff, 6: 0xff, 7: 0xff, 24: 0xff, 25: 0xff, 26: 0xff, 27: 0xff,
			90: 0x0f, 91: 0xc0, 94: 0x07, 95: 0x07, 134: 0x0f, 135: 0xc0, 138: 0x07, 139: 0x03}},
		{mad.AttrMRA, map[int]byte{8: 0x3f, 9: 0x07}},
		{mad.AttrREJ, map[int]byte{8: 0x3f, 9: 0x01}},
		{mad.AttrREP, map[int]byte{15: 0xff, 19: 0xff, 23: 0xff, 27: 0x0f}},
		{mad.AttrRTU, map[int]byte{}},
		{mad.AttrDREQ, map[int]byte{11: 0xff}},
		{mad.AttrDREP, map[int]byte{}},
		{mad.AttrSIDRREQ, map[int]byte{6: 0xff, 7: 0xff}},
		{mad.AttrSIDRREP, map[int]byte{6: 0xff, 7: 0xff, 11: 0xff}},
	}
	for _, c := range cases {
		got := mad.Reserved(c.attr)
		if len(got) != mad.DataSize {
			t.Fatalf("%s: reserved mask of %d bytes", c.attr, len(got))
		}
		for i, b := range got {
			if b != c.want[i] {
				t.Errorf("%s: data byte %d reserved bits %#02x, want %#02x", c.attr, i, b, c.want[i])
			}
		}
	}
	if mad.Reserved(mad.AttrLAP) != nil {
		t.Error("LAP has a layout; this package does not decode it")
	}
}

func sample() []mad.Message {
	g1 := verbsio.GIDFromAddr(netip.MustParseAddr("192.0.2.1"))
	g2 := verbsio.GIDFromAddr(netip.MustParseAddr("2001:db8::2"))
	req := &mad.REQ{LocalCommID: 0xdeadbeef, ServiceID: 0x0000000001064a69, LocalCAGUID: 0x0102030405060708,
		LocalQKey: 0x11111111, LocalQPN: 0xabcdef, ResponderResources: 16, LocalEECN: 0x123456, InitiatorDepth: 15,
		RemoteEECN: 0x654321, RemoteCMResponseTimeout: 31, TransportServiceType: mad.TransportUC, EndToEndFlowControl: true,
		StartingPSN: 0xfedcba, LocalCMResponseTimeout: 17, RetryCount: 5, PKey: 0x8001, PathMTU: 5, RDCExists: true,
		RNRRetryCount: 6, MaxCMRetries: 14, SRQ: true, ExtendedTransportType: 1,
		Primary: mad.Path{LocalLID: 1, RemoteLID: 2, LocalGID: g1, RemoteGID: g2, FlowLabel: 0xfffff, PacketRate: 63,
			TrafficClass: 0xb8, HopLimit: 64, SL: 15, SubnetLocal: true, LocalACKTimeout: 31},
		Alternate:    mad.Path{LocalLID: 3, RemoteLID: 4, LocalGID: g2, RemoteGID: g1, FlowLabel: 1, PacketRate: 1, SL: 1, LocalACKTimeout: 1},
		SAPSupported: true}
	copy(req.PrivateData[:], "private data of a REQ")
	rej := &mad.REJ{LocalCommID: 1, RemoteCommID: 2, MessageRejected: mad.MsgREP, RejectedInfoLength: 72, Reason: mad.RejStaleConn}
	rej.ARI[71] = 0xaa
	rej.PrivateData[147] = 0xbb
	return []mad.Message{
		req,
		&mad.MRA{LocalCommID: 7, RemoteCommID: 8, MessageMRAed: mad.MsgOther, ServiceTimeout: 24},
		rej,
		&mad.REP{LocalCommID: 3, RemoteCommID: 4, LocalQKey: 5, LocalQPN: 0xffffff, LocalEECN: 6, StartingPSN: 0xffffff,
			ResponderResources: 255, InitiatorDepth: 254, TargetACKDelay: 31, FailoverAccepted: 3, EndToEndFlowControl: true,
			RNRRetryCount: 7, SRQ: true, LocalCAGUID: ^uint64(0)},
		&mad.RTU{LocalCommID: 9, RemoteCommID: 10},
		&mad.DREQ{LocalCommID: 11, RemoteCommID: 12, RemoteQPN: 0x800001},
		&mad.DREP{LocalCommID: 13, RemoteCommID: 14},
		&mad.SIDRREQ{RequestID: 15, PKey: 0xffff, ServiceID: 0x0000000001111c06},
		&mad.SIDRREP{RequestID: 16, Status: mad.SIDRRedirect, AdditionalInfoLength: 72, QPN: 0x10, ServiceID: 17, QKey: 0x01234567},
	}
}

// TestRoundTrip encodes a message with every field set and decodes it.
func TestRoundTrip(t *testing.T) {
	for _, msg := range sample() {
		m := mad.MAD{Header: mad.CMHeader(msg.Attr(), 0x0000000212345678), Msg: msg}
		b, err := mad.Append(nil, &m)
		if err != nil {
			t.Fatalf("%s: %v", msg.Attr(), err)
		}
		if len(b) != mad.Size {
			t.Fatalf("%s: %d bytes", msg.Attr(), len(b))
		}
		if !bytes.Equal(b[:4], []byte{1, 7, 2, 3}) || b[16] != 0 || b[17] != byte(msg.Attr()) {
			t.Errorf("%s: header % x", msg.Attr(), b[:mad.HeaderSize])
		}
		got, err := mad.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", msg.Attr(), err)
		}
		if got.Header != m.Header {
			t.Errorf("%s: header %+v, want %+v", msg.Attr(), got.Header, m.Header)
		}
		if got.Msg.String() != msg.String() || !equalMsg(got.Msg, msg) {
			t.Errorf("%s: decoded %+v, want %+v", msg.Attr(), got.Msg, msg)
		}
	}
}

func equalMsg(a, b mad.Message) bool {
	x, _ := mad.Append(nil, &mad.MAD{Msg: a})
	y, _ := mad.Append(nil, &mad.MAD{Msg: b})
	switch a := a.(type) {
	case *mad.REQ:
		return *a == *b.(*mad.REQ)
	case *mad.REP:
		return *a == *b.(*mad.REP)
	case *mad.REJ:
		return *a == *b.(*mad.REJ)
	case *mad.SIDRREP:
		return *a == *b.(*mad.SIDRREP)
	}
	return bytes.Equal(x, y)
}

// TestEncodeRange refuses values wider than their field, naming the field.
func TestEncodeRange(t *testing.T) {
	cases := []struct {
		msg   mad.Message
		field string
	}{
		{&mad.REQ{LocalQPN: 1 << 24}, "LocalQPN"},
		{&mad.REQ{StartingPSN: 1 << 24}, "StartingPSN"},
		{&mad.REQ{PathMTU: 16}, "PathMTU"},
		{&mad.REQ{RetryCount: 8}, "RetryCount"},
		{&mad.REQ{Primary: mad.Path{FlowLabel: 1 << 20}}, "FlowLabel"},
		{&mad.REQ{Primary: mad.Path{LocalACKTimeout: 32}}, "LocalACKTimeout"},
		{&mad.MRA{ServiceTimeout: 32}, "ServiceTimeout"},
		{&mad.REJ{RejectedInfoLength: 128}, "RejectedInfoLength"},
		{&mad.REP{RNRRetryCount: 8}, "RNRRetryCount"},
		{&mad.DREQ{RemoteQPN: 1 << 24}, "RemoteQPN"},
		{&mad.SIDRREP{QPN: 1 << 24}, "QPN"},
	}
	for _, c := range cases {
		_, err := mad.Append(nil, &mad.MAD{Msg: c.msg})
		if !errors.Is(err, mad.ErrRange) || !bytes.Contains([]byte(err.Error()), []byte(c.field)) {
			t.Errorf("%s with a wide %s: %v", c.msg.Attr(), c.field, err)
		}
	}
	if _, err := mad.Append(nil, &mad.MAD{Header: mad.Header{AttrID: mad.AttrREP}, Msg: &mad.REQ{}}); !errors.Is(err, mad.ErrRange) {
		t.Errorf("header REP with a REQ message: %v", err)
	}
	if err := mad.Encode(make([]byte, 255), &mad.MAD{Msg: &mad.RTU{}}); !errors.Is(err, mad.ErrShortBuffer) {
		t.Errorf("short buffer: %v", err)
	}
}

// TestDecodeErrors: what Linux's MAD layer and CM drop, with the reason.
func TestDecodeErrors(t *testing.T) {
	good, err := mad.Append(nil, &mad.MAD{Header: mad.CMHeader(mad.AttrRTU, 1), Msg: &mad.RTU{}})
	if err != nil {
		t.Fatal(err)
	}
	mod := func(i int, v byte) []byte {
		b := append([]byte(nil), good...)
		b[i] = v
		return b
	}
	cases := []struct {
		name string
		b    []byte
		kind error
	}{
		{"empty", nil, mad.ErrTruncated},
		{"header only", good[:mad.HeaderSize], mad.ErrTruncated},
		{"one byte short", good[:mad.Size-1], mad.ErrTruncated},
		{"one byte long", append(append([]byte(nil), good...), 0), mad.ErrLength},
		{"base version 0", mod(0, 0), mad.ErrHeader},
		{"SA class", mod(1, 0x03), mad.ErrHeader},
		{"class version 1", mod(2, 1), mad.ErrHeader},
		{"method Get", mod(3, 0x01), mad.ErrHeader},
		{"ClassPortInfo", mod(17, 0x01), mad.ErrAttr},
		{"LAP", mod(17, 0x19), mad.ErrAttr},
		{"attribute 0x99", mod(17, 0x99), mad.ErrAttr},
	}
	for _, c := range cases {
		_, err := mad.Decode(c.b)
		if !errors.Is(err, c.kind) {
			t.Errorf("%s: %v, want %v", c.name, err, c.kind)
		}
	}
	if _, err := mad.Decode(good); err != nil {
		t.Errorf("the unmodified MAD: %v", err)
	}
}

// TestDecodeIgnoresReserved: reserved bits a sender set do not change the
// fields, and re-encoding clears them.
func TestDecodeIgnoresReserved(t *testing.T) {
	for _, msg := range sample() {
		b, err := mad.Append(nil, &mad.MAD{Header: mad.CMHeader(msg.Attr(), 5), Msg: msg})
		if err != nil {
			t.Fatal(err)
		}
		dirty := append([]byte(nil), b...)
		for i, r := range mad.Reserved(msg.Attr()) {
			dirty[mad.HeaderSize+i] |= r
		}
		m, err := mad.Decode(dirty)
		if err != nil {
			t.Fatal(err)
		}
		out, err := mad.Append(nil, &m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, b) {
			t.Errorf("%s: reserved bits changed the decoding", msg.Attr())
		}
	}
}

func TestCMAHeader(t *testing.T) {
	cases := []mad.CMAHeader{
		{IPVersion: 4, Port: 0xbe95, Src: netip.MustParseAddr("10.77.0.2"), Dst: netip.MustParseAddr("10.77.0.1")},
		{IPVersion: 6, Port: 1, Src: netip.MustParseAddr("fe80::5054:ff:fe77:2"), Dst: netip.MustParseAddr("2001:db8::1")},
	}
	for _, h := range cases {
		var b [mad.CMAHeaderLen]byte
		if err := h.Marshal(b[:]); err != nil {
			t.Fatal(err)
		}
		if b[0] != 0 || b[1] != h.IPVersion<<4 {
			t.Errorf("%+v: version bytes % x", h, b[:2])
		}
		if h.IPVersion == 4 && !bytes.Equal(b[4:16], make([]byte, 12)) {
			t.Errorf("IPv4 source is not after 12 zero bytes: % x", b[4:20])
		}
		var got mad.CMAHeader
		if err := got.Unmarshal(b[:]); err != nil || got != h {
			t.Errorf("%+v: decoded %+v, %v", h, got, err)
		}
	}
	bad := []struct {
		h    mad.CMAHeader
		kind error
	}{
		{mad.CMAHeader{IPVersion: 5, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}, mad.ErrRange},
		{mad.CMAHeader{IPVersion: 4, Src: netip.MustParseAddr("::1"), Dst: netip.MustParseAddr("10.0.0.2")}, mad.ErrRange},
		{mad.CMAHeader{IPVersion: 6, Src: netip.MustParseAddr("::1")}, mad.ErrRange},
	}
	for _, c := range bad {
		var b [mad.CMAHeaderLen]byte
		if err := c.h.Marshal(b[:]); !errors.Is(err, c.kind) {
			t.Errorf("%+v: %v", c.h, err)
		}
	}
	var h mad.CMAHeader
	if err := h.Unmarshal([]byte{0, 0x40}); !errors.Is(err, mad.ErrTruncated) {
		t.Errorf("short: %v", err)
	}
	b := make([]byte, mad.CMAHeaderLen)
	b[0], b[1] = 1, 0x40
	if err := h.Unmarshal(b); !errors.Is(err, mad.ErrRange) {
		t.Errorf("version 1: %v", err)
	}
	b[0], b[1] = 0, 0x50
	if err := h.Unmarshal(b); !errors.Is(err, mad.ErrRange) {
		t.Errorf("IP version 5: %v", err)
	}
}

func TestServiceID(t *testing.T) {
	if got := mad.ServiceID(mad.PortSpaceTCP, 18515); got != 0x0000000001064853 {
		t.Errorf("TCP 18515: %#x", got)
	}
	if got := mad.ServiceID(mad.PortSpaceUDP, 7174); got != 0x0000000001111c06 {
		t.Errorf("UDP 7174: %#x", got)
	}
	ps, port, ok := mad.ServicePort(0x0000000001064853)
	if !ok || ps != mad.PortSpaceTCP || port != 18515 || ps.String() != "TCP" {
		t.Errorf("split: %v %d %v", ps, port, ok)
	}
	if _, _, ok := mad.ServicePort(0x1000000001064853); ok {
		t.Error("an IB service ID split as an IP one")
	}
}

func TestTimeouts(t *testing.T) {
	if d := mad.Duration(0); d != 4096*time.Nanosecond {
		t.Errorf("Duration(0) = %v", d)
	}
	if d := mad.Duration(20); d != 4096*time.Nanosecond<<20 {
		t.Errorf("Duration(20) = %v", d)
	}
	for _, c := range []struct {
		t    uint8
		want time.Duration
	}{{0, time.Millisecond}, {8, time.Millisecond}, {9, 2 * time.Millisecond}, {18, 1024 * time.Millisecond},
		{20, 4096 * time.Millisecond}, {24, 65536 * time.Millisecond}} {
		if got := mad.LinuxTimeout(c.t); got != c.want {
			t.Errorf("LinuxTimeout(%d) = %v, want %v", c.t, got, c.want)
		}
	}
	// cm_ack_timeout: the larger of the terms, plus one when the other is
	// within a factor of two.
	for _, c := range []struct{ delay, life, want uint8 }{
		{15, 18, 19}, // rxe over RoCE, seen in the captures
		{15, 16, 17},
		{15, 14, 16}, // life+1 = 15 = delay: both equal, round up
		{15, 13, 16}, // life+1 = 14 within a factor of two of 15
		{15, 12, 15},
		{0, 0, 2},
		{31, 31, 31},
	} {
		if got := mad.ACKTimeout(c.delay, c.life); got != c.want {
			t.Errorf("ACKTimeout(%d, %d) = %d, want %d", c.delay, c.life, got, c.want)
		}
	}
}

func TestStrings(t *testing.T) {
	if s := mad.RejInvalidServiceID.String(); s != "invalid service ID" {
		t.Error(s)
	}
	if s := mad.RejectReason(99).String(); s != "unrecognized reason" {
		t.Error(s)
	}
	if s := mad.AttrSIDRREP.String(); s != "SIDR_REP" {
		t.Error(s)
	}
	if s := mad.AttrID(0x77).String(); s != "attr 0x0077" {
		t.Error(s)
	}
	if s := mad.SIDRUnsupported.String(); s != "service ID not supported" {
		t.Error(s)
	}
}
