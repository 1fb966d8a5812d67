package reports

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rperf/rperf/internal/clock"
)

// Env describes where and how a document's results were measured.
// [GatherEnv] fills the machine facts; the caller fills the test facts
// (Provider, Fabric, Device, MTU, SendPath).
type Env struct {
	// Time is when the environment was gathered, RFC 3339 in UTC.
	Time string `json:"time"`
	// Host is the host name.
	Host string `json:"host"`
	// OS and Arch are Go's GOOS and GOARCH.
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// Kernel is the kernel release (uname -r).
	Kernel string `json:"kernel"`
	// CPUModel is the first CPU's model name from /proc/cpuinfo.
	CPUModel string `json:"cpu_model"`
	// CPUs is the number of logical CPUs usable by the process.
	CPUs int `json:"cpus"`
	// CPUGovernor is the cpufreq scaling governor of the online CPUs
	// ("performance", "powersave", ...; several, comma-separated, when
	// they differ), "none" when the kernel scales no frequency here (no
	// cpufreq, as in most virtual machines). Empty in documents of
	// earlier rperf versions.
	CPUGovernor string `json:"cpu_governor,omitempty"`
	// SMT is the kernel's simultaneous multithreading control: "on",
	// "off", "forceoff", "notsupported" or "notimplemented".
	SMT string `json:"smt,omitempty"`
	// IsolatedCPUs is the kernel's isolated CPU list (isolcpus=), e.g.
	// "2-3", or "none".
	IsolatedCPUs string `json:"isolated_cpus,omitempty"`
	// GoVersion is the Go toolchain that built rperf.
	GoVersion string `json:"go_version"`
	// RperfVersion is rperf's module version, or "devel" plus the VCS
	// revision for a development build.
	RperfVersion string `json:"rperf_version"`
	// Provider is the verbs provider ("soft", "hw", ...).
	Provider string `json:"provider"`
	// Fabric is the transport under the provider ("shm", "udp", "ib", ...).
	Fabric string `json:"fabric"`
	// Device is the RDMA device name.
	Device string `json:"device"`
	// MTU is the path MTU in bytes.
	MTU int `json:"mtu"`
	// SendPath is the post-send path measured ("wr", "burst", ...).
	SendPath string `json:"send_path"`
	// Clock is the timestamp source every sample was taken with.
	Clock clock.Info `json:"clock"`
	// Extra holds further facts as free-form key/value pairs.
	Extra map[string]string `json:"extra,omitempty"`
	// EngineCounters are the transport counters of the built-in engine's
	// udp fabric for this side's device context over the whole run
	// (packets sent and received, retransmissions, ICRC errors, ...), as
	// rdiag counters shows them; nil on other fabrics.
	EngineCounters map[string]uint64 `json:"engine_counters,omitempty"`
}

// System is what [GatherEnv] reads from the machine. A nil field means the
// running machine's own source; tests replace them to get a fixed Env.
type System struct {
	Now       func() time.Time
	Hostname  func() (string, error)
	ReadFile  func(name string) ([]byte, error)
	NumCPU    func() int
	BuildInfo func() (*debug.BuildInfo, bool)
	Clock     func() clock.Info
}

// unknown is what GatherEnv reports for a fact it could not read.
const unknown = "unknown"

// GatherEnv returns the machine part of an Env: time, host, OS, kernel, CPU
// model, count, frequency governor, SMT and isolated CPUs, Go and rperf
// versions, and the measured clock. Facts it
// cannot read are "unknown" rather than errors: a missing /proc must not
// stop a report. The clock measured is [clock.Measure], the default source;
// a run that stamps with the TSC sets System.Clock to its TSC's Measure.
func GatherEnv(sys System) Env {
	if sys.Now == nil {
		sys.Now = time.Now
	}
	if sys.Hostname == nil {
		sys.Hostname = os.Hostname
	}
	if sys.ReadFile == nil {
		sys.ReadFile = os.ReadFile
	}
	if sys.NumCPU == nil {
		sys.NumCPU = runtime.NumCPU
	}
	if sys.BuildInfo == nil {
		sys.BuildInfo = debug.ReadBuildInfo
	}
	if sys.Clock == nil {
		sys.Clock = clock.Measure
	}
	env := Env{
		Time:         sys.Now().UTC().Format(time.RFC3339),
		Host:         unknown,
		OS:           runtime.GOOS,
		Arch:         runtime.GOARCH,
		Kernel:       unknown,
		CPUModel:     unknown,
		CPUs:         sys.NumCPU(),
		GoVersion:    runtime.Version(),
		RperfVersion: unknown,
		Clock:        sys.Clock(),
	}
	if h, err := sys.Hostname(); err == nil && h != "" {
		env.Host = h
	}
	if b, err := sys.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		if k := strings.TrimSpace(string(b)); k != "" {
			env.Kernel = k
		}
	}
	if b, err := sys.ReadFile("/proc/cpuinfo"); err == nil {
		if m := cpuModel(b); m != "" {
			env.CPUModel = m
		}
	}
	env.CPUGovernor, env.SMT, env.IsolatedCPUs = cpuSettings(sys.ReadFile)
	if bi, ok := sys.BuildInfo(); ok {
		if bi.GoVersion != "" {
			env.GoVersion = bi.GoVersion
		}
		env.RperfVersion = moduleVersion(bi)
	}
	return env
}

// sysCPU is where Linux shows the CPUs' settings.
const sysCPU = "/sys/devices/system/cpu/"

// cpuSettings reads the CPU facts that change latency without changing
// the code: the frequency governor of every online CPU, the SMT control,
// and the isolated CPUs. A fact the kernel does not show is "unknown".
func cpuSettings(read func(string) ([]byte, error)) (governor, smt, isolated string) {
	text := func(name string) (string, bool) {
		b, err := read(sysCPU + name)
		return strings.TrimSpace(string(b)), err == nil
	}
	governor, smt, isolated = unknown, unknown, unknown
	if online, ok := text("online"); ok {
		var govs []string
		for _, cpu := range cpuList(online) {
			if g, ok := text(fmt.Sprintf("cpu%d/cpufreq/scaling_governor", cpu)); ok && g != "" && !slices.Contains(govs, g) {
				govs = append(govs, g)
			}
		}
		slices.Sort(govs)
		governor = strings.Join(govs, ",")
		if governor == "" {
			governor = "none"
		}
	}
	if v, ok := text("smt/control"); ok && v != "" {
		smt = v
	}
	if v, ok := text("isolated"); ok {
		isolated = v
		if v == "" {
			isolated = "none"
		}
	}
	return governor, smt, isolated
}

// cpuList expands a kernel CPU list ("0-3,8,10-11") into CPU numbers;
// malformed parts are skipped.
func cpuList(s string) []int {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b-a > 1<<16 {
			continue
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}

// cpuModel returns the CPU model from /proc/cpuinfo text: x86's "model
// name", else the first of the keys other architectures use, else an ARM
// implementer/part pair.
func cpuModel(cpuinfo []byte) string {
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if _, seen := fields[k]; !seen && v != "" {
			fields[k] = v
		}
	}
	for _, k := range []string{"model name", "Model", "Hardware", "cpu model", "cpu"} {
		if v := fields[k]; v != "" {
			return v
		}
	}
	if impl, part := fields["CPU implementer"], fields["CPU part"]; impl != "" && part != "" {
		return "implementer " + impl + " part " + part
	}
	return ""
}

// moduleVersion returns the main module's version, or for a development
// build "devel" plus the first 12 digits of the VCS revision and "-dirty"
// for uncommitted changes.
func moduleVersion(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	v := "devel"
	if rev != "" {
		v += "-" + rev[:min(12, len(rev))]
	}
	if dirty {
		v += "-dirty"
	}
	return v
}
