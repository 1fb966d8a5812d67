// Package stats holds the distribution-free statistics behind rperf
// compare: medians, the exact null distribution of the Mann-Whitney U
// statistic, Hodges-Lehmann shift estimates with their rank-based
// confidence intervals, and order-statistic confidence intervals for a
// quantile of a large sample.
//
// None of it assumes a distribution shape. Latency and bandwidth figures
// are skewed, multimodal and heavy-tailed; rank methods need only that the
// values on each side are independent draws from one distribution. Every
// result is deterministic: there is no resampling and no seed.
package stats

import (
	"math"
	"slices"
)

// Median returns the median of xs: the middle value, or the mean of the
// two middle values when the count is even. It returns NaN for no values
// and does not modify xs.
func Median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// NormalQuantile returns z with Φ(z) = p, the standard normal quantile,
// for 0 < p < 1.
func NormalQuantile(p float64) float64 {
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

// normalCDF is Φ, the standard normal distribution function.
func normalCDF(x float64) float64 {
	return 0.5 * math.Erfc(-x/math.Sqrt2)
}

// exactLimit is the largest n·m for which the U distribution is computed
// exactly; the dynamic program costs about n·m·n·m/2 additions (about 3
// million here, well under a millisecond). Larger samples use the normal
// approximation, which is accurate there.
const exactLimit = 2500

// uCounts returns, for u = 0..n·m, how many of the C(n+m, n) orderings of
// n x's and m y's have U = u, where U counts the pairs with y above x.
// The largest value overall is either a y, which is above all n x's
// (U drops by n when it is removed), or an x (U unchanged):
// c(n, m, u) = c(n, m−1, u−n) + c(n−1, m, u).
func uCounts(n, m int) []float64 {
	prev := make([][]float64, m+1) // prev[j] = c(i−1, j, ·)
	for j := range prev {
		prev[j] = []float64{1} // no x's: U = 0
	}
	for i := 1; i <= n; i++ {
		cur := make([][]float64, m+1)
		cur[0] = []float64{1} // no y's: U = 0
		for j := 1; j <= m; j++ {
			c := make([]float64, i*j+1)
			for u, v := range cur[j-1] {
				c[u+i] += v
			}
			for u, v := range prev[j] {
				c[u] += v
			}
			cur[j] = c
		}
		prev = cur
	}
	return prev[m]
}

// uLower is P(U ≤ u) for fixed sample sizes.
type uLower func(u int) float64

// newULower returns P(U ≤ ·) under the null hypothesis (both samples from
// one continuous distribution) for sample sizes n and m: exactly when
// n·m ≤ exactLimit, else by the normal approximation with a continuity
// correction. The exact counts are computed once, here.
func newULower(n, m int) uLower {
	if n*m <= exactLimit {
		counts := uCounts(n, m)
		cum := make([]float64, len(counts))
		total := 0.0
		for u, c := range counts {
			total += c
			cum[u] = total
		}
		return func(u int) float64 {
			switch {
			case u < 0:
				return 0
			case u >= len(cum):
				return 1
			}
			return cum[u] / total
		}
	}
	mean := float64(n*m) / 2
	sd := math.Sqrt(float64(n*m) * float64(n+m+1) / 12)
	return func(u int) float64 { return normalCDF((float64(u) + 0.5 - mean) / sd) }
}

// UCDF returns P(U ≤ u) for the Mann-Whitney U statistic of samples of n
// and m values under the null hypothesis that both come from one
// continuous distribution: exact for n·m ≤ 2500, normal approximation
// (with continuity correction) beyond.
func UCDF(n, m, u int) float64 {
	return newULower(n, m)(u)
}

// MaxConfidence returns the highest confidence a rank interval for the
// shift between n and m values can have: that of the interval from the
// smallest to the largest pairwise difference, 1 − 2/C(n+m, n). Three
// values per side reach 90%, so a 95% interval needs more (4 and 4, or 3
// and 5, or 2 and 8).
func MaxConfidence(n, m int) float64 {
	if n < 1 || m < 1 {
		return 0
	}
	return 1 - 2*UCDF(n, m, 0)
}

// Shift is a Hodges-Lehmann estimate of how far y lies from x, in y's
// units, with a rank-based confidence interval.
type Shift struct {
	// Estimate is the median of all n·m differences y_j − x_i.
	Estimate float64
	// Lo and Hi are the k-th smallest and k-th largest difference.
	Lo, Hi float64
	// Confidence is the interval's exact confidence, 1 − 2·P(U ≤ k−1);
	// it is at least the confidence asked for when ok, and otherwise
	// the interval is the widest there is (k = 1, see [MaxConfidence]).
	Confidence float64
}

// ShiftCI returns the Hodges-Lehmann estimate of the shift y − x and the
// narrowest rank interval whose confidence is at least conf: with the n·m
// differences sorted, the interval [D(k), D(nm+1−k)] for the largest k
// with P(U ≤ k−1) ≤ (1−conf)/2 (Hollander and Wolfe, Nonparametric
// Statistical Methods, 4.3). The interval excludes 0 exactly when the
// two-sided Mann-Whitney test rejects "no shift" at level 1−conf.
//
// ok is false when no interval reaches conf because there are too few
// values (conf > MaxConfidence(len(x), len(y))); s then holds the estimate
// and the widest interval, from the smallest to the largest difference,
// with its lower confidence. ShiftCI panics when x or y is empty.
func ShiftCI(x, y []float64, conf float64) (s Shift, ok bool) {
	n, m := len(x), len(y)
	if n == 0 || m == 0 {
		panic("stats: ShiftCI needs values on both sides")
	}
	d := make([]float64, 0, n*m)
	for _, yj := range y {
		for _, xi := range x {
			d = append(d, yj-xi)
		}
	}
	slices.Sort(d)
	K := len(d)
	if K%2 == 1 {
		s.Estimate = d[K/2]
	} else {
		s.Estimate = (d[K/2-1] + d[K/2]) / 2
	}
	lower := newULower(n, m)
	half := (1 - conf) / 2
	const eps = 1e-12 // tail probabilities are ratios of counts: allow for rounding at equality
	k := 0
	for c := 1; c <= (K+1)/2; c++ {
		if lower(c-1) > half+eps {
			break
		}
		k = c
	}
	if k == 0 {
		s.Lo, s.Hi = d[0], d[K-1]
		s.Confidence = 1 - 2*lower(0)
		return s, false
	}
	s.Lo, s.Hi = d[k-1], d[K-k]
	s.Confidence = 1 - 2*lower(k-1)
	return s, true
}

// QuantileRanks returns the 1-based ranks lo ≤ hi of the order statistics
// X(lo) and X(hi) of n independent samples that bracket the population
// p-quantile (0 < p < 1) with confidence about conf. The count B of
// samples below the quantile is Binomial(n, p), and X(lo) ≤ ξp ≤ X(hi)
// exactly when lo ≤ B ≤ hi−1; with B approximated by a normal
// distribution with a continuity correction and z = Φ⁻¹((1+conf)/2):
//
//	lo = floor(np − z·√(np(1−p)) + 0.5),  hi = ceil(np + z·√(np(1−p)) + 0.5)
//
// clamped to [1, n]. The approximation is good when np(1−p) is more than
// a few; for tail quantiles of small samples the clamping makes the
// interval reach the extreme samples, which is conservative.
func QuantileRanks(n int64, p, conf float64) (lo, hi int64) {
	if n < 1 {
		return 0, 0
	}
	z := NormalQuantile((1 + conf) / 2)
	np := float64(n) * p
	w := z * math.Sqrt(np*(1-p))
	lo = int64(math.Floor(np - w + 0.5))
	hi = int64(math.Ceil(np + w + 0.5))
	return min(max(lo, 1), n), min(max(hi, 1), n)
}
