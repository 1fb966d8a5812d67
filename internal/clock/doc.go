// Package clock is rperf's timestamp source: every latency sample and every
// bandwidth post/completion stamp is a difference of two [Now] readings.
//
// # Default source: the runtime's monotonic clock
//
// [Now] returns nanoseconds on the Go runtime's monotonic clock, read through
// time.Since on a process-wide epoch. time.Since on a Time that carries a
// monotonic reading reads only runtime nanotime, which on linux/amd64 is
// clock_gettime(CLOCK_MONOTONIC) through the vDSO: no system call and no
// cgo, and the kernel does the TSC-to-nanosecond conversion. The reading is
// monotonic, comparable across goroutines and CPUs, and already in
// nanoseconds, so no calibration can be wrong.
//
// Candidates measured on the development VM (2 vCPU Xeon, kernel
// clocksource "tsc", Go 1.26, ns per read, see BenchmarkRead):
//
//	time.Since(epoch) (Now)            ~21.7  monotonic, ns, no calibration
//	runtime.nanotime via go:linkname   ~20.7  same clock; 1 ns saved, relies on linkname
//	time.Now()                         ~36.8  reads the wall clock as well
//	RDTSC (TSC.Ticks)                  ~8.0   raw ticks; needs invariant TSC
//	RDTSC converted to ns (TSC.Now)    ~10.6  plus a calibrated multiply
//
// Now is the default because it is correct by construction. The linkname
// variant saves about a nanosecond at the price of depending on a runtime
// internal, so it is not used. When the kernel clocksource is not "tsc"
// (some hypervisors use "kvm-clock" or "hyperv_clocksource_tsc_page"; "hpet"
// or "acpi_pm" mean every read is a system call), the vDSO read can cost far
// more: [Measure] reports what it actually costs on the machine at hand, and
// the reports state it.
//
// # Optional source: the TSC
//
// [CalibrateTSC] returns a [TSC] that reads the x86 time-stamp counter with
// RDTSC (what perftest's get_cycles does) and converts ticks to nanoseconds
// with a multiplier calibrated against [Now]. It is about twice as cheap per
// read as [Now], which matters for bandwidth tests that stamp every
// message. It refuses to run unless /proc/cpuinfo advertises an invariant
// TSC (constant_tsc and nonstop_tsc), and it is only available on amd64.
//
// # Measuring a source
//
// [Measure] (and [MeasureFunc] for any other source) reports a source's
// name, its resolution — the smallest nonzero difference observed between
// back-to-back reads, i.e. the shortest interval it can resolve in practice,
// which includes the read cost — and its cost per read in nanoseconds. Every
// rperf report carries these three numbers.
package clock
