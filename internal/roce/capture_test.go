package roce

import (
	"errors"
	"io"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rperf/rperf/internal/pcap"
	"github.com/rperf/rperf/internal/psn"
)

const (
	rxeCapture      = "../pcap/testdata/rxe-rc.pcap"
	perftestCapture = "../pcap/testdata/perftest-oob.pcap"
)

// readFrames returns copies of every frame in a capture.
func readFrames(tb testing.TB, path string) [][]byte {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var frames [][]byte
	for {
		p, err := r.Next()
		if err == io.EOF {
			return frames
		}
		if err != nil {
			tb.Fatal(err)
		}
		if p.LinkType != pcap.LinkTypeEthernet {
			tb.Fatalf("link type %v, want Ethernet", p.LinkType)
		}
		frames = append(frames, append([]byte(nil), p.Data...))
	}
}

// TestCaptureDecode decodes every packet of the Soft-RoCE capture, checks
// its fields against what the capture is known to hold, verifies its ICRC
// and re-encodes it byte for byte.
func TestCaptureDecode(t *testing.T) {
	frames := readFrames(t, rxeCapture)
	if len(frames) != 74 {
		t.Fatalf("got %d frames, want 74", len(frames))
	}
	counts := map[Opcode]int{}
	for i, b := range frames {
		var f Frame
		if err := f.DecodeEthernet(b); err != nil {
			t.Fatalf("frame %d: %v", i+1, err)
		}
		if !f.VerifyICRC() {
			crc, _ := f.ComputeICRC()
			t.Errorf("frame %d: ICRC %#08x stored, %#08x computed", i+1, f.Packet.ICRC, crc)
		}
		counts[f.Packet.BTH.Opcode]++
		bth := f.Packet.BTH
		if bth.PKey != DefaultPKey || bth.TVer != 0 || bth.PadCnt != 0 || bth.FECN || bth.BECN {
			t.Errorf("frame %d: unexpected BTH %+v", i+1, bth)
		}
		if bth.DestQP < 0x11 || bth.DestQP > 0x14 {
			t.Errorf("frame %d: DestQP %#x outside 0x11-0x14", i+1, bth.DestQP)
		}
		if f.IPVersion != 4 || !f.IPv4.DF() || f.IPv4.TTL != 64 || f.IPv4.TOS != 0 || f.UDP.Checksum != 0 || f.UDP.DstPort != UDPPort {
			t.Errorf("frame %d: unexpected IPv4/UDP %+v %+v", i+1, f.IPv4, f.UDP)
		}
		if got := IPv4Checksum(f.IPHeader); got != f.IPv4.Checksum {
			t.Errorf("frame %d: IPv4 checksum %#x, computed %#x", i+1, f.IPv4.Checksum, got)
		}
		// The UDP source port follows rdma_get_udp_sport with both QPs equal.
		if want := UDPSourcePort(0, bth.DestQP, bth.DestQP); f.UDP.SrcPort != want {
			t.Errorf("frame %d: UDP source port %#x, want %#x", i+1, f.UDP.SrcPort, want)
		}
		// Re-encode from the decoded fields alone.
		g := Frame{
			HasEthernet: true, Ethernet: f.Ethernet, IPVersion: 4,
			IPv4:   IPv4{TOS: f.IPv4.TOS, ID: f.IPv4.ID, Flags: f.IPv4.Flags, TTL: f.IPv4.TTL, Src: f.IPv4.Src, Dst: f.IPv4.Dst},
			UDP:    UDP{SrcPort: f.UDP.SrcPort, DstPort: f.UDP.DstPort},
			Packet: f.Packet,
		}
		g.Packet.ICRC = 0
		out := make([]byte, g.Len())
		n, err := g.Encode(out)
		if err != nil {
			t.Fatalf("frame %d: encode: %v", i+1, err)
		}
		if diff := cmp.Diff(b, out[:n]); diff != "" {
			t.Errorf("frame %d: re-encoded frame differs (-captured +encoded):\n%s", i+1, diff)
		}
		// A sender that knows only the path and the IP ID predicts the
		// same ICRC and headers.
		path := IPv4Path{Src: f.IPv4.Src, Dst: f.IPv4.Dst, SrcPort: f.UDP.SrcPort, DstPort: UDPPort, DontFragment: true}
		crc, err := path.ICRC(f.IPv4.ID, f.Transport)
		if err != nil || crc != f.Packet.ICRC {
			t.Errorf("frame %d: IPv4Path.ICRC = %#08x, %v; want %#08x", i+1, crc, err, f.Packet.ICRC)
		}
		ip, udp := path.Headers(f.IPv4.ID, len(f.Transport))
		if diff := cmp.Diff(f.IPv4, ip); diff != "" {
			t.Errorf("frame %d: IPv4Path.Headers IPv4 (-captured +predicted):\n%s", i+1, diff)
		}
		if diff := cmp.Diff(f.UDP, udp); diff != "" {
			t.Errorf("frame %d: IPv4Path.Headers UDP (-captured +predicted):\n%s", i+1, diff)
		}
	}
	want := map[Opcode]int{
		RCSendFirst: 8, RCSendLast: 8, RCWriteFirst: 8, RCWriteLast: 8, RCAck: 16,
		RCReadRequest: 8, RCReadResponseOnly: 8, RCFetchAdd: 5, RCAtomicAck: 5,
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("opcode counts (-want +got):\n%s", diff)
	}
}

// TestCaptureFields checks every header field of one packet of each opcode
// against values read by hand from the capture's hex dump.
func TestCaptureFields(t *testing.T) {
	frames := readFrames(t, rxeCapture)
	tests := []struct {
		frame      int // 1-based
		want       Packet
		payloadLen int
	}{
		{1, Packet{BTH: BTH{Opcode: RCSendFirst, PKey: 0xffff, DestQP: 0x11, PSN: 0x480aa1}, ICRC: 0xa298bacc}, 1024},
		{2, Packet{BTH: BTH{Opcode: RCSendLast, PKey: 0xffff, DestQP: 0x11, AckReq: true, PSN: 0x480aa2}, ICRC: 0x8015d4b0}, 1024},
		{17, Packet{BTH: BTH{Opcode: RCAck, PKey: 0xffff, DestQP: 0x11, PSN: 0x480aa2}, AETH: AETH{Syndrome: SyndromeACKUnlimited, MSN: 1}, ICRC: 0x0f2ce87b}, 0},
		{25, Packet{BTH: BTH{Opcode: RCWriteFirst, PKey: 0xffff, DestQP: 0x12, PSN: 0x757202}, RETH: RETH{VA: 0x0000557200337000, RKey: 0x3bd, DMALen: 2048}, ICRC: 0x582a8d3c}, 1024},
		{49, Packet{BTH: BTH{Opcode: RCReadRequest, PKey: 0xffff, DestQP: 0x13, AckReq: true, PSN: 0xaa1721}, RETH: RETH{VA: 0x0000559f7acd7000, RKey: 0x46d, DMALen: 64}, ICRC: 0x1f157054}, 0},
		{50, Packet{BTH: BTH{Opcode: RCReadResponseOnly, PKey: 0xffff, DestQP: 0x13, PSN: 0xaa1721}, AETH: AETH{Syndrome: SyndromeACKUnlimited, MSN: 1}, ICRC: 0xf3d0678d}, 64},
		{65, Packet{BTH: BTH{Opcode: RCFetchAdd, PKey: 0xffff, DestQP: 0x14, AckReq: true, PSN: 0x8b8e00}, AtomicETH: AtomicETH{VA: 0x000055e3439d2000, RKey: 0x557, SwapAdd: 1, Compare: 0}, ICRC: 0xb560c313}, 0},
		{66, Packet{BTH: BTH{Opcode: RCAtomicAck, PKey: 0xffff, DestQP: 0x14, PSN: 0x8b8e00}, AETH: AETH{Syndrome: SyndromeACKUnlimited, MSN: 1}, AtomicAckETH: AtomicAckETH{OrigData: 0x914173efe7d4c060}, ICRC: 0x7ace3437}, 0},
	}
	for _, tt := range tests {
		var f Frame
		if err := f.DecodeEthernet(frames[tt.frame-1]); err != nil {
			t.Fatalf("frame %d: %v", tt.frame, err)
		}
		got := f.Packet
		if len(got.Payload) != tt.payloadLen {
			t.Errorf("frame %d: payload %d bytes, want %d", tt.frame, len(got.Payload), tt.payloadLen)
		}
		got.Payload = nil
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("frame %d (-want +got):\n%s", tt.frame, diff)
		}
	}
}

// TestCaptureCorruption flips one bit of every byte of a few captured frames
// and checks that the ICRC catches exactly the bytes it covers.
func TestCaptureCorruption(t *testing.T) {
	frames := readFrames(t, rxeCapture)
	const ipOff, udpOff, bthOff = 14, 34, 42
	masked := map[int]string{
		ipOff + 1: "TOS", ipOff + 8: "TTL", ipOff + 10: "IP checksum", ipOff + 11: "IP checksum",
		udpOff + 6: "UDP checksum", udpOff + 7: "UDP checksum", bthOff + 4: "FECN/BECN/resv",
	}
	for _, idx := range []int{1, 17, 25, 50, 65, 66} {
		orig := frames[idx-1]
		for pos := range orig {
			for _, bit := range []byte{0x01, 0x80} {
				b := append([]byte(nil), orig...)
				b[pos] ^= bit
				// A flipped IP version is rejected outright, which
				// counts as detected.
				crc, err := ICRCRaw(b[ipOff:udpOff], b[udpOff:bthOff], b[bthOff:])
				match := err == nil && crc == StoredICRC(b)
				var want bool
				switch {
				case pos < ipOff:
					want = true // Ethernet is not covered
				case masked[pos] != "":
					want = true
				default:
					want = false
				}
				if pos >= len(b)-ICRCLen {
					// The stored ICRC itself changed.
					want = false
				}
				if match != want {
					t.Errorf("frame %d: flipping bit %#x of byte %d (%s): ICRC match %v, want %v", idx, bit, pos, masked[pos], match, want)
				}
			}
		}
	}
}

// TestCaptureDecodeVerifyCorrupt checks that a corrupted payload still
// decodes but fails VerifyICRC.
func TestCaptureDecodeVerifyCorrupt(t *testing.T) {
	frames := readFrames(t, rxeCapture)
	b := append([]byte(nil), frames[0]...)
	b[100] ^= 0x40
	var f Frame
	if err := f.DecodeEthernet(b); err != nil {
		t.Fatal(err)
	}
	if f.VerifyICRC() {
		t.Error("VerifyICRC accepted a corrupted payload")
	}
}

// TestCaptureNonRoCE checks that the TCP capture is recognised as not RoCE.
func TestCaptureNonRoCE(t *testing.T) {
	frames := readFrames(t, perftestCapture)
	if len(frames) == 0 {
		t.Fatal("no frames")
	}
	for i, b := range frames {
		var f Frame
		err := f.DecodeEthernet(b)
		if !errors.Is(err, ErrNotRoCE) {
			t.Errorf("frame %d: err = %v, want ErrNotRoCE", i+1, err)
		}
	}
}

// TestCapturePSN checks the PSN sequence of the SEND flow with the psn
// package.
func TestCapturePSN(t *testing.T) {
	frames := readFrames(t, rxeCapture)
	var prev psn.PSN
	for i := 0; i < 16; i++ {
		var f Frame
		if err := f.DecodeEthernet(frames[i]); err != nil {
			t.Fatal(err)
		}
		if i > 0 && psn.Diff(prev, f.Packet.BTH.PSN) != 1 {
			t.Errorf("frame %d: PSN %#x does not follow %#x", i+1, f.Packet.BTH.PSN, prev)
		}
		prev = f.Packet.BTH.PSN
	}
}

// rxeIPv6Capture is the start of a write-lat over an IPv6 GID (perftest
// 4.5's ib_write_lat -x 2 on Linux 6.1's rxe0 at fd00:77::1 against
// rperf's udp fabric at fd00:77::9, from the interop suite's -pcap): rperf's
// three RDMA WRITEs and rxe's nine packets, ACKs and WRITEs.
const rxeIPv6Capture = "../pcap/testdata/rxe-rc-ipv6.pcap"

// TestCaptureIPv6 checks the IPv6 ICRC against Linux rxe's packets, both
// from the raw headers and from what a UDP socket sees of them (IPv6Path:
// addresses, ports, the packet), and records what rxe puts in the headers:
// UDP checksum 0 over IPv6 too (RFC 6936; a receiving socket must allow it
// with UDP_NO_CHECK6_RX), traffic class 0, flow label 0, hop limit 64.
func TestCaptureIPv6(t *testing.T) {
	frames := readFrames(t, rxeIPv6Capture)
	if len(frames) != 12 {
		t.Fatalf("got %d frames, want 12", len(frames))
	}
	rxe := [16]byte{0xfd, 0x00, 0x00, 0x77, 15: 0x01}
	fromRxe := 0
	for i, b := range frames {
		var f Frame
		if err := f.DecodeEthernet(b); err != nil {
			t.Fatalf("frame %d: %v", i+1, err)
		}
		if f.IPVersion != 6 || f.UDP.DstPort != UDPPort {
			t.Fatalf("frame %d: IPv%d to UDP port %d, want IPv6 to %d", i+1, f.IPVersion, f.UDP.DstPort, UDPPort)
		}
		stored := f.Packet.ICRC
		raw, err := ICRCRaw(f.IPHeader, f.UDPHeader, f.Transport)
		if err != nil || raw != stored {
			t.Errorf("frame %d: ICRC %#08x stored, %#08x from the raw headers (%v)", i+1, stored, raw, err)
		}
		path := IPv6Path{Src: f.IPv6.Src, Dst: f.IPv6.Dst, SrcPort: f.UDP.SrcPort, DstPort: f.UDP.DstPort}
		if got, err := path.ICRC(f.Transport); err != nil || got != stored {
			t.Errorf("frame %d: ICRC %#08x stored, %#08x from the path (%v)", i+1, stored, got, err)
		}
		if f.IPv6.Src != rxe {
			continue
		}
		fromRxe++
		if h := f.IPv6; f.UDP.Checksum != 0 || h.TrafficClass != 0 || h.FlowLabel != 0 || h.HopLimit != 64 {
			t.Errorf("frame %d from rxe: UDP checksum %#04x, traffic class %d, flow label %#x, hop limit %d; want 0, 0, 0, 64",
				i+1, f.UDP.Checksum, h.TrafficClass, h.FlowLabel, h.HopLimit)
		}
	}
	if fromRxe != 9 {
		t.Errorf("%d frames from rxe, want 9", fromRxe)
	}
}
