package clock

import (
	"testing"
	"time"
)

func TestNowMonotonicAndNanoseconds(t *testing.T) {
	prev := Now()
	for range 100000 {
		n := Now()
		if n < prev {
			t.Fatalf("Now went backwards: %d after %d", n, prev)
		}
		prev = n
	}
	// Now counts nanoseconds: a 20ms sleep must read as 20ms..(20ms+slack).
	t0 := Now()
	time.Sleep(20 * time.Millisecond)
	d := Since(t0)
	if d < int64(20*time.Millisecond) || d > int64(2*time.Second) {
		t.Fatalf("Since after a 20ms sleep = %dns", d)
	}
}

func TestNowDoesNotAllocate(t *testing.T) {
	if a := testing.AllocsPerRun(1000, func() { _ = Now() }); a != 0 {
		t.Fatalf("Now allocates %v per call", a)
	}
}

func TestMeasure(t *testing.T) {
	info := Measure()
	if info.Name != Name {
		t.Errorf("Name = %q, want %q", info.Name, Name)
	}
	if info.ResolutionNs <= 0 || info.ResolutionNs > int64(time.Millisecond) {
		t.Errorf("ResolutionNs = %d, want a positive sub-millisecond value", info.ResolutionNs)
	}
	if info.CostNs <= 0 || info.CostNs > 100000 {
		t.Errorf("CostNs = %v, want a positive value under 100us", info.CostNs)
	}
	t.Logf("%+v", info)
}

func TestMeasureFuncFakeSource(t *testing.T) {
	tests := []struct {
		name    string
		step    int64 // the fake clock advances by step every read...
		every   int   // ...on every every-th read
		wantRes int64
	}{
		{"advances 7ns per read", 7, 1, 7},
		{"1000ns tick every 4th read", 1000, 4, 1000},
		{"never advances", 0, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var now int64
			var reads int
			info := MeasureFunc("fake", func() int64 {
				reads++
				if reads%tt.every == 0 {
					now += tt.step
				}
				return now
			})
			if info.ResolutionNs != tt.wantRes {
				t.Errorf("ResolutionNs = %d, want %d", info.ResolutionNs, tt.wantRes)
			}
			// Cost is measured with the fake clock itself: step/every ns per read.
			want := float64(tt.step) / float64(tt.every)
			if d := info.CostNs - want; d > want*0.01+0.001 || d < -want*0.01-0.001 {
				t.Errorf("CostNs = %v, want ~%v", info.CostNs, want)
			}
		})
	}
}
