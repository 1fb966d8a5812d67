package reports

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// LatMeasureTail is perftest's LAT_MEASURE_TAIL: the number of largest
// samples print_report_lat discards before computing its statistics.
const LatMeasureTail = 2

// RTT factors: what each sample is divided by to report one-way latency.
const (
	// RTTFactorRoundTrip is for SEND and WRITE latency tests, whose samples
	// are ping-pong round trips (perftest: one-way = RTT/2).
	RTTFactorRoundTrip = 2
	// RTTFactorOneSided is for READ and ATOMIC latency tests, whose samples
	// are one request and its response, reported as is.
	RTTFactorOneSided = 1
)

// ticksPerUsec is perftest's cycles_to_units with rperf's tick: samples are
// nanoseconds, so a microsecond is 1000 ticks (perftest: CPU MHz cycles).
const ticksPerUsec = 1000.0

// ErrTooFewSamples is returned when perftest's latency fields are asked of
// fewer than LatMeasureTail+1 samples: perftest itself would read outside
// its array (its minimum, -n 5, gives 4 samples).
var ErrTooFewSamples = errors.New("perftest latency needs at least 3 samples")

// Perftest holds perftest's latency fields, in microseconds, one-way
// (already divided by the rtt_factor). The JSON names are those of
// rperf/v1; SCHEMA.md defines each.
type Perftest struct {
	TMinUs     float64 `json:"t_min_us"`
	TMaxUs     float64 `json:"t_max_us"`
	TTypicalUs float64 `json:"t_typical_us"`
	TAvgUs     float64 `json:"t_avg_us"`
	TStdevUs   float64 `json:"t_stdev_us"`
	P99Us      float64 `json:"p99_us"`
	P999Us     float64 `json:"p999_us"`
	// Samples is how many samples the fields were computed from, before the
	// two largest were dropped (perftest's measure_cnt).
	Samples int64 `json:"perftest_samples"`
	// AllSamples reports whether those were all the samples recorded; false
	// when a duration-mode run outgrew the Recorder's raw slice and the
	// fields come from the first Samples samples only.
	AllSamples bool `json:"perftest_all_samples"`
}

// PerftestFromSamples sorts a copy of samples (nanoseconds, one per
// iteration, as perftest's delta[]) and computes perftest's fields from it.
// AllSamples is left false; callers who know set it.
func PerftestFromSamples(samples []int64, rttFactor int) (Perftest, error) {
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	return PerftestFromSorted(sorted, rttFactor)
}

// PerftestFromSorted computes perftest's latency fields from samples already
// sorted ascending, exactly as print_report_lat (perftest 6.x) does, with
// nanoseconds in place of CPU cycles:
//
//	q        = 1000 * rttFactor                     (cycles_rtt_quotient)
//	m        = len(sorted); n = m - 2               (measure_cnt -= LAT_MEASURE_TAIL)
//	t_min    = sorted[0] / q
//	t_max    = sorted[n] / q                        (the second-largest sample)
//	t_typical= median / q, median in integer ns:    (get_median(n))
//	           n even: (sorted[n/2-1] + sorted[n/2]) / 2, truncated; n odd: sorted[n/2]
//	t_avg    = (Σ_{i<n} sorted[i]/q) / n            (summed in this order)
//	t_stdev  = sqrt(Σ_{i<n} d_i² / n), d_i = int(t_avg - sorted[i]/q)
//	           (each deviation truncated toward zero to whole µs before squaring)
//	99%      = sorted[ceil(n*0.99)] / q
//	99.9%    = sorted[ceil(n*0.999)] / q
//
// The percentile indices are computed in float64 like perftest's double
// arithmetic, and index the full sorted array, so they can land on the
// dropped samples: for n < 100, ceil(n*0.99) = n and the 99% value is t_max;
// for n < 1000 the same holds for 99.9%. Where perftest's int deviation or
// its square would overflow (deviations above ~46 ms), rperf uses 64-bit
// integers instead of reproducing C's undefined behaviour.
func PerftestFromSorted(sorted []int64, rttFactor int) (Perftest, error) {
	if rttFactor < 1 {
		return Perftest{}, fmt.Errorf("perftest latency: rtt factor %d < 1", rttFactor)
	}
	m := len(sorted)
	if m < LatMeasureTail+1 {
		return Perftest{}, fmt.Errorf("perftest latency: %d samples: %w", m, ErrTooFewSamples)
	}
	q := ticksPerUsec * float64(rttFactor)
	n := m - LatMeasureTail

	var median int64
	if (n-1)%2 != 0 {
		a, b := uint64(sorted[n/2]), uint64(sorted[n/2-1])
		median = int64((a + b) / 2) // cycles_t (unsigned) arithmetic
	} else {
		median = sorted[n/2]
	}

	var sum float64
	for _, v := range sorted[:n] {
		sum += float64(v) / q
	}
	avg := sum / float64(n)

	var sq float64
	for _, v := range sorted[:n] {
		d := int64(avg - float64(v)/q) // C: int temp_var = average - delta/q
		sq += float64(d * d)           // C: int pow_var = pow(temp_var, 2)
	}

	i99 := int(math.Ceil(float64(n) * 0.99))
	i999 := int(math.Ceil(float64(n) * 0.999))

	return Perftest{
		TMinUs:     float64(sorted[0]) / q,
		TMaxUs:     float64(sorted[n]) / q,
		TTypicalUs: float64(median) / q,
		TAvgUs:     avg,
		TStdevUs:   math.Sqrt(sq / float64(n)),
		P99Us:      float64(sorted[i99]) / q,
		P999Us:     float64(sorted[i999]) / q,
		Samples:    int64(m),
	}, nil
}

// PerftestDuration computes perftest's duration-mode latency line
// (print_report_lat_duration): t_avg = elapsed / rttFactor / iterations in
// microseconds, and tps = iterations per second, where elapsed is the
// sample window (perftest's tcompleted[0] - tposted[0]) in nanoseconds and
// iterations the exchanges completed in it.
func PerftestDuration(elapsedNs, iterations int64, rttFactor int) (tAvgUs, tps float64, err error) {
	if elapsedNs <= 0 || iterations <= 0 || rttFactor < 1 {
		return 0, 0, fmt.Errorf("perftest duration latency: need elapsed > 0, iterations > 0, rtt factor >= 1 (got %d ns, %d, %d)",
			elapsedNs, iterations, rttFactor)
	}
	e := float64(elapsedNs)
	tAvgUs = e / ticksPerUsec / float64(rttFactor) / float64(iterations)
	tps = float64(iterations) / (e / (ticksPerUsec * 1e6))
	return tAvgUs, tps, nil
}
