package soft

import (
	"encoding/binary"
	"testing"
)

// TestImmWire: the ImmDt bytes on the wire are the memory bytes of the
// work request's Imm (a __be32 in verbs), so htonl(0x1234) arrives as
// 00 00 12 34 and comes back as the same uint32.
func TestImmWire(t *testing.T) {
	for _, imm := range []uint32{0, 0x12, 0x34120000, 0x72706631, 0xdeadbeef} {
		var mem, wire [4]byte
		binary.NativeEndian.PutUint32(mem[:], imm)
		binary.BigEndian.PutUint32(wire[:], immToWire(imm))
		if wire != mem {
			t.Errorf("Imm %#x goes on the wire as % x, want its memory bytes % x", imm, wire, mem)
		}
		if back := immFromWire(immToWire(imm)); back != imm {
			t.Errorf("Imm %#x comes back as %#x", imm, back)
		}
	}
	htonl := binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, 0x1234))
	var wire [4]byte
	binary.BigEndian.PutUint32(wire[:], immToWire(htonl))
	if wire != [4]byte{0, 0, 0x12, 0x34} {
		t.Errorf("htonl(0x1234) goes on the wire as % x", wire)
	}
}
