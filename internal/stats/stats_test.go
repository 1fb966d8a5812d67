package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"one", []float64{3}, 3},
		{"two: mean of both", []float64{1, 4}, 2.5},
		{"odd, unsorted", []float64{5, 1, 3}, 3},
		{"even, unsorted", []float64{10, 2, 8, 4}, 6},
		{"ties", []float64{7, 7, 1, 7}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			if got := Median(in); got != tc.want {
				t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Errorf("Median modified its input: %v", in)
			}
		})
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}

func TestNormalQuantile(t *testing.T) {
	for _, tc := range []struct{ p, z float64 }{
		{0.5, 0}, {0.975, 1.959963985}, {0.95, 1.644853627}, {0.025, -1.959963985}, {0.995, 2.575829304},
	} {
		if got := NormalQuantile(tc.p); !near(got, tc.z, 1e-8) {
			t.Errorf("NormalQuantile(%v) = %v, want %v", tc.p, got, tc.z)
		}
	}
}

// TestUCounts checks the U distribution against counts done by hand:
// for n=m=2 the six orderings of xxyy give U = 0,1,2,2,3,4; for n=m=5
// the left tail is 1,1,2,3,5,7 of C(10,5) = 252.
func TestUCounts(t *testing.T) {
	for _, tc := range []struct {
		n, m int
		head []float64
		sum  float64
	}{
		{1, 1, []float64{1, 1}, 2},
		{2, 2, []float64{1, 1, 2, 1, 1}, 6},
		{1, 3, []float64{1, 1, 1, 1}, 4},
		{3, 3, []float64{1, 1, 2, 3, 3, 3, 3, 2, 1, 1}, 20},
		{5, 5, []float64{1, 1, 2, 3, 5, 7}, 252},
	} {
		c := uCounts(tc.n, tc.m)
		if len(c) != tc.n*tc.m+1 {
			t.Fatalf("uCounts(%d, %d) has %d entries, want %d", tc.n, tc.m, len(c), tc.n*tc.m+1)
		}
		if diff := cmp.Diff(tc.head, c[:len(tc.head)]); diff != "" {
			t.Errorf("uCounts(%d, %d) (-want +got):\n%s", tc.n, tc.m, diff)
		}
		sum := 0.0
		for u, v := range c {
			sum += v
			if v != c[len(c)-1-u] {
				t.Errorf("uCounts(%d, %d) not symmetric at %d", tc.n, tc.m, u)
			}
		}
		if sum != tc.sum {
			t.Errorf("uCounts(%d, %d) sums to %v, want C(n+m, n) = %v", tc.n, tc.m, sum, tc.sum)
		}
	}
}

func TestMaxConfidence(t *testing.T) {
	for _, tc := range []struct {
		n, m int
		want float64
	}{
		{1, 1, 0},           // 1 − 2/2
		{2, 2, 1 - 2.0/6},   // C(4,2) = 6
		{3, 3, 0.9},         // C(6,3) = 20
		{3, 4, 1 - 2.0/35},  // 94.3%: short of 95%
		{4, 4, 1 - 2.0/70},  // 97.1%
		{3, 5, 1 - 2.0/56},  // 96.4%
		{2, 8, 1 - 2.0/45},  // 95.6%
		{2, 7, 1 - 2.0/36},  // 94.4%
		{5, 5, 1 - 2.0/252}, // 99.2%
	} {
		if got := MaxConfidence(tc.n, tc.m); !near(got, tc.want, 1e-12) {
			t.Errorf("MaxConfidence(%d, %d) = %v, want %v", tc.n, tc.m, got, tc.want)
		}
	}
}

// TestShiftCI checks intervals worked out by hand.
func TestShiftCI(t *testing.T) {
	for _, tc := range []struct {
		name string
		x, y []float64
		conf float64
		want Shift
		ok   bool
	}{
		{
			// Differences 1..9 with multiplicities 1,2,3,4,5,4,3,2,1 (25 in
			// all). P(U ≤ 2) = 4/252 ≤ 0.025 < P(U ≤ 3) = 7/252, so k = 3:
			// D(3) = 2, D(23) = 8, confidence 1 − 8/252.
			name: "5 vs 5 at 95%",
			x:    []float64{10, 11, 12, 13, 14}, y: []float64{15, 16, 17, 18, 19},
			conf: 0.95,
			want: Shift{Estimate: 5, Lo: 2, Hi: 8, Confidence: 1 - 8.0/252},
			ok:   true,
		},
		{
			// At 99%: P(U ≤ 0) = 1/252 ≤ 0.005 < P(U ≤ 1) = 2/252, k = 1.
			name: "5 vs 5 at 99%",
			x:    []float64{10, 11, 12, 13, 14}, y: []float64{15, 16, 17, 18, 19},
			conf: 0.99,
			want: Shift{Estimate: 5, Lo: 1, Hi: 9, Confidence: 1 - 2.0/252},
			ok:   true,
		},
		{
			// Input order does not matter; a negative shift.
			name: "4 vs 4, unsorted, shift down",
			x:    []float64{103, 100, 102, 101}, y: []float64{91, 90, 93, 92},
			conf: 0.95,
			// Differences: −13..−7 with multiplicities 1,2,3,4,3,2,1.
			// P(U ≤ 0) = 1/70 ≤ 0.025 < P(U ≤ 1) = 2/70: k = 1.
			want: Shift{Estimate: -10, Lo: -13, Hi: -7, Confidence: 1 - 2.0/70},
			ok:   true,
		},
		{
			// 3 vs 3 reaches 90% at most: not ok at 95%, widest interval.
			name: "3 vs 3 at 95%: too few",
			x:    []float64{1, 2, 3}, y: []float64{5, 6, 7},
			conf: 0.95,
			want: Shift{Estimate: 4, Lo: 2, Hi: 6, Confidence: 0.9},
			ok:   false,
		},
		{
			name: "3 vs 3 at 90%",
			x:    []float64{1, 2, 3}, y: []float64{5, 6, 7},
			conf: 0.90,
			want: Shift{Estimate: 4, Lo: 2, Hi: 6, Confidence: 0.9},
			ok:   true,
		},
		{
			name: "1 vs 1",
			x:    []float64{10}, y: []float64{12},
			conf: 0.95,
			want: Shift{Estimate: 2, Lo: 2, Hi: 2, Confidence: 0},
			ok:   false,
		},
		{
			// Overlapping samples: the interval contains 0.
			name: "overlap",
			x:    []float64{1, 3, 5, 7, 9}, y: []float64{2, 4, 6, 8, 10},
			conf: 0.95,
			// Differences y−x: 1 (×5), 3 (×4), 5 (×3), 7 (×2), 9, −1 (×4),
			// −3 (×3), −5 (×2), −7. Sorted: −7 −5 −5 −3 −3 −3 −1 … 7 7 9.
			want: Shift{Estimate: 1, Lo: -5, Hi: 7, Confidence: 1 - 8.0/252},
			ok:   true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ShiftCI(tc.x, tc.y, tc.conf)
			if ok != tc.ok {
				t.Errorf("ok = %v, want %v", ok, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b float64) bool { return near(a, b, 1e-12) })); diff != "" {
				t.Errorf("ShiftCI (-want +got):\n%s", diff)
			}
		})
	}
}

// TestShiftCIMatchesUTest checks the duality on random samples without
// ties: the interval excludes 0 exactly when the two-sided exact
// Mann-Whitney test rejects at level 1 − conf.
func TestShiftCIMatchesUTest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	checked, rejected := 0, 0
	for trial := range 300 {
		n, m := 2+r.IntN(7), 2+r.IntN(7)
		x, y := make([]float64, n), make([]float64, m)
		shift := r.Float64() * 2
		for i := range x {
			x[i] = r.NormFloat64()
		}
		for j := range y {
			y[j] = r.NormFloat64() + shift
		}
		u := 0
		for _, yj := range y {
			for _, xi := range x {
				if yj > xi {
					u++
				}
			}
		}
		p := 2 * min(UCDF(n, m, u), 1-UCDF(n, m, u-1))
		s, ok := ShiftCI(x, y, 0.95)
		if !ok {
			continue
		}
		excludes := s.Lo > 0 || s.Hi < 0
		if excludes != (p <= 1-s.Confidence+1e-12) {
			t.Fatalf("trial %d (%d vs %d): interval [%v, %v] at %v, U = %d, p = %v: excludes 0 = %v",
				trial, n, m, s.Lo, s.Hi, s.Confidence, u, p, excludes)
		}
		if s.Confidence < 0.95 {
			t.Fatalf("trial %d: confidence %v < 0.95", trial, s.Confidence)
		}
		checked++
		if excludes {
			rejected++
		}
	}
	if checked < 100 || rejected == 0 || rejected == checked {
		t.Errorf("checked %d samples, %d rejected: the test did not exercise both outcomes", checked, rejected)
	}
}

// TestUCDFNormalApproximation checks the approximation used above
// n·m = 2500 against the exact distribution just below it.
func TestUCDFNormalApproximation(t *testing.T) {
	n, m := 45, 55 // 2475: exact
	exact := newULower(n, m)
	mean := float64(n*m) / 2
	sd := math.Sqrt(float64(n*m) * float64(n+m+1) / 12)
	for _, u := range []int{800, 900, 1000, 1100, 1237} {
		approx := normalCDF((float64(u) + 0.5 - mean) / sd)
		if !near(exact(u), approx, 0.002) {
			t.Errorf("P(U ≤ %d): exact %v, normal %v", u, exact(u), approx)
		}
	}
	// Beyond the limit the approximation is used, symmetric about nm/2:
	// P(U ≤ 1799) = P(U ≥ 1801) = 1 − P(U ≤ 1800).
	if lo, hi := UCDF(60, 60, 1799), UCDF(60, 60, 1800); !near(lo+hi, 1, 1e-12) || !(lo < 0.5) {
		t.Errorf("UCDF(60, 60, 1799) = %v, UCDF(60, 60, 1800) = %v: not symmetric about 1800", lo, hi)
	}
}

func TestQuantileRanks(t *testing.T) {
	for _, tc := range []struct {
		n        int64
		p, conf  float64
		lo, hi   int64
		coverage bool // check exact binomial coverage
	}{
		// np = 500, z·√(np(1−p)) = 1.95996·15.8114 = 30.99:
		// lo = floor(469.51) = 469, hi = ceil(531.49) = 532.
		{1000, 0.5, 0.95, 469, 532, true},
		// np = 990, √(9.9)·1.95996 = 6.167: lo = floor(984.33), hi = ceil(996.67).
		{1000, 0.99, 0.95, 984, 997, true},
		// np = 999, w = 1.96·0.9995 = 1.959: lo = floor(997.54), hi = ceil(1001.5) → clamped to 1000.
		{1000, 0.999, 0.95, 997, 1000, false},
		{100000, 0.5, 0.95, 49690, 50311, true},
		{1, 0.5, 0.95, 1, 1, false},
	} {
		lo, hi := QuantileRanks(tc.n, tc.p, tc.conf)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("QuantileRanks(%d, %v, %v) = %d, %d; want %d, %d", tc.n, tc.p, tc.conf, lo, hi, tc.lo, tc.hi)
		}
		if tc.coverage {
			if c := binomialRange(tc.n, tc.p, lo, hi-1); c < tc.conf-0.005 {
				t.Errorf("QuantileRanks(%d, %v, %v): exact coverage %v", tc.n, tc.p, tc.conf, c)
			}
		}
	}
}

// binomialRange returns P(a ≤ B ≤ b) for B ~ Binomial(n, p).
func binomialRange(n int64, p float64, a, b int64) float64 {
	sum := 0.0
	lgn, _ := math.Lgamma(float64(n + 1))
	for k := a; k <= b; k++ {
		lk, _ := math.Lgamma(float64(k + 1))
		lnk, _ := math.Lgamma(float64(n - k + 1))
		sum += math.Exp(lgn - lk - lnk + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
	}
	return sum
}
