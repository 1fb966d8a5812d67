package clock

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"time"
)

// ErrTSCUnavailable is returned by [CalibrateTSC] when the TSC cannot be
// used as a clock on this machine (not amd64, or no invariant TSC).
var ErrTSCUnavailable = errors.New("clock: tsc unavailable")

// tscShift is the fixed-point shift of the ticks-to-nanoseconds multiplier.
const tscShift = 32

// TSC is the x86 time-stamp counter converted to nanoseconds. Create one with
// [CalibrateTSC]. Its methods never allocate and are safe for concurrent use.
type TSC struct {
	base uint64  // counter value that Now reports as 0
	mult uint64  // nanoseconds per tick, fixed point with tscShift bits
	hz   float64 // calibrated tick rate
}

// CalibrateTSC checks that the TSC is invariant and measures its rate
// against [Now] over (at least) the given window; 20ms or more gives an error
// well under 10 ppm. It returns an error wrapping [ErrTSCUnavailable] when
// the TSC cannot serve as a clock here.
func CalibrateTSC(window time.Duration) (*TSC, error) {
	if !tscSupported {
		return nil, fmt.Errorf("calibrate tsc: %w: not amd64", ErrTSCUnavailable)
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return nil, fmt.Errorf("calibrate tsc: %w: %v", ErrTSCUnavailable, err)
	}
	if !invariantTSC(info) {
		return nil, fmt.Errorf("calibrate tsc: %w: /proc/cpuinfo lacks constant_tsc or nonstop_tsc", ErrTSCUnavailable)
	}
	if window <= 0 {
		window = 20 * time.Millisecond
	}
	n0, c0 := pairedRead()
	time.Sleep(window)
	n1, c1 := pairedRead()
	if c1 <= c0 || n1 <= n0 {
		return nil, fmt.Errorf("calibrate tsc: %w: counter did not advance", ErrTSCUnavailable)
	}
	hz := float64(c1-c0) / (float64(n1-n0) / 1e9)
	t := &TSC{base: c1, hz: hz}
	t.mult = uint64(math.Round(1e9 / hz * (1 << tscShift)))
	return t, nil
}

// pairedRead returns a ([Now], counter) pair read as close together as
// possible: of several attempts, the one whose two surrounding counter reads
// are nearest, with the counter taken as their midpoint.
func pairedRead() (ns int64, ticks uint64) {
	best := uint64(math.MaxUint64)
	for range 16 {
		a := rdtsc()
		n := Now()
		b := rdtsc()
		if b-a < best {
			best = b - a
			ns, ticks = n, a+(b-a)/2
		}
	}
	return ns, ticks
}

// Ticks returns the raw counter (RDTSC). Convert differences with
// [TSC.TicksToNs].
func (t *TSC) Ticks() uint64 {
	return rdtsc()
}

// Now returns nanoseconds since calibration, from the counter.
func (t *TSC) Now() int64 {
	return t.TicksToNs(int64(rdtsc() - t.base))
}

// TicksToNs converts a counter difference to nanoseconds.
func (t *TSC) TicksToNs(ticks int64) int64 {
	neg := ticks < 0
	u := uint64(ticks)
	if neg {
		u = -u
	}
	hi, lo := bits.Mul64(u, t.mult)
	ns := int64(hi<<(64-tscShift) | lo>>tscShift)
	if neg {
		return -ns
	}
	return ns
}

// Hz returns the calibrated counter rate in ticks per second.
func (t *TSC) Hz() float64 {
	return t.hz
}

// Name returns the name [TSC.Measure] reports, including the calibrated rate.
func (t *TSC) Name() string {
	return fmt.Sprintf("tsc (RDTSC, %.3f GHz calibrated against CLOCK_MONOTONIC)", t.hz/1e9)
}

// Measure measures this source like [Measure] does for the default one.
func (t *TSC) Measure() Info {
	return MeasureFunc(t.Name(), t.Now)
}
