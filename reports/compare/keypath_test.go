package compare

import (
	"testing"

	"github.com/rperf/rperf/reports"
)

// A generic record matches a record that names no path (written before
// send paths existed, or by a test run without --path), and no other.
func TestKeyOfGenericPath(t *testing.T) {
	plain := reports.Result{Test: "send_bw", Bytes: 64}
	generic := reports.Result{Test: "send_bw", Bytes: 64, Path: "generic"}
	dv := reports.Result{Test: "send_bw", Bytes: 64, Path: "dv"}
	if KeyOf(plain) != KeyOf(generic) || KeyOf(generic).String() != "send_bw 64B" {
		t.Errorf("generic %v, no path %v", KeyOf(generic), KeyOf(plain))
	}
	if KeyOf(dv) == KeyOf(generic) || KeyOf(dv).String() != "send_bw 64B path=dv" {
		t.Errorf("dv %v", KeyOf(dv))
	}
}

// A record timed by completion timestamps ("clock": "completion") is not
// a repetition of the software clock's record of the same run: it has a
// key of its own, and is compared with its like only.
func TestKeyOfClock(t *testing.T) {
	sw := latencyResult(t, "send_lat", 2, 2, spreadSamples(1, 500, 3000))
	ts := latencyResult(t, "send_lat", 2, 2, spreadSamples(2, 500, 1000))
	ts.Clock = reports.ClockCompletion
	if KeyOf(sw) == KeyOf(ts) || KeyOf(ts).String() != "send_lat 2B clock=completion" || KeyOf(sw).String() != "send_lat 2B" {
		t.Fatalf("software %v, completion %v", KeyOf(sw), KeyOf(ts))
	}
	// Both sides hold both records of one run: each is compared with
	// its own clock's, and both are the same.
	base := inputs("base", doc("shm0", sw, ts))
	cand := inputs("cand", doc("shm0", sw, ts))
	rep, err := Compare(base, cand, Options{Metrics: mustMetrics(t, "p50")})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Comparisons) != 2 {
		t.Fatalf("%d comparisons, want one per clock: %+v", len(rep.Comparisons), rep.Comparisons)
	}
	for _, c := range rep.Comparisons {
		if c.ChangePct != 0 || c.Key() != KeyOf(map[string]reports.Result{"": sw, "completion": ts}[c.Clock]) {
			t.Errorf("comparison %v: change %.2f%%", c.Key(), c.ChangePct)
		}
	}
}
