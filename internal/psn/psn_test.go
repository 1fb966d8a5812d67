package psn

import "testing"

func TestAddNext(t *testing.T) {
	tests := []struct {
		p    PSN
		n    int
		want PSN
	}{
		{0, 1, 1},
		{Mask, 1, 0},
		{Mask - 1, 3, 1},
		{0, -1, Mask},
		{5, -10, Mask - 4},
		{0x123456, Modulus, 0x123456},
		{0xff000005, 1, 6}, // high bits ignored
	}
	for _, tt := range tests {
		if got := tt.p.Add(tt.n); got != tt.want {
			t.Errorf("PSN(%#x).Add(%d) = %#x, want %#x", tt.p, tt.n, got, tt.want)
		}
		if tt.n == 1 {
			if got := tt.p.Next(); got != tt.want {
				t.Errorf("PSN(%#x).Next() = %#x, want %#x", tt.p, got, tt.want)
			}
		}
	}
}

func TestDiffCompare(t *testing.T) {
	tests := []struct {
		p, q    PSN
		diff    int32
		cmp     int
		before  bool
		after   bool
		forward uint32
	}{
		{0, 0, 0, 0, false, false, 0},
		{0, 1, 1, -1, true, false, 1},
		{1, 0, -1, 1, false, true, Mask},
		{Mask, 0, 1, -1, true, false, 1},
		{0, Mask, -1, 1, false, true, Mask},
		{Mask - 2, 3, 6, -1, true, false, 6},
		{0, Half - 1, Half - 1, -1, true, false, Half - 1},
		{0, Half + 1, -(Half - 1), 1, false, true, Half + 1},
		{0, Half, -Half, 1, false, false, Half},
		{Half, 0, -Half, 1, false, false, Half},
	}
	for _, tt := range tests {
		if got := Diff(tt.p, tt.q); got != tt.diff {
			t.Errorf("Diff(%#x, %#x) = %d, want %d", tt.p, tt.q, got, tt.diff)
		}
		if got := Compare(tt.p, tt.q); got != tt.cmp {
			t.Errorf("Compare(%#x, %#x) = %d, want %d", tt.p, tt.q, got, tt.cmp)
		}
		if got := tt.p.Before(tt.q); got != tt.before {
			t.Errorf("PSN(%#x).Before(%#x) = %v, want %v", tt.p, tt.q, got, tt.before)
		}
		if got := tt.p.After(tt.q); got != tt.after {
			t.Errorf("PSN(%#x).After(%#x) = %v, want %v", tt.p, tt.q, got, tt.after)
		}
		if got := tt.p.Forward(tt.q); got != tt.forward {
			t.Errorf("PSN(%#x).Forward(%#x) = %d, want %d", tt.p, tt.q, got, tt.forward)
		}
	}
}

func TestMaxValidWindow(t *testing.T) {
	if got := Max(Mask, 2); got != 2 {
		t.Errorf("Max(Mask, 2) = %#x, want 2", got)
	}
	if got := Max(2, Mask); got != 2 {
		t.Errorf("Max(2, Mask) = %#x, want 2", got)
	}
	if got := Max(10, 4); got != 10 {
		t.Errorf("Max(10, 4) = %#x, want 10", got)
	}
	if !Valid(Mask) || Valid(Modulus) {
		t.Errorf("Valid: Mask=%v Modulus=%v, want true false", Valid(Mask), Valid(Modulus))
	}
	window := []struct {
		start PSN
		size  uint32
		q     PSN
		want  bool
	}{
		{Mask - 1, 4, Mask - 1, true},
		{Mask - 1, 4, 1, true},
		{Mask - 1, 4, 2, false},
		{Mask - 1, 4, Mask - 2, false},
		{7, 0, 7, false},
		{7, Modulus, 3, true},
	}
	for _, tt := range window {
		if got := InWindow(tt.start, tt.size, tt.q); got != tt.want {
			t.Errorf("InWindow(%#x, %d, %#x) = %v, want %v", tt.start, tt.size, tt.q, got, tt.want)
		}
	}
}

func FuzzDiff(f *testing.F) {
	f.Add(uint32(0), uint32(1))
	f.Add(uint32(Mask), uint32(0))
	f.Fuzz(func(t *testing.T, a, b uint32) {
		p, q := PSN(a), PSN(b)
		d := Diff(p, q)
		if d < -Half || d >= Half {
			t.Fatalf("Diff(%#x, %#x) = %d out of range", a, b, d)
		}
		if p.Add(int(d)) != q&Mask {
			t.Fatalf("p.Add(Diff(p, q)) != q for %#x %#x", a, b)
		}
		if d != -Half && Diff(q, p) != -d {
			t.Fatalf("Diff not antisymmetric for %#x %#x", a, b)
		}
	})
}
