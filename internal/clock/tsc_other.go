//go:build !amd64

package clock

const tscSupported = false

// rdtsc is never called where tscSupported is false.
func rdtsc() uint64 { return 0 }
