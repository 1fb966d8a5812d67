package ibcm

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// FuzzReceive drives a listening CM with arbitrary MADs, arbitrary
// owner operations and time. The input is a script of one-byte opcodes and
// their operands: raw bytes as a MAD, a well-formed message of a chosen type
// whose fields come from the input but whose communication IDs name live
// IDs (so that the fuzzer reaches every state), time passing, and the
// owner's answers. After every step the CM must not have panicked, must
// only send MADs that decode, must keep its tables consistent with the
// states of its IDs, and must count every MAD it was given.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 1, 3, 2, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 200, 2, 200})
	f.Add([]byte{1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 3, 1, 3, 3, 2, 255, 2, 255, 2, 255})
	f.Add([]byte{1, 7, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 6, 3, 5})
	f.Add([]byte{0, 40, 1, 7, 2, 3})
	f.Fuzz(func(t *testing.T, script []byte) {
		now := t0
		c := New(Config{CAGUID: 0xb, ACKDelay: 15, HiTID: 1, FirstID: 1})
		for _, s := range []uint64{sid, mad.ServiceID(mad.PortSpaceUDP, 7174)} {
			if err := c.Listen(c.CreateID(nil), s); err != nil {
				t.Fatal(err)
			}
		}
		peer := verbsio.MADAddr{GID: gidA}
		var live []*ID
		fed := uint64(0)
		take := func(n int) []byte {
			if n > len(script) {
				n = len(script)
			}
			b := script[:n]
			script = script[n:]
			return b
		}
		one := func() byte {
			if b := take(1); len(b) == 1 {
				return b[0]
			}
			return 0
		}
		u32 := func(b []byte, i int) uint32 {
			if len(b) >= i+4 {
				return binary.BigEndian.Uint32(b[i:])
			}
			return 0
		}
		pick := func(b byte) uint32 {
			if len(live) == 0 || b&1 == 0 {
				return uint32(b)
			}
			return live[int(b>>1)%len(live)].localID
		}
		for len(script) > 0 {
			op := one()
			switch op % 4 {
			case 0: // raw bytes
				n := int(one()) * 2
				c.Receive(now, gidB, peer, take(n))
				fed++
			case 1: // a well-formed message: type, two ID picks, fields
				b := take(12)
				var a [4]byte
				copy(a[:], b)
				var m mad.Message
				local, remote := uint32(0), uint32(0)
				if len(b) > 2 {
					local, remote = u32(b, 4), pick(b[2])
				}
				switch a[1] % 9 {
				case 0:
					m = &mad.REQ{LocalCommID: local, ServiceID: sid, LocalCAGUID: 0xa, LocalQPN: u32(b, 8) & 0xffffff,
						TransportServiceType: a[3] & 3, PathMTU: 3, MaxCMRetries: a[3] >> 4, LocalCMResponseTimeout: 9}
				case 1:
					m = &mad.MRA{LocalCommID: local, RemoteCommID: remote, MessageMRAed: a[3] & 3, ServiceTimeout: a[3] >> 3}
				case 2:
					m = &mad.REJ{LocalCommID: local, RemoteCommID: remote, MessageRejected: a[3] & 3, Reason: mad.RejectReason(a[3] >> 2)}
				case 3:
					m = &mad.REP{LocalCommID: local, RemoteCommID: remote, LocalQPN: u32(b, 8) & 0xffffff, LocalCAGUID: 0xa}
				case 4:
					m = &mad.RTU{LocalCommID: local, RemoteCommID: remote}
				case 5:
					m = &mad.DREQ{LocalCommID: local, RemoteCommID: remote, RemoteQPN: u32(b, 8) & 0xffffff}
				case 6:
					m = &mad.DREP{LocalCommID: local, RemoteCommID: remote}
				case 7:
					m = &mad.SIDRREQ{RequestID: local, ServiceID: mad.ServiceID(mad.PortSpaceUDP, 7174)}
				case 8:
					m = &mad.SIDRREP{RequestID: remote, QPN: u32(b, 8) & 0xffffff}
				}
				buf, err := mad.Append(nil, &mad.MAD{Header: mad.CMHeader(m.Attr(), uint64(local)), Msg: m})
				if err != nil {
					t.Fatal(err)
				}
				c.Receive(now, gidB, peer, buf)
				fed++
			case 2: // time passes
				now = now.Add(time.Duration(one()) * 100 * time.Millisecond)
				c.Advance(now)
				if d, ok := c.NextDeadline(); ok && !d.After(now) {
					t.Fatalf("deadline %v not after now %v after Advance", d, now)
				}
			case 3: // the owner acts on a live ID
				b := take(1)
				if len(live) == 0 || len(b) == 0 {
					continue
				}
				id := live[int(b[0]>>3)%len(live)]
				switch b[0] & 7 {
				case 0:
					_ = c.SendMRA(now, id, 24, true, nil)
				case 1:
					_ = c.SendREP(now, id, REPParam{QPN: 0x22, StartingPSN: 5})
				case 2:
					_ = c.SendRTU(now, id, nil)
				case 3:
					_ = c.SendDREQ(now, id, nil)
				case 4:
					_ = c.SendDREP(now, id, nil)
				case 5:
					c.Destroy(now, id)
				case 6:
					_ = c.Establish(now, id)
				case 7:
					_ = c.SendSIDRREP(now, id, SIDRREPParam{QPN: 1})
				}
				for _, s := range []verbsio.QPState{verbsio.QPStateInit, verbsio.QPStateRTR, verbsio.QPStateRTS} {
					_, _, _ = c.InitQPAttr(id, s)
				}
			}
			out, evs := c.Take()
			for _, p := range out {
				if _, err := mad.Decode(p.MAD[:]); err != nil {
					t.Fatalf("sent a MAD that does not decode: %v", err)
				}
			}
			for _, e := range evs {
				if e.ID == nil || e.ID.cm != c {
					t.Fatalf("event %s without its ID", e.Type)
				}
				if e.Type == REQReceived || e.Type == SIDRREQReceived {
					live = append(live, e.ID)
				}
			}
			checkTables(t, c)
			cn := c.Counters()
			var rx uint64
			for _, n := range cn.Rx {
				rx += n
			}
			if got := rx + cn.RxTruncated + cn.RxBadHeader + cn.RxUnknownAttr; got != fed {
				t.Fatalf("fed %d MADs, counted %d", fed, got)
			}
		}
	})
}

// checkTables: every entry of the duplicate and stale tables is a live ID
// in a state that has a remote side.
func checkTables(t *testing.T, c *CM) {
	t.Helper()
	for k, id := range c.remoteIDs {
		if id.destroyed || !id.inRemoteID || c.ids[id.localID] != id || k.id != id.remoteID {
			t.Fatalf("remote ID table entry %+v for ID %#x (%s, destroyed %v)", k, id.localID, id.state, id.destroyed)
		}
		switch id.state {
		case REQRcvd, MRAREQSent, REPSent, MRAREPRcvd, REPRcvd, MRAREPSent, Established, DREQSent, DREQRcvd:
		default:
			t.Fatalf("ID %#x in the remote ID table in state %s", id.localID, id.state)
		}
	}
	for k, id := range c.remoteQPNs {
		if id.destroyed || !id.inRemoteQPN || k.id != id.remoteQPN {
			t.Fatalf("remote QPN table entry %+v for ID %#x", k, id.localID)
		}
	}
	for k, id := range c.sidrs {
		if id.destroyed || id.state != SIDRREQRcvd || id.sidr == nil || *id.sidr != k {
			t.Fatalf("SIDR table entry %+v for ID %#x (%s)", k, id.localID, id.state)
		}
	}
	for l, id := range c.ids {
		if id.localID != l || id.destroyed {
			t.Fatalf("ID table entry %#x for ID %#x (destroyed %v)", l, id.localID, id.destroyed)
		}
		if id.pending != nil && id.state == Idle {
			t.Fatalf("idle ID %#x with a pending %s", l, id.pending.pkt.Attr)
		}
	}
}
