package faultrelay

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// buildFrame makes an Ethernet frame carrying one UDP datagram from src to
// dst with payload, with a correct UDP checksum (and IPv4 header checksum).
func buildFrame(src, dst netip.AddrPort, payload []byte) []byte {
	udpLen := udpHdrLen + len(payload)
	var f []byte
	eth := make([]byte, ethHdrLen)
	copy(eth, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
	if src.Addr().Is4() {
		binary.BigEndian.PutUint16(eth[12:], etherTypeIPv4)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
		binary.BigEndian.PutUint16(ip[4:], 0x1234)
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
		ip[8], ip[9] = 64, protoUDP
		s, d := src.Addr().As4(), dst.Addr().As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		binary.BigEndian.PutUint16(ip[10:], ipv4HeaderChecksum(ip))
		f = append(eth, ip...)
	} else {
		binary.BigEndian.PutUint16(eth[12:], etherTypeIPv6)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6], ip[7] = protoUDP, 64
		s, d := src.Addr().As16(), dst.Addr().As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		f = append(eth, ip...)
	}
	udp := make([]byte, udpHdrLen)
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	f = append(f, udp...)
	f = append(f, payload...)
	u, ok := parseUDPFrame(f)
	if !ok {
		panic("buildFrame: unparsable frame")
	}
	setUDPChecksum(f, u)
	return f
}

var (
	v4src = netip.MustParseAddrPort("10.1.2.3:5000")
	v4dst = netip.MustParseAddrPort("10.1.2.4:4791")
	v6src = netip.MustParseAddrPort("[fd00::1]:5000")
	v6dst = netip.MustParseAddrPort("[fd00::2]:4791")
)

func TestParseUDPFrame(t *testing.T) {
	payload := []byte("0123456789")
	v4 := buildFrame(v4src, v4dst, payload)
	v6 := buildFrame(v6src, v6dst, payload)
	frag := buildFrame(v4src, v4dst, payload)
	binary.BigEndian.PutUint16(frag[ethHdrLen+6:], 0x2000) // more fragments
	tcp := buildFrame(v4src, v4dst, payload)
	tcp[ethHdrLen+9] = 6
	arp := append(make([]byte, 12), 0x08, 0x06)
	arp = append(arp, make([]byte, 28)...)
	short := v4[:ethHdrLen+20+4]
	padded := append(buildFrame(v4src, v4dst, []byte("x")), make([]byte, 20)...)
	tests := []struct {
		name         string
		f            []byte
		ok           bool
		v6           bool
		payloadLen   int
		sport, dport uint16
	}{
		{"ipv4", v4, true, false, 10, 5000, 4791},
		{"ipv6", v6, true, true, 10, 5000, 4791},
		{"padded ipv4", padded, true, false, 1, 5000, 4791},
		{"fragment", frag, false, false, 0, 0, 0},
		{"tcp", tcp, false, false, 0, 0, 0},
		{"arp", arp, false, false, 0, 0, 0},
		{"truncated", short, false, false, 0, 0, 0},
		{"too short for ethernet", []byte{1, 2, 3}, false, false, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ok := parseUDPFrame(tt.f)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if u.v6 != tt.v6 || u.end-u.payload != tt.payloadLen || u.srcPort != tt.sport || u.dstPort != tt.dport {
				t.Errorf("got %+v", u)
			}
			if !udpChecksumOK(tt.f, u) {
				t.Error("checksum of a built frame does not verify")
			}
		})
	}
}

func TestUDPChecksumKnownValue(t *testing.T) {
	// An IPv4 datagram whose checksum was computed by hand: pseudo-header
	// 0a01 0203 0a01 0204 0011 000c, header 1388 12b7 000c, payload "abcd".
	f := buildFrame(v4src, v4dst, []byte("abcd"))
	u, _ := parseUDPFrame(f)
	var sum uint32
	for _, w := range []uint32{0x0a01, 0x0203, 0x0a01, 0x0204, 0x0011, 0x000c, 0x1388, 0x12b7, 0x000c, 0x6162, 0x6364} {
		sum += w
	}
	want := ^fold(sum)
	if got := binary.BigEndian.Uint16(f[u.l4+6:]); got != want {
		t.Errorf("checksum %#04x, want %#04x", got, want)
	}
}

func TestChecksumDetectsCorruption(t *testing.T) {
	for _, f := range [][]byte{
		buildFrame(v4src, v4dst, make([]byte, 100)),
		buildFrame(v6src, v6dst, make([]byte, 101)),
	} {
		u, _ := parseUDPFrame(f)
		for i := u.payload; i < u.end; i++ {
			f[i] ^= 0x10
			if udpChecksumOK(f, u) {
				t.Fatalf("bit flip at %d not detected", i)
			}
			f[i] ^= 0x10
		}
		f[u.payload] ^= 0x01
		g := append(make([]byte, vnetHdrLen), f...)
		fixUDPChecksum(g)
		if !udpChecksumOK(g[vnetHdrLen:], u) {
			t.Error("fixUDPChecksum left a bad checksum")
		}
	}
	// IPv4 "no checksum" stays 0.
	f := buildFrame(v4src, v4dst, []byte("payload"))
	u, _ := parseUDPFrame(f)
	binary.BigEndian.PutUint16(f[u.l4+6:], 0)
	g := append(make([]byte, vnetHdrLen), f...)
	g[vnetHdrLen+u.payload] ^= 1
	fixUDPChecksum(g)
	if c := binary.BigEndian.Uint16(g[vnetHdrLen+u.l4+6:]); c != 0 {
		t.Errorf("IPv4 zero checksum became %#04x", c)
	}
}

func TestSegmentUDP(t *testing.T) {
	tests := []struct {
		name      string
		src, dst  netip.AddrPort
		total     int
		gso       int
		wantSizes []int
	}{
		{"ipv4 even", v4src, v4dst, 3000, 1000, []int{1000, 1000, 1000}},
		{"ipv4 short tail", v4src, v4dst, 2500, 1000, []int{1000, 1000, 500}},
		{"ipv6", v6src, v6dst, 2001, 1000, []int{1000, 1000, 1}},
		{"single", v6src, v6dst, 10, 1000, []int{10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := make([]byte, tt.total)
			for i := range payload {
				payload[i] = byte(i * 13)
			}
			f := buildFrame(tt.src, tt.dst, payload)
			u, _ := parseUDPFrame(f)
			segs, err := segmentUDP(f, u, tt.gso)
			if err != nil {
				t.Fatal(err)
			}
			if len(segs) != len(tt.wantSizes) {
				t.Fatalf("%d segments, want %d", len(segs), len(tt.wantSizes))
			}
			off := 0
			for i, s := range segs {
				if h := parseVnetHdr(s); h != (vnetHdr{}) {
					t.Errorf("segment %d: virtio header %+v, want zero", i, h)
				}
				sf := s[vnetHdrLen:]
				su, ok := parseUDPFrame(sf)
				if !ok {
					t.Fatalf("segment %d does not parse", i)
				}
				if n := su.end - su.payload; n != tt.wantSizes[i] {
					t.Errorf("segment %d: %d bytes, want %d", i, n, tt.wantSizes[i])
				}
				if string(sf[su.payload:su.end]) != string(payload[off:off+tt.wantSizes[i]]) {
					t.Errorf("segment %d: wrong bytes", i)
				}
				off += tt.wantSizes[i]
				if !udpChecksumOK(sf, su) {
					t.Errorf("segment %d: bad UDP checksum", i)
				}
				if got := binary.BigEndian.Uint16(sf[su.l4+4:]); int(got) != su.end-su.l4 {
					t.Errorf("segment %d: UDP length %d, want %d", i, got, su.end-su.l4)
				}
				if !su.v6 {
					ip := sf[su.l3:su.l4]
					if id := binary.BigEndian.Uint16(ip[4:]); id != 0x1234+uint16(i) {
						t.Errorf("segment %d: IPv4 id %#x, want %#x", i, id, 0x1234+i)
					}
					if fold(sum16(0, ip)) != 0xffff {
						t.Errorf("segment %d: bad IPv4 header checksum", i)
					}
				}
				if su.srcPort != tt.src.Port() || su.dstPort != tt.dst.Port() {
					t.Errorf("segment %d: ports %d->%d", i, su.srcPort, su.dstPort)
				}
			}
		})
	}
	if _, err := segmentUDP(buildFrame(v4src, v4dst, []byte("x")), udpFrame{}, 0); err == nil {
		t.Error("gso size 0 accepted")
	}
}

func FuzzParseUDPFrame(f *testing.F) {
	f.Add(buildFrame(v4src, v4dst, []byte("seed")))
	f.Add(buildFrame(v6src, v6dst, []byte("seed")))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, ok := parseUDPFrame(b)
		if !ok {
			return
		}
		if !(u.l3 < u.l4 && u.l4+udpHdrLen == u.payload && u.payload <= u.end && u.end <= len(b)) {
			t.Fatalf("inconsistent offsets %+v for %d bytes", u, len(b))
		}
		udpChecksum(b, u)
		if segs, err := segmentUDP(b, u, 7); err == nil {
			for _, s := range segs {
				if _, ok := parseUDPFrame(s[vnetHdrLen:]); !ok && u.end > u.payload {
					t.Fatal("segment does not parse")
				}
			}
		}
	})
}
