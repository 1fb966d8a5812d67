package roce

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ipv6Vector is an IPv6 RoCEv2 packet (no Ethernet) whose ICRC was computed
// independently of this package (Python zlib.crc32 over the masked headers,
// following the rule in shared/reference/roce.md): RC_SEND_ONLY with SE,
// FECN and AckReq set, payload "hello", traffic class 0xb8, flow label
// 0xabcde, hop limit 64, UDP checksum 0x1234.
const ipv6Vector = "6b8abcde0020114020010db800000000000000000000000120010db8000000000000000000000002" +
	"c12112b700201234" +
	"04b0ffff800000118012345668656c6c6f000000422b86ca"

func ipv6Addr(last byte) [16]byte {
	return [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: last}
}

func TestIPv6Vector(t *testing.T) {
	b := unhex(t, ipv6Vector)
	var f Frame
	if err := f.DecodeIP(b); err != nil {
		t.Fatal(err)
	}
	want := Frame{
		IPVersion: 6,
		IPv6:      IPv6{TrafficClass: 0xb8, FlowLabel: 0xabcde, PayloadLength: 32, NextHeader: ProtoUDP, HopLimit: 64, Src: ipv6Addr(1), Dst: ipv6Addr(2)},
		UDP:       UDP{SrcPort: 0xc121, DstPort: UDPPort, Length: 32, Checksum: 0x1234},
		Packet: Packet{
			BTH:     BTH{Opcode: RCSendOnly, SE: true, PadCnt: 3, PKey: 0xffff, FECN: true, DestQP: 0x11, AckReq: true, PSN: 0x123456},
			Payload: []byte("hello"),
			ICRC:    0xca862b42,
		},
	}
	got := f
	got.IPHeader, got.UDPHeader, got.Transport = nil, nil, nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decode (-want +got):\n%s", diff)
	}
	if !f.VerifyICRC() {
		crc, _ := f.ComputeICRC()
		t.Errorf("ICRC %#08x stored, %#08x computed", f.Packet.ICRC, crc)
	}
	if crc, err := ICRCIPv6(&f.IPv6, &f.UDP, f.Transport); err != nil || crc != 0xca862b42 {
		t.Errorf("ICRCIPv6 = %#08x, %v", crc, err)
	}
	path := IPv6Path{Src: ipv6Addr(1), Dst: ipv6Addr(2), SrcPort: 0xc121, DstPort: UDPPort}
	if crc, err := path.ICRC(f.Transport); err != nil || crc != 0xca862b42 {
		t.Errorf("IPv6Path.ICRC = %#08x, %v", crc, err)
	}
	// Re-encode from fields.
	g := want
	g.Packet.ICRC = 0
	out := make([]byte, g.Len())
	n, err := g.Encode(out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, out[:n]); diff != "" {
		t.Errorf("encode (-want +got):\n%s", diff)
	}
}

// TestIPv6Masking checks which IPv6 header bytes the ICRC covers.
func TestIPv6Masking(t *testing.T) {
	orig := unhex(t, ipv6Vector)
	masked := map[int]bool{0: true, 1: true, 2: true, 3: true, 7: true, 46: true, 47: true, 52: true}
	for pos := 0; pos < len(orig)-ICRCLen; pos++ {
		for _, bit := range []byte{0x01, 0x08, 0x80} {
			b := append([]byte(nil), orig...)
			b[pos] ^= bit
			crc, err := ICRCRaw(b[:40], b[40:48], b[48:])
			match := err == nil && crc == StoredICRC(b)
			want := masked[pos]
			if pos == 0 && bit&0xf0 != 0 {
				want = false // the version nibble is covered
			}
			if match != want {
				t.Errorf("flipping bit %#x of byte %d: ICRC match %v, want %v", bit, pos, match, want)
			}
		}
	}
}

func TestUDPChecksum(t *testing.T) {
	// Build an IPv6 frame, fill in its UDP checksum and check that the
	// one's-complement sum over pseudo-header and datagram is 0xffff.
	f := Frame{
		IPVersion: 6,
		IPv6:      IPv6{HopLimit: 64, Src: ipv6Addr(1), Dst: ipv6Addr(2)},
		UDP:       UDP{SrcPort: 0xc001, DstPort: UDPPort},
		Packet:    samplePacket(UDSendOnlyImm, payloadOf(7)),
	}
	b := make([]byte, f.Len())
	n, err := f.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	dgram := b[IPv6Len:n]
	c := UDPChecksum(f.IPv6.Src[:], f.IPv6.Dst[:], dgram)
	dgram[6], dgram[7] = byte(c>>8), byte(c)
	var sum uint32
	add := func(p []byte) {
		for i := 0; i < len(p); i += 2 {
			w := uint32(p[i]) << 8
			if i+1 < len(p) {
				w |= uint32(p[i+1])
			}
			sum += w
		}
	}
	add(f.IPv6.Src[:])
	add(f.IPv6.Dst[:])
	sum += ProtoUDP + uint32(len(dgram))
	add(dgram)
	if got := fold(sum); got != 0xffff {
		t.Errorf("checksum %#04x does not verify: sum %#04x", c, got)
	}
	// The UDP checksum is masked out of the ICRC.
	var g Frame
	if err := g.DecodeIP(b[:n]); err != nil || !g.VerifyICRC() {
		t.Errorf("after setting the UDP checksum: err %v, ICRC ok %v", err, g.VerifyICRC())
	}
	// Over IPv4.
	c4 := UDPChecksum([]byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}, []byte{0xc0, 0x00, 0x12, 0xb7, 0, 9, 0, 0, 0xab})
	if c4 == 0 {
		t.Error("zero IPv4 UDP checksum")
	}
}

func TestEthernetVLAN(t *testing.T) {
	tests := []struct {
		name string
		eth  Ethernet
		wire string
	}{
		{"untagged", Ethernet{Dst: [6]byte{1, 2, 3, 4, 5, 6}, Src: [6]byte{7, 8, 9, 10, 11, 12}, Type: EtherTypeIPv4},
			"010203040506 0708090a0b0c 0800"},
		{"802.1Q", Ethernet{Dst: [6]byte{1}, Src: [6]byte{2}, NumTags: 1, Tags: [2]VLANTag{{TPID: EtherTypeVLAN, PCP: 3, ID: 100}}, Type: EtherTypeIPv6},
			"010000000000 020000000000 8100 6064 86dd"},
		{"QinQ", Ethernet{NumTags: 2, Tags: [2]VLANTag{{TPID: EtherTypeQinQ, PCP: 7, DEI: true, ID: 0xfff}, {TPID: EtherTypeVLAN, ID: 1}}, Type: EtherTypeIPv4},
			"000000000000 000000000000 88a8 ffff 8100 0001 0800"},
	}
	for _, tt := range tests {
		want := unhex(t, tt.wire)
		if tt.eth.Len() != len(want) {
			t.Errorf("%s: Len() = %d, want %d", tt.name, tt.eth.Len(), len(want))
		}
		buf := make([]byte, len(want))
		n, err := tt.eth.Marshal(buf)
		if err != nil || n != len(want) {
			t.Fatalf("%s: Marshal = %d, %v", tt.name, n, err)
		}
		if diff := cmp.Diff(want, buf); diff != "" {
			t.Errorf("%s: Marshal (-want +got):\n%s", tt.name, diff)
		}
		var got Ethernet
		n, err = got.Unmarshal(want)
		if err != nil || n != len(want) {
			t.Fatalf("%s: Unmarshal = %d, %v", tt.name, n, err)
		}
		if diff := cmp.Diff(tt.eth, got); diff != "" {
			t.Errorf("%s: Unmarshal (-want +got):\n%s", tt.name, diff)
		}
		if _, err := got.Unmarshal(want[:len(want)-1]); !errors.Is(err, ErrTooShort) {
			t.Errorf("%s: truncated: err = %v", tt.name, err)
		}
	}
	var e Ethernet
	if _, err := e.Unmarshal(unhex(t, "000000000000 000000000000 8100 0001 8100 0001 8100 0001 0800")); !errors.Is(err, ErrUnsupported) {
		t.Errorf("three tags: err = %v, want ErrUnsupported", err)
	}
	bad := Ethernet{NumTags: 3}
	if _, err := bad.Marshal(make([]byte, 64)); !errors.Is(err, ErrRange) {
		t.Errorf("NumTags 3: err = %v, want ErrRange", err)
	}
	bad = Ethernet{NumTags: 1, Tags: [2]VLANTag{{ID: 4096}}}
	if _, err := bad.Marshal(make([]byte, 64)); !errors.Is(err, ErrRange) {
		t.Errorf("VLAN ID 4096: err = %v, want ErrRange", err)
	}
}

// TestFrameVLANRoundTrip wraps a captured packet in a VLAN tag.
func TestFrameVLANRoundTrip(t *testing.T) {
	frames := readFrames(t, rxeCapture)
	var f Frame
	if err := f.DecodeEthernet(frames[49]); err != nil {
		t.Fatal(err)
	}
	f.Ethernet.NumTags = 1
	f.Ethernet.Tags[0] = VLANTag{TPID: EtherTypeVLAN, PCP: 5, ID: 42}
	b := make([]byte, f.Len())
	n, err := f.Encode(b)
	if err != nil || n != len(frames[49])+4 {
		t.Fatalf("Encode = %d, %v", n, err)
	}
	var g Frame
	if err := g.DecodeEthernet(b[:n]); err != nil {
		t.Fatal(err)
	}
	if !g.VerifyICRC() || g.Ethernet.Tags[0].ID != 42 || g.Packet.ICRC != StoredICRC(frames[49]) {
		t.Errorf("VLAN frame: ICRC ok %v, tag %+v, ICRC %#x want %#x", g.VerifyICRC(), g.Ethernet.Tags[0], g.Packet.ICRC, StoredICRC(frames[49]))
	}
	// Ethernet padding after the datagram is ignored.
	padded := append(append([]byte(nil), b[:n]...), 0, 0, 0, 0, 0, 0)
	if err := g.DecodeEthernet(padded); err != nil || !g.VerifyICRC() {
		t.Errorf("padded frame: %v, ICRC ok %v", err, g.VerifyICRC())
	}
}

func TestFrameDecodeErrors(t *testing.T) {
	frames := readFrames(t, rxeCapture)
	ack := frames[16] // RC_ACKNOWLEDGE, 62 bytes
	mod := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), ack...)) }
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTooShort},
		{"arp", mod(func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b }), ErrNotRoCE},
		{"ip version 5", mod(func(b []byte) []byte { b[14] = 0x55; return b }), ErrNotRoCE},
		{"ethertype ipv6 on ipv4", mod(func(b []byte) []byte { b[12], b[13] = 0x86, 0xdd; return b }), ErrNotRoCE},
		{"tcp", mod(func(b []byte) []byte { b[23] = 6; return b }), ErrNotRoCE},
		{"fragment", mod(func(b []byte) []byte { b[20] |= 0x20; return b }), ErrNotRoCE},
		{"fragment offset", mod(func(b []byte) []byte { b[21] = 1; return b }), ErrNotRoCE},
		{"other port", mod(func(b []byte) []byte { b[37] = 0x35; return b }), ErrNotRoCE},
		{"ipv4 options", mod(func(b []byte) []byte { b[14] = 0x46; return b }), ErrUnsupported},
		{"ihl 4", mod(func(b []byte) []byte { b[14] = 0x44; return b }), ErrLength},
		{"truncated ip", mod(func(b []byte) []byte { return b[:30] }), ErrTooShort},
		{"truncated datagram", mod(func(b []byte) []byte { return b[:60] }), ErrTooShort},
		{"ip length below headers", mod(func(b []byte) []byte { b[16], b[17] = 0, 27; return b }), ErrLength},
		{"udp length too long", mod(func(b []byte) []byte { b[39] = 0x40; return b }), ErrLength},
		{"udp length below 8", mod(func(b []byte) []byte { b[39] = 4; return b }), ErrLength},
		{"bad transport", mod(func(b []byte) []byte { b[42] = 0x15; return b }), ErrUnknownOpcode},
	}
	for _, tt := range tests {
		var f Frame
		if err := f.DecodeEthernet(tt.in); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	var f Frame
	if err := f.DecodeIP(nil); !errors.Is(err, ErrTooShort) {
		t.Errorf("DecodeIP(nil) = %v", err)
	}
	v6 := unhex(t, ipv6Vector)
	v6[4], v6[5] = 0, 0
	if err := f.DecodeIP(v6); !errors.Is(err, ErrUnsupported) {
		t.Errorf("jumbogram: err = %v, want ErrUnsupported", err)
	}
	v6 = unhex(t, ipv6Vector)
	v6[6] = 0 // hop-by-hop options header
	if err := f.DecodeIP(v6); !errors.Is(err, ErrNotRoCE) {
		t.Errorf("ipv6 extension header: err = %v, want ErrNotRoCE", err)
	}
}

func TestFrameEncodeErrors(t *testing.T) {
	f := Frame{IPVersion: 5, Packet: samplePacket(RCSendOnly, nil)}
	if _, err := f.Encode(make([]byte, 128)); !errors.Is(err, ErrRange) {
		t.Errorf("IPVersion 5: err = %v", err)
	}
	f = Frame{IPVersion: 4, Packet: Packet{BTH: BTH{Opcode: 0x15}}}
	if _, err := f.Encode(make([]byte, 128)); !errors.Is(err, ErrUnknownOpcode) {
		t.Errorf("unknown opcode: err = %v", err)
	}
	f = Frame{IPVersion: 4, Packet: samplePacket(RCSendOnly, payloadOf(10))}
	if _, err := f.Encode(make([]byte, f.Len()-1)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("short buffer: err = %v", err)
	}
	f = Frame{IPVersion: 4, Packet: samplePacket(RCSendOnly, payloadOf(0xffff-40))}
	if _, err := f.Encode(make([]byte, 0x20000)); !errors.Is(err, ErrLength) {
		t.Errorf("too long: err = %v", err)
	}
}

func TestUDPSourcePort(t *testing.T) {
	tests := []struct {
		fl, lqpn, rqpn uint32
		label          uint32
		want           uint16
	}{
		{0, 0x11, 0x11, 0x121, 0xc121},
		{0, 0x12, 0x12, 0x144, 0xc144},
		{0, 0x13, 0x13, 0x169, 0xc169},
		{0, 0x14, 0x14, 0x190, 0xc190},
		{0, 0xffffff, 0xffffff, 0xfff1e, 0xff21},
		{0x12345, 0, 0, 0x12345, 0xe341},
		{0xfffff, 7, 9, 0xfffff, 0xffc0},
	}
	for _, tt := range tests {
		if tt.fl == 0 {
			if got := FlowLabel(tt.lqpn, tt.rqpn); got != tt.label {
				t.Errorf("FlowLabel(%#x, %#x) = %#x, want %#x", tt.lqpn, tt.rqpn, got, tt.label)
			}
		}
		if got := UDPSourcePort(tt.fl, tt.lqpn, tt.rqpn); got != tt.want {
			t.Errorf("UDPSourcePort(%#x, %#x, %#x) = %#x, want %#x", tt.fl, tt.lqpn, tt.rqpn, got, tt.want)
		}
	}
}

func TestICRCErrors(t *testing.T) {
	short := make([]byte, 15)
	if _, err := ICRCRaw(make([]byte, 20), make([]byte, 8), short); !errors.Is(err, ErrTooShort) {
		t.Errorf("short packet: %v", err)
	}
	if _, err := ICRCRaw(make([]byte, 20), make([]byte, 8), make([]byte, 16)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("IPv4 header without version: %v", err)
	}
	if _, err := ICRCRaw([]byte{0x45}, make([]byte, 8), make([]byte, 16)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("1-byte IP header: %v", err)
	}
	p4 := IPv4Path{}
	if _, err := p4.ICRC(0, short); !errors.Is(err, ErrTooShort) {
		t.Errorf("IPv4Path short: %v", err)
	}
	if err := p4.Seal(0, make([]byte, 0x10000)); !errors.Is(err, ErrLength) {
		t.Errorf("IPv4Path long: %v", err)
	}
	p6 := IPv6Path{}
	if err := p6.Seal(short); !errors.Is(err, ErrTooShort) {
		t.Errorf("IPv6Path short: %v", err)
	}
	if _, err := ICRCIPv4(&IPv4{Flags: 8}, &UDP{}, make([]byte, 16)); !errors.Is(err, ErrRange) {
		t.Errorf("ICRCIPv4 bad flags: %v", err)
	}
	if _, err := ICRCIPv6(&IPv6{}, &UDP{}, short); !errors.Is(err, ErrTooShort) {
		t.Errorf("ICRCIPv6 short: %v", err)
	}
	if StoredICRC([]byte{1}) != 0 {
		t.Error("StoredICRC of 1 byte")
	}
	PutICRC([]byte{1}, 5) // must not panic
}

// TestICRCKnownSeed pins the seed: the CRC state after 8 bytes of 0xff,
// which roce.md gives as 0xdebb20e3 in the kernel's un-inverted form.
func TestICRCKnownSeed(t *testing.T) {
	if ^icrcSeed != 0xdebb20e3 {
		t.Errorf("seed state %#08x, want 0xdebb20e3", ^icrcSeed)
	}
}
