package table_test

import (
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/table"
)

func f(v float64) *float64 { return &v }

var pathsClock = clock.Info{Name: "monotonic", ResolutionNs: 20, CostNs: 22.5}

func TestWritePathsBandwidth(t *testing.T) {
	rec := func(path string, mpps, lo, hi, ratio float64, verdict string) reports.Result {
		return reports.Result{Test: "send_bw", Bytes: 64, Iterations: 100000, Path: path, Repetitions: 5,
			Bandwidth: &reports.Bandwidth{MsgRateMpps: mpps, BWAvgGbps: mpps * 64 * 8 / 1000},
			MeritMin:  f(lo), MeritMax: f(hi), RatioToGeneric: f(ratio), Verdict: verdict}
	}
	rs := []reports.Result{rec("generic", 2, 1.9, 2.1, 1, ""), rec("dv", 3, 2.9, 3.2, 1.5, "better")}
	var b strings.Builder
	if err := table.WritePaths(&b, rs, nil, pathsClock); err != nil {
		t.Fatal(err)
	}
	want := ` send_bw, 64 B, median of 5 repetitions per path
 path    MsgRate[Mpps]          spread[Mpps]   BW avg[Gb/s]    #messages    ratio  verdict
 generic        2.0000          1.900..2.100          1.024       100000    1.000  reference
 dv             3.0000          2.900..3.200          1.536       100000    1.500  better
 ratio: the path's message rate over generic's (above 1 is faster); spread: the lowest and highest of 5 repetitions, interleaved;
 verdict: better/worse when a Mann-Whitney rank test over the repetitions tells them apart at 95%, else same
 clock: monotonic: resolution 20 ns, cost 22.5 ns per read
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWritePathsLatency(t *testing.T) {
	rec := func(path string, bytes int64, p50 float64, verdict string) reports.Result {
		return reports.Result{Test: "write_lat", Bytes: bytes, Path: path, Repetitions: 3,
			Latency:  &reports.Latency{Percentiles: map[string]float64{"50": p50, "99": 2 * p50}, MeanUs: p50, TrueMaxUs: 10},
			MeritMin: f(p50 - 0.01), MeritMax: f(p50 + 0.01), RatioToGeneric: f(p50 / 0.2), Verdict: verdict}
	}
	rs := []reports.Result{rec("generic", 2, 0.2, ""), rec("dm", 2, 0.25, "worse"), rec("generic", 64, 0.2, ""), rec("dm", 64, 0.2, "same")}
	var b strings.Builder
	label := func(r reports.Result) string {
		if r.Path == "dm" {
			return "device memory"
		}
		return "host memory"
	}
	if err := table.WritePaths(&b, rs, label, pathsClock); err != nil {
		t.Fatal(err)
	}
	want := ` write_lat, 2 B, median of 3 repetitions per path
 path             p50[usec]          spread[usec]    p99[usec]   mean[usec]    max[usec]    ratio  verdict
 host memory          0.200          0.190..0.210        0.400        0.200       10.000    1.000  reference
 device memory        0.250          0.240..0.260        0.500        0.250       10.000    1.250  worse

 write_lat, 64 B, median of 3 repetitions per path
 path             p50[usec]          spread[usec]    p99[usec]   mean[usec]    max[usec]    ratio  verdict
 host memory          0.200          0.190..0.210        0.400        0.200       10.000    1.000  reference
 device memory        0.200          0.190..0.210        0.400        0.200       10.000    1.000  same
 ratio: the path's median latency over generic's (below 1 is faster); spread: the lowest and highest of 3 repetitions, interleaved;
 verdict: better/worse when a Mann-Whitney rank test over the repetitions tells them apart at 95%, else same
 clock: monotonic: resolution 20 ns, cost 22.5 ns per read
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWritePacing(t *testing.T) {
	rec := func(req, got float64, gap *reports.Gap) reports.Result {
		return reports.Result{Test: "pacing", Bytes: 4096, Iterations: 300, RequestedMbps: f(req), AchievedMbps: f(got),
			ErrorPct: f(reports.ErrorPct(req, got)), ExcludedMessages: 1, Gap: gap}
	}
	g := &reports.Gap{ExpectedUs: 327.68, MaxUs: 400, Percentiles: map[string]float64{"50": 327.7, "99": 350.25}}
	rs := []reports.Result{rec(100, 99.5, g), rec(1000, 990.1234, g)}
	var b strings.Builder
	if err := table.WritePacing(&b, rs, pathsClock); err != nil {
		t.Fatal(err)
	}
	want := ` requested[Mb/s] achieved[Mb/s]  error[%]  #messages    gap[usec]         p50         p99         max
             100           99.5    -0.500        300      327.680     327.700     350.250     400.000
            1000        990.123    -0.988        300      327.680     327.700     350.250     400.000
 4096-byte SENDs, measured at the receiver; not measured: the first 1 message of each rate, which the token bucket (it starts full) lets go back to back
 gap: the interval the requested rate implies, then percentiles and maximum of the gaps between consecutive arrivals
 clock: monotonic: resolution 20 ns, cost 22.5 ns per read
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	// A rate 3% short with a 5 ms gap at a 32.768 us interval stalled; one
	// 3% short without a long gap, or 0.5% short with one, did not.
	long := &reports.Gap{ExpectedUs: 32.768, MaxUs: 5000, Percentiles: map[string]float64{"50": 32.8, "99": 60}}
	b.Reset()
	if err := table.WritePacing(&b, []reports.Result{rec(1000, 970, long), rec(100, 97, g), rec(2000, 1990, long)}, pathsClock); err != nil {
		t.Fatal(err)
	}
	wantNote := " note: at 1000 Mb/s the stream stalled (longest gap 5.000 ms, 153x the interval)"
	if !strings.Contains(b.String(), wantNote) || strings.Count(b.String(), " note: ") != 1 {
		t.Errorf("want one stall note %q in:\n%s", wantNote, b.String())
	}
	// The sender's records have no gaps.
	b.Reset()
	if err := table.WritePacing(&b, []reports.Result{rec(10, 10, nil)}, pathsClock); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), " requested[Mb/s] achieved[Mb/s]  error[%]  #messages\n              10             10    +0.000        300\n") ||
		!strings.Contains(b.String(), "the receiver (the client) measured these figures") {
		t.Errorf("sender's table:\n%s", b.String())
	}
}
