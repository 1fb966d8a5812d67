package rperfcmd

import (
	"strings"
	"testing"

	"github.com/rperf/rperf/reports"
)

// TestRatioTo checks the engine-to-machine ratio against cases worked out
// by hand.
func TestRatioTo(t *testing.T) {
	lat := func(p50 float64) reports.Result {
		return reports.Result{Test: "x_lat", Bytes: 64, Latency: &reports.Latency{Percentiles: map[string]float64{"50": p50}}}
	}
	bw := func(bytes int64, mibps, mpps float64) reports.Result {
		return reports.Result{Test: "x_bw", Bytes: bytes, Bandwidth: &reports.Bandwidth{BWAvgMiBps: mibps, MsgRateMpps: mpps}}
	}
	for _, tc := range []struct {
		name            string
		machine, engine reports.Result
		want            float64
		err             string
	}{
		{"latency: 3.6 us over 1.8 us", lat(1.8), lat(3.6), 2, ""},
		{"latency: faster than the machine", lat(4), lat(3), 0.75, ""},
		// Same size: message rates, 0.012 over 0.048 Mpps.
		{"bandwidth, same size", bw(65536, 3000, 0.048), bw(65536, 750, 0.012), 0.25, ""},
		// Different sizes: MiB/s, 1500 over 2000.
		{"bandwidth, other size", bw(65536, 2000, 0.032), bw(1<<20, 1500, 0.0015), 0.75, ""},
		{"mixed", lat(1), bw(64, 1, 1), 0, "cannot be compared"},
		{"no machine figure", bw(64, 0, 0), bw(64, 1, 1), 0, "nothing to divide by"},
		{"no p50", reports.Result{Test: "y", Latency: &reports.Latency{}}, lat(1), 0, "no 50th percentile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ratioTo(tc.machine, tc.engine)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v; want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ratio %v (%v); want %v", got, err, tc.want)
			}
		})
	}
}
