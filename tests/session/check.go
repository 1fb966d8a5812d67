package session

import (
	"fmt"
	"time"
)

// CheckSizes checks the message sizes of a test of verb v: at least one
// size, none below a byte, and for atomics AtomicSize each.
func CheckSizes(v Verb, sizes []int) error {
	if len(sizes) == 0 {
		return fmt.Errorf("no message size")
	}
	for _, s := range sizes {
		if s < 1 {
			return fmt.Errorf("message size %d is below 1", s)
		}
		if v == Atomic && s != AtomicSize {
			return fmt.Errorf("atomic operations move %d bytes, not %d", AtomicSize, s)
		}
	}
	return nil
}

// CheckLength checks how long a test runs: in iterations mode (duration
// 0) at least 5 iterations after warmup unmeasured ones, in duration mode
// a duration longer than its two margins and no warm-up. unit names what
// the test counts ("messages", "iterations") in the error about warm-up.
func CheckLength(iterations, warmup int, duration, margin time.Duration, unit string) error {
	switch {
	case duration < 0 || margin < 0:
		return fmt.Errorf("negative duration or margin")
	case duration > 0 && duration <= 2*margin:
		return fmt.Errorf("duration %v is not longer than twice the margin %v", duration, margin)
	case duration == 0 && iterations < 5:
		return fmt.Errorf("%d iterations: at least 5 are needed", iterations)
	case warmup < 0:
		return fmt.Errorf("negative warm-up")
	case duration > 0 && warmup > 0:
		return fmt.Errorf("warm-up %s apply to iterations mode; duration mode has its margin", unit)
	}
	return nil
}
