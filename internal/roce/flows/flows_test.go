package flows

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/rperf/rperf/internal/pcap"
	"github.com/rperf/rperf/internal/psn"
	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/internal/testsupport/golden"
)

var cmpFlow = cmp.Options{cmpopts.IgnoreUnexported(Flow{}), cmpopts.EquateComparable(netip.Addr{})}

func u32(v uint32) *uint32 { return &v }

func ts(sec int64, usec int64) time.Time { return time.Unix(sec, usec*1000).UTC() }

func summariseFile(t *testing.T, path string, opts Options) Summary {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := SummariseOptions(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSoftRoCECapture checks the summary of rxe-rc.pcap against numbers
// counted by hand from its packet list: four RC connections (QPs 0x11-0x14)
// from 10.77.0.2 to 10.77.0.1, each a request flow and a response flow.
func TestSoftRoCECapture(t *testing.T) {
	a := netip.MustParseAddr("10.77.0.2")
	b := netip.MustParseAddr("10.77.0.1")
	want := Summary{
		Format: "pcap", Frames: 74, Packets: 74, PayloadBytes: 16*1024 + 16*1024 + 8*64, FlowCount: 8,
		FirstTimestamp: ptr(ts(1795351417, 468263)), LastTimestamp: ptr(ts(1795351426, 217117)),
		Flows: []*Flow{
			{Src: a, Dst: b, DestQP: 0x11, UDPSrcPort: 0xc121, Packets: 16, PayloadBytes: 16384, Requests: 16,
				Opcodes: map[string]int{"RC_SEND_FIRST": 8, "RC_SEND_LAST": 8}, PSNFirst: u32(0x480aa1), PSNLast: u32(0x480ab0),
				FirstTimestamp: ts(1795351417, 468263), LastTimestamp: ts(1795351417, 472742)},
			{Src: b, Dst: a, DestQP: 0x11, UDPSrcPort: 0xc121, Packets: 8, Responses: 8, ACKs: 8,
				Opcodes: map[string]int{"RC_ACKNOWLEDGE": 8}, PSNFirst: u32(0x480aa2), PSNLast: u32(0x480ab0),
				FirstTimestamp: ts(1795351417, 478680), LastTimestamp: ts(1795351417, 478736)},
			{Src: a, Dst: b, DestQP: 0x12, UDPSrcPort: 0xc144, Packets: 16, PayloadBytes: 16384, Requests: 16,
				Opcodes: map[string]int{"RC_RDMA_WRITE_FIRST": 8, "RC_RDMA_WRITE_LAST": 8}, PSNFirst: u32(0x757202), PSNLast: u32(0x757211),
				FirstTimestamp: ts(1795351420, 684744), LastTimestamp: ts(1795351420, 690593)},
			{Src: b, Dst: a, DestQP: 0x12, UDPSrcPort: 0xc144, Packets: 8, Responses: 8, ACKs: 8,
				Opcodes: map[string]int{"RC_ACKNOWLEDGE": 8}, PSNFirst: u32(0x757203), PSNLast: u32(0x757211),
				FirstTimestamp: ts(1795351420, 687015), LastTimestamp: ts(1795351420, 690987)},
			{Src: a, Dst: b, DestQP: 0x13, UDPSrcPort: 0xc169, Packets: 8, Requests: 8,
				Opcodes: map[string]int{"RC_RDMA_READ_REQUEST": 8}, PSNFirst: u32(0xaa1721), PSNLast: u32(0xaa1728),
				FirstTimestamp: ts(1795351423, 355878), LastTimestamp: ts(1795351423, 369019)},
			{Src: b, Dst: a, DestQP: 0x13, UDPSrcPort: 0xc169, Packets: 8, PayloadBytes: 512, Responses: 8,
				Opcodes: map[string]int{"RC_RDMA_READ_RESPONSE_ONLY": 8}, PSNFirst: u32(0xaa1721), PSNLast: u32(0xaa1728),
				FirstTimestamp: ts(1795351423, 357209), LastTimestamp: ts(1795351423, 369496)},
			{Src: a, Dst: b, DestQP: 0x14, UDPSrcPort: 0xc190, Packets: 5, Requests: 5,
				Opcodes: map[string]int{"RC_FETCH_ADD": 5}, PSNFirst: u32(0x8b8e00), PSNLast: u32(0x8b8e04),
				FirstTimestamp: ts(1795351426, 210385), LastTimestamp: ts(1795351426, 214863)},
			{Src: b, Dst: a, DestQP: 0x14, UDPSrcPort: 0xc190, Packets: 5, Responses: 5,
				Opcodes: map[string]int{"RC_ATOMIC_ACKNOWLEDGE": 5}, PSNFirst: u32(0x8b8e00), PSNLast: u32(0x8b8e04),
				FirstTimestamp: ts(1795351426, 211573), LastTimestamp: ts(1795351426, 217117)},
		},
	}
	for _, file := range []string{"rxe-rc.pcap", "rxe-rc.pcapng", "rxe-rc-nsec.pcap"} {
		got := summariseFile(t, "../../pcap/testdata/"+file, Options{})
		w := want
		if file == "rxe-rc.pcapng" {
			w.Format = "pcapng"
		}
		if diff := cmp.Diff(w, got, cmpFlow); diff != "" {
			t.Errorf("%s: summary (-want +got):\n%s", file, diff)
		}
	}
	// With the path MTU known the READ requests still consume one PSN each.
	got := summariseFile(t, "../../pcap/testdata/rxe-rc.pcap", Options{MTU: 1024})
	if diff := cmp.Diff(want, got, cmpFlow); diff != "" {
		t.Errorf("MTU 1024: summary (-want +got):\n%s", diff)
	}
	goldenJSON(t, "testdata/rxe-rc.json", got)
}

func ptr[T any](v T) *T { return &v }

// goldenJSON compares the JSON form of s with a file, or rewrites the file
// under -update (package golden).
func goldenJSON(t *testing.T, path string, s Summary) {
	t.Helper()
	got, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, path, append(got, '\n'))
}

func TestNonRoCECapture(t *testing.T) {
	got := summariseFile(t, "../../pcap/testdata/perftest-oob.pcap", Options{})
	want := Summary{Format: "pcap", Frames: 140, NonRoCEFrames: 140, Flows: []*Flow{}}
	if diff := cmp.Diff(want, got, cmpFlow); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	js, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"format":"pcap","frames":140,"packets":0,"payload_bytes":0,"icrc_errors":0,"non_roce_frames":140,"truncated_frames":0,"malformed_frames":0,"flows":0,"by_flow":[]}`; string(js) != want {
		t.Errorf("JSON\n got %s\nwant %s", js, want)
	}
}

func TestSummariseErrors(t *testing.T) {
	if _, err := Summarise(bytes.NewReader([]byte("not a capture"))); err == nil {
		t.Error("no error for a non-capture")
	}
	orig, err := os.ReadFile("../../pcap/testdata/rxe-rc.pcap")
	if err != nil {
		t.Fatal(err)
	}
	// Cut inside the third record: two packets are summarised.
	s, err := Summarise(bytes.NewReader(orig[:24+2*(16+1082)+20]))
	if err == nil || s.Packets != 2 || s.FlowCount != 1 {
		t.Errorf("truncated file: %d packets, %d flows, err %v", s.Packets, s.FlowCount, err)
	}
}

// builder makes synthetic captures with roce's encoder and pcap's writer.
type builder struct {
	t   *testing.T
	buf bytes.Buffer
	w   *pcap.Writer
	ts  time.Time
}

func newBuilder(t *testing.T, lt pcap.LinkType) *builder {
	b := &builder{t: t, ts: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	w, err := pcap.NewWriter(&b.buf, lt, pcap.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.w = w
	return b
}

var (
	hostA = [4]byte{192, 0, 2, 1}
	hostB = [4]byte{192, 0, 2, 2}
)

// frame encodes an IPv4 Ethernet RoCEv2 frame from src to dst.
func (b *builder) frame(src, dst [4]byte, p roce.Packet) []byte {
	f := roce.Frame{
		HasEthernet: true,
		Ethernet:    roce.Ethernet{Dst: [6]byte{2, 0, 0, 0, 0, dst[3]}, Src: [6]byte{2, 0, 0, 0, 0, src[3]}},
		IPVersion:   4,
		IPv4:        roce.IPv4{ID: 1, Flags: roce.IPv4DontFragment, TTL: 64, Src: src, Dst: dst},
		UDP:         roce.UDP{SrcPort: roce.UDPSourcePort(0, p.BTH.DestQP, p.BTH.DestQP), DstPort: roce.UDPPort},
		Packet:      p,
	}
	out := make([]byte, f.Len())
	n, err := f.Encode(out)
	if err != nil {
		b.t.Fatal(err)
	}
	return out[:n]
}

func (b *builder) write(data []byte, origLen int) {
	b.ts = b.ts.Add(time.Millisecond)
	if err := b.w.WritePacket(b.ts, data, origLen); err != nil {
		b.t.Fatal(err)
	}
}

func (b *builder) add(src, dst [4]byte, p roce.Packet) { b.write(b.frame(src, dst, p), 0) }

func send(qp uint32, p psn.PSN, n int) roce.Packet {
	return roce.Packet{BTH: roce.BTH{Opcode: roce.RCSendOnly, PKey: roce.DefaultPKey, DestQP: qp, AckReq: true, PSN: p}, Payload: make([]byte, n)}
}

func ack(qp uint32, p psn.PSN, syn roce.Syndrome) roce.Packet {
	return roce.Packet{BTH: roce.BTH{Opcode: roce.RCAck, PKey: roce.DefaultPKey, DestQP: qp, PSN: p}, AETH: roce.AETH{Syndrome: syn, MSN: 1}}
}

func read(qp uint32, p psn.PSN, length uint32) roce.Packet {
	return roce.Packet{BTH: roce.BTH{Opcode: roce.RCReadRequest, PKey: roce.DefaultPKey, DestQP: qp, AckReq: true, PSN: p}, RETH: roce.RETH{VA: 0x1000, RKey: 7, DMALen: length}}
}

// TestSyntheticCapture builds a capture with a PSN gap, a retransmission,
// NAKs, an RNR NAK, a corrupted ICRC, PSN wrap-around, UD from two source
// QPs, a CNP, and frames that are not RoCE, truncated or malformed.
func TestSyntheticCapture(t *testing.T) {
	build := func() []byte {
		b := newBuilder(t, pcap.LinkTypeEthernet)
		// Requests A -> B, QP 0x100.
		b.add(hostA, hostB, send(0x100, 10, 100))
		b.add(hostA, hostB, send(0x100, 11, 101)) // payload 101: PadCnt 3
		b.add(hostA, hostB, send(0x100, 14, 4))   // gap: 12 and 13 missing
		// Responses B -> A, QP 0x200: a NAK for the gap, then ACKs.
		b.add(hostB, hostA, ack(0x200, 11, roce.SyndromeACKUnlimited))
		b.add(hostB, hostA, ack(0x200, 12, roce.SyndromeNAKPSNSeqErr))
		b.add(hostA, hostB, send(0x100, 12, 4)) // retransmission
		bad := b.frame(hostA, hostB, send(0x100, 13, 8))
		bad[60] ^= 0x10 // a payload byte: the ICRC no longer matches
		b.write(bad, 0)
		b.add(hostA, hostB, send(0x100, 13, 8))
		b.add(hostA, hostB, send(0x100, 14, 4))
		b.add(hostB, hostA, ack(0x200, 14, roce.RNRNAKSyndrome(14)))
		b.add(hostA, hostB, read(0x100, 15, 4096)) // 1 PSN at MTU 4096, 16 at 256
		b.add(hostA, hostB, send(0x100, 20, 0))    // within the READ's range
		b.add(hostB, hostA, ack(0x200, 20, roce.SyndromeNAKRemoteAccess))
		b.add(hostB, hostA, ack(0x200, 20, roce.SyndromeNAKRemoteAccess))
		b.add(hostB, hostA, ack(0x200, 20, roce.SyndromeNAKInvalidRequest))
		// PSN wrap-around on QP 0x300.
		for _, p := range []psn.PSN{0xfffffe, 0xffffff, 0, 1} {
			b.add(hostA, hostB, send(0x300, p, 16))
		}
		// UD from two source QPs to QP 0x400.
		for i, src := range []uint32{0x41, 0x42, 0x41} {
			b.add(hostA, hostB, roce.Packet{
				BTH:     roce.BTH{Opcode: roce.UDSendOnly, PKey: roce.DefaultPKey, DestQP: 0x400, PSN: psn.PSN(i)},
				DETH:    roce.DETH{QKey: 0x11111111, SrcQP: src},
				Payload: make([]byte, 32),
			})
		}
		// A CNP with BECN for QP 0x200.
		b.add(hostB, hostA, roce.Packet{BTH: roce.BTH{Opcode: roce.CNPOpcode, PKey: roce.DefaultPKey, BECN: true, DestQP: 0x200}})
		// Not RoCE: ARP, and UDP to port 53.
		arp := make([]byte, 42)
		arp[12], arp[13] = 0x08, 0x06
		b.write(arp, 0)
		dns := b.frame(hostA, hostB, send(0x100, 99, 4))
		dns[36], dns[37] = 0, 53
		b.write(dns, 0)
		b.write(dns[:50], len(dns)) // truncated, but still recognisably not RoCE
		// Malformed: unknown opcode 0x15 to port 4791.
		mal := b.frame(hostA, hostB, send(0x100, 99, 4))
		mal[42] = 0x15
		b.write(mal, 0)
		// Truncated by the snapshot length.
		full := b.frame(hostA, hostB, send(0x100, 99, 400))
		b.write(full[:100], len(full))
		return b.buf.Bytes()
	}
	a := netip.AddrFrom4(hostA)
	bb := netip.AddrFrom4(hostB)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Millisecond) }
	want := Summary{
		Format: "pcap", Frames: 28, Packets: 23, ICRCErrors: 1,
		PayloadBytes:     100 + 101 + 4 + 4 + 8 + 4 + 0 + 4*16 + 3*32,
		NonRoCEFrames:    3,
		TruncatedFrames:  1,
		MalformedFrames:  1,
		MalformedReasons: map[string]int{"roce: decode packet: unknown opcode": 1},
		FlowCount:        5,
		FirstTimestamp:   ptr(at(1)),
		LastTimestamp:    ptr(at(23)),
		Flows: []*Flow{
			{Src: a, Dst: bb, DestQP: 0x100, UDPSrcPort: roce.UDPSourcePort(0, 0x100, 0x100), Packets: 9, Requests: 8, ICRCErrors: 1,
				PayloadBytes: 100 + 101 + 4 + 4 + 8 + 4 + 0,
				Opcodes:      map[string]int{"RC_SEND_ONLY": 7, "RC_RDMA_READ_REQUEST": 1},
				PSNFirst:     u32(10), PSNLast: u32(20), PSNGaps: 1, PSNMissing: 2, Retransmits: 3,
				FirstTimestamp: at(1), LastTimestamp: at(12)},
			{Src: bb, Dst: a, DestQP: 0x200, UDPSrcPort: roce.UDPSourcePort(0, 0x200, 0x200), Packets: 7, Responses: 6, ACKs: 1,
				NAKs: 4, NAKSyndromes: map[string]int{"psn_sequence_error": 1, "remote_access_error": 2, "invalid_request": 1},
				RNRNAKs: 1, CNPs: 1, BECN: 1,
				Opcodes:  map[string]int{"RC_ACKNOWLEDGE": 6, "CNP": 1},
				PSNFirst: u32(11), PSNLast: u32(20),
				FirstTimestamp: at(4), LastTimestamp: at(23)},
			{Src: a, Dst: bb, DestQP: 0x300, UDPSrcPort: roce.UDPSourcePort(0, 0x300, 0x300), Packets: 4, Requests: 4, PayloadBytes: 64,
				Opcodes:  map[string]int{"RC_SEND_ONLY": 4},
				PSNFirst: u32(0xfffffe), PSNLast: u32(1),
				FirstTimestamp: at(16), LastTimestamp: at(19)},
			{Src: a, Dst: bb, DestQP: 0x400, SrcQP: u32(0x41), UDPSrcPort: roce.UDPSourcePort(0, 0x400, 0x400), Packets: 2, Requests: 2, PayloadBytes: 64,
				Opcodes:  map[string]int{"UD_SEND_ONLY": 2},
				PSNFirst: u32(0), PSNLast: u32(2), PSNGaps: 1, PSNMissing: 1,
				FirstTimestamp: at(20), LastTimestamp: at(22)},
			{Src: a, Dst: bb, DestQP: 0x400, SrcQP: u32(0x42), UDPSrcPort: roce.UDPSourcePort(0, 0x400, 0x400), Packets: 1, Requests: 1, PayloadBytes: 32,
				Opcodes:  map[string]int{"UD_SEND_ONLY": 1},
				PSNFirst: u32(1), PSNLast: u32(1),
				FirstTimestamp: at(21), LastTimestamp: at(21)},
		},
	}
	capture := build()
	got, err := Summarise(bytes.NewReader(capture))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpFlow); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	goldenJSON(t, "testdata/synthetic.json", got)

	// With MTU 1024 the 4096-byte READ at PSN 15 consumes PSNs 15-18, so
	// the SEND at PSN 20 follows a gap of one PSN (19).
	got, err = SummariseOptions(bytes.NewReader(capture), Options{MTU: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if fl := got.Flows[0]; fl.PSNGaps != 2 || fl.PSNMissing != 3 || fl.Retransmits != 3 {
		t.Errorf("MTU 1024: gaps %d missing %d retransmissions %d, want 2 3 3", fl.PSNGaps, fl.PSNMissing, fl.Retransmits)
	}
	// With MTU 256 it consumes PSNs 15-30, so the SEND at 20 is behind.
	got, err = SummariseOptions(bytes.NewReader(capture), Options{MTU: 256})
	if err != nil {
		t.Fatal(err)
	}
	if fl := got.Flows[0]; fl.PSNGaps != 1 || fl.Retransmits != 4 {
		t.Errorf("MTU 256: gaps %d retransmissions %d, want 1 4", fl.PSNGaps, fl.Retransmits)
	}
}

// TestIPv6 summarises an IPv6 RoCEv2 exchange captured as raw IP.
func TestIPv6(t *testing.T) {
	src := netip.MustParseAddr("2001:db8::1")
	dst := netip.MustParseAddr("2001:db8::2")
	b := newBuilder(t, pcap.LinkTypeRaw)
	for i, p := range []roce.Packet{send(0x21, 5, 10), send(0x21, 6, 10), ack(0x22, 6, roce.ACKSyndrome(0))} {
		s, d := src, dst
		if i == 2 {
			s, d = dst, src
		}
		f := roce.Frame{
			IPVersion: 6,
			IPv6:      roce.IPv6{FlowLabel: 0x12345, HopLimit: 64, Src: s.As16(), Dst: d.As16()},
			UDP:       roce.UDP{SrcPort: roce.UDPSourcePort(0x12345, 0, 0), DstPort: roce.UDPPort},
			Packet:    p,
		}
		out := make([]byte, f.Len())
		if _, err := f.Encode(out); err != nil {
			t.Fatal(err)
		}
		b.write(out, 0)
	}
	got, err := Summarise(&b.buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.Packets != 3 || got.FlowCount != 2 || got.ICRCErrors != 0 {
		t.Fatalf("summary %+v", got)
	}
	f0, f1 := got.Flows[0], got.Flows[1]
	if f0.Src != src || f0.Dst != dst || f0.DestQP != 0x21 || f0.Requests != 2 || f0.PayloadBytes != 20 || f0.UDPSrcPort != 0xe341 {
		t.Errorf("request flow %+v", f0)
	}
	if f1.Src != dst || f1.DestQP != 0x22 || f1.ACKs != 1 {
		t.Errorf("response flow %+v", f1)
	}
}

// TestLinkTypes runs the Soft-RoCE frames through the other link types.
func TestLinkTypes(t *testing.T) {
	ref := summariseFile(t, "../../pcap/testdata/rxe-rc.pcap", Options{})
	f, err := os.Open("../../pcap/testdata/rxe-rc.pcap")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		ts   time.Time
		data []byte
	}
	var recs []rec
	for {
		p, err := r.Next()
		if err != nil {
			break
		}
		recs = append(recs, rec{p.Timestamp, append([]byte(nil), p.Data...)})
	}
	tests := []struct {
		lt   pcap.LinkType
		wrap func(eth []byte) []byte
	}{
		{pcap.LinkTypeRaw, func(eth []byte) []byte { return eth[14:] }},
		{pcap.LinkTypeLinuxSLL, func(eth []byte) []byte {
			h := make([]byte, 16)
			h[14], h[15] = eth[12], eth[13]
			return append(h, eth[14:]...)
		}},
		{pcap.LinkTypeLinuxSLL2, func(eth []byte) []byte {
			h := make([]byte, 20)
			h[0], h[1] = eth[12], eth[13]
			return append(h, eth[14:]...)
		}},
	}
	for _, tt := range tests {
		b := newBuilder(t, tt.lt)
		for _, r := range recs {
			if err := b.w.WritePacket(r.ts, tt.wrap(r.data), 0); err != nil {
				t.Fatal(err)
			}
		}
		got, err := Summarise(&b.buf)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(ref, got, cmpFlow); diff != "" {
			t.Errorf("%v: summary differs from the Ethernet capture (-ethernet +%v):\n%s", tt.lt, tt.lt, diff)
		}
	}
	// A link type the summariser does not know: every frame is skipped.
	b := newBuilder(t, pcap.LinkType(147))
	b.write([]byte{1, 2, 3}, 0)
	got, err := Summarise(&b.buf)
	if err != nil || got.NonRoCEFrames != 1 || got.Packets != 0 {
		t.Errorf("unknown link type: %+v, %v", got, err)
	}
}

// FuzzSummarise feeds arbitrary bytes to Summarise: it must not panic, and
// its counts must add up.
func FuzzSummarise(f *testing.F) {
	for _, name := range []string{"rxe-rc.pcap", "rxe-rc.pcapng"} {
		b, err := os.ReadFile("../../pcap/testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 3000)])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _ := Summarise(bytes.NewReader(data))
		if s.Packets+s.NonRoCEFrames+s.TruncatedFrames+s.MalformedFrames != s.Frames {
			t.Fatalf("counts do not add up: %+v", s)
		}
		n := 0
		for _, fl := range s.Flows {
			n += fl.Packets
		}
		if n != s.Packets || len(s.Flows) != s.FlowCount {
			t.Fatalf("flow packets %d, total %d", n, s.Packets)
		}
	})
}

// TestCMMADs: the connection manager's MADs of Linux's CM capture decode
// (50, none broken, the first the rping REQ to a port nobody listened on
// and its REJ); a MAD whose header is not the CM's is listed with why, and
// MADs to QP 1 are also counted in their flows.
func TestCMMADs(t *testing.T) {
	s := summariseFile(t, "../../../verbsio/cm/testdata/rxe-cm1.pcap", Options{})
	if len(s.MADs) != 50 || s.MADsOmitted != 0 {
		t.Fatalf("%d MADs (%d omitted), want 50", len(s.MADs), s.MADsOmitted)
	}
	for i, m := range s.MADs {
		if m.Error != "" || m.Summary == "" {
			t.Errorf("MAD %d: %+v", i, m)
		}
	}
	first, rej := s.MADs[0], s.MADs[1]
	if first.Attr != "REQ" || first.TID != 0x25990c418 || first.Src != netip.MustParseAddr("10.77.0.2") ||
		first.Summary != "REQ comm 0x18c49059 sid 0x0000000001061c06 qpn 0x11 psn 0xe8e10a RC mtu 1024 ::ffff:10.77.0.2->::ffff:10.77.0.1 tid 0x25990c418" {
		t.Errorf("first MAD %+v", first)
	}
	if rej.Attr != "REJ" || !strings.Contains(rej.Summary, "reason 8 (invalid service ID)") {
		t.Errorf("second MAD %+v", rej)
	}
	qp1 := 0
	for _, fl := range s.Flows {
		if fl.DestQP == 1 {
			qp1 += fl.Packets
		}
	}
	if qp1 != 50 {
		t.Errorf("flows to QP 1 hold %d packets, want 50", qp1)
	}

	b := newBuilder(t, pcap.LinkTypeEthernet)
	payload := make([]byte, 256)
	payload[0], payload[1], payload[2], payload[3] = 1, 0x04, 2, 3 // class 0x04 (performance), not the CM
	payload[16], payload[17] = 0x00, 0x10
	b.add(hostA, hostB, roce.Packet{BTH: roce.BTH{Opcode: roce.UDSendOnly, PKey: roce.DefaultPKey, DestQP: 1},
		DETH: roce.DETH{QKey: 0x80010000, SrcQP: 1}, Payload: payload})
	b.add(hostA, hostB, roce.Packet{BTH: roce.BTH{Opcode: roce.UDSendOnly, PKey: roce.DefaultPKey, DestQP: 1},
		DETH: roce.DETH{QKey: 0x80010000, SrcQP: 1}, Payload: payload[:100]})
	got, err := Summarise(&b.buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.MADs) != 2 || got.MADs[0].Attr != "REQ" || !strings.Contains(got.MADs[0].Error, "class") ||
		got.MADs[1].Attr != "REQ" || !strings.Contains(got.MADs[1].Error, "100 bytes") {
		t.Errorf("broken MADs %+v", got.MADs)
	}
}
