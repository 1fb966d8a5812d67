package plot

import (
	"math"
	"strconv"
)

// scale maps data values onto [0, 1] along an axis.
type scale int

const (
	linear scale = iota
	log2         // message sizes: ticks at powers of two
	log10        // latency: ticks at 1, 2, 5 × 10^k
	tail         // percentiles: x = 1/(1−q), log10, ticks at 0%, 90%, 99%, 99.9% ...
)

// axis is one axis: its scale, range, ticks and label.
type axis struct {
	label    string
	scale    scale
	min, max float64
	ticks    []tick
}

type tick struct {
	v     float64
	label string
}

// pos returns v's position along the axis in [0, 1].
func (a *axis) pos(v float64) float64 {
	if a.scale == linear {
		return (v - a.min) / (a.max - a.min)
	}
	return (math.Log(v) - math.Log(a.min)) / (math.Log(a.max) - math.Log(a.min))
}

// newAxis returns an axis of scale s covering lo..hi (data bounds) with
// ticks at round values. Linear axes start at 0 when all data are
// positive, so that bar-free line charts do not exaggerate differences.
func newAxis(label string, s scale, lo, hi float64) axis {
	a := axis{label: label, scale: s}
	// Data from a damaged document must not reach the tick loops: bound
	// the range to what a chart can show.
	if !finite(lo) || !finite(hi) || hi < lo {
		lo, hi = 1, 1
	}
	switch s {
	case log2:
		lo, hi = max(lo, 1), min(max(hi, 1), 1<<40)
	case log10:
		if lo <= 0 {
			lo = hi / 1e6
		}
		if lo <= 0 {
			lo, hi = 1, 1
		}
		lo, hi = max(lo, 1e-300), min(hi, 1e300)
	case tail:
		hi = min(max(hi, 1), 1e15)
	}
	switch s {
	case linear:
		a.linearTicks(min(lo, 0), hi)
	case log2:
		a.log2Ticks(lo, hi)
	case log10:
		a.log10Ticks(lo, hi)
	case tail:
		a.tailTicks(hi)
	}
	return a
}

// linearTicks: about five steps of 1, 2 or 5 × 10^k from lo to past hi.
func (a *axis) linearTicks(lo, hi float64) {
	if !(hi > lo) {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / 5)
	decimals := max(0, -int(math.Floor(math.Log10(step))))
	a.min = math.Floor(lo/step) * step
	a.max = math.Ceil(hi/step) * step
	for i := 0; ; i++ {
		v := a.min + float64(i)*step
		if v > a.max+step/2 {
			break
		}
		a.ticks = append(a.ticks, tick{v, strconv.FormatFloat(v, 'f', decimals, 64)})
	}
}

// niceStep rounds x up to 1, 2 or 5 × 10^k.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// log2Ticks: powers of two from below lo to above hi, every second or
// fourth one when there would be more than 12.
func (a *axis) log2Ticks(lo, hi float64) {
	e0, e1 := int(math.Floor(math.Log2(lo))), int(math.Ceil(math.Log2(hi)))
	if e1 == e0 {
		e1++
		if e0 > 0 { // no sizes below 1 byte
			e0--
		}
	}
	every := 1
	for (e1-e0)/every > 12 {
		every *= 2
	}
	e0 -= ((e0 % every) + every) % every // align to a multiple of every
	a.min, a.max = math.Exp2(float64(e0)), math.Exp2(float64(e1))
	for e := e0; e <= e1; e += every {
		a.ticks = append(a.ticks, tick{math.Exp2(float64(e)), sizeLabel(int64(1) << e)})
	}
	if a.ticks[len(a.ticks)-1].v < a.max {
		a.max = a.ticks[len(a.ticks)-1].v * math.Exp2(float64(every))
		a.ticks = append(a.ticks, tick{a.max, sizeLabel(int64(a.max))})
	}
}

// sizeLabel writes a size with a binary suffix: 2, 512, 1K, 64K, 1M, 1G.
func sizeLabel(n int64) string {
	for _, u := range []struct {
		shift  uint
		suffix string
	}{{30, "G"}, {20, "M"}, {10, "K"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// log10Ticks: decades from below lo to above hi, with 2 and 5 between
// them when the range spans at most two decades.
func (a *axis) log10Ticks(lo, hi float64) {
	e0, e1 := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	if e1 == e0 {
		e1++
	}
	a.min, a.max = math.Pow(10, float64(e0)), math.Pow(10, float64(e1))
	mults := []float64{1}
	if e1-e0 <= 2 {
		mults = []float64{1, 2, 5}
	}
	for e := e0; e <= e1; e++ {
		for _, m := range mults {
			v := m * math.Pow(10, float64(e))
			if v > a.max*(1+1e-9) {
				break
			}
			a.ticks = append(a.ticks, tick{v, strconv.FormatFloat(v, 'f', max(0, -e), 64)})
		}
	}
}

// tailTicks: the percentile axis, 1/(1−q) on a log10 scale from 1 (0%)
// to the decade above hi: 0%, 90%, 99%, 99.9%, ...
func (a *axis) tailTicks(hi float64) {
	d := max(1, int(math.Ceil(math.Log10(hi)-1e-9)))
	a.min, a.max = 1, math.Pow(10, float64(d))
	for e := 0; e <= d; e++ {
		q := 100 * (1 - math.Pow(10, -float64(e)))
		a.ticks = append(a.ticks, tick{math.Pow(10, float64(e)), strconv.FormatFloat(q, 'f', max(0, e-2), 64) + "%"})
	}
}
