package table

import (
	"fmt"
	"io"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
)

// trueCol is the width of a true-statistics number: up to 99999999.999 us
// line up; wider values push the row right but stay separated by a space.
const trueCol = 12

// WriteTrueLatency writes rperf's true statistics for latency results, in
// microseconds one-way like perftest's line: exact min, max, mean,
// population stdev, then each percentile present in any result; then notes
// on anything that limits the numbers, and the clock line.
func WriteTrueLatency(w io.Writer, results []reports.Result, clk clock.Info) error {
	var lats []reports.Result
	all := map[string]float64{} // every percentile key, for the columns
	rtts := map[int]bool{}
	for _, r := range results {
		if r.Latency == nil {
			continue
		}
		lats = append(lats, r)
		rtts[r.RTTFactor] = true
		for k := range r.Percentiles {
			all[k] = 0
		}
	}
	if len(lats) == 0 {
		return nil
	}
	keys := reports.SortedPercentileKeys(all)

	ew := &errWriter{w: w}
	rtt := "rtt_factor per test"
	if len(rtts) == 1 {
		rtt = fmt.Sprintf("rtt_factor %d", lats[0].RTTFactor)
	}
	ew.printf(" rperf true statistics over all samples, one-way [usec] = sample / %s\n", rtt)
	ew.printf(" %-7s %-10s", "#bytes", "#samples")
	for _, h := range []string{"min", "max", "mean", "stdev"} {
		ew.printf(" %*s", trueCol, h+"[usec]")
	}
	for _, k := range keys {
		ew.printf(" %*s", trueCol, "p"+k+"[usec]")
	}
	ew.printf("\n")
	for _, r := range lats {
		ew.printf(" %-7d %-10d", r.Bytes, r.Samples)
		for _, v := range []float64{r.TrueMinUs, r.TrueMaxUs, r.MeanUs, r.StdevUs} {
			ew.printf(" %*.3f", trueCol, v)
		}
		for _, k := range keys {
			if v, ok := r.Percentiles[k]; ok {
				ew.printf(" %*.3f", trueCol, v)
			} else {
				ew.printf(" %*s", trueCol, "-")
			}
		}
		ew.printf("\n")
	}
	for _, r := range lats {
		for _, n := range latencyNotes(r) {
			ew.printf(" note: %d B: %s\n", r.Bytes, n)
		}
	}
	writeClock(ew, clk)
	return ew.err
}

// latencyNotes explains what limits a latency result's numbers.
func latencyNotes(r reports.Result) []string {
	var notes []string
	switch {
	case r.Perftest == nil:
		notes = append(notes, "fewer than 3 samples stored: perftest's fields not computed")
	case !r.AllSamples:
		notes = append(notes, fmt.Sprintf("perftest's fields come from the first %d of %d samples (raw buffer full); the true statistics use all",
			r.Perftest.Samples, r.Samples))
	}
	if r.HDROutOfRange > 0 {
		notes = append(notes, fmt.Sprintf("%s outside the histogram's range recorded at its bounds: percentiles there are bounds, min/max/mean/stdev are exact",
			samples(r.HDROutOfRange)))
	}
	if r.HDRDropped > 0 {
		notes = append(notes, fmt.Sprintf("%s refused by the histogram: percentiles omit them", samples(r.HDRDropped)))
	}
	return notes
}

// samples returns "1 sample" or "n samples".
func samples(n int64) string {
	if n == 1 {
		return "1 sample"
	}
	return fmt.Sprintf("%d samples", n)
}

// bandwidthNotes explains an unmeasured BW peak and lost messages.
func bandwidthNotes(r reports.Result) []string {
	var notes []string
	switch r.PeakStatus {
	case reports.PeakOverIterationLimit:
		notes = append(notes, fmt.Sprintf("BW peak not measured: more than %d iterations (perftest skips it too); shown as 0.00", reports.PeakIterationLimit))
	case reports.PeakDurationMode:
		notes = append(notes, "BW peak not measured in duration mode (as perftest); shown as 0.00")
	case reports.PeakDisabled:
		notes = append(notes, "BW peak disabled on request; shown as 0.00")
	case reports.PeakReceiver:
		notes = append(notes, "measured on the receiving side, from the first receive to the last; no BW peak (shown as 0.00)")
	}
	if r.LostMessages > 0 {
		notes = append(notes, fmt.Sprintf("%s lost on the way (UC, UD and raw frames are not retransmitted); the rates count what arrived", messages(r.LostMessages)))
	}
	return notes
}

// messages returns "1 message" or "n messages".
func messages(n int64) string {
	if n == 1 {
		return "1 message"
	}
	return fmt.Sprintf("%d messages", n)
}

func writeClock(ew *errWriter, clk clock.Info) {
	name := clk.Name
	if name == "" {
		name = "unknown"
	}
	ew.printf(" clock: %s: resolution %d ns, cost %.1f ns per read\n", name, clk.ResolutionNs, clk.CostNs)
}

// errWriter keeps the first write error, so a sequence of printf calls
// needs one check.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
