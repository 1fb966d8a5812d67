// Package tests holds rperf's measurement drivers, not Go tests: the
// programs perftest calls tests, as production code. Each subpackage runs
// measurements between two peers over verbsio and returns
// reports.Results; the commands in internal/cli drive them.
//
//   - session: the core every family shares: the test table, the common
//     configuration and its checks, the run skeleton, the connected QPs,
//     posting by a send path, bounded waits.
//   - latency, bw: the test families (send_lat ... atomic_bw).
//   - paths, dm: one test across send paths, device against host memory.
//   - pacing: packet pacing's rate sweep.
//   - baseline: this machine's own limits for the engine's work (bare
//     UDP and shared-memory ping-pongs, a GSO+GRO stream, memmove, system
//     call and clock costs).
//   - sendpath: the catalogue of send paths.
//   - oob: perftest's out-of-band TCP exchange (versions, keys, reports).
//
// Go's own tests of these packages are in their _test.go files, as
// everywhere; tests/internal holds helpers for them and for the drivers
// (datacheck's patterns are part of the drivers).
package tests
