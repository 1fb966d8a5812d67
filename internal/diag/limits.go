package diag

import "fmt"

// Unlimited is RLIM_INFINITY.
const Unlimited = ^uint64(0)

// Limit is a resource limit as getrlimit(2) reports it. Err is set when
// the limit could not be read.
type Limit struct {
	Soft, Hard uint64
	Err        error
}

// String formats the limit as byte sizes: "soft 8 MiB, hard unlimited".
func (l Limit) String() string {
	return fmt.Sprintf("soft %s, hard %s", fmtBytes(l.Soft), fmtBytes(l.Hard))
}

// Memlock checks RLIMIT_MEMLOCK against need bytes. Kernel verbs pin
// every registered memory region and charge it to this limit, unless the
// process has CAP_IPC_LOCK.
func Memlock(lim Limit, capIPCLock bool, need uint64) Finding {
	f := Finding{Check: CheckMemlock}
	switch {
	case lim.Err != nil:
		f.Severity = Warn
		f.What = fmt.Sprintf("cannot read RLIMIT_MEMLOCK: %v", lim.Err)
		f.Fix = `check "ulimit -l" by hand`
	case capIPCLock:
		f.Severity = Pass
		f.What = fmt.Sprintf("CAP_IPC_LOCK is held, so RLIMIT_MEMLOCK (%s) does not limit memory registration", lim)
	case lim.Soft >= need:
		f.Severity = Pass
		f.What = fmt.Sprintf("RLIMIT_MEMLOCK %s covers the %s needed", lim, fmtBytes(need))
	case lim.Hard >= need:
		f.Severity = Warn
		f.What = fmt.Sprintf("RLIMIT_MEMLOCK soft limit %s is below the %s needed; the hard limit %s allows more", fmtBytes(lim.Soft), fmtBytes(need), fmtBytes(lim.Hard))
		f.Fix = fmt.Sprintf(`raise the soft limit before the run: "ulimit -l %s"`, ulimitArg(lim.Hard))
	default:
		f.Severity = Fail
		f.What = fmt.Sprintf("RLIMIT_MEMLOCK %s is below the %s needed to register memory", lim, fmtBytes(need))
		f.Fix = `set memlock to unlimited: "* - memlock unlimited" in /etc/security/limits.conf, LimitMEMLOCK=infinity for a systemd unit, or --ulimit memlock=-1 for docker`
	}
	return f
}

// ulimitArg is the argument "ulimit -l" takes for a byte limit (KiB).
func ulimitArg(b uint64) string {
	if b == Unlimited {
		return "unlimited"
	}
	return fmt.Sprint(b / 1024)
}

// NoFile checks RLIMIT_NOFILE against need descriptors (memfds, sockets,
// eventfds of the built-in engine; verbs objects of kernel devices). Go
// programs raise their soft limit to the hard limit at start-up, so the
// hard limit is what counts for rperf itself.
func NoFile(lim Limit, need uint64) Finding {
	f := Finding{Check: CheckNoFile}
	str := fmt.Sprintf("soft %s, hard %s", fmtCount(lim.Soft), fmtCount(lim.Hard))
	switch {
	case lim.Err != nil:
		f.Severity = Warn
		f.What = fmt.Sprintf("cannot read RLIMIT_NOFILE: %v", lim.Err)
		f.Fix = `check "ulimit -n" by hand`
	case lim.Soft >= need:
		f.Severity = Pass
		f.What = fmt.Sprintf("RLIMIT_NOFILE %s covers the %d descriptors needed", str, need)
	case lim.Hard >= need:
		f.Severity = Warn
		f.What = fmt.Sprintf("RLIMIT_NOFILE soft limit %s is below the %d descriptors needed; rperf raises it to the hard limit %s at start, other tools may not", fmtCount(lim.Soft), need, fmtCount(lim.Hard))
		f.Fix = fmt.Sprintf(`for non-Go peers, raise it first: "ulimit -n %s"`, fmtCount(lim.Hard))
	default:
		f.Severity = Fail
		f.What = fmt.Sprintf("RLIMIT_NOFILE %s is below the %d descriptors needed", str, need)
		f.Fix = fmt.Sprintf(`raise the hard limit to at least %d: LimitNOFILE= for a systemd unit, "nofile" in /etc/security/limits.conf, or --ulimit nofile= for docker`, need)
	}
	return f
}

func fmtCount(n uint64) string {
	if n == Unlimited {
		return "unlimited"
	}
	return fmt.Sprint(n)
}
