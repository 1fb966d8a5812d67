package roce

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// addCaptureSeeds adds the transport part (or the whole frame) of every
// packet of the Soft-RoCE capture to the fuzz corpus.
func addCaptureSeeds(f *testing.F, whole bool) {
	for _, b := range readFrames(f, rxeCapture) {
		if whole {
			f.Add(b)
			continue
		}
		var fr Frame
		if err := fr.DecodeEthernet(b); err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte(nil), fr.Transport...))
	}
	for _, op := range Opcodes() {
		p := samplePacket(op, payloadOf(3))
		b := make([]byte, p.Len())
		if _, err := p.Encode(b); err != nil {
			f.Fatal(err)
		}
		if !whole {
			f.Add(b)
		}
	}
}

// FuzzDecode decodes arbitrary transport bytes. It must never panic, and a
// packet that decodes must re-encode to the same bytes (with the pad bytes
// zeroed) and decode again to the same fields.
func FuzzDecode(f *testing.F) {
	addCaptureSeeds(f, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Packet
		if err := p.Decode(data); err != nil {
			return
		}
		want := append([]byte(nil), data...)
		if p.BTH.Opcode.HasPayload() {
			end := len(want) - ICRCLen
			clear(want[end-int(p.BTH.PadCnt) : end])
		}
		if n := p.Len(); n != len(data) {
			t.Fatalf("Len() = %d, input %d bytes", n, len(data))
		}
		out := make([]byte, len(data))
		n, err := p.Encode(out)
		if err != nil {
			t.Fatalf("Encode of a decoded packet: %v", err)
		}
		if !bytes.Equal(want, out[:n]) {
			t.Fatalf("re-encoded packet differs:\n in % x\nout % x", want, out[:n])
		}
		var q Packet
		if err := q.Decode(out[:n]); err != nil {
			t.Fatalf("decode of re-encoded packet: %v", err)
		}
		if diff := cmp.Diff(p, q); diff != "" {
			t.Fatalf("re-decoded packet differs (-first +second):\n%s", diff)
		}
	})
}

// FuzzDecodeFrame decodes arbitrary Ethernet frames. It must never panic; a
// frame that decodes must re-encode (with lengths, checksum and ICRC
// recomputed) to a frame that decodes to the same transport fields and
// passes its ICRC check.
func FuzzDecodeFrame(f *testing.F) {
	addCaptureSeeds(f, true)
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr Frame
		if err := fr.DecodeEthernet(data); err != nil {
			return
		}
		_ = fr.VerifyICRC()
		g := fr
		out := make([]byte, g.Len())
		n, err := g.Encode(out)
		if err != nil {
			t.Fatalf("Encode of a decoded frame: %v", err)
		}
		var h Frame
		if err := h.DecodeEthernet(out[:n]); err != nil {
			t.Fatalf("decode of re-encoded frame: %v", err)
		}
		if !h.VerifyICRC() {
			t.Fatal("re-encoded frame fails its ICRC check")
		}
		fr.Packet.ICRC = h.Packet.ICRC
		if diff := cmp.Diff(fr.Packet, h.Packet); diff != "" {
			t.Fatalf("re-decoded packet differs (-first +second):\n%s", diff)
		}
	})
}
