package clock

const tscSupported = true

// rdtsc returns the time-stamp counter (RDTSC, not serializing, as perftest's
// get_cycles). Implemented in tsc_amd64.s.
//
//go:noescape
func rdtsc() uint64
