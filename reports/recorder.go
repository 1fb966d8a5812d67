package reports

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Recorder defaults.
const (
	// DefaultRawLimit is how many raw samples a Recorder keeps when the
	// sample count is not known in advance (duration mode): 1 Mi samples,
	// 8 MiB.
	DefaultRawLimit = 1 << 20
	// DefaultLowestNs and DefaultHighestNs bound the HdrHistogram: 1 ns to
	// 1 hour. Samples outside are recorded at the nearest bound and counted
	// (see [Exact.HDROutOfRange]).
	DefaultLowestNs  = 1
	DefaultHighestNs = int64(time.Hour)
	// DefaultSigFigs is the HdrHistogram precision: 3 significant digits,
	// i.e. 1 ns resolution up to 2047 ns, 2 ns up to 4095 ns, and so on
	// (relative error below 0.1%).
	DefaultSigFigs = 3
)

// RecorderOptions configures [NewRecorder]. The zero value is valid: duration
// mode with the defaults above.
type RecorderOptions struct {
	// Expected is the number of samples the caller will record (iterations
	// mode). The raw-sample slice is preallocated to exactly this size, so
	// perftest's fields, which need every sorted sample, are computed from
	// all of them. 0 means unknown (duration mode).
	Expected int
	// RawLimit caps the raw samples kept when Expected is 0; 0 means
	// [DefaultRawLimit]. Samples beyond the cap still reach the exact
	// statistics and the histogram.
	RawLimit int
	// HighestNs is the histogram's highest trackable value; 0 means
	// [DefaultHighestNs].
	HighestNs int64
	// SigFigs is the histogram's precision (1..5); 0 means [DefaultSigFigs].
	SigFigs int
}

// Recorder collects latency samples in nanoseconds. It keeps every raw
// sample up to a preallocated capacity, exact minimum, maximum, count, sum
// and sum of squares, and an HdrHistogram; all of them see every sample.
//
// Record is the only method meant for the measurement loop: it never
// allocates, never locks, and costs a few nanoseconds while the sample fits
// in the raw slice (its statistics are folded in later, when a result is
// asked for) and ~20 ns afterwards. A Recorder is not safe for concurrent
// use: keep one per goroutine and [Recorder.Merge] them after the run.
type Recorder struct {
	raw      []int64 // raw samples in arrival order; cap fixed at creation
	folded   int     // raw[:folded] are already in the statistics below
	overflow int64   // samples that did not fit in raw (folded on arrival)

	n        int64 // samples folded
	min, max int64
	sums     exactSums

	h          *hdr.Histogram
	highest    int64
	outOfRange int64 // samples clamped into [0, highest] for the histogram
	hdrDropped int64 // histogram record errors (must stay 0)
}

// NewRecorder returns a Recorder with its raw-sample slice and histogram
// allocated up front.
func NewRecorder(opts RecorderOptions) (*Recorder, error) {
	if opts.Expected < 0 || opts.RawLimit < 0 || opts.HighestNs < 0 || opts.SigFigs < 0 {
		return nil, fmt.Errorf("new recorder: negative option in %+v", opts)
	}
	capacity := opts.Expected
	if capacity == 0 {
		capacity = opts.RawLimit
		if capacity == 0 {
			capacity = DefaultRawLimit
		}
	}
	highest := opts.HighestNs
	if highest == 0 {
		highest = DefaultHighestNs
	}
	sig := opts.SigFigs
	if sig == 0 {
		sig = DefaultSigFigs
	}
	if sig > 5 {
		return nil, fmt.Errorf("new recorder: SigFigs %d out of range 1..5", sig)
	}
	if highest < 2*DefaultLowestNs {
		return nil, fmt.Errorf("new recorder: HighestNs %d too small", highest)
	}
	r := &Recorder{
		raw:     make([]int64, 0, capacity),
		h:       hdr.New(DefaultLowestNs, highest, sig),
		highest: highest,
	}
	r.Reset()
	return r, nil
}

// Record adds one sample, in nanoseconds. It never allocates.
func (r *Recorder) Record(ns int64) {
	if n := len(r.raw); n < cap(r.raw) {
		r.raw = r.raw[:n+1]
		r.raw[n] = ns
		return
	}
	r.overflow++
	r.fold(ns)
}

// fold adds one sample to the exact statistics and the histogram.
func (r *Recorder) fold(ns int64) {
	if ns < r.min {
		r.min = ns
	}
	if ns > r.max {
		r.max = ns
	}
	r.n++
	r.sums.add(ns)
	v := ns
	if v < 0 {
		v = 0
		r.outOfRange++
	} else if v > r.highest {
		v = r.highest
		r.outOfRange++
	}
	if r.h.RecordValue(v) != nil {
		r.hdrDropped++
	}
}

// flush folds the raw samples recorded since the last flush.
func (r *Recorder) flush() {
	for _, v := range r.raw[r.folded:] {
		r.fold(v)
	}
	r.folded = len(r.raw)
}

// Reset forgets every sample, keeping the allocated storage, so one Recorder
// can serve message size after message size.
func (r *Recorder) Reset() {
	r.raw = r.raw[:0]
	r.folded = 0
	r.overflow = 0
	r.n = 0
	r.min, r.max = math.MaxInt64, math.MinInt64
	r.sums = exactSums{}
	r.h.Reset()
	r.outOfRange = 0
	r.hdrDropped = 0
}

// Count returns the number of samples recorded.
func (r *Recorder) Count() int64 {
	return int64(len(r.raw)) + r.overflow
}

// Stored returns how many samples are kept raw; it equals [Recorder.Count]
// unless the raw slice filled up.
func (r *Recorder) Stored() int {
	return len(r.raw)
}

// Samples returns a copy of the stored raw samples, in recording order
// (perftest's -U dump). It may be shorter than Count; see [Recorder.Stored].
func (r *Recorder) Samples() []int64 {
	return slices.Clone(r.raw)
}

// Histogram returns the recorder's HdrHistogram, up to date with every
// sample. It is shared, not copied: do not modify it.
func (r *Recorder) Histogram() *hdr.Histogram {
	r.flush()
	return r.h
}

// Exact holds a Recorder's exact statistics, in nanoseconds, before any
// rtt_factor division.
type Exact struct {
	Count  int64   // samples recorded
	MinNs  int64   // smallest sample
	MaxNs  int64   // largest sample
	MeanNs float64 // Σx/n, exact then rounded once
	// StdevNs is the population standard deviation, sqrt(Σ(x−mean)²/n),
	// exact then rounded once. Population, not sample (n−1), to match
	// perftest's definition; the difference is a factor sqrt(n/(n−1)).
	StdevNs float64
	// HDROutOfRange counts samples outside the histogram's range (negative,
	// or above its highest trackable value) that were recorded at the
	// nearest bound instead.
	HDROutOfRange int64
	// HDRDropped counts samples the histogram refused; always 0 unless the
	// histogram library misbehaves.
	HDRDropped int64
}

// ErrNoSamples is returned when statistics are asked of an empty Recorder.
var ErrNoSamples = errors.New("no samples recorded")

// Exact returns the exact statistics of every sample recorded.
func (r *Recorder) Exact() (Exact, error) {
	r.flush()
	if r.n == 0 {
		return Exact{}, fmt.Errorf("exact statistics: %w", ErrNoSamples)
	}
	mean, stdev := r.sums.meanStdev(r.n)
	return Exact{
		Count:         r.n,
		MinNs:         r.min,
		MaxNs:         r.max,
		MeanNs:        mean,
		StdevNs:       stdev,
		HDROutOfRange: r.outOfRange,
		HDRDropped:    r.hdrDropped,
	}, nil
}

// Merge adds every sample of o to r, for example per-QP recorders after a
// multi-QP run. The histograms must have the same range and precision. Merge
// allocates; call it after the measurement loop. r's raw slice is clipped
// afterwards, so later Records are folded on arrival.
func (r *Recorder) Merge(o *Recorder) error {
	if r.highest != o.highest || r.h.SignificantFigures() != o.h.SignificantFigures() {
		return fmt.Errorf("merge recorders: histogram geometry differs (highest %d vs %d, sigfigs %d vs %d)",
			r.highest, o.highest, r.h.SignificantFigures(), o.h.SignificantFigures())
	}
	r.flush()
	o.flush()
	r.raw = slices.Clip(append(r.raw, o.raw...))
	r.folded = len(r.raw)
	r.overflow += o.overflow
	r.n += o.n
	r.min = min(r.min, o.min)
	r.max = max(r.max, o.max)
	r.sums.merge(o.sums)
	r.outOfRange += o.outOfRange
	r.hdrDropped += o.hdrDropped + r.h.Merge(o.h)
	return nil
}
