package netpkt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/internal/testsupport/tshark"
)

// naiveSum is RFC 1071's reference loop, to check Sum against.
func naiveSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func hexBytes(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.ReplaceAll(s, " ", "")
	b := make([]byte, len(s)/2)
	for i := range b {
		v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		b[i] = byte(v)
	}
	return b
}

func TestChecksumByHand(t *testing.T) {
	tests := []struct {
		name string
		data string
		sum  uint16 // folded sum, worked out by hand
		csum uint16
	}{
		// RFC 1071 section 3: 0001 + f203 + f4f5 + f6f7 = 0x2ddf0 -> ddf2.
		{"rfc1071", "0001 f203 f4f5 f6f7", 0xddf2, 0x220d},
		// An IPv4 header with its checksum field zero: 4500+0073+0000+4000+4011+
		// c0a8+0001+c0a8+00c7 = 0x2479c -> 479e, checksum b861.
		{"ipv4 header", "4500 0073 0000 4000 4011 0000 c0a8 0001 c0a8 00c7", 0x479e, 0xb861},
		// An odd length: the last byte is a high half: 0102 + 0300 = 0402.
		{"odd", "01 02 03", 0x0402, 0xfbfd},
		// Carries: ffff + ffff = 1fffe -> ffff; checksum 0.
		{"carry", "ffff ffff", 0xffff, 0x0000},
		{"empty", "", 0, 0xffff},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := hexBytes(t, tc.data)
			if got := Fold(Sum(0, b)); got != tc.sum {
				t.Errorf("Fold(Sum) = %#04x, want %#04x", got, tc.sum)
			}
			if got := Checksum(b); got != tc.csum {
				t.Errorf("Checksum = %#04x, want %#04x", got, tc.csum)
			}
		})
	}
}

func TestSumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 200 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if n%7 == 0 {
			for i := range b {
				b[i] = 0xff // the most carries
			}
		}
		if got, want := Fold(Sum(0, b)), naiveSum(b); got != want {
			t.Fatalf("len %d: Fold(Sum) = %#04x, reference %#04x", n, got, want)
		}
		// Sum is incremental over even splits.
		if n >= 10 {
			if got, want := Fold(Sum(Sum(0, b[:10]), b[10:])), naiveSum(b); got != want {
				t.Fatalf("len %d split: %#04x, want %#04x", n, got, want)
			}
		}
	}
}

var (
	macA = [6]byte{0x02, 0, 0, 0, 0, 0x0a}
	macB = [6]byte{0x02, 0, 0, 0, 0, 0x0b}
	ip4A = netip.MustParseAddr("10.1.2.3")
	ip4B = netip.MustParseAddr("10.1.2.4")
	ip6A = netip.MustParseAddr("fd00::a")
	ip6B = netip.MustParseAddr("fd00::b")
)

func payloadOf(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return p
}

// frameCases are frames of every shape the package builds.
var frameCases = []struct {
	name string
	h    Headers
	has  uint16
}{
	{"ipv4 udp", Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, TOS: 0x28, ID: 77, DF: true, Proto: ProtoUDP, SrcPort: 5000, DstPort: 6000}, HasIPv4 | HasUDP},
	{"ipv4 tcp", Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, ID: 1, Proto: ProtoTCP, SrcPort: 40000, DstPort: 80, Seq: 1000, Ack: 7, TCPFlags: TCPAck | TCPPsh}, HasIPv4 | HasTCP},
	{"ipv6 udp", Headers{Dst: macB, Src: macA, SrcIP: ip6A, DstIP: ip6B, TOS: 0xb8, FlowLabel: 0x12345, Proto: ProtoUDP, SrcPort: 1, DstPort: 2}, HasIPv6 | HasUDP},
	{"ipv6 tcp", Headers{Dst: macB, Src: macA, SrcIP: ip6A, DstIP: ip6B, Proto: ProtoTCP, SrcPort: 3, DstPort: 4, Seq: 0xfffffff0, TCPFlags: TCPSyn}, HasIPv6 | HasTCP},
	{"vlan ipv4 udp", Headers{Dst: macB, Src: macA, VLAN: Tag{Present: true, TCI: 5<<13 | 100}, SrcIP: ip4A, DstIP: ip4B, Proto: ProtoUDP, SrcPort: 7007, DstPort: 7008}, HasVLAN | HasIPv4 | HasUDP},
	{"vxlan ipv4 tcp", Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, Proto: ProtoUDP, SrcPort: 49152, VNI: 42,
		Inner: &Headers{Dst: [6]byte{2, 1, 1, 1, 1, 1}, Src: [6]byte{2, 2, 2, 2, 2, 2}, SrcIP: netip.MustParseAddr("192.168.0.1"), DstIP: netip.MustParseAddr("192.168.0.2"), ID: 9, Proto: ProtoTCP, SrcPort: 1234, DstPort: 8443, Seq: 5, TCPFlags: TCPAck}},
		HasIPv4 | HasUDP | HasVXLAN | HasInnerETH | HasInnerIPv4 | HasInnerTCP},
	{"vlan vxlan over ipv6, inner vlan ipv6 udp", Headers{Dst: macB, Src: macA, VLAN: Tag{Present: true, TCI: 200}, SrcIP: ip6A, DstIP: ip6B, Proto: ProtoUDP, SrcPort: 50000, VNI: 0xabcdef,
		Inner: &Headers{Dst: [6]byte{2, 1, 1, 1, 1, 1}, Src: [6]byte{2, 2, 2, 2, 2, 2}, VLAN: Tag{Present: true, TCI: 300}, SrcIP: ip6B, DstIP: ip6A, Proto: ProtoUDP, SrcPort: 9, DstPort: 10}},
		HasVLAN | HasIPv6 | HasUDP | HasVXLAN | HasInnerETH | HasInnerVLAN | HasInnerIPv6 | HasInnerUDP},
	{"ipv4 other protocol", Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, Proto: 47}, HasIPv4},
	{"arp-like", Headers{Dst: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Src: macA, EtherType: 0x0806}, 0},
}

func TestBuildParse(t *testing.T) {
	var frames [][]byte
	for _, tc := range frameCases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.h.Append(nil, payloadOf(100))
			if err != nil {
				t.Fatal(err)
			}
			if len(f) != tc.h.Len()+100 {
				t.Fatalf("frame is %d bytes, Len()+payload = %d", len(f), tc.h.Len()+100)
			}
			var l Layers
			Parse(f, Tag{}, &l)
			if l.Has != tc.has {
				t.Fatalf("Has = %#x, want %#x", l.Has, tc.has)
			}
			if tc.h.VLAN.Present && l.VLAN != tc.h.VLAN.TCI {
				t.Errorf("VLAN = %#x, want %#x", l.VLAN, tc.h.VLAN.TCI)
			}
			end := l.L4End
			if l.Has&HasVXLAN != 0 {
				end = l.InnerL4End
				if vni := binary.BigEndian.Uint32(f[l.Tunnel+4:]) >> 8; vni != tc.h.VNI {
					t.Errorf("VNI %d, want %d", vni, tc.h.VNI)
				}
			}
			if l.Has&(HasTCP|HasUDP) != 0 && !bytes.Equal(f[end:], payloadOf(100)) {
				t.Errorf("payload after the headers (at %d) is not the payload", end)
			}
			if l.Has&HasIPv4 != 0 {
				if Checksum(f[l.L3:l.L4]) != 0 {
					t.Error("IPv4 header checksum does not verify")
				}
				if l.Has&HasUDP != 0 && l.Has&HasVXLAN == 0 {
					want := roce.UDPChecksum(f[l.L3+12:l.L3+16], f[l.L3+16:l.L3+20], f[l.L4:])
					if got := binary.BigEndian.Uint16(f[l.L4+6:]); got != want {
						t.Errorf("UDP checksum %#04x, internal/roce computes %#04x", got, want)
					}
				}
			}
			frames = append(frames, f)
			// Every strict prefix parses without panicking and finds no more.
			for n := range f {
				var p Layers
				Parse(f[:n], Tag{}, &p)
				if p.Has&^l.Has != 0 {
					t.Fatalf("prefix %d has layers %#x the frame has not (%#x)", n, p.Has, l.Has)
				}
			}
		})
	}
	rows := tshark.Fields(t, frames, "frame.protocols", "vlan.id", "ip.checksum.status", "tcp.checksum.status", "udp.checksum.status",
		"vxlan.vni", "ip.dsfield", "ipv6.flow", "ip.id", "tcp.seq_raw", "udp.length", "ip.len", "ipv6.plen")
	want := [][]string{
		{"eth:ethertype:ip:udp:data", "", "1", "", "1", "", "0x28", "", "0x004d", "", "108", "128", ""},
		{"eth:ethertype:ip:tcp", "", "1", "1", "", "", "0x00", "", "0x0001", "1000", "", "140", ""},
		{"eth:ethertype:ipv6:udp:data", "", "", "", "1", "", "", "0x012345", "", "", "108", "", "108"},
		{"eth:ethertype:ipv6:tcp:data", "", "", "1", "", "", "", "0x000000", "", "4294967280", "", "", "120"},
		{"eth:ethertype:vlan:ethertype:ip:udp:data", "100", "1", "", "1", "", "0x00", "", "0x0000", "", "108", "128", ""},
		{"eth:ethertype:ip:udp:vxlan:eth:ethertype:ip:tcp:data", "", "1;1", "1", "3", "42", "0x00;0x00", "", "0x0000;0x0009", "5", "170", "190;140", ""},
		{"eth:ethertype:vlan:ethertype:ipv6:udp:vxlan:eth:ethertype:vlan:ethertype:ipv6:udp:data", "200;300", "", "", "1;1", "11259375", "", "0x000000;0x000000", "", "", "182;108", "", "182;108"},
		{"eth:ethertype:ip:gre", "", "1", "", "", "", "0x00", "", "0x0000", "", "", "120", ""},
		{"eth:ethertype:arp", "", "", "", "", "", "", "", "", "", "", "", ""},
	}
	for i, row := range rows {
		for j := range row {
			if j < len(want[i]) && row[j] != want[i][j] && !(j == 0 && strings.HasPrefix(row[j], want[i][j])) {
				t.Errorf("%s: tshark field %d = %q, want %q (row %q)", frameCases[i].name, j, row[j], want[i][j], row)
			}
		}
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name string
		h    Headers
		want string
	}{
		{"mixed families", Headers{SrcIP: ip4A, DstIP: ip6B}, "not of one IP version"},
		{"one address", Headers{SrcIP: ip4A}, "not of one IP version"},
		{"vxlan over tcp", Headers{SrcIP: ip4A, DstIP: ip4B, Proto: ProtoTCP, Inner: &Headers{}}, "VXLAN needs IP and UDP"},
		{"wide vni", Headers{SrcIP: ip4A, DstIP: ip4B, Proto: ProtoUDP, VNI: 1 << 24, Inner: &Headers{}}, "wider than 24 bits"},
		{"flow label", Headers{SrcIP: ip6A, DstIP: ip6B, FlowLabel: 1 << 20}, "flow label"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.h.Append(nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Append: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	h := Headers{SrcIP: ip4A, DstIP: ip4B, Proto: ProtoUDP}
	if _, err := h.AppendHeader(nil, 70000); err == nil {
		t.Error("a 70000-byte IPv4 payload was accepted")
	}
}

// TestParseStrippedTag: the kernel hands packet sockets frames without
// their outer tag and the tag beside them.
func TestParseStrippedTag(t *testing.T) {
	h := frameCases[0].h
	f, _ := h.Append(nil, payloadOf(10))
	var l Layers
	Parse(f, Tag{Present: true, TCI: 0x2064}, &l)
	if l.Has&HasVLAN == 0 || l.VLAN != 0x2064 || l.EtherType != EtherTypeIPv4 || l.Has&HasUDP == 0 {
		t.Errorf("with a stripped tag: %+v", l)
	}
	// A QinQ frame: both tags in the frame, the first one is the VLAN.
	q := append(append(append([]byte{}, f[:12]...), 0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x14), f[12:]...)
	Parse(q, Tag{}, &l)
	if l.VLAN != 10 || l.L3 != EthLen+2*VLANLen || l.Has&HasUDP == 0 {
		t.Errorf("QinQ: VLAN %d, L3 at %d, has %#x", l.VLAN, l.L3, l.Has)
	}
}

func TestFillChecksums(t *testing.T) {
	for _, tc := range frameCases {
		t.Run(tc.name, func(t *testing.T) {
			good, _ := tc.h.Append(nil, payloadOf(33)) // odd payload
			bad := append([]byte(nil), good...)
			var l Layers
			Parse(bad, Tag{}, &l)
			damage := func(has uint16, off int) {
				if l.Has&has != 0 {
					bad[off] ^= 0x5a
				}
			}
			damage(HasIPv4, int(l.L3)+10)
			damage(HasTCP, int(l.L4)+16)
			if l.Has&HasVXLAN == 0 || l.Has&HasIPv6 != 0 { // a zero VXLAN checksum over IPv4 stays zero
				damage(HasUDP, int(l.L4)+6)
			}
			damage(HasInnerIPv4, int(l.InnerL3)+10)
			damage(HasInnerTCP, int(l.InnerL4)+16)
			damage(HasInnerUDP, int(l.InnerL4)+6)
			err := FillChecksums(bad, Tag{})
			if tc.has&(HasIPv4|HasIPv6) == 0 {
				if err != ErrNotIP {
					t.Fatalf("FillChecksums: %v, want ErrNotIP", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Only checksum fields were damaged, so all must be restored.
			if !bytes.Equal(bad, good) {
				t.Errorf("FillChecksums did not restore the frame:\n got % x\nwant % x", bad, good)
			}
		})
	}
}

// TestFillChecksumsVXLANOuterZero: a VXLAN frame's zero outer UDP checksum
// stays zero; a non-zero one is computed.
func TestFillChecksumsVXLANOuterZero(t *testing.T) {
	h := frameCases[5].h
	f, _ := h.Append(nil, payloadOf(20))
	var l Layers
	Parse(f, Tag{}, &l)
	if c := binary.BigEndian.Uint16(f[l.L4+6:]); c != 0 {
		t.Fatalf("outer UDP checksum %#x, want 0", c)
	}
	f[l.L4+7] = 1
	if err := FillChecksums(f, Tag{}); err != nil {
		t.Fatal(err)
	}
	want := roce.UDPChecksum(f[l.L3+12:l.L3+16], f[l.L3+16:l.L3+20], f[l.L4:])
	if c := binary.BigEndian.Uint16(f[l.L4+6:]); c != want {
		t.Errorf("outer UDP checksum %#x, want %#x", c, want)
	}
}

func TestTSO(t *testing.T) {
	tests := []struct {
		name    string
		h       Headers
		payload int
		mss     int
	}{
		{"ipv4 tcp 64KiB", Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, ID: 0xfff0, DF: true, Proto: ProtoTCP, SrcPort: 40000, DstPort: 5001,
			Seq: 0xffff0000, Ack: 99, TCPFlags: TCPAck | TCPPsh | TCPFin | TCPCwr | TCPEce}, 65536, 1448},
		{"ipv6 tcp", Headers{Dst: macB, Src: macA, SrcIP: ip6A, DstIP: ip6B, FlowLabel: 7, Proto: ProtoTCP, SrcPort: 1, DstPort: 2, Seq: 1, TCPFlags: TCPAck | TCPPsh}, 10000, 1428},
		{"vlan ipv4 tcp, one frame", Headers{Dst: macB, Src: macA, VLAN: Tag{Present: true, TCI: 42}, SrcIP: ip4A, DstIP: ip4B, Proto: ProtoTCP, SrcPort: 1, DstPort: 2, TCPFlags: TCPAck | TCPFin}, 500, 1448},
		{"ipv4 udp (USO)", Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, ID: 3, Proto: ProtoUDP, SrcPort: 1, DstPort: 2}, 5000, 1472},
		{"vxlan ipv4 tcp", Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, ID: 100, Proto: ProtoUDP, SrcPort: 49153, VNI: 42,
			Inner: &Headers{Dst: [6]byte{2, 1, 1, 1, 1, 1}, Src: [6]byte{2, 2, 2, 2, 2, 2}, SrcIP: netip.MustParseAddr("192.168.0.1"), DstIP: netip.MustParseAddr("192.168.0.2"), ID: 500, Proto: ProtoTCP, SrcPort: 1234, DstPort: 8443, Seq: 10, TCPFlags: TCPAck | TCPPsh}},
			9000, 1398},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr, err := tc.h.AppendHeader(nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			payload := payloadOf(tc.payload)
			var tso TSO
			if err := tso.Init(hdr, len(payload), tc.mss); err != nil {
				t.Fatal(err)
			}
			n := tso.Frames()
			if want := (tc.payload + tc.mss - 1) / tc.mss; n != want {
				t.Fatalf("Frames = %d, want %d", n, want)
			}
			var frames [][]byte
			var got []byte
			buf := make([]byte, len(hdr)+tc.mss)
			for i := range n {
				off, c := tso.Chunk(i)
				fl := tso.Frame(buf, i, payload[off:off+c])
				f := append([]byte(nil), buf[:fl]...)
				frames = append(frames, f)
				var l Layers
				Parse(f, Tag{}, &l)
				end := l.L4End
				if l.Has&HasVXLAN != 0 {
					end = l.InnerL4End
				}
				got = append(got, f[end:]...)
			}
			if !bytes.Equal(got, payload) {
				t.Fatal("the frames' payloads do not add up to the payload")
			}
			tcp := tc.h.Proto == ProtoTCP || (tc.h.Inner != nil && tc.h.Inner.Proto == ProtoTCP)
			fields := []string{"ip.id", "ip.checksum.status", "ip.len", "ipv6.plen", "udp.length", "udp.checksum.status"}
			if tcp {
				fields = append(fields, "tcp.seq_raw", "tcp.flags", "tcp.len", "tcp.checksum.status")
			}
			rows := tshark.Fields(t, frames, fields...)
			inner := tc.h
			if tc.h.Inner != nil {
				inner = *tc.h.Inner
			}
			for i, row := range rows {
				off, c := tso.Chunk(i)
				last := i == n-1
				check := func(field int, want string) {
					t.Helper()
					if row[field] != want {
						t.Errorf("frame %d: %s = %q, want %q", i, fields[field], row[field], want)
					}
				}
				ipIDs := func() string {
					s := fmt.Sprintf("0x%04x", tc.h.ID+uint16(i))
					if tc.h.Inner != nil && inner.SrcIP.Is4() {
						s += fmt.Sprintf(";0x%04x", inner.ID+uint16(i))
					}
					return s
				}
				switch {
				case tc.h.SrcIP.Is4() && tc.h.Inner != nil:
					check(0, ipIDs())
					check(1, "1;1")
					l4 := UDPLen + VXLANLen + inner.Len() + c
					check(2, fmt.Sprintf("%d;%d", IPv4Len+l4, inner.Len()-EthLen+c))
					check(4, strconv.Itoa(l4))
					check(5, tshark.NotPresent) // the zero outer UDP checksum
				case tc.h.SrcIP.Is4():
					check(0, ipIDs())
					check(1, tshark.Good)
					check(2, strconv.Itoa(len(hdr)-EthLen-vlanLen(tc.h)+c))
				default:
					check(3, strconv.Itoa(len(hdr)-EthLen-vlanLen(tc.h)-IPv6Len+c))
				}
				if !tcp {
					check(4, strconv.Itoa(UDPLen+c))
					check(5, tshark.Good)
					continue
				}
				check(6, strconv.FormatUint(uint64(inner.Seq+uint32(off)), 10))
				fl := inner.TCPFlags
				if i > 0 {
					fl &^= TCPCwr
				}
				if !last {
					fl &^= TCPFin | TCPPsh
				}
				check(7, fmt.Sprintf("0x%04x", fl))
				check(8, strconv.Itoa(c))
				check(9, tshark.Good)
			}
		})
	}
}

func vlanLen(h Headers) int {
	if h.VLAN.Present {
		return VLANLen
	}
	return 0
}

func TestTSOErrors(t *testing.T) {
	udp, _ := frameCases[0].h.AppendHeader(nil, 0)
	var tso TSO
	tests := []struct {
		name string
		hdr  []byte
		mss  int
		want error
	}{
		{"mss 0", udp, 0, ErrTSOMSS},
		{"header with payload", append(append([]byte(nil), udp...), 1, 2), 100, ErrTSOHeader},
		{"not ip", make([]byte, 14), 100, ErrTSOHeader},
		{"truncated", udp[:30], 100, ErrTSOHeader},
	}
	for _, tc := range tests {
		if err := tso.Init(tc.hdr, 1000, tc.mss); err != tc.want {
			t.Errorf("%s: Init = %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := tso.Init(udp, 100000, 65530); err == nil {
		t.Error("an MSS whose frames overflow the IP length was accepted")
	}
}

func TestInsertTag(t *testing.T) {
	f := mustFrame(t, frameCases[4].h, 10) // tagged
	g, tag := stripTag(f)
	dst := make([]byte, len(f)+VLANLen)
	if n := InsertTag(dst, g, tag); !bytes.Equal(dst[:n], f) {
		t.Errorf("InsertTag:\n got % x\nwant % x", dst[:n], f)
	}
	if n := InsertTag(dst, g, Tag{}); !bytes.Equal(dst[:n], g) {
		t.Error("InsertTag without a tag changed the frame")
	}
	tag.TPID = EtherTypeQinQ
	n := InsertTag(dst, g, tag)
	if binary.BigEndian.Uint16(dst[12:]) != EtherTypeQinQ || n != len(f) {
		t.Errorf("TPID %#x, length %d", binary.BigEndian.Uint16(dst[12:]), n)
	}
}

// TestVerifyChecksums: every frame shape Append builds verifies; damaging
// any covered byte (an IPv4 header byte, a payload byte, a checksum) fails
// it; a frame without TCP or UDP never verifies; a zero UDP checksum over
// IPv4 passes (it means none); an IP length past the frame fails.
func TestVerifyChecksums(t *testing.T) {
	for _, tc := range frameCases {
		t.Run(tc.name, func(t *testing.T) {
			good, _ := tc.h.Append(nil, payloadOf(33))
			want := tc.has&(HasTCP|HasUDP) != 0 && tc.has&HasFragment == 0
			if got := VerifyChecksums(good, Tag{}); got != want {
				t.Fatalf("VerifyChecksums(good frame) = %v, want %v", got, want)
			}
			if !want {
				return
			}
			if allocs := testing.AllocsPerRun(100, func() { VerifyChecksums(good, Tag{}) }); allocs != 0 {
				t.Errorf("%v allocations per call", allocs)
			}
			var l Layers
			Parse(good, Tag{}, &l)
			offs := []int{len(good) - 1} // the last payload byte
			if l.Has&HasIPv4 != 0 {
				offs = append(offs, int(l.L3)+8) // the TTL
			}
			if l.Has&HasInnerIPv4 != 0 {
				offs = append(offs, int(l.InnerL3)+8)
			}
			for _, off := range offs {
				bad := append([]byte(nil), good...)
				bad[off] ^= 0x5a
				if VerifyChecksums(bad, Tag{}) {
					t.Errorf("byte %d damaged, still verified", off)
				}
			}
			short := good[:len(good)-1]
			if VerifyChecksums(short, Tag{}) {
				t.Error("a frame shorter than its IP length verified")
			}
		})
	}
	h := Headers{SrcIP: ip4A, DstIP: ip4B, Proto: ProtoUDP, SrcPort: 1, DstPort: 2}
	f, _ := h.Append(nil, payloadOf(20))
	var l Layers
	Parse(f, Tag{}, &l)
	f[l.L4+6], f[l.L4+7] = 0, 0
	f[len(f)-1] ^= 1 // uncovered once the checksum is "none"
	if !VerifyChecksums(f, Tag{}) {
		t.Error("an IPv4 UDP frame without a checksum (0) did not verify")
	}
}
