package baseline

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
)

// Memmove measures copies of size bytes with Go's copy (the runtime's
// memmove, which the shm fabric's copies are), each stamped from its
// start to its end. Warm, every copy has the same source and destination;
// cold (region > 0), source and destination move on by size bytes each
// copy through two regions of region bytes each, so that a copy finds its
// memory in the cache only if region is smaller than the cache. The
// record is a bandwidth record with its peak (the best window of
// consecutive copies) when copies is at most
// [reports.PeakIterationLimit].
func Memmove(size, copies, region int) (reports.Result, error) {
	if size < 1 {
		return reports.Result{}, fmt.Errorf("memmove: size %d: must be at least 1 byte", size)
	}
	if err := checkCount("memmove: copies", copies); err != nil {
		return reports.Result{}, err
	}
	test := NameMemmoveWarm
	span := size
	if region > 0 {
		if region < 2*size {
			return reports.Result{}, fmt.Errorf("memmove: a %d-byte region holds fewer than two %d-byte copies", region, size)
		}
		test, span = NameMemmoveCold, region/size*size
	}
	src, dst := make([]byte, span), make([]byte, span)
	for i := 0; i < span; i += 4096 { // fault every page in (a private page, not the shared zero page) before the clock runs
		src[i], dst[i] = byte(i>>12), 1
	}
	posted, completed := make([]int64, copies), make([]int64, copies)
	off := 0
	for i := 0; i < copies; i++ {
		t0 := clock.Now()
		copy(dst[off:off+size], src[off:off+size])
		posted[i], completed[i] = t0, clock.Now()
		if off += size; off+size > span {
			off = 0
		}
	}
	res, err := reports.NewBandwidthResult(reports.BWSpec{
		Test: test, Bytes: int64(size), Iterations: int64(copies), Posted: posted, Completed: completed,
	})
	if err != nil {
		return reports.Result{}, fmt.Errorf("memmove: %w", err)
	}
	return res, nil
}

// ColdRegion is the region Memmove's cold copies use on this machine:
// twice the largest cache the kernel lists (sysfs), at least 64 MiB and
// at most 512 MiB (a virtual machine may list a cache of the host's size;
// 2 × 512 MiB are allocated),
// and the cache size it came from (0 when none is listed).
func ColdRegion() (region, cache int) {
	cache = largestCache(func(name string) ([]byte, error) { return os.ReadFile(name) })
	return min(max(2*cache, 64<<20), MaxColdRegion), cache
}

// MaxColdRegion caps ColdRegion.
const MaxColdRegion = 512 << 20

// largestCache returns the largest cache size of CPU 0 in sysfs, 0 if
// none is listed.
func largestCache(read func(string) ([]byte, error)) int {
	best := 0
	for i := 0; i < 16; i++ {
		b, err := read("/sys/devices/system/cpu/cpu0/cache/index" + strconv.Itoa(i) + "/size")
		if err != nil {
			break
		}
		if n := parseSize(strings.TrimSpace(string(b))); n > best {
			best = n
		}
	}
	return best
}

// parseSize reads sysfs's cache sizes: "48K", "2048K", "32M", "512".
func parseSize(s string) int {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n * mult
}

// CostBatch is how many operations one sample of Syscall and ClockRead
// times: one clock read would cost as much as the operation.
const CostBatch = 1000

// Syscall measures the cost of one system call, getppid (the cheapest
// there is: no argument, no lock), through Go's ordinary path
// (syscall.Syscall: the scheduler is told the thread may block), or raw
// (syscall.RawSyscall: it is not). Each of samples samples times
// [CostBatch] calls in a loop of its own (no call through a function
// value); the record is a latency record whose rtt_factor is CostBatch,
// so that its microsecond figures are per call.
func Syscall(samples int, raw bool) (reports.Result, error) {
	if raw {
		return costOf(NameSyscallRaw, samples, opRawSyscall)
	}
	return costOf(NameSyscall, samples, opSyscall)
}

// ClockRead measures the cost of one read of rperf's clock (clock.Now),
// as Syscall measures a system call.
func ClockRead(samples int) (reports.Result, error) {
	return costOf(NameClockRead, samples, opClock)
}

// Operations costOf times.
const (
	opSyscall = iota
	opRawSyscall
	opClock
)

// costOf records samples batches of CostBatch operations op.
func costOf(test string, samples int, op int) (reports.Result, error) {
	if err := checkCount(test+": samples", samples); err != nil {
		return reports.Result{}, err
	}
	rec, err := reports.NewRecorder(reports.RecorderOptions{Expected: samples})
	if err != nil {
		return reports.Result{}, err
	}
	for i := 0; i < samples; i++ {
		t0 := clock.Now()
		switch op {
		case opSyscall:
			for k := 0; k < CostBatch; k++ {
				syscall.Syscall(unix.SYS_GETPPID, 0, 0, 0)
			}
		case opRawSyscall:
			for k := 0; k < CostBatch; k++ {
				syscall.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
			}
		case opClock:
			for k := 0; k < CostBatch; k++ {
				clock.Now()
			}
		}
		rec.Record(clock.Now() - t0)
	}
	return reports.NewLatencyResult(reports.LatencySpec{
		Test: test, Iterations: int64(samples), Mode: reports.ModeIterations, RTTFactor: CostBatch,
	}, rec)
}
