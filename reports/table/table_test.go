package table_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/internal/testsupport/golden"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/table"
)

var testClock = clock.Info{Name: clock.Name, ResolutionNs: 20, CostNs: 21.5}

// latency records samples (ns) and returns the result.
func latency(t *testing.T, spec reports.LatencySpec, opts reports.RecorderOptions, samples []int64) reports.Result {
	t.Helper()
	rec, err := reports.NewRecorder(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		rec.Record(s)
	}
	r, err := reports.NewLatencyResult(spec, rec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ramp returns n samples from lo ns rising by step, with one tail sample.
func ramp(n int, lo, step, tail int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = lo + int64(i%50)*step
	}
	s[n/2] = tail
	return s
}

func doc(results ...reports.Result) *reports.Document {
	d := reports.NewDocument(reports.Env{Clock: testClock})
	d.Results = results
	return d
}

// stamped is a document of a software-clock record and the same run's
// record from completion timestamps, on a 156.25 MHz device clock.
func stamped(sw, ts reports.Result) *reports.Document {
	ts.Clock = reports.ClockCompletion
	d := doc(sw, ts)
	d.Env.Extra = map[string]string{"completion_clock_khz": "156250"}
	return d
}

// TestPerftestLinesMatchPerftest feeds the figures of real perftest output
// lines through rperf's formats and expects the same bytes, tabs included.
func TestPerftestLinesMatchPerftest(t *testing.T) {
	lat := reports.Result{Bytes: 2, Iterations: 1000, Mode: reports.ModeIterations, Latency: &reports.Latency{
		Perftest: &reports.Perftest{TMinUs: 0.96, TMaxUs: 1.25, TTypicalUs: 0.98, TAvgUs: 0.98, TStdevUs: 0.01, P99Us: 1.00, P999Us: 1.25}}}
	bw := reports.Result{Bytes: 65536, Iterations: 5000, Bandwidth: &reports.Bandwidth{
		BWPeakMiBps: 11030.78, BWAvgMiBps: 11030.45, MsgRateMpps: 0.176487}}
	var buf bytes.Buffer
	for _, step := range []func() error{
		func() error { return table.WriteLatencyHeader(&buf, reports.ModeIterations) },
		func() error { return table.WriteLatencyRow(&buf, lat) },
		func() error { return table.WriteBandwidthHeader(&buf, false) },
		func() error { return table.WriteBandwidthRow(&buf, bw, false) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	want := " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n" +
		" 2       1000          0.96           1.25         0.98     \t       0.98        \t0.01   \t\t1.00    \t\t1.25   \n" +
		" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n" +
		" 65536      5000             11030.78            11030.45\t\t     0.176487\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("(-perftest +rperf)\n%s", diff)
	}
}

func TestWriteGolden(t *testing.T) {
	rtt2 := reports.LatencySpec{Test: "write_lat", Mode: reports.ModeIterations, RTTFactor: 2}
	lat := func(bytes int64, samples []int64) reports.Result {
		s := rtt2
		s.Bytes, s.Iterations = bytes, int64(len(samples)+1)
		return latency(t, s, reports.RecorderOptions{Expected: len(samples)}, samples)
	}
	tiny := rtt2
	tiny.Bytes, tiny.Iterations = 8, 3
	durSpec := reports.LatencySpec{Test: "send_lat", Bytes: 2, Iterations: 1_000_000, Mode: reports.ModeDuration,
		RTTFactor: 2, ElapsedNs: 2_000_000_000}

	posted := make([]int64, 1000)
	completed := make([]int64, 1000)
	for i := range posted {
		posted[i] = int64(i) * 250
		completed[i] = posted[i] + 4000
	}
	bw := func(bytes int64) reports.Result {
		r, err := reports.NewBandwidthResult(reports.BWSpec{Test: "write_bw", Bytes: bytes, Iterations: 1000, Posted: posted, Completed: completed})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	slow, err := reports.NewBandwidthResult(reports.BWSpec{Test: "read_bw", Bytes: 2, Iterations: 30000, ElapsedNs: 3_000_000_000})
	if err != nil {
		t.Fatal(err)
	}
	bwDur, err := reports.NewBandwidthDurationResult(reports.BWDurationSpec{Test: "send_bw", Bytes: 65536, Messages: 279928, WindowNs: 3_000_000_000})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		doc  *reports.Document
		opts table.Options
	}{
		{"latency_iterations.golden", doc(
			lat(2, ramp(1000, 1800, 10, 95000)),
			lat(64, ramp(1000, 1900, 12, 120000)),
			// Sub-microsecond jitter: perftest's t_stdev prints 0.00, the true stdev does not.
			lat(4096, append(make([]int64, 0, 12), 3000, 3800, 3000, 3800, 3000, 3800, 3000, 3800, 3000, 3800, 3000, 3800)),
			latency(t, tiny, reports.RecorderOptions{Expected: 2}, []int64{2000, 2400}),
			// A two-hour stall: beyond the histogram (1 h), recorded at its bound and noted.
			lat(16, append(ramp(10, 1800, 10, 1900), 7_200_000_000_000)),
		), table.Options{}},
		{"latency_duration.golden", doc(
			latency(t, durSpec, reports.RecorderOptions{RawLimit: 500}, ramp(1000, 1800, 10, 95000)),
		), table.Options{}},
		{"bandwidth_mib.golden", doc(bw(2), bw(65536), slow, bwDur), table.Options{}},
		{"bandwidth_gbits.golden", doc(bw(2), bw(65536), slow, bwDur), table.Options{Gbits: true}},
		{"mixed.golden", doc(lat(2, ramp(100, 1800, 10, 5000)), bw(4096), lat(8, ramp(100, 1800, 10, 5000))), table.Options{}},
		// --completion-timestamps: the same run from the device's
		// stamps, in a block of its own under the device's clock.
		{"latency_completion.golden", stamped(lat(2, ramp(1000, 1800, 10, 95000)), lat(2, ramp(1000, 1700, 10, 90000))), table.Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := table.Write(&buf, tt.doc, tt.opts); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", tt.name), buf.Bytes())
		})
	}
}

func TestRowKindErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := table.WriteLatencyRow(&buf, reports.Result{Bandwidth: &reports.Bandwidth{}}); err == nil {
		t.Error("latency row of a bandwidth result: no error")
	}
	if err := table.WriteBandwidthRow(&buf, reports.Result{Latency: &reports.Latency{}}, false); err == nil {
		t.Error("bandwidth row of a latency result: no error")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteReportsWriteErrors(t *testing.T) {
	d := doc(latency(t, reports.LatencySpec{Test: "x", Mode: reports.ModeIterations, RTTFactor: 1},
		reports.RecorderOptions{}, []int64{1, 2, 3, 4}))
	if err := table.Write(failWriter{}, d, table.Options{}); err == nil {
		t.Error("write error swallowed")
	}
}

func TestBandwidthNotes(t *testing.T) {
	var buf bytes.Buffer
	rs := []reports.Result{
		{Bytes: 64, Bandwidth: &reports.Bandwidth{PeakStatus: reports.PeakReceiver, LostMessages: 3}},
		{Bytes: 128, Bandwidth: &reports.Bandwidth{PeakStatus: reports.PeakMeasured, LostMessages: 1}},
		{Bytes: 256, Bandwidth: &reports.Bandwidth{PeakStatus: reports.PeakMeasured}},
	}
	if err := table.WriteBandwidthNotes(&buf, rs, testClock); err != nil {
		t.Fatal(err)
	}
	want := " note: 64 B: measured on the receiving side, from the first receive to the last; no BW peak (shown as 0.00)\n" +
		" note: 64 B: 3 messages lost on the way (UC, UD and raw frames are not retransmitted); the rates count what arrived\n" +
		" note: 128 B: 1 message lost on the way (UC, UD and raw frames are not retransmitted); the rates count what arrived\n" +
		" clock: monotonic (runtime nanotime, CLOCK_MONOTONIC via vDSO): resolution 20 ns, cost 21.5 ns per read\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
