package roce

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rperf/rperf/internal/psn"
)

// samplePacket returns a packet of opcode op with every header its layout
// names filled with distinct values, and the given payload.
func samplePacket(op Opcode, payload []byte) Packet {
	p := Packet{BTH: BTH{Opcode: op, SE: true, PKey: DefaultPKey, BECN: true, DestQP: 0xabcdef, AckReq: true, PSN: 0xfffffe}}
	l := op.Layout()
	for i := 0; i < l.NumExt; i++ {
		switch l.Ext[i] {
		case ExtRETH:
			p.RETH = RETH{VA: 0x7f0000001000, RKey: 0x1234, DMALen: 8192}
		case ExtAETH:
			p.AETH = AETH{Syndrome: ACKSyndrome(3), MSN: 0x10203}
		case ExtAtomicETH:
			p.AtomicETH = AtomicETH{VA: 0x7f0000002000, RKey: 0x5678, SwapAdd: 0xffffffffffffffff, Compare: 42}
		case ExtAtomicAck:
			p.AtomicAckETH = AtomicAckETH{OrigData: 0x8000000000000001}
		case ExtImmDt:
			p.ImmDt = ImmDt{Data: 0x01020304}
		case ExtDETH:
			p.DETH = DETH{QKey: 0x11111111, SrcQP: 0x77}
		case ExtIETH:
			p.IETH = IETH{RKey: 0x9abc}
		case ExtFETH:
			p.FETH = FETH{PlacementType: 1, Selectivity: 1}
		case ExtCNPPad:
			p.CNPPad = CNPPad{}
		}
	}
	if op.HasPayload() {
		p.Payload = payload
		p.BTH.PadCnt = uint8(PadLen(len(payload)))
	}
	p.ICRC = 0x89abcdef
	return p
}

func payloadOf(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}

func TestPacketRoundTrip(t *testing.T) {
	for _, op := range Opcodes() {
		lens := []int{0}
		if op.HasPayload() {
			lens = []int{0, 1, 2, 3, 4, 5, 255, 1024, 4095}
		}
		for _, n := range lens {
			p := samplePacket(op, payloadOf(n))
			want := p.Len()
			if got := op.Layout().HeaderLen + n + PadLen(n) + ICRCLen; want != got {
				t.Fatalf("%v/%d: Len() = %d, want %d", op, n, want, got)
			}
			buf := make([]byte, want+8)
			m, err := p.Encode(buf)
			if err != nil {
				t.Fatalf("%v/%d: Encode: %v", op, n, err)
			}
			if m != want || m%4 != 0 {
				t.Fatalf("%v/%d: Encode wrote %d bytes, want %d", op, n, m, want)
			}
			var q Packet
			if err := q.Decode(buf[:m]); err != nil {
				t.Fatalf("%v/%d: Decode: %v", op, n, err)
			}
			if diff := cmp.Diff(p, q); diff != "" {
				t.Errorf("%v/%d: round trip (-want +got):\n%s", op, n, diff)
			}
			// The pad bytes are zero and the ICRC is little-endian.
			end := m - ICRCLen
			for _, c := range buf[end-PadLen(n) : end] {
				if c != 0 {
					t.Errorf("%v/%d: non-zero pad byte", op, n)
				}
			}
			if StoredICRC(buf[:m]) != p.ICRC || buf[end] != 0xef {
				t.Errorf("%v/%d: ICRC bytes % x", op, n, buf[end:m])
			}
		}
	}
}

// TestPacketEncodeSetsPadCnt checks that Encode derives PadCnt from the
// payload, whatever the field says.
func TestPacketEncodeSetsPadCnt(t *testing.T) {
	p := samplePacket(RCSendOnly, payloadOf(5))
	p.BTH.PadCnt = 0
	buf := make([]byte, p.Len())
	if _, err := p.Encode(buf); err != nil {
		t.Fatal(err)
	}
	if got := buf[1] >> 4 & 3; got != 3 {
		t.Errorf("PadCnt on the wire = %d, want 3", got)
	}
}

func TestPacketDecodeErrors(t *testing.T) {
	// A valid RC_SEND_ONLY with 5 payload bytes (PadCnt 3), 24 bytes long.
	good := make([]byte, 24)
	p := samplePacket(RCSendOnly, payloadOf(5))
	if _, err := p.Encode(good); err != nil {
		t.Fatal(err)
	}
	ack := make([]byte, 20)
	a := samplePacket(RCAck, nil)
	if _, err := a.Encode(ack); err != nil {
		t.Fatal(err)
	}
	mod := func(b []byte, f func([]byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTooShort},
		{"15 bytes", good[:15], ErrTooShort},
		{"unknown opcode", mod(good, func(b []byte) []byte { b[0] = 0x15; return b }), ErrUnknownOpcode},
		{"rd opcode", mod(good, func(b []byte) []byte { b[0] = 0x44; return b }), ErrUnknownOpcode},
		{"tver 1", mod(good, func(b []byte) []byte { b[1] |= 1; return b }), ErrTVer},
		{"not multiple of 4", append(append([]byte(nil), good...), 0), ErrLength},
		{"ack without aeth", mod(ack, func(b []byte) []byte { return b[:16] }), ErrTooShort},
		{"ack with trailing data", append(append([]byte(nil), ack...), 0, 0, 0, 0), ErrLength},
		{"ack with pad", mod(ack, func(b []byte) []byte { b[1] |= 0x10; return b }), ErrPadCount},
		{"pad beyond payload", func() []byte {
			b := make([]byte, 16)
			q := samplePacket(RCSendOnly, nil)
			q.Encode(b)
			b[1] |= 0x30
			return b
		}(), ErrPadCount},
		{"write first without reth", func() []byte {
			b := make([]byte, 20)
			q := samplePacket(RCSendOnly, payloadOf(4))
			q.Encode(b)
			b[0] = byte(RCWriteFirst)
			return b
		}(), ErrTooShort},
	}
	for _, tt := range tests {
		var q Packet
		err := q.Decode(tt.in)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Op == "" || e.Error()[:6] != "roce: ") {
			t.Errorf("%s: err %q is not a well-formed *Error", tt.name, err)
		}
	}
	var q Packet
	if err := q.Decode(good); err != nil || !bytes.Equal(q.Payload, payloadOf(5)) {
		t.Errorf("good packet: err %v payload % x", err, q.Payload)
	}
}

func TestPacketEncodeErrors(t *testing.T) {
	tests := []struct {
		name string
		p    Packet
		buf  int
		want error
	}{
		{"unknown opcode", Packet{BTH: BTH{Opcode: 0x15}}, 64, ErrUnknownOpcode},
		{"payload on ack", Packet{BTH: BTH{Opcode: RCAck}, Payload: []byte{1}}, 64, ErrLength},
		{"short buffer", samplePacket(RCSendOnly, payloadOf(8)), 23, ErrShortBuffer},
		{"psn range", Packet{BTH: BTH{Opcode: RCSendOnly, PSN: psn.Modulus}}, 64, ErrRange},
		{"msn range", Packet{BTH: BTH{Opcode: RCAck}, AETH: AETH{MSN: 1 << 24}}, 64, ErrRange},
		{"too long", Packet{BTH: BTH{Opcode: RCSendOnly}, Payload: make([]byte, 0xffff)}, 0x20000, ErrLength},
	}
	for _, tt := range tests {
		_, err := tt.p.Encode(make([]byte, tt.buf))
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	if n := (&Packet{BTH: BTH{Opcode: 0x15}}).Len(); n != 0 {
		t.Errorf("Len of unknown opcode = %d, want 0", n)
	}
}

func TestAllocs(t *testing.T) {
	frames := readFrames(t, rxeCapture)
	frame := frames[0]
	var f Frame
	if err := f.DecodeEthernet(frame); err != nil {
		t.Fatal(err)
	}
	transport := append([]byte(nil), f.Transport...)
	out := make([]byte, 2048)
	path := IPv4Path{Src: f.IPv4.Src, Dst: f.IPv4.Dst, SrcPort: f.UDP.SrcPort, DstPort: UDPPort, DontFragment: true}
	path6 := IPv6Path{SrcPort: 0xc000, DstPort: UDPPort}
	bad := append([]byte(nil), transport...)
	bad[0] = 0x15
	enc := f
	tests := []struct {
		name string
		fn   func()
	}{
		{"Packet.Decode", func() { var p Packet; _ = p.Decode(transport) }},
		{"Packet.Decode error", func() { var p Packet; _ = p.Decode(bad) }},
		{"Packet.Encode", func() { _, _ = f.Packet.Encode(out) }},
		{"Frame.DecodeEthernet", func() { var g Frame; _ = g.DecodeEthernet(frame) }},
		{"Frame.VerifyICRC", func() { _ = f.VerifyICRC() }},
		{"Frame.Encode", func() { _, _ = enc.Encode(out) }},
		{"ICRCRaw", func() { _, _ = ICRCRaw(f.IPHeader, f.UDPHeader, f.Transport) }},
		{"ICRCIPv4", func() { _, _ = ICRCIPv4(&f.IPv4, &f.UDP, transport) }},
		{"IPv4Path.Seal", func() { _ = path.Seal(7, transport) }},
		{"IPv6Path.Seal", func() { _ = path6.Seal(transport) }},
		{"BTH", func() { var h BTH; _ = h.Unmarshal(transport); _ = h.Marshal(out) }},
	}
	for _, tt := range tests {
		if n := testing.AllocsPerRun(200, tt.fn); n != 0 {
			t.Errorf("%s: %v allocations per run, want 0", tt.name, n)
		}
	}
}
