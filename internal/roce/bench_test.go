package roce

import (
	"fmt"
	"hash/crc32"
	"testing"
)

// BenchmarkICRC measures the ICRC of an RC_SEND_ONLY packet over IPv4 as a
// UDP-socket sender computes it (IPv4Path.ICRC) and as a receiver checks a
// captured frame (ICRCRaw), next to a plain CRC-32 of the same bytes as the
// reference. SetBytes counts the transport part (BTH, payload, ICRC).
func BenchmarkICRC(b *testing.B) {
	for _, size := range []int{64, 4096} {
		p := Packet{BTH: BTH{Opcode: RCSendOnly, PKey: DefaultPKey, DestQP: 0x11, PSN: 1}, Payload: payloadOf(size)}
		pkt := make([]byte, p.Len())
		if _, err := p.Encode(pkt); err != nil {
			b.Fatal(err)
		}
		path := IPv4Path{Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}, SrcPort: 0xc121, DstPort: UDPPort, DontFragment: true}
		ip, udp := path.Headers(0, len(pkt))
		var hdr [IPv4Len + UDPLen]byte
		if err := PutIPv4UDP(hdr[:], &ip, &udp, len(pkt)); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("path=ipv4/payload=%d", size), func(b *testing.B) {
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				if err := path.Seal(0, pkt); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("path=raw/payload=%d", size), func(b *testing.B) {
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ICRCRaw(hdr[:IPv4Len], hdr[IPv4Len:], pkt); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("path=crc32-reference/payload=%d", size), func(b *testing.B) {
			buf := make([]byte, 8+len(hdr)+len(pkt)-ICRCLen)
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				_ = crc32.ChecksumIEEE(buf)
			}
		})
	}
}

// BenchmarkDecode measures Packet.Decode and Frame.DecodeEthernet with an
// ICRC check on a captured 1 KiB SEND.
func BenchmarkDecode(b *testing.B) {
	frame := readFrames(b, rxeCapture)[0]
	var f Frame
	if err := f.DecodeEthernet(frame); err != nil {
		b.Fatal(err)
	}
	transport := f.Transport
	b.Run("packet", func(b *testing.B) {
		b.ReportAllocs()
		var p Packet
		for b.Loop() {
			if err := p.Decode(transport); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("frame+icrc", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		var g Frame
		for b.Loop() {
			if err := g.DecodeEthernet(frame); err != nil || !g.VerifyICRC() {
				b.Fatal(err)
			}
		}
	})
}
