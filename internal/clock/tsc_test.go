package clock

import (
	"errors"
	"math"
	"testing"
	"time"
)

func calibrated(t testing.TB) *TSC {
	t.Helper()
	tsc, err := CalibrateTSC(20 * time.Millisecond)
	if errors.Is(err, ErrTSCUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return tsc
}

func TestTSCAgreesWithNow(t *testing.T) {
	tsc := calibrated(t)
	if tsc.Hz() < 1e8 || tsc.Hz() > 1e10 {
		t.Fatalf("Hz = %v, implausible", tsc.Hz())
	}
	n0, c0 := Now(), tsc.Now()
	time.Sleep(50 * time.Millisecond)
	n1, c1 := Now(), tsc.Now()
	dn, dc := float64(n1-n0), float64(c1-c0)
	// 20ms calibration: the rates must agree to well under 0.1%.
	if rel := math.Abs(dc-dn) / dn; rel > 1e-3 {
		t.Errorf("over %.0fns the TSC measured %.0fns (rel. error %.2g)", dn, dc, rel)
	}
	t.Logf("%s: %.6g Hz", tsc.Name(), tsc.Hz())
}

func TestTSCTicksToNs(t *testing.T) {
	// A 2 GHz counter: 2 ticks per ns.
	tsc := &TSC{hz: 2e9, mult: uint64(math.Round(0.5 * (1 << tscShift)))}
	tests := []struct{ ticks, want int64 }{
		{0, 0}, {2, 1}, {2000, 1000}, {-2000, -1000},
		{2 * 3600e9, 3600e9}, // an hour
	}
	for _, tt := range tests {
		if got := tsc.TicksToNs(tt.ticks); got != tt.want {
			t.Errorf("TicksToNs(%d) = %d, want %d", tt.ticks, got, tt.want)
		}
	}
}

func TestTSCNowDoesNotAllocate(t *testing.T) {
	tsc := calibrated(t)
	if a := testing.AllocsPerRun(1000, func() { _ = tsc.Now() }); a != 0 {
		t.Fatalf("TSC.Now allocates %v per call", a)
	}
}

func TestTSCMeasure(t *testing.T) {
	tsc := calibrated(t)
	info := tsc.Measure()
	if info.Name != tsc.Name() || info.CostNs <= 0 || info.ResolutionNs <= 0 {
		t.Errorf("Measure = %+v", info)
	}
	a := tsc.Ticks()
	b := tsc.Ticks()
	if b < a {
		t.Errorf("Ticks went backwards: %d then %d", a, b)
	}
	t.Logf("%+v", info)
}
