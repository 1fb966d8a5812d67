package reports

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
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
// model and count, Go and rperf versions, and the measured clock. Facts it
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
	if bi, ok := sys.BuildInfo(); ok {
		if bi.GoVersion != "" {
			env.GoVersion = bi.GoVersion
		}
		env.RperfVersion = moduleVersion(bi)
	}
	return env
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
