package clock

import (
	"slices"
)

// Info describes a timestamp source as measured on the running machine.
// Reports embed it so that every number states the clock behind it.
type Info struct {
	// Name identifies the source, e.g. [Name] or "tsc (RDTSC, 2.100 GHz calibrated)".
	Name string `json:"name"`
	// ResolutionNs is the smallest nonzero difference, in nanoseconds,
	// observed between two back-to-back reads: the shortest interval the
	// source can resolve in practice (its tick or its read cost, whichever
	// is larger).
	ResolutionNs int64 `json:"resolution_ns"`
	// CostNs is the median cost of one read, in nanoseconds, including
	// about one nanosecond of loop overhead.
	CostNs float64 `json:"cost_ns"`
}

// Measurement sizes. Measure takes a few milliseconds with a ~20 ns source.
const (
	costRounds      = 5
	readsPerRound   = 20000
	resolutionReads = 100000
)

// Measure measures the default source, [Now].
func Measure() Info {
	return MeasureFunc(Name, Now)
}

// MeasureFunc measures a source given as a function returning nanoseconds.
// The cost is the median over several rounds of back-to-back reads, timed by
// the source itself, so one preempted round does not skew it. The resolution
// is the smallest positive difference seen over many consecutive reads; it is
// 0 if the source never advanced.
func MeasureFunc(name string, read func() int64) Info {
	costs := make([]float64, 0, costRounds)
	var sink int64
	for range costRounds {
		t0 := read()
		for range readsPerRound {
			sink += read()
		}
		t1 := read()
		costs = append(costs, float64(t1-t0)/float64(readsPerRound+1))
	}
	_ = sink
	slices.Sort(costs)

	var res int64
	prev := read()
	for range resolutionReads {
		t := read()
		if d := t - prev; d > 0 && (res == 0 || d < res) {
			res = d
		}
		prev = t
	}
	return Info{Name: name, ResolutionNs: res, CostNs: costs[len(costs)/2]}
}
