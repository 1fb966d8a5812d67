package table

import (
	"fmt"
	"io"

	"github.com/rperf/rperf/reports"
)

// perftest's result strings (src/perftest_parameters.h, perftest 6.x).
const (
	// ResultLine is perftest's RESULT_LINE, without its newline.
	ResultLine = "---------------------------------------------------------------------------------------"

	latHeader    = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	latRow       = " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f"
	latNoRow     = " %-7d %d          %-7s        %-7s      %-7s  \t       %-7s     \t%-7s\t\t%-7s \t\t%-7s"
	latDurHeader = " #bytes        #iterations       t_avg[usec]    tps average"
	latDurRow    = " %-7d       %d            %-7.2f        %-7.2f"
	bwHeaderMiB  = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
	bwHeaderGb   = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	// bwRow is REPORT_FMT as perftest 6.x prints it (five spaces after the
	// tabs since the MB→MiB header change); bwRowExt is REPORT_FMT_EXT,
	// used for Gb/s averages below 0.1.
	bwRow    = " %-7d    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f"
	bwRowExt = " %-7d    %d           %-7.6f            %-7.6f            %-7.6f"
)

// WriteResultLine writes perftest's dashed separator line.
func WriteResultLine(w io.Writer) error {
	_, err := fmt.Fprintln(w, ResultLine)
	return err
}

// WriteLatencyHeader writes perftest's latency column header for mode.
func WriteLatencyHeader(w io.Writer, mode reports.Mode) error {
	h := latHeader
	if mode == reports.ModeDuration {
		h = latDurHeader
	}
	_, err := fmt.Fprintln(w, h)
	return err
}

// WriteLatencyRow writes one latency result as perftest's result line. A
// result with too few samples for perftest's fields shows "-" in them.
func WriteLatencyRow(w io.Writer, r reports.Result) error {
	if r.Latency == nil {
		return fmt.Errorf("latency row: %s %d B is not a latency result", r.Test, r.Bytes)
	}
	var err error
	switch {
	case r.Mode == reports.ModeDuration && r.Perftest != nil:
		_, err = fmt.Fprintf(w, latDurRow+"\n", r.Bytes, r.Iterations, r.TAvgUs, r.TPSAverage)
	case r.Mode == reports.ModeDuration:
		_, err = fmt.Fprintf(w, " %-7d       %d            %-7s        %-7.2f\n", r.Bytes, r.Iterations, "-", r.TPSAverage)
	case r.Perftest != nil:
		_, err = fmt.Fprintf(w, latRow+"\n", r.Bytes, r.Iterations,
			r.TMinUs, r.TMaxUs, r.TTypicalUs, r.TAvgUs, r.TStdevUs, r.P99Us, r.P999Us)
	default:
		_, err = fmt.Fprintf(w, latNoRow+"\n", r.Bytes, r.Iterations, "-", "-", "-", "-", "-", "-", "-")
	}
	return err
}

// WriteBandwidthHeader writes perftest's bandwidth column header, in Gb/s
// when gbits (perftest --report_gbits), else MiB/s.
func WriteBandwidthHeader(w io.Writer, gbits bool) error {
	h := bwHeaderMiB
	if gbits {
		h = bwHeaderGb
	}
	_, err := fmt.Fprintln(w, h)
	return err
}

// WriteBandwidthRow writes one bandwidth result as perftest's result line,
// in Gb/s when gbits. Like perftest, a Gb/s average below 0.1 switches to
// six decimals.
func WriteBandwidthRow(w io.Writer, r reports.Result, gbits bool) error {
	if r.Bandwidth == nil {
		return fmt.Errorf("bandwidth row: %s %d B is not a bandwidth result", r.Test, r.Bytes)
	}
	peak, avg := r.BWPeakMiBps, r.BWAvgMiBps
	if gbits {
		peak, avg = r.BWPeakGbps, r.BWAvgGbps
	}
	format := bwRow
	if gbits && avg < 0.1 {
		format = bwRowExt
	}
	_, err := fmt.Fprintf(w, format+"\n", r.Bytes, r.Iterations, peak, avg, r.MsgRateMpps)
	return err
}
