package reports

import "fmt"

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
	// PeakReceiver: the record was measured by the receiving side of a
	// SEND test, which has no per-message post stamps (perftest's server
	// prints no peak either).
	PeakReceiver PeakStatus = "receiver"
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
	// LostMessages counts messages a UC or UD receiver never got, in
	// iterations mode (expected minus received); 0 (omitted) otherwise.
	LostMessages int64 `json:"lost_messages,omitempty"`
}

// Plus returns the sum of two sides' bandwidth, as perftest prints for
// bidirectional tests (each side measures what it sends). The peak is
// measured only if it was on both sides.
func (b Bandwidth) Plus(o Bandwidth) Bandwidth {
	s := Bandwidth{
		BWPeakGbps:   b.BWPeakGbps + o.BWPeakGbps,
		BWAvgGbps:    b.BWAvgGbps + o.BWAvgGbps,
		BWPeakMiBps:  b.BWPeakMiBps + o.BWPeakMiBps,
		BWAvgMiBps:   b.BWAvgMiBps + o.BWAvgMiBps,
		MsgRateMpps:  b.MsgRateMpps + o.MsgRateMpps,
		PeakStatus:   b.PeakStatus,
		LostMessages: b.LostMessages + o.LostMessages,
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
