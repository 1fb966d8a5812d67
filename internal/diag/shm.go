package diag

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"syscall"
)

// ShmStat is the size of the /dev/shm file system (statfs). Err is set
// when it could not be examined; it wraps fs.ErrNotExist when /dev/shm is
// missing.
type ShmStat struct {
	Total, Free uint64 // bytes
	Err         error
}

// Shm checks that /dev/shm has need bytes free. The built-in engine keeps
// shared regions and rings in memfds, which do not count against
// /dev/shm; POSIX shared memory (shm_open) and tools that use it do.
// Containers often get only 64 MiB.
func Shm(st ShmStat, need uint64) Finding {
	f := Finding{Check: CheckShm}
	switch {
	case errors.Is(st.Err, fs.ErrNotExist):
		f.Severity = Warn
		f.What = "/dev/shm does not exist: POSIX shared memory is unavailable (memfd still works)"
		f.Fix = `"mount -t tmpfs -o size=1g tmpfs /dev/shm"`
	case st.Err != nil:
		f.Severity = Warn
		f.What = fmt.Sprintf("cannot examine /dev/shm: %v", st.Err)
		f.Fix = `check "df -h /dev/shm"`
	case st.Free < need:
		f.Severity = Warn
		f.What = fmt.Sprintf("/dev/shm has %s free of %s; %s wanted", fmtBytes(st.Free), fmtBytes(st.Total), fmtBytes(need))
		f.Fix = `enlarge it: "mount -o remount,size=1g /dev/shm" (docker: --shm-size=1g)`
	default:
		f.Severity = Pass
		f.What = fmt.Sprintf("/dev/shm has %s free of %s", fmtBytes(st.Free), fmtBytes(st.Total))
	}
	return f
}

// Memfd checks the result of probing memfd_create(2) (nil: it worked).
// The built-in engine's shared-memory fabric allocates every region a
// peer may touch with it.
func Memfd(probeErr error) Finding {
	f := Finding{Check: CheckMemfd}
	switch {
	case probeErr == nil:
		f.Severity = Pass
		f.What = "memfd_create works"
	case errors.Is(probeErr, syscall.ENOSYS), errors.Is(probeErr, errors.ErrUnsupported):
		f.Severity = Fail
		f.What = fmt.Sprintf("memfd_create is not available: %v", probeErr)
		f.Fix = "the built-in engine's shared memory needs Linux 3.17 or later"
	case errors.Is(probeErr, syscall.EPERM), errors.Is(probeErr, syscall.EACCES):
		f.Severity = Fail
		f.What = fmt.Sprintf("memfd_create is refused: %v", probeErr)
		f.Fix = "a seccomp or LSM policy blocks it; allow memfd_create in the container's seccomp profile"
	default:
		f.Severity = Fail
		f.What = fmt.Sprintf("memfd_create failed: %v", probeErr)
		f.Fix = "check free memory and the memory cgroup limit"
	}
	return f
}

// PtraceScopePath is Yama's setting, relative to the proc mount point.
const PtraceScopePath = "sys/kernel/yama/ptrace_scope"

// ParsePtraceScope parses the contents of ptrace_scope.
func ParsePtraceScope(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("parse ptrace_scope %q: %w", s, err)
	}
	return v, nil
}

// PtraceScope checks Yama's ptrace_scope, which also governs
// process_vm_readv/writev and pidfd_getfd between processes: the built-in
// engine uses the first to reach a peer's memory that was registered
// without being allocated shareable, and the second to take a peer's
// memfd. readErr is the error reading the setting; fs.ErrNotExist means
// Yama is not built in, which restricts nothing. capSysPtrace says
// whether this process holds CAP_SYS_PTRACE.
func PtraceScope(scope int, readErr error, capSysPtrace bool) Finding {
	f := Finding{Check: CheckPtraceScope}
	const ops = "process_vm_readv and pidfd_getfd"
	switch {
	case errors.Is(readErr, fs.ErrNotExist):
		f.Severity = Pass
		f.What = fmt.Sprintf("Yama is not enabled: same-user processes may use %s on each other", ops)
	case readErr != nil:
		f.Severity = Warn
		f.What = fmt.Sprintf("cannot read kernel.yama.ptrace_scope: %v", readErr)
		f.Fix = `check "sysctl kernel.yama.ptrace_scope"`
	case scope == 0:
		f.Severity = Pass
		f.What = fmt.Sprintf("kernel.yama.ptrace_scope is 0: same-user processes may use %s on each other", ops)
	case scope == 1:
		f.Severity = Info
		f.What = fmt.Sprintf("kernel.yama.ptrace_scope is 1: %s work only on descendants, or on peers that allow it with prctl(PR_SET_PTRACER)", ops)
		f.Fix = `if unrelated peers cannot reach each other's memory: "sysctl kernel.yama.ptrace_scope=0"`
	case scope == 2 && capSysPtrace:
		f.Severity = Pass
		f.What = fmt.Sprintf("kernel.yama.ptrace_scope is 2 (%s need CAP_SYS_PTRACE), and this process has it", ops)
	case scope == 2:
		f.Severity = Warn
		f.What = fmt.Sprintf("kernel.yama.ptrace_scope is 2: only CAP_SYS_PTRACE holders may use %s; registering memory that is not shareable will fail across processes", ops)
		f.Fix = `"sysctl kernel.yama.ptrace_scope=1", or run with CAP_SYS_PTRACE`
	case scope == 3:
		f.Severity = Warn
		f.What = fmt.Sprintf("kernel.yama.ptrace_scope is 3: no process may use %s, and the setting stays until reboot; only shareable (memfd) memory works across processes", ops)
		f.Fix = "set kernel.yama.ptrace_scope=1 in /etc/sysctl.d/ and reboot"
	default:
		f.Severity = Warn
		f.What = fmt.Sprintf("kernel.yama.ptrace_scope is %d, a value this check does not know", scope)
		f.Fix = `check "sysctl kernel.yama.ptrace_scope"`
	}
	return f
}

// Capability bits (linux/capability.h) this package looks at.
const (
	CapNetRaw    = 13
	CapIPCLock   = 14
	CapSysPtrace = 19
)

// ParseCapEff returns the effective capability set from the text of
// /proc/self/status ("CapEff:\t000001ffffffffff").
func ParseCapEff(status string) (uint64, error) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("parse CapEff %q: %w", strings.TrimSpace(v), err)
			}
			return caps, nil
		}
	}
	return 0, errors.New("parse status: no CapEff line")
}

// HasCap reports whether capability bit c is set in caps.
func HasCap(caps uint64, c uint) bool { return caps&(1<<c) != 0 }
