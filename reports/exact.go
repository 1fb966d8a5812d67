package reports

import (
	"math"
	"math/big"
	"math/bits"
)

// exactSums accumulates Σx and Σx² of int64 samples without rounding and
// without any possibility of overflow: Σx is a signed 128-bit integer
// (|Σx| < 2^63 · 2^63), Σx² an unsigned 192-bit one (< 2^63 samples of at
// most 2^126 each). Adding a sample costs a 64x64→128 multiply and a few
// adds with carry, cheaper than one floating-point division of Welford's
// update, and the mean and standard deviation computed from it at the end
// are exact up to the final rounding to float64.
type exactSums struct {
	s1hi, s1lo       uint64 // Σx, two's complement
	s2w2, s2hi, s2lo uint64 // Σx², most significant word first
}

func (a *exactSums) add(x int64) {
	var c uint64
	a.s1lo, c = bits.Add64(a.s1lo, uint64(x), 0)
	a.s1hi += uint64(x>>63) + c // sign extension plus carry
	ax := uint64(x)
	if x < 0 {
		ax = -ax
	}
	h, l := bits.Mul64(ax, ax)
	a.s2lo, c = bits.Add64(a.s2lo, l, 0)
	a.s2hi, c = bits.Add64(a.s2hi, h, c)
	a.s2w2 += c
}

func (a *exactSums) merge(b exactSums) {
	var c uint64
	a.s1lo, c = bits.Add64(a.s1lo, b.s1lo, 0)
	a.s1hi += b.s1hi + c
	a.s2lo, c = bits.Add64(a.s2lo, b.s2lo, 0)
	a.s2hi, c = bits.Add64(a.s2hi, b.s2hi, c)
	a.s2w2 += b.s2w2 + c
}

// sum returns Σx.
func (a *exactSums) sum() *big.Int {
	s := words(a.s1hi, a.s1lo)
	if int64(a.s1hi) < 0 { // negative: subtract 2^128
		s.Sub(s, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	return s
}

// sumSq returns Σx².
func (a *exactSums) sumSq() *big.Int {
	return words(a.s2w2, a.s2hi, a.s2lo)
}

// words builds a nonnegative big.Int from 64-bit words, most significant first.
func words(ws ...uint64) *big.Int {
	z := new(big.Int)
	for _, w := range ws {
		z.Lsh(z, 64)
		z.Or(z, new(big.Int).SetUint64(w))
	}
	return z
}

// meanStdev returns the exact mean Σx/n and the exact population standard
// deviation sqrt((nΣx² − (Σx)²) / n²), each rounded once to float64. n must
// be positive.
func (a *exactSums) meanStdev(n int64) (mean, stdev float64) {
	s1, s2 := a.sum(), a.sumSq()
	bn := big.NewInt(n)
	mean, _ = new(big.Rat).SetFrac(s1, bn).Float64()

	num := new(big.Int).Mul(bn, s2)
	num.Sub(num, new(big.Int).Mul(s1, s1)) // ≥ 0 by Cauchy–Schwarz
	if num.Sign() <= 0 {
		return mean, 0
	}
	const prec = 200
	v := new(big.Float).SetPrec(prec).SetInt(num)
	v.Quo(v, new(big.Float).SetPrec(prec).SetInt(new(big.Int).Mul(bn, bn)))
	stdev, _ = v.Sqrt(v).Float64()
	if math.IsInf(stdev, 0) {
		stdev = math.MaxFloat64
	}
	return mean, stdev
}
