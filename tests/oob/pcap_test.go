package oob

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"testing"
)

// This file holds a minimal pcap reader for the tests: classic pcap files
// with Ethernet frames carrying IPv4/TCP, each direction of each TCP
// connection reassembled into its byte stream.

// tcpStream is one TCP connection of a capture.
type tcpStream struct {
	client, server netip.AddrPort
	toServer       []byte // client -> server payload, in sequence order
	toClient       []byte // server -> client payload, in sequence order
}

// tcpSegment is one captured TCP segment's payload and where it belongs.
type tcpSegment struct {
	seq     uint32
	payload []byte
}

// tcpHalf is one direction of a connection while it is being collected.
type tcpHalf struct {
	isn     uint32
	haveISN bool
	segs    []tcpSegment
}

// reassemble orders the segments by sequence number relative to the ISN,
// drops retransmitted bytes, and fails on a hole.
func (h *tcpHalf) reassemble() ([]byte, error) {
	base := h.isn + 1
	segs := slices.Clone(h.segs)
	slices.SortStableFunc(segs, func(a, b tcpSegment) int {
		return int(int64(a.seq-base) - int64(b.seq-base))
	})
	var out []byte
	for _, s := range segs {
		rel := int(s.seq - base)
		switch {
		case rel > len(out):
			return nil, fmt.Errorf("hole of %d bytes at stream offset %d", rel-len(out), len(out))
		case rel+len(s.payload) <= len(out):
			continue // retransmission
		}
		out = append(out, s.payload[len(out)-rel:]...)
	}
	return out, nil
}

// readTCPStreams parses a pcap file and returns its TCP connections that
// carried data, in the order their SYNs appear.
func readTCPStreams(t *testing.T, path string) []tcpStream {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read capture: %v", err)
	}
	if len(data) < 24 {
		t.Fatalf("capture %s: %d bytes, too short for a pcap header", path, len(data))
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(data) {
	case 0xa1b2c3d4, 0xa1b23c4d: // microsecond or nanosecond timestamps
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		t.Fatalf("capture %s: not a classic pcap file (magic %#x)", path, data[:4])
	}
	if lt := bo.Uint32(data[20:]) & 0xffff; lt != 1 {
		t.Fatalf("capture %s: link type %d, want 1 (Ethernet)", path, lt)
	}

	type flow struct{ src, dst netip.AddrPort }
	type conn struct {
		client, server netip.AddrPort
		halves         map[flow]*tcpHalf
	}
	var conns []*conn
	byFlow := map[flow]*conn{}

	off := 24
	for rec := 1; off < len(data); rec++ {
		if off+16 > len(data) {
			t.Fatalf("record %d: truncated header", rec)
		}
		incl := int(bo.Uint32(data[off+8:]))
		off += 16
		if off+incl > len(data) {
			t.Fatalf("record %d: truncated packet", rec)
		}
		pkt := data[off : off+incl]
		off += incl

		if len(pkt) < 14 {
			continue
		}
		etherType := binary.BigEndian.Uint16(pkt[12:])
		l3 := pkt[14:]
		if etherType == 0x8100 && len(pkt) >= 18 { // one VLAN tag
			etherType = binary.BigEndian.Uint16(pkt[16:])
			l3 = pkt[18:]
		}
		if etherType != 0x0800 || len(l3) < 20 || l3[0]>>4 != 4 {
			continue
		}
		ihl := int(l3[0]&0xf) * 4
		total := int(binary.BigEndian.Uint16(l3[2:]))
		if l3[9] != 6 || ihl < 20 || total < ihl || total > len(l3) {
			continue
		}
		if binary.BigEndian.Uint16(l3[6:])&0x3fff != 0 {
			t.Fatalf("record %d: IP fragment; not supported", rec)
		}
		src := netip.AddrFrom4([4]byte(l3[12:16]))
		dst := netip.AddrFrom4([4]byte(l3[16:20]))
		tcp := l3[ihl:total]
		if len(tcp) < 20 {
			t.Fatalf("record %d: truncated TCP header", rec)
		}
		doff := int(tcp[12]>>4) * 4
		if doff < 20 || doff > len(tcp) {
			t.Fatalf("record %d: bad TCP data offset %d", rec, doff)
		}
		f := flow{
			src: netip.AddrPortFrom(src, binary.BigEndian.Uint16(tcp[0:])),
			dst: netip.AddrPortFrom(dst, binary.BigEndian.Uint16(tcp[2:])),
		}
		seq := binary.BigEndian.Uint32(tcp[4:])
		flags := tcp[13]
		syn, ack := flags&0x02 != 0, flags&0x10 != 0
		payload := tcp[doff:]

		if syn && !ack { // a new connection (a reused 4-tuple starts afresh)
			c := &conn{client: f.src, server: f.dst, halves: map[flow]*tcpHalf{}}
			conns = append(conns, c)
			byFlow[f] = c
			byFlow[flow{f.dst, f.src}] = c
		}
		c := byFlow[f]
		if c == nil {
			continue // connection started before the capture
		}
		h := c.halves[f]
		if h == nil {
			h = &tcpHalf{}
			c.halves[f] = h
		}
		if syn {
			h.isn, h.haveISN = seq, true
		}
		if len(payload) > 0 {
			if !h.haveISN {
				t.Fatalf("record %d: data before the SYN of %v -> %v", rec, f.src, f.dst)
			}
			h.segs = append(h.segs, tcpSegment{seq, payload})
		}
	}

	var out []tcpStream
	for _, c := range conns {
		s := tcpStream{client: c.client, server: c.server}
		for f, h := range c.halves {
			b, err := h.reassemble()
			if err != nil {
				t.Fatalf("%v -> %v: %v", f.src, f.dst, err)
			}
			if f.src == c.client {
				s.toServer = b
			} else {
				s.toClient = b
			}
		}
		if len(s.toServer) > 0 || len(s.toClient) > 0 {
			out = append(out, s)
		}
	}
	return out
}

func TestTCPHalfReassemble(t *testing.T) {
	h := tcpHalf{isn: 0xfffffffe, haveISN: true} // stream starts at 0xffffffff: wraps
	h.segs = []tcpSegment{
		{0x00000003, []byte("efg")},
		{0xffffffff, []byte("abcd")},
		{0x00000001, []byte("cd")},  // pure retransmission
		{0x00000004, []byte("fgh")}, // overlaps the end
	}
	got, err := h.reassemble()
	if err != nil || string(got) != "abcdefgh" {
		t.Errorf("reassemble = %q, %v; want \"abcdefgh\"", got, err)
	}
	h.segs = []tcpSegment{{0xffffffff, []byte("ab")}, {0x00000005, []byte("x")}}
	if _, err := h.reassemble(); err == nil {
		t.Error("reassemble with a hole succeeded")
	}
}
