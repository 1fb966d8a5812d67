package reports

import (
	"fmt"
	"math/bits"
)

// Bandwidth units, as perftest's format_factor.
const (
	// MiB is the divisor for MiB/s (perftest's default report, 0x100000).
	MiB = 1 << 20
	// GbpsBytes is the divisor for Gb/s: 10^9 bits per second is 125,000,000
	// bytes per second (perftest --report_gbits). Gb/s is bits, GB/s would be
	// bytes: the two differ by 8×.
	GbpsBytes = 125_000_000
)

// PeakIterationLimit is the iteration count above which perftest (and
// rperf) skip the O(n²/cq_mod) peak computation.
const PeakIterationLimit = 20000

// PeakStatus says whether a result's BW peak was measured and, if not, why.
// An unmeasured peak is reported as 0, as perftest prints 0.00.
type PeakStatus string

// Peak statuses.
const (
	PeakMeasured           PeakStatus = "measured"
	PeakOverIterationLimit PeakStatus = "over_iteration_limit" // iterations > PeakIterationLimit
	PeakDurationMode       PeakStatus = "duration_mode"        // perftest -D never measures it
	PeakDisabled           PeakStatus = "disabled"             // the user asked (perftest -N)
)

// Bandwidth is the bandwidth part of a [Result]. Its JSON fields are
// flattened into the record.
type Bandwidth struct {
	BWPeakGbps  float64    `json:"bw_peak_gbps"`
	BWAvgGbps   float64    `json:"bw_avg_gbps"`
	BWPeakMiBps float64    `json:"bw_peak_mibps"`
	BWAvgMiBps  float64    `json:"bw_avg_mibps"`
	MsgRateMpps float64    `json:"msg_rate_mpps"`
	PeakStatus  PeakStatus `json:"bw_peak_status"`
}

// Plus returns the sum of two sides' bandwidth, as perftest prints for
// bidirectional tests (each side measures what it sends). The peak is
// measured only if it was on both sides.
func (b Bandwidth) Plus(o Bandwidth) Bandwidth {
	s := Bandwidth{
		BWPeakGbps:  b.BWPeakGbps + o.BWPeakGbps,
		BWAvgGbps:   b.BWAvgGbps + o.BWAvgGbps,
		BWPeakMiBps: b.BWPeakMiBps + o.BWPeakMiBps,
		BWAvgMiBps:  b.BWAvgMiBps + o.BWAvgMiBps,
		MsgRateMpps: b.MsgRateMpps + o.MsgRateMpps,
		PeakStatus:  b.PeakStatus,
	}
	if o.PeakStatus != PeakMeasured {
		s.PeakStatus = o.PeakStatus
	}
	return s
}

// BWRates is a rate in the three units perftest reports.
type BWRates struct {
	MiBps float64 // 2^20 bytes per second
	Gbps  float64 // 10^9 bits per second
	Mpps  float64 // 10^6 messages per second
}

// BWAverage returns perftest's average bandwidth and message rate for
// messages of size bytes over elapsedNs nanoseconds:
//
//	BW   = bytes · messages · 10^9 / (elapsedNs · format_factor)
//	Mpps = messages · 10^9 / (elapsedNs · 10^6)
//
// evaluated in perftest's order (print_report_bw, with 10^9 ticks per
// second since rperf's ticks are nanoseconds).
func BWAverage(bytes, messages, elapsedNs int64) (BWRates, error) {
	if bytes < 0 || messages < 0 || elapsedNs <= 0 {
		return BWRates{}, fmt.Errorf("bw average: need bytes >= 0, messages >= 0, elapsed > 0 (got %d, %d, %d ns)",
			bytes, messages, elapsedNs)
	}
	const hz = 1e9
	e := float64(elapsedNs)
	num := float64(bytes) * float64(messages) * hz
	return BWRates{
		MiBps: num / (e * MiB),
		Gbps:  num / (e * GbpsBytes),
		Mpps:  float64(messages) * hz / (e * 1e6),
	}, nil
}

// PeakWindow is the window perftest's BW-peak search settles on: from the
// post of message First to the completion of message Last.
type PeakWindow struct {
	First, Last int
	Ns          int64 // completed[Last] - posted[First]
	Messages    int64 // Last - First + 1
}

// NsPerMessage returns the window's average time per message.
func (w PeakWindow) NsPerMessage() float64 {
	return float64(w.Ns) / float64(w.Messages)
}

// FindPeakWindow runs perftest's peak search over per-message timestamps
// (nanoseconds, len(posted) == len(completed) == iterations × QPs): for each
// window start i = 0, postList, 2·postList, ... (the messages whose post
// perftest stamps) and each end j = roundUp(i+1, cqMod)−1, +cqMod, ... (the
// completions perftest stamps, one per CQE), plus j = n−1 when n is not a
// multiple of cqMod, it takes (completed[j] − posted[i]) / (j − i + 1) and
// returns the window where that is smallest. Only those indices are read,
// so unstamped entries may hold anything.
//
// Two deliberate differences from perftest: the ratio is compared exactly
// (perftest truncates it to whole cycles, under a nanosecond at GHz cycle
// rates but a whole tick at rperf's nanosecond ticks), and no window
// (0,0) is assumed when cqMod > 1 (perftest seeds its minimum with
// tcompleted[0] − tposted[0], an entry it never stamps in that case).
// The search costs O(n²/(postList·cqMod)).
func FindPeakWindow(posted, completed []int64, postList, cqMod int) (PeakWindow, error) {
	n := len(posted)
	switch {
	case n == 0 || len(completed) != n:
		return PeakWindow{}, fmt.Errorf("bw peak: need equal, nonempty posted and completed (got %d, %d)", n, len(completed))
	case postList < 1 || cqMod < 1:
		return PeakWindow{}, fmt.Errorf("bw peak: post list %d and cq moderation %d must be >= 1", postList, cqMod)
	}
	best := PeakWindow{First: -1}
	var bestNs, bestK uint64 // best.Ns and best.Messages, as uint64
	for i := 0; i < n; i += postList {
		p := posted[i]
		last := n - 1
		if n%cqMod == 0 {
			last = -1 // already among the cqMod steps
		}
		for j := roundUp(i+1, cqMod) - 1; ; j += cqMod {
			if j >= n {
				if last < 0 {
					break
				}
				j, last = last, -1 // the last message's CQE is always requested
			}
			t := completed[j] - p
			if t <= 0 {
				return PeakWindow{}, fmt.Errorf("bw peak: completion of message %d (%d ns) is not after post of message %d (%d ns)",
					j, completed[j], i, p)
			}
			k := uint64(j - i + 1)
			// t/k < bestNs/bestK  ⇔  t·bestK < bestNs·k, compared in 128 bits.
			ahi, alo := bits.Mul64(uint64(t), bestK)
			bhi, blo := bits.Mul64(bestNs, k)
			if best.First < 0 || ahi < bhi || ahi == bhi && alo < blo {
				best = PeakWindow{First: i, Last: j, Ns: t, Messages: int64(k)}
				bestNs, bestK = uint64(t), k
			}
		}
	}
	return best, nil
}

// roundUp rounds v up to a multiple of a (perftest's ROUND_UP).
func roundUp(v, a int) int {
	return (v + a - 1) / a * a
}

// BWPeak returns perftest's peak bandwidth, the rate of the best window of
// [FindPeakWindow]: bytes per message over its time per message.
func BWPeak(bytes int64, posted, completed []int64, postList, cqMod int) (BWRates, PeakWindow, error) {
	w, err := FindPeakWindow(posted, completed, postList, cqMod)
	if err != nil {
		return BWRates{}, PeakWindow{}, err
	}
	r, err := BWAverage(bytes, w.Messages, w.Ns)
	return r, w, err
}

// BWSpec describes an iteration-mode bandwidth measurement for
// [NewBandwidthResult].
type BWSpec struct {
	Test       string
	Bytes      int64 // message size
	Iterations int64 // per QP (perftest -n)
	QPs        int   // 0 means 1
	PostList   int   // 0 means 1
	CQMod      int   // 0 means 1
	NoPeak     bool  // the user disabled the peak (perftest -N)
	// Posted and Completed are per-message timestamps in nanoseconds,
	// len Iterations×QPs, as perftest's tposted/tcompleted. Needed for the
	// peak; unused when it is disabled.
	Posted, Completed []int64
	// ElapsedNs is last completion minus first post; 0 means
	// Completed[last] - Posted[0].
	ElapsedNs int64
}

// NewBandwidthResult computes an iteration-mode bandwidth record: the
// average over ElapsedNs, the message rate, and the peak unless disabled or
// Iterations > [PeakIterationLimit]. Its Iterations is messages
// (iterations × QPs), as perftest's #iterations column.
func NewBandwidthResult(spec BWSpec) (Result, error) {
	qps, pl, cq := max(spec.QPs, 1), max(spec.PostList, 1), max(spec.CQMod, 1)
	if spec.Iterations <= 0 || spec.QPs < 0 || spec.PostList < 0 || spec.CQMod < 0 {
		return Result{}, fmt.Errorf("bandwidth result: invalid spec (iterations %d, qps %d, post list %d, cq mod %d)",
			spec.Iterations, spec.QPs, spec.PostList, spec.CQMod)
	}
	msgs := spec.Iterations * int64(qps)
	bw := &Bandwidth{PeakStatus: PeakMeasured}
	switch {
	case spec.NoPeak:
		bw.PeakStatus = PeakDisabled
	case spec.Iterations > PeakIterationLimit:
		bw.PeakStatus = PeakOverIterationLimit
	}
	elapsed := spec.ElapsedNs
	if elapsed == 0 {
		if int64(len(spec.Posted)) != msgs || int64(len(spec.Completed)) != msgs {
			return Result{}, fmt.Errorf("bandwidth result: no ElapsedNs and %d posted / %d completed stamps for %d messages",
				len(spec.Posted), len(spec.Completed), msgs)
		}
		elapsed = spec.Completed[msgs-1] - spec.Posted[0]
	}
	avg, err := BWAverage(spec.Bytes, msgs, elapsed)
	if err != nil {
		return Result{}, fmt.Errorf("bandwidth result: %w", err)
	}
	bw.BWAvgMiBps, bw.BWAvgGbps, bw.MsgRateMpps = avg.MiBps, avg.Gbps, avg.Mpps
	if bw.PeakStatus == PeakMeasured {
		if int64(len(spec.Posted)) != msgs || int64(len(spec.Completed)) != msgs {
			return Result{}, fmt.Errorf("bandwidth result: peak needs %d posted and completed stamps (got %d, %d)",
				msgs, len(spec.Posted), len(spec.Completed))
		}
		peak, _, err := BWPeak(spec.Bytes, spec.Posted, spec.Completed, pl, cq)
		if err != nil {
			return Result{}, fmt.Errorf("bandwidth result: %w", err)
		}
		bw.BWPeakMiBps, bw.BWPeakGbps = peak.MiBps, peak.Gbps
	}
	return Result{
		Test: spec.Test, Bytes: spec.Bytes, Iterations: msgs, Mode: ModeIterations,
		ElapsedNs: elapsed, Bandwidth: bw,
	}, nil
}

// BWDurationSpec describes a duration-mode bandwidth measurement.
type BWDurationSpec struct {
	Test  string
	Bytes int64
	// Messages completed inside the sample window (perftest counts cq_mod
	// per CQE while in SAMPLE_STATE).
	Messages int64
	// WindowNs is the sample window: perftest's tcompleted[0] − tposted[0],
	// stamped when the margins end.
	WindowNs int64
}

// NewBandwidthDurationResult computes a duration-mode bandwidth record:
// averages over the sample window; the peak is never measured (perftest -D
// prints 0.00).
func NewBandwidthDurationResult(spec BWDurationSpec) (Result, error) {
	avg, err := BWAverage(spec.Bytes, spec.Messages, spec.WindowNs)
	if err != nil {
		return Result{}, fmt.Errorf("bandwidth duration result: %w", err)
	}
	return Result{
		Test: spec.Test, Bytes: spec.Bytes, Iterations: spec.Messages, Mode: ModeDuration,
		ElapsedNs: spec.WindowNs,
		Bandwidth: &Bandwidth{
			BWAvgMiBps: avg.MiBps, BWAvgGbps: avg.Gbps, MsgRateMpps: avg.Mpps,
			PeakStatus: PeakDurationMode,
		},
	}, nil
}
