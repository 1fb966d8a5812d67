package reports

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// DefaultPercentiles are the true-statistics percentiles reported when none
// are asked for.
var DefaultPercentiles = []float64{50, 90, 99, 99.9, 99.99}

// HDRUnit is the unit of the values in an encoded histogram.
const HDRUnit = "ns"

// Latency is the latency part of a [Result], in microseconds, one-way
// (divided by RTTFactor). Its JSON fields are flattened into the record.
type Latency struct {
	// RTTFactor divides every sample: 2 for SEND/WRITE round trips, 1 for
	// READ/ATOMIC.
	RTTFactor int `json:"rtt_factor"`
	// Samples is the number of samples recorded.
	Samples int64 `json:"samples"`

	// Perftest holds perftest's fields; nil when fewer than 3 samples were
	// stored. In duration mode TAvgUs is perftest's duration-mode t_avg
	// (elapsed / rtt_factor / iterations) and TPSAverage is set.
	*Perftest
	// TPSAverage is perftest's duration-mode "tps average": iterations
	// completed per second of the sample window. Duration mode only.
	TPSAverage float64 `json:"tps_average,omitempty"`

	// The true statistics, over every sample.
	TrueMinUs float64 `json:"true_min_us"`
	TrueMaxUs float64 `json:"true_max_us"`
	MeanUs    float64 `json:"mean_us"`
	// StdevUs is the population standard deviation (divide by n).
	StdevUs float64 `json:"stdev_us"`
	// Percentiles maps a percentile, formatted like "99.99", to its value
	// from the histogram (capped at the true maximum).
	Percentiles map[string]float64 `json:"percentiles"`

	// HDR is the histogram of the raw samples (ns, not divided by the rtt
	// factor), HdrHistogram V2 compressed and base64-encoded.
	HDR     string `json:"hdr"`
	HDRUnit string `json:"hdr_unit"`
	// HDROutOfRange counts samples recorded at the histogram's bounds
	// because they fell outside them; HDRDropped counts samples the
	// histogram refused (always 0). Exact statistics include both.
	HDROutOfRange int64 `json:"hdr_out_of_range"`
	HDRDropped    int64 `json:"hdr_dropped"`
}

// LatencySpec describes a latency measurement for [NewLatencyResult].
type LatencySpec struct {
	Test        string
	Bytes       int64
	Iterations  int64 // perftest's #iterations (-n, or completed in the window)
	Mode        Mode
	RTTFactor   int       // RTTFactorRoundTrip or RTTFactorOneSided
	Percentiles []float64 // nil: DefaultPercentiles
	// ElapsedNs is the duration-mode sample window (perftest's
	// tcompleted[0] - tposted[0]); required in duration mode, ignored
	// otherwise.
	ElapsedNs int64
}

// NewLatencyResult computes a latency record from a Recorder: perftest's
// fields from the stored raw samples, the true statistics and percentiles
// from every sample, and the encoded histogram.
func NewLatencyResult(spec LatencySpec, rec *Recorder) (Result, error) {
	if spec.RTTFactor < 1 {
		return Result{}, fmt.Errorf("latency result: rtt factor %d < 1", spec.RTTFactor)
	}
	if spec.Mode != ModeIterations && spec.Mode != ModeDuration {
		return Result{}, fmt.Errorf("latency result: unknown mode %q", spec.Mode)
	}
	ps := spec.Percentiles
	if ps == nil {
		ps = DefaultPercentiles
	}
	if err := checkPercentiles(ps); err != nil {
		return Result{}, fmt.Errorf("latency result: %w", err)
	}
	ex, err := rec.Exact()
	if err != nil {
		return Result{}, fmt.Errorf("latency result: %w", err)
	}
	q := ticksPerUsec * float64(spec.RTTFactor)
	h := rec.Histogram()
	enc, err := EncodeHDR(h)
	if err != nil {
		return Result{}, fmt.Errorf("latency result: %w", err)
	}
	lat := &Latency{
		RTTFactor:     spec.RTTFactor,
		Samples:       ex.Count,
		TrueMinUs:     float64(ex.MinNs) / q,
		TrueMaxUs:     float64(ex.MaxNs) / q,
		MeanUs:        ex.MeanNs / q,
		StdevUs:       ex.StdevNs / q,
		Percentiles:   PercentilesUs(h, ps, spec.RTTFactor, ex.MaxNs),
		HDR:           enc,
		HDRUnit:       HDRUnit,
		HDROutOfRange: ex.HDROutOfRange,
		HDRDropped:    ex.HDRDropped,
	}
	if rec.Stored() > LatMeasureTail {
		sorted := slices.Clone(rec.raw)
		slices.Sort(sorted)
		pt, err := PerftestFromSorted(sorted, spec.RTTFactor)
		if err != nil {
			return Result{}, fmt.Errorf("latency result: %w", err)
		}
		pt.AllSamples = int64(rec.Stored()) == ex.Count
		lat.Perftest = &pt
	}
	res := Result{Test: spec.Test, Bytes: spec.Bytes, Iterations: spec.Iterations, Mode: spec.Mode, Latency: lat}
	if spec.Mode == ModeDuration {
		tAvg, tps, err := PerftestDuration(spec.ElapsedNs, spec.Iterations, spec.RTTFactor)
		if err != nil {
			return Result{}, fmt.Errorf("latency result: %w", err)
		}
		if lat.Perftest != nil {
			lat.TAvgUs = tAvg
		}
		lat.TPSAverage = tps
		res.ElapsedNs = spec.ElapsedNs
	}
	return res, nil
}

// PercentileKey formats a percentile as it appears in JSON and tables:
// the shortest decimal, e.g. "50", "99.9", "99.99".
func PercentileKey(p float64) string {
	return strconv.FormatFloat(p, 'f', -1, 64)
}

func checkPercentiles(ps []float64) error {
	for _, p := range ps {
		if !(p > 0 && p <= 100) {
			return fmt.Errorf("percentile %v outside (0, 100]", p)
		}
	}
	return nil
}

// PercentilesUs returns the histogram's value at each percentile (nearest
// rank, HdrHistogram's highest equivalent value) in microseconds, one-way
// (divided by 1000·rttFactor), keyed by [PercentileKey]. A histogram value
// above maxNs — possible by up to one histogram bucket, under 0.1% at 3
// significant digits — is reported as maxNs, the true maximum; pass
// math.MaxInt64 for no cap.
func PercentilesUs(h *hdr.Histogram, ps []float64, rttFactor int, maxNs int64) map[string]float64 {
	q := ticksPerUsec * float64(rttFactor)
	out := make(map[string]float64, len(ps))
	vals := h.ValueAtPercentilesSlice(ps)
	for i, p := range ps {
		out[PercentileKey(p)] = float64(min(vals[i], maxNs)) / q
	}
	return out
}

// SortedPercentileKeys returns m's keys in ascending numeric order.
func SortedPercentileKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		fa, _ := strconv.ParseFloat(a, 64)
		fb, _ := strconv.ParseFloat(b, 64)
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	})
	return keys
}

// EncodeHDR encodes a histogram as HdrHistogram V2 compressed base64, the
// form of the hdr field.
func EncodeHDR(h *hdr.Histogram) (string, error) {
	b, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
	if err != nil {
		return "", fmt.Errorf("encode histogram: %w", err)
	}
	return string(b), nil
}

// DecodeHDR decodes an hdr field.
func DecodeHDR(s string) (*hdr.Histogram, error) {
	h, err := hdr.Decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("decode histogram: %w", err)
	}
	return h, nil
}

// MaxNs returns the true maximum of a latency result in nanoseconds, before
// the rtt_factor division, as [PercentilesUs] needs it to recompute the
// percentiles of a decoded hdr field.
func (l *Latency) MaxNs() int64 {
	return int64(math.Round(l.TrueMaxUs * ticksPerUsec * float64(l.RTTFactor)))
}
