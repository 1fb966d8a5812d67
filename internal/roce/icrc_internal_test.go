package roce

import (
	"hash/crc32"
	"math/rand/v2"

	"github.com/rperf/rperf/internal/psn"
	"testing"
)

// TestUpdateSmall checks the slicing-by-8 CRC against hash/crc32 for every
// length up to 100 and several starting states.
func TestUpdateSmall(t *testing.T) {
	b := make([]byte, 100)
	for i := range b {
		b[i] = byte(i*131 + 7)
	}
	for _, seed := range []uint32{0, icrcSeed, 0xffffffff, 0x12345678} {
		for n := 0; n <= len(b); n++ {
			if got, want := updateSmall(seed, b[:n]), crc32.Update(seed, crc32.IEEETable, b[:n]); got != want {
				t.Fatalf("seed %#x, %d bytes: %#08x, want %#08x", seed, n, got, want)
			}
		}
	}
}

// TestPrefixMatchesHeaders checks the table-driven ICRC (Prefix, Begin)
// against the ICRC over the real IP and UDP headers (Headers, ICRCIPv4,
// ICRCIPv6) for random paths, identifications and lengths, with and
// without DF, with extension headers.
func TestPrefixMatchesHeaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 500; i++ {
		var p4 IPv4Path
		var p6 IPv6Path
		for k := range p4.Src {
			p4.Src[k], p4.Dst[k] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		for k := range p6.Src {
			p6.Src[k], p6.Dst[k] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		p4.SrcPort, p4.DstPort, p4.DontFragment = uint16(rng.Uint32()), uint16(rng.Uint32()), i%2 == 0
		p6.SrcPort, p6.DstPort = p4.SrcPort, p4.DstPort
		op := []Opcode{RCSendOnly, RCWriteOnly, RCAck, UDSendOnlyImm}[i%4]
		n := rng.IntN(300)
		if i%50 == 0 {
			n = 4096
		}
		var pk Packet
		pk.BTH = BTH{Opcode: op, PKey: DefaultPKey, DestQP: rng.Uint32() & 0xffffff, PSN: psn.PSN(rng.Uint32() & 0xffffff), AckReq: i%3 == 0}
		pk.RETH = RETH{VA: rng.Uint64(), RKey: rng.Uint32(), DMALen: uint32(n)}
		if op == RCAck {
			n = 0
		}
		pk.Payload = make([]byte, n)
		for k := range pk.Payload {
			pk.Payload[k] = byte(rng.Uint32())
		}
		buf := make([]byte, pk.Len())
		if _, err := pk.Encode(buf); err != nil {
			t.Fatal(err)
		}
		id := uint16(rng.Uint32())
		ip4, u4 := p4.Headers(id, len(buf))
		want4, err := ICRCIPv4(&ip4, &u4, buf)
		if err != nil {
			t.Fatal(err)
		}
		ip6 := IPv6{PayloadLength: uint16(UDPLen + len(buf)), NextHeader: ProtoUDP, HopLimit: 64, Src: p6.Src, Dst: p6.Dst}
		u6 := UDP{SrcPort: p6.SrcPort, DstPort: p6.DstPort, Length: uint16(UDPLen + len(buf))}
		want6, err := ICRCIPv6(&ip6, &u6, buf)
		if err != nil {
			t.Fatal(err)
		}
		hl := op.Layout().HeaderLen
		body := buf[hl : len(buf)-ICRCLen]
		got4 := ICRCUpdate(p4.Prefix().Begin(id, len(buf), buf[:hl]), body)
		got6 := ICRCUpdate(p6.Prefix().Begin(len(buf), buf[:hl]), body)
		if got4 != want4 || got6 != want6 {
			t.Fatalf("#%d %s, %d bytes, id %d, DF %v: ICRC %08x/%08x, over the headers %08x/%08x", i, op, len(buf), id, p4.DontFragment, got4, got6, want4, want6)
		}
	}
}
