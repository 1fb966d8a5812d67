package roce

import (
	"hash/crc32"
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
