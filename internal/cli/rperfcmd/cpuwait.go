package rperfcmd

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuWait is how long the calling thread has waited for a CPU while
// runnable (the second field of /proc/thread-self/schedstat, the
// scheduler's run-queue delay); ok is false where the kernel does not
// provide it. The caller locks its goroutine to the thread
// (runtime.LockOSThread) for two reads to be of one thread.
func cpuWait() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(b))
	if len(fields) < 2 {
		return 0, false
	}
	n, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(n), true
}
