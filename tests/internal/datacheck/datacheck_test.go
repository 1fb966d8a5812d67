package datacheck

import (
	"bytes"
	"testing"
)

func TestFillCheck(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 8, 9, 15, 16, 100, 4096, 65537} {
		id := ID(Server, 3, 7, 12345)
		b := make([]byte, n)
		Fill(b, id)
		if m := Check(b, id); m != nil {
			t.Fatalf("%d B: %v", n, m)
		}
		// A prefix of a longer message is the shorter message.
		long := make([]byte, n+13)
		Fill(long, id)
		if !bytes.Equal(long[:n], b) {
			t.Fatalf("%d B: not a prefix of the longer message", n)
		}
		if n == 0 {
			continue
		}
		// Every byte counts: flip one anywhere, Check names it.
		for _, off := range []int{0, n / 2, n - 1} {
			c := bytes.Clone(b)
			c[off] ^= 0x10
			m := Check(c, id)
			if m == nil || m.Off != off || m.Got != c[off] || m.Want != b[off] || m.Size != n {
				t.Errorf("%d B, byte %d flipped: %v", n, off, m)
			}
		}
		// Another message differs (the id is in the first bytes).
		if Check(b, ID(Server, 3, 7, 12346)) == nil {
			t.Errorf("%d B: message 12345 passes as 12346", n)
		}
	}
	if ID(Client, 0, 0, 5) == ID(Server, 0, 0, 5) || ID(Client, 1, 0, 5) == ID(Client, 0, 0, 5) || ID(Client, 0, 1, 5) == ID(Client, 0, 0, 5) {
		t.Error("side, QP and run must change the id")
	}
	m := Check([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, ID(Client, 0, 0, 0))
	if m == nil || m.Error() == "" {
		t.Error("garbage passes")
	}
}

func TestNumber(t *testing.T) {
	base := ID(Client, 2, 9, 0)
	for _, n := range []int{1, 2, 3, 4, 6, 8, 64} {
		for _, c := range []struct{ k, next int64 }{{0, 0}, {5, 0}, {300, 290}, {70000, 69990}, {1 << 31, 1<<31 - 3}} {
			b := make([]byte, n)
			Fill(b, base|uint64(c.k))
			k, ok := Number(b, base, c.next)
			if !ok || k != c.k {
				t.Errorf("%d B, message %d (next %d): got %d ok %v", n, c.k, c.next, k, ok)
			}
		}
	}
	b := make([]byte, 16)
	Fill(b, ID(Client, 3, 9, 4))
	if _, ok := Number(b, base, 0); ok {
		t.Error("a message of another QP is taken for this one")
	}
}

func BenchmarkFill(b *testing.B) {
	buf := make([]byte, 65536)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		Fill(buf, uint64(i))
	}
}

func BenchmarkCheck(b *testing.B) {
	buf := make([]byte, 65536)
	Fill(buf, 7)
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		if Check(buf, 7) != nil {
			b.Fatal("mismatch")
		}
	}
}
