package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestTQuantile checks Student's t quantiles against printed tables
// (Abramowitz and Stegun, table 26.10) and the normal limit.
func TestTQuantile(t *testing.T) {
	for _, tc := range []struct {
		p, df, want float64
	}{
		{0.975, 1, 12.706205},
		{0.975, 6, 2.446912},
		{0.975, 8, 2.306004},
		{0.995, 6, 3.707428},
		{0.9995, 6, 5.958816},
		{0.975, 120, 1.979930},
		{0.975, math.Inf(1), 1.959964},
		{0.025, 6, -2.446912},
	} {
		if got := TQuantile(tc.p, tc.df); !near(got, tc.want, 2e-6) {
			t.Errorf("TQuantile(%v, %v) = %.6f, want %.6f", tc.p, tc.df, got, tc.want)
		}
	}
}

func TestMeanVarPooled(t *testing.T) {
	m, v := MeanVar([]float64{1, 2, 3, 4})
	if m != 2.5 || !near(v, 5.0/3, 1e-12) {
		t.Errorf("MeanVar = %v, %v; want 2.5, 5/3", m, v)
	}
	if _, v := MeanVar([]float64{7}); v != 0 {
		t.Errorf("one value: variance %v", v)
	}
	// x: variance 1 (df 2); y: variance 4 (df 3): pooled (2+12)/5.
	pv, df := PooledVariance([]float64{1, 2, 3}, []float64{0, 2, 4, 6 - 2*math.Sqrt(3)})
	_, vy := MeanVar([]float64{0, 2, 4, 6 - 2*math.Sqrt(3)})
	if df != 5 || !near(pv, (2*1+3*vy)/5, 1e-12) {
		t.Errorf("PooledVariance = %v, %v", pv, df)
	}
	if v, df := PooledVariance([]float64{1}, []float64{2}); v != 0 || df != 0 {
		t.Errorf("1 vs 1: %v, %v; want no estimate", v, df)
	}
}

func TestTrigamma(t *testing.T) {
	for _, tc := range []struct{ x, want float64 }{
		{1, math.Pi * math.Pi / 6},
		{0.5, math.Pi * math.Pi / 2},
		{3, math.Pi*math.Pi/6 - 1 - 0.25},
	} {
		if got := Trigamma(tc.x); !near(got, tc.want, 1e-10) {
			t.Errorf("Trigamma(%v) = %v, want %v", tc.x, got, tc.want)
		}
		if got := inverseTrigamma(tc.want); !near(got, tc.x, 1e-8) {
			t.Errorf("inverseTrigamma(%v) = %v, want %v", tc.want, got, tc.x)
		}
	}
}

// TestFitVariancePrior draws variances from a known prior, then sample
// variances with 6 degrees of freedom from them, and recovers the prior.
func TestFitVariancePrior(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	chi2 := func(df int) float64 {
		s := 0.0
		for range df {
			z := r.NormFloat64()
			s += z * z
		}
		return s
	}
	const d0, s0, df = 10, 2.0, 6
	var s2 []float64
	for range 20000 {
		sigma2 := s0 * d0 / chi2(d0)
		s2 = append(s2, sigma2*chi2(df)/df)
	}
	p, ok := FitVariancePrior(s2, df)
	if !ok || math.Abs(p.DF-d0) > 1.5 || math.Abs(p.S2-s0) > 0.1 {
		t.Errorf("fit %+v, %v; want d0 ≈ %v, s0² ≈ %v", p, ok, d0, s0)
	}

	// One true variance for all: the spread is df's alone, d0 is capped
	// at the family's degrees of freedom and s0² is that variance.
	s2 = s2[:0]
	for range 2000 {
		s2 = append(s2, 3*chi2(df)/df)
	}
	p, ok = FitVariancePrior(s2, df)
	if !ok || p.DF < 1000 || math.Abs(p.S2-3) > 0.1 {
		t.Errorf("equal variances: %+v, %v; want a heavy prior at 3", p, ok)
	}
	if p.DF > 2000*df {
		t.Errorf("d0 %v above the family's %d degrees of freedom", p.DF, 2000*df)
	}

	if _, ok := FitVariancePrior([]float64{1, 0, 2}, 6); ok {
		t.Error("fitted from two positive estimates")
	}
	v, dof := VariancePrior{S2: 2, DF: 4}.Moderate(5, 6)
	if !near(v, (4*2+6*5)/10.0, 1e-12) || dof != 10 {
		t.Errorf("Moderate = %v, %v", v, dof)
	}
}
