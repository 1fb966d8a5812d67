package table

import (
	"fmt"
	"io"
	"strings"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
)

// WritePaths writes a send-path comparison (rperf paths, rperf dm-lat):
// for each message size one block with a line per path, the median
// repetition's figures side by side, the spread of the figure of merit
// over the repetitions, the ratio to generic and the verdict; then the
// clock line. label names each path's row ("generic" may read "host
// memory" in dm-lat); nil uses the path.
func WritePaths(w io.Writer, results []reports.Result, label func(reports.Result) string, clk clock.Info) error {
	if label == nil {
		label = func(r reports.Result) string { return r.Path }
	}
	ew := &errWriter{w: w}
	width := len("path")
	for _, r := range results {
		width = max(width, len(label(r)))
	}
	var last int64 = -1
	for _, r := range results {
		if r.Bytes != last {
			if last >= 0 {
				ew.printf("\n")
			}
			last = r.Bytes
			writePathsHeader(ew, r, width)
		}
		writePathsRow(ew, r, label(r), width)
	}
	if len(results) > 0 {
		r := results[0]
		what := "message rate"
		better := "above 1 is faster"
		if r.Latency != nil {
			what, better = "median latency", "below 1 is faster"
		}
		ew.printf(" ratio: the path's %s over generic's (%s); spread: the lowest and highest of %d repetitions, interleaved;\n", what, better, r.Repetitions)
		ew.printf(" verdict: better/worse when a Mann-Whitney rank test over the repetitions tells them apart at 95%%, else same\n")
	}
	writeClock(ew, clk)
	return ew.err
}

func writePathsHeader(ew *errWriter, r reports.Result, width int) {
	ew.printf(" %s, %d B, median of %d repetitions per path\n", r.Test, r.Bytes, r.Repetitions)
	if r.Latency != nil {
		ew.printf(" %-*s %12s %21s %12s %12s %12s %8s  %s\n", width, "path", "p50[usec]", "spread[usec]", "p99[usec]", "mean[usec]", "max[usec]", "ratio", "verdict")
		return
	}
	ew.printf(" %-*s %13s %21s %14s %12s %8s  %s\n", width, "path", "MsgRate[Mpps]", "spread[Mpps]", "BW avg[Gb/s]", "#messages", "ratio", "verdict")
}

func writePathsRow(ew *errWriter, r reports.Result, label string, width int) {
	spread := "-"
	if r.MeritMin != nil && r.MeritMax != nil {
		spread = fmt.Sprintf("%.3f..%.3f", *r.MeritMin, *r.MeritMax)
	}
	ratio := "-"
	if r.RatioToGeneric != nil {
		ratio = fmt.Sprintf("%.3f", *r.RatioToGeneric)
	}
	verdict := r.Verdict
	if verdict == "" {
		verdict = "reference"
	}
	if r.Latency != nil {
		ew.printf(" %-*s %12.3f %21s %12.3f %12.3f %12.3f %8s  %s\n", width, label, r.Percentiles["50"], spread,
			r.Percentiles["99"], r.MeanUs, r.TrueMaxUs, ratio, verdict)
		return
	}
	ew.printf(" %-*s %13.4f %21s %14.3f %12d %8s  %s\n", width, label, r.MsgRateMpps, spread, r.BWAvgGbps, r.Iterations, ratio, verdict)
}

// WritePacing writes a pacing sweep (rperf pacing): one line per
// requested rate with the achieved rate, its error and, where the record
// has them (the receiver's), the gap distribution's percentiles next to
// the gap the rate implies; then the clock line.
func WritePacing(w io.Writer, results []reports.Result, clk clock.Info) error {
	ew := &errWriter{w: w}
	var keys []string
	gaps := false
	for _, r := range results {
		if r.Gap != nil {
			gaps = true
			all := map[string]float64{}
			for k := range r.Gap.Percentiles {
				all[k] = 0
			}
			keys = reports.SortedPercentileKeys(all)
			break
		}
	}
	ew.printf(" %14s %14s %9s %10s", "requested[Mb/s]", "achieved[Mb/s]", "error[%]", "#messages")
	if gaps {
		ew.printf(" %12s", "gap[usec]")
		for _, k := range keys {
			ew.printf(" %11s", "p"+k)
		}
		ew.printf(" %11s", "max")
	}
	ew.printf("\n")
	for _, r := range results {
		if r.RequestedMbps == nil || r.AchievedMbps == nil || r.ErrorPct == nil {
			continue
		}
		ew.printf(" %15s %14s %+9.3f %10d", mbps(*r.RequestedMbps), mbps(*r.AchievedMbps), *r.ErrorPct, r.Iterations)
		if g := r.Gap; g != nil {
			ew.printf(" %12.3f", g.ExpectedUs)
			for _, k := range keys {
				ew.printf(" %11.3f", g.Percentiles[k])
			}
			ew.printf(" %11.3f", g.MaxUs)
		}
		ew.printf("\n")
	}
	if len(results) > 0 {
		r := results[0]
		ew.printf(" %d-byte SENDs, measured at the receiver; not measured: the first %s of each rate, which the token bucket (it starts full) lets go back to back\n",
			r.Bytes, messages(r.ExcludedMessages))
		if gaps {
			ew.printf(" gap: the interval the requested rate implies, then percentiles and maximum of the gaps between consecutive arrivals\n")
			for _, r := range results {
				if stalled(r) {
					ew.printf(" note: at %s Mb/s the stream stalled (longest gap %.3f ms, %.0fx the interval): a process lost its CPU (other busy processes?); a late sender catches up one burst at most (--burst), so the shortfall is this machine's, not the pacer's\n",
						mbps(*r.RequestedMbps), r.Gap.MaxUs/1000, r.Gap.MaxUs/r.Gap.ExpectedUs)
				}
			}
		} else {
			ew.printf(" the receiver (the client) measured these figures and prints the gap distribution\n")
		}
	}
	writeClock(ew, clk)
	return ew.err
}

// stalled reports whether a paced rate fell more than 1% short with a
// gap of at least a millisecond and ten intervals: the stream stopped,
// which a scheduler does to a process, not a token bucket to a stream.
func stalled(r reports.Result) bool {
	g := r.Gap
	return g != nil && r.ErrorPct != nil && r.RequestedMbps != nil && *r.ErrorPct < -1 &&
		g.MaxUs >= 1000 && g.MaxUs >= 10*g.ExpectedUs
}

// mbps formats a rate with up to three decimals, without trailing zeros.
func mbps(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
