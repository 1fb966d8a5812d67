package diag

import (
	"fmt"
	"strconv"
)

// Severity grades a Finding. The order is PASS < INFO < WARN < FAIL.
type Severity int

// Severities.
const (
	Pass Severity = iota // the condition holds
	Info                 // a fact worth knowing; nothing to fix for this run
	Warn                 // the run can work, degraded or with a caveat
	Fail                 // the run will not work until this is fixed
)

// String returns "PASS", "INFO", "WARN" or "FAIL".
func (s Severity) String() string {
	switch s {
	case Pass:
		return "PASS"
	case Info:
		return "INFO"
	case Warn:
		return "WARN"
	case Fail:
		return "FAIL"
	default:
		return "Severity(" + strconv.Itoa(int(s)) + ")"
	}
}

// Finding is the result of one pre-flight check on one subject.
type Finding struct {
	Check    string   // the check's name, one of CheckNames
	Severity Severity // PASS, INFO, WARN or FAIL
	What     string   // the observed fact, with its subject ("rxe0/1: PORT_ACTIVE (4)")
	Fix      string   // one line telling what to do; empty on PASS
}

// String formats f as "FAIL memlock: WHAT (fix: FIX)".
func (f Finding) String() string {
	s := fmt.Sprintf("%s %s: %s", f.Severity, f.Check, f.What)
	if f.Fix != "" {
		s += " (fix: " + f.Fix + ")"
	}
	return s
}

// Check names, in the order Evaluate reports them.
const (
	CheckRDMADevices   = "rdma-devices"
	CheckDevInfiniband = "dev-infiniband"
	CheckPortState     = "port-state"
	CheckMTU           = "mtu"
	CheckRoCEGID       = "roce-gid"
	CheckMemlock       = "memlock"
	CheckUDPPort       = "udp-port"
	CheckShm           = "shm"
	CheckMemfd         = "memfd"
	CheckPtraceScope   = "ptrace-scope"
	CheckNoFile        = "nofile"
	CheckNetRaw        = "net-raw"
)

// CheckNames lists every check Evaluate runs, in report order.
var CheckNames = []string{
	CheckRDMADevices, CheckDevInfiniband, CheckPortState, CheckMTU, CheckRoCEGID,
	CheckMemlock, CheckUDPPort, CheckShm, CheckMemfd, CheckPtraceScope, CheckNoFile, CheckNetRaw,
}

// Worst returns the highest severity among fs, or Pass for none.
func Worst(fs []Finding) Severity {
	w := Pass
	for _, f := range fs {
		w = max(w, f.Severity)
	}
	return w
}

// ExitFail is the exit status of "rdiag check" when a finding is FAIL:
// 3, internal/cli's ExitRegression, the code for "the tool ran and its
// verdict is negative" ("rperf compare" found a regression, "rdiag check"
// found a FAIL). It is deliberately not ExitEnvironment (4), which says
// the command itself could not do what was asked (no such device, a
// platform where the checks cannot gather), so scripts can tell "the
// machine failed the checks" from "the checks could not run". (diag does
// not import internal/cli; rdiagcmd's tests assert the two agree.)
const ExitFail = 3

// ExitCode returns 0 when no finding is FAIL and ExitFail otherwise.
// Warnings do not fail a pre-flight check.
func ExitCode(fs []Finding) int {
	if Worst(fs) == Fail {
		return ExitFail
	}
	return 0
}

// Engine says which RDMA engine the run will use. Checks that only
// matter to the other engine are softened, so that, for example, a
// missing /dev/infiniband fails a kernel-verbs run but is only INFO for
// a built-in-engine run.
type Engine int

// Engines.
const (
	// EngineAuto uses kernel RDMA devices when usable and the built-in
	// engine otherwise; a problem that breaks only one of them is at
	// most WARN.
	EngineAuto Engine = iota
	// EngineKernel needs kernel RDMA devices through libibverbs
	// (/dev/infiniband/uverbsN); built-in engine checks are at most INFO.
	EngineKernel
	// EngineBuiltin is rperf's built-in engine (shared memory and UDP);
	// kernel device checks are at most INFO.
	EngineBuiltin
)

// String returns "auto", "kernel" or "builtin".
func (e Engine) String() string {
	switch e {
	case EngineAuto:
		return "auto"
	case EngineKernel:
		return "kernel"
	case EngineBuiltin:
		return "builtin"
	default:
		return "Engine(" + strconv.Itoa(int(e)) + ")"
	}
}

// scope says which engine a check's findings matter to.
type scope int

const (
	scopeBoth scope = iota
	scopeKernel
	scopeBuiltin
)

// checkScope maps each check to the engine it concerns.
var checkScope = map[string]scope{
	CheckRDMADevices:   scopeKernel,
	CheckDevInfiniband: scopeKernel,
	CheckPortState:     scopeKernel,
	CheckMTU:           scopeKernel,
	CheckRoCEGID:       scopeKernel,
	CheckMemlock:       scopeKernel,
	CheckUDPPort:       scopeBuiltin,
	CheckShm:           scopeBuiltin,
	CheckMemfd:         scopeBuiltin,
	CheckPtraceScope:   scopeBuiltin,
	CheckNoFile:        scopeBoth,
	CheckNetRaw:        scopeBuiltin,
}

// ForEngine returns fs with each severity capped for engine e: findings
// of checks that concern only the other engine become at most INFO, and
// under EngineAuto at most WARN.
func ForEngine(fs []Finding, e Engine) []Finding {
	out := make([]Finding, len(fs))
	for i, f := range fs {
		limit := Fail
		switch sc := checkScope[f.Check]; {
		case sc == scopeBoth:
		case e == EngineAuto:
			limit = Warn
		case sc == scopeKernel && e == EngineBuiltin, sc == scopeBuiltin && e == EngineKernel:
			limit = Info
		}
		f.Severity = min(f.Severity, limit)
		out[i] = f
	}
	return out
}

// fmtBytes formats a byte count with a binary unit ("64 KiB"), or
// "unlimited" for Unlimited.
func fmtBytes(n uint64) string {
	if n == Unlimited {
		return "unlimited"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n)/unit, 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	if v == float64(uint64(v)) {
		return fmt.Sprintf("%d %s", uint64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
