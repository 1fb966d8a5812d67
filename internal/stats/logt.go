package stats

import (
	"math"

	"gonum.org/v1/gonum/mathext"
	"gonum.org/v1/gonum/stat/distuv"
)

// TQuantile returns t with P(T ≤ t) = p for Student's t distribution with
// df degrees of freedom (0 < p < 1, df > 0); df = +Inf gives the standard
// normal quantile.
func TQuantile(p, df float64) float64 {
	if math.IsInf(df, 1) {
		return NormalQuantile(p)
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(p)
}

// MeanVar returns the mean and the unbiased sample variance (divided by
// n−1) of xs; the variance is 0 for fewer than two values.
func MeanVar(xs []float64) (mean, variance float64) {
	if len(xs) == 0 {
		return math.NaN(), 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(xs)-1)
}

// PooledVariance returns the pooled variance of two samples,
// ((n−1)·s_x² + (m−1)·s_y²) / (n+m−2), and its degrees of freedom n+m−2;
// with fewer than three values in all, both are 0.
func PooledVariance(x, y []float64) (variance, df float64) {
	n, m := len(x), len(y)
	if n+m < 3 || n == 0 || m == 0 {
		return 0, 0
	}
	_, vx := MeanVar(x)
	_, vy := MeanVar(y)
	df = float64(n + m - 2)
	return (float64(n-1)*vx + float64(m-1)*vy) / df, df
}

// Trigamma returns ψ′(x), the derivative of the digamma function, for
// x > 0: the Hurwitz zeta function ζ(2, x).
func Trigamma(x float64) float64 { return mathext.Zeta(2, x) }

// inverseTrigamma returns x > 0 with ψ′(x) = y, for y > 0, by Newton's
// method on 1/ψ′ from x = 1/2 + 1/y, which converges monotonically (the
// algorithm of limma's trigammaInverse), with the asymptotes at the
// extremes: ψ′(x) ≈ 1/x² for small x (large y), 1/x for large x.
func inverseTrigamma(y float64) float64 {
	switch {
	case y > 1e7:
		return 1 / math.Sqrt(y)
	case y < 1e-6:
		return 1 / y
	}
	x := 0.5 + 1/y
	for range 50 {
		tri := Trigamma(x)
		step := tri * (1 - tri/y) / (-2 * mathext.Zeta(3, x)) // ψ″(x) = −2ζ(3, x)
		x += step
		if -step/x < 1e-10 {
			break
		}
	}
	return x
}

// VariancePrior is a scaled inverse chi-square prior for the variances of
// a family of measurements: each true variance is s0²·d0 / χ²(d0). Its
// weight DF is worth that many degrees of freedom of data.
type VariancePrior struct {
	S2 float64 // s0²: the family's typical variance
	DF float64 // d0: the prior's degrees of freedom
}

// FitVariancePrior estimates the prior of a family's variances from their
// estimates s2, each with df degrees of freedom, by the method of moments
// on their logarithms (Smyth 2004, "Linear models and empirical Bayes
// methods for assessing differential expression in microarray
// experiments", section 6.2): with e = log s² − ψ(df/2) + log(df/2), the
// spread of e beyond what df alone explains, ψ′(df/2), is ψ′(d0/2), and
// s0² = exp(mean e + ψ(d0/2) − log(d0/2)). When df alone explains the
// spread, every member has the same variance: d0 is then capped at the
// family's own degrees of freedom, len·df, so the prior never weighs more
// than the data it came from. The cap applies to any d0.
//
// Estimates of 0 (values identical on both sides) carry no spread to fit
// and are left out. ok is false with fewer than three positive estimates.
func FitVariancePrior(s2 []float64, df float64) (p VariancePrior, ok bool) {
	var e []float64
	shift := math.Log(df/2) - mathext.Digamma(df/2)
	for _, v := range s2 {
		if v > 0 && !math.IsInf(v, 1) {
			e = append(e, math.Log(v)+shift)
		}
	}
	if len(e) < 3 || !(df > 0) {
		return VariancePrior{}, false
	}
	mean, spread := MeanVar(e)
	limit := float64(len(e)) * df
	d0 := limit
	if extra := spread - Trigamma(df/2); extra > 0 {
		d0 = min(2*inverseTrigamma(extra), limit)
	}
	return VariancePrior{S2: math.Exp(mean + mathext.Digamma(d0/2) - math.Log(d0/2)), DF: d0}, true
}

// Moderate returns the posterior variance of a member whose estimate s2
// has df degrees of freedom, (d0·s0² + df·s2) / (d0 + df), with its
// degrees of freedom d0 + df.
func (p VariancePrior) Moderate(s2, df float64) (variance, dof float64) {
	return (p.DF*p.S2 + df*s2) / (p.DF + df), p.DF + df
}
