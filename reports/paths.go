package reports

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/rperf/rperf/internal/stats"
)

// Figures of merit of repeated measurements (Result.Merit).
const (
	// MeritMsgRate is a bandwidth record's message rate, msg_rate_mpps:
	// higher is better.
	MeritMsgRate = "msg_rate_mpps"
	// MeritP50 is a latency record's median one-way latency,
	// percentiles["50"]: lower is better.
	MeritP50 = "p50_us"
)

// Verdicts of a path against the reference (Result.Verdict).
const (
	VerdictBetter = "better" // significantly better (see VerdictOf)
	VerdictWorse  = "worse"  // significantly worse
	VerdictSame   = "same"   // no difference the repetitions can show
)

// VerdictConfidence is the confidence of VerdictOf's rank test.
const VerdictConfidence = 0.95

// MeritOf returns a record's figure of merit: the message rate of a
// bandwidth record, the median latency of a latency record (which must
// have the 50th percentile); higher says whether a larger value is
// better.
func MeritOf(r Result) (name string, value float64, higher bool, err error) {
	switch {
	case r.Bandwidth != nil:
		return MeritMsgRate, r.MsgRateMpps, true, nil
	case r.Latency != nil:
		v, ok := r.Percentiles[PercentileKey(50)]
		if !ok {
			return "", 0, false, fmt.Errorf("%s %d B: no 50th percentile to compare", r.Test, r.Bytes)
		}
		return MeritP50, v, false, nil
	}
	return "", 0, false, fmt.Errorf("%s %d B: neither a latency nor a bandwidth record", r.Test, r.Bytes)
}

// MedianRepetition returns the record of the repetition whose figure of
// merit is the median of reps (the lower of the two middle ones for an
// even count), so that every number in it comes from one real run, with
// Repetitions, Merit, Merits (in the order of reps), MeritMin and
// MeritMax set from all of them.
func MedianRepetition(reps []Result) (Result, error) {
	if len(reps) == 0 {
		return Result{}, errors.New("median repetition: no repetitions")
	}
	type rv struct {
		i int
		v float64
	}
	vals := make([]rv, len(reps))
	merits := make([]float64, len(reps))
	var name string
	for i, r := range reps {
		n, v, _, err := MeritOf(r)
		if err != nil {
			return Result{}, fmt.Errorf("median repetition: %w", err)
		}
		if i > 0 && n != name {
			return Result{}, fmt.Errorf("median repetition: repetition %d is a %s record, repetition 0 a %s record", i, n, name)
		}
		name = n
		vals[i] = rv{i, v}
		merits[i] = v
	}
	// Stable: equal figures keep their order, so the pick is deterministic.
	slices.SortStableFunc(vals, func(a, b rv) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	out := reps[vals[(len(vals)-1)/2].i]
	lo, hi := vals[0].v, vals[len(vals)-1].v
	out.Repetitions, out.Merit, out.Merits, out.MeritMin, out.MeritMax = len(reps), name, merits, &lo, &hi
	return out, nil
}

// VerdictOf compares a path's figures over its repetitions with the
// reference's by the two-sided Mann-Whitney rank test at
// VerdictConfidence: better or worse when the Hodges-Lehmann confidence
// interval of the difference (path − reference, stats.ShiftCI) lies
// wholly on one side of 0, the same otherwise. higher says whether
// larger is better. Ranks make it robust to a stray repetition, and it
// assumes nothing of the figures' distribution. With fewer than four
// repetitions a side no interval reaches 95% (stats.MaxConfidence): the
// widest one is used, from the smallest to the largest difference, so
// the verdict then says whether the ranges are apart.
func VerdictOf(path, ref []float64, higher bool) string {
	if len(path) == 0 || len(ref) == 0 {
		return VerdictSame
	}
	s, _ := stats.ShiftCI(ref, path, VerdictConfidence)
	up, down := VerdictBetter, VerdictWorse
	if !higher {
		up, down = down, up
	}
	switch {
	case s.Lo > 0:
		return up
	case s.Hi < 0:
		return down
	}
	return VerdictSame
}

// SetRatios fills RatioToGeneric and Verdict of median-repetition
// records (see MedianRepetition) against ref, the generic path's record
// of the same test and size: the ratio of the figures of merit (path /
// generic: above 1 means a higher message rate, or a longer latency).
func SetRatios(ref Result, rs []Result) error {
	_, rv, higher, err := MeritOf(ref)
	if err != nil {
		return err
	}
	if rv == 0 || len(ref.Merits) == 0 {
		return fmt.Errorf("%s %d B: the reference has no usable figure of merit", ref.Test, ref.Bytes)
	}
	for i := range rs {
		r := &rs[i]
		_, v, _, err := MeritOf(*r)
		if err != nil {
			return err
		}
		ratio := v / rv
		r.RatioToGeneric = &ratio
		if len(r.Merits) > 0 && r.Path != ref.Path {
			r.Verdict = VerdictOf(r.Merits, ref.Merits, higher)
		}
	}
	return nil
}

// Gap is the distribution of the gaps between consecutive messages of a
// paced stream, as the receiver saw them, in microseconds.
type Gap struct {
	// Samples is the number of gaps measured.
	Samples int64 `json:"samples"`
	// ExpectedUs is the gap the requested rate implies: bytes × 8 /
	// requested rate.
	ExpectedUs float64 `json:"expected_us"`
	MinUs      float64 `json:"min_us"`
	MaxUs      float64 `json:"max_us"`
	MeanUs     float64 `json:"mean_us"`
	StdevUs    float64 `json:"stdev_us"` // population standard deviation
	// Percentiles maps a percentile ("50", "99.9") to its gap, from the
	// HdrHistogram (nearest rank, capped at the true maximum).
	Percentiles map[string]float64 `json:"percentiles"`
	// HDR is the histogram of the gaps in nanoseconds, HdrHistogram V2
	// compressed and base64-encoded, as Latency.HDR.
	HDR     string `json:"hdr"`
	HDRUnit string `json:"hdr_unit"`
}

// NewGap summarises the gaps recorded in rec (nanoseconds) at the
// percentiles ps (nil: DefaultPercentiles); expectedNs is the gap the
// requested rate implies.
func NewGap(rec *Recorder, expectedNs float64, ps []float64) (*Gap, error) {
	if ps == nil {
		ps = DefaultPercentiles
	}
	if err := checkPercentiles(ps); err != nil {
		return nil, fmt.Errorf("gap: %w", err)
	}
	ex, err := rec.Exact()
	if err != nil {
		return nil, fmt.Errorf("gap: %w", err)
	}
	h := rec.Histogram()
	enc, err := EncodeHDR(h)
	if err != nil {
		return nil, fmt.Errorf("gap: %w", err)
	}
	return &Gap{
		Samples: ex.Count, ExpectedUs: expectedNs / ticksPerUsec,
		MinUs: float64(ex.MinNs) / ticksPerUsec, MaxUs: float64(ex.MaxNs) / ticksPerUsec,
		MeanUs: ex.MeanNs / ticksPerUsec, StdevUs: ex.StdevNs / ticksPerUsec,
		Percentiles: PercentilesUs(h, ps, 1, ex.MaxNs),
		HDR:         enc, HDRUnit: HDRUnit,
	}, nil
}

// RateMbps is the rate of msgs messages of bytes each over ns
// nanoseconds, in Mb/s (10^6 bits per second): bytes × msgs × 8000 / ns.
func RateMbps(bytes, msgs, ns int64) (float64, error) {
	if bytes <= 0 || msgs <= 0 || ns <= 0 {
		return 0, fmt.Errorf("rate of %d messages of %d bytes in %d ns: all must be positive", msgs, bytes, ns)
	}
	return float64(bytes) * float64(msgs) * 8000 / float64(ns), nil
}

// ErrorPct is (achieved − requested) / requested × 100.
func ErrorPct(requested, achieved float64) float64 {
	if requested == 0 {
		return math.NaN()
	}
	return (achieved - requested) / requested * 100
}
