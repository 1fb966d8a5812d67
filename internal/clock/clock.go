package clock

import "time"

// Name is the name [Measure] reports for the default source, [Now].
const Name = "monotonic (runtime nanotime, CLOCK_MONOTONIC via vDSO)"

// epoch is the process-wide origin of [Now]. It carries a monotonic reading,
// so time.Since(epoch) reads only the monotonic clock.
var epoch = time.Now()

// Now returns the current time in nanoseconds on the monotonic clock,
// counted from an arbitrary process-wide origin (the package's
// initialization). Only differences between two readings are meaningful.
// Now never allocates and is safe for concurrent use.
func Now() int64 {
	return int64(time.Since(epoch))
}

// Since returns the nanoseconds elapsed since t0, a value returned by [Now].
func Since(t0 int64) int64 {
	return Now() - t0
}
