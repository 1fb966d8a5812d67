package roce

import (
	"math/rand/v2"
	"testing"
)

func TestSolveID(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	path := IPv4Path{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, SrcPort: 0xc123, DstPort: 4791, DontFragment: true}
	for _, n := range []int{20, 64, 1028, 4112, 9000} {
		for trial := 0; trial < 20; trial++ {
			pkt := make([]byte, n)
			for i := range pkt {
				pkt[i] = byte(rng.Uint32())
			}
			id := uint16(rng.Uint32())
			if trial == 0 {
				id = 0
			}
			if err := path.Seal(id, pkt); err != nil {
				t.Fatal(err)
			}
			got, ok := path.SolveID(pkt)
			if !ok || got != id {
				t.Fatalf("len %d: SolveID = %d, %v; sealed with %d", n, got, ok, id)
			}
			// A flipped payload bit is caught (it could pass with
			// probability 2^-16; this seed does not hit it).
			pkt[BTHLen+rng.IntN(n-BTHLen-ICRCLen)] ^= 1 << rng.IntN(8)
			if got, ok := path.SolveID(pkt); ok {
				t.Fatalf("len %d: corrupted packet accepted with id %d", n, got)
			}
		}
	}
}

func TestSolveIDOnCapture(t *testing.T) {
	// Every rxe packet in the capture carries its own IPv4 ID; SolveID
	// must find it from the addresses, ports and payload alone.
	frames := readFrames(t, rxeCapture)
	for i, f := range frames {
		var fr Frame
		if err := fr.DecodeEthernet(f); err != nil {
			t.Fatal(err)
		}
		path := IPv4Path{Src: fr.IPv4.Src, Dst: fr.IPv4.Dst, SrcPort: fr.UDP.SrcPort, DstPort: fr.UDP.DstPort,
			DontFragment: fr.IPv4.Flags&IPv4DontFragment != 0}
		id, ok := path.SolveID(fr.Transport)
		if !ok || id != fr.IPv4.ID {
			t.Errorf("packet %d: SolveID = %d, %v; the IP header says %d", i, id, ok, fr.IPv4.ID)
		}
	}
}

func BenchmarkSolveID(b *testing.B) {
	path := IPv4Path{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, SrcPort: 0xc123, DstPort: 4791, DontFragment: true}
	pkt := make([]byte, 1052)
	path.Seal(1234, pkt)
	path.SolveID(pkt)
	b.ReportAllocs()
	for b.Loop() {
		path.SolveID(pkt)
	}
}

func TestICRCBeginMatchesICRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p4 := IPv4Path{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, SrcPort: 4791, DstPort: 4791, DontFragment: true}
	p6 := IPv6Path{Src: [16]byte{0xfd, 1}, Dst: [16]byte{0xfd, 2}, SrcPort: 4791, DstPort: 4791}
	for _, op := range []Opcode{RCSendOnly, RCWriteFirst, RCWriteOnlyImm, UDSendOnlyImm} {
		for _, n := range []int{0, 1, 3, 100, 4096} {
			var pk Packet
			pk.BTH = BTH{Opcode: op, PKey: DefaultPKey, DestQP: 0x123, PSN: 77}
			pk.RETH = RETH{VA: 0x1000, RKey: 9, DMALen: uint32(n)}
			pk.Payload = make([]byte, n)
			for i := range pk.Payload {
				pk.Payload[i] = byte(rng.Uint32())
			}
			buf := make([]byte, pk.Len())
			if _, err := pk.Encode(buf); err != nil {
				t.Fatal(err)
			}
			hl := op.Layout().HeaderLen
			id := uint16(rng.Uint32())
			want4, _ := p4.ICRC(id, buf)
			want6, _ := p6.ICRC(buf)
			// Payload split in two pieces, then the pad.
			pad := buf[hl+n : len(buf)-ICRCLen]
			got4 := ICRCUpdate(ICRCUpdate(ICRCUpdate(p4.ICRCBegin(id, len(buf), buf[:hl]), pk.Payload[:n/2]), pk.Payload[n/2:]), pad)
			got6 := ICRCUpdate(ICRCUpdate(p6.ICRCBegin(len(buf), buf[:hl]), pk.Payload), pad)
			if got4 != want4 || got6 != want6 {
				t.Errorf("%s len %d: streamed ICRC %08x/%08x, whole %08x/%08x", op, n, got4, got6, want4, want6)
			}
		}
	}
}
