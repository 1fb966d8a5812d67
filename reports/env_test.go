package reports

import (
	"errors"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rperf/rperf/internal/clock"
)

// fixedSystem is a System with every machine fact fixed.
func fixedSystem(files map[string]string) System {
	return System{
		Now:      func() time.Time { return time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("X", 3600)) },
		Hostname: func() (string, error) { return "node01", nil },
		ReadFile: func(name string) ([]byte, error) {
			if s, ok := files[name]; ok {
				return []byte(s), nil
			}
			return nil, errors.New("no such file")
		},
		NumCPU: func() int { return 2 },
		BuildInfo: func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}, true
		},
		Clock: func() clock.Info { return clock.Info{Name: clock.Name, ResolutionNs: 20, CostNs: 21.5} },
	}
}

func TestGatherEnv(t *testing.T) {
	sys := fixedSystem(map[string]string{
		"/proc/sys/kernel/osrelease":                            "6.18.44-fc-v769\n",
		"/proc/cpuinfo":                                         "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Processor\n",
		"/sys/devices/system/cpu/online":                        "0-1\n",
		"/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance\n",
		"/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor": "performance\n",
		"/sys/devices/system/cpu/smt/control":                   "off\n",
		"/sys/devices/system/cpu/isolated":                      "1\n",
	})
	got := GatherEnv(sys)
	want := Env{
		Time: "2026-03-04T04:06:07Z", Host: "node01", OS: runtime.GOOS, Arch: runtime.GOARCH,
		Kernel: "6.18.44-fc-v769", CPUModel: "Intel(R) Xeon(R) Processor", CPUs: 2,
		CPUGovernor: "performance", SMT: "off", IsolatedCPUs: "1",
		GoVersion: "go1.26.8", RperfVersion: "devel-0123456789ab-dirty",
		Clock: clock.Info{Name: clock.Name, ResolutionNs: 20, CostNs: 21.5},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestGatherEnvMissingFacts(t *testing.T) {
	sys := fixedSystem(nil)
	sys.Hostname = func() (string, error) { return "", errors.New("no host") }
	sys.BuildInfo = func() (*debug.BuildInfo, bool) { return nil, false }
	got := GatherEnv(sys)
	if got.Host != "unknown" || got.Kernel != "unknown" || got.CPUModel != "unknown" || got.RperfVersion != "unknown" {
		t.Errorf("missing facts: host %q kernel %q cpu %q version %q", got.Host, got.Kernel, got.CPUModel, got.RperfVersion)
	}
	if got.GoVersion != runtime.Version() {
		t.Errorf("GoVersion = %q, want runtime.Version()", got.GoVersion)
	}
}

func TestGatherEnvHost(t *testing.T) {
	env := GatherEnv(System{Clock: func() clock.Info { return clock.Info{} }})
	if env.Host == "" || env.CPUs < 1 || env.GoVersion == "" || env.Time == "" {
		t.Errorf("host env incomplete: %+v", env)
	}
	t.Logf("%+v", env)
}

func TestCPUModel(t *testing.T) {
	tests := []struct{ name, cpuinfo, want string }{
		{"x86", "processor : 0\nmodel name : AMD EPYC 7763 64-Core Processor\n", "AMD EPYC 7763 64-Core Processor"},
		{"arm64 with Model", "processor : 0\nCPU implementer : 0x41\nCPU part : 0xd0c\n\nModel : Raspberry Pi 4\n", "Raspberry Pi 4"},
		{"arm64 bare", "processor : 0\nCPU implementer : 0x41\nCPU part : 0xd0c\n", "implementer 0x41 part 0xd0c"},
		{"ppc64le", "processor : 0\ncpu : POWER9, altivec supported\n", "POWER9, altivec supported"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		if got := cpuModel([]byte(tt.cpuinfo)); got != tt.want {
			t.Errorf("%s: cpuModel = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestModuleVersion(t *testing.T) {
	tests := []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}, "devel-abc"},
	}
	for _, tt := range tests {
		if got := moduleVersion(&tt.bi); got != tt.want {
			t.Errorf("moduleVersion(%+v) = %q, want %q", tt.bi.Main, got, tt.want)
		}
	}
}

// TestCPUSettings reads the governors of the online CPUs only, names
// several when they differ, and says what the kernel does not show.
func TestCPUSettings(t *testing.T) {
	const dir = "/sys/devices/system/cpu/"
	for _, tc := range []struct {
		name                    string
		files                   map[string]string
		governor, smt, isolated string
	}{
		{"virtual machine", map[string]string{dir + "online": "0-1", dir + "smt/control": "notsupported", dir + "isolated": "\n"},
			"none", "notsupported", "none"},
		{"mixed governors, offline CPU ignored", map[string]string{dir + "online": "0,2-3",
			dir + "cpu0/cpufreq/scaling_governor": "powersave", dir + "cpu1/cpufreq/scaling_governor": "userspace",
			dir + "cpu2/cpufreq/scaling_governor": "performance", dir + "cpu3/cpufreq/scaling_governor": "powersave",
			dir + "smt/control": "on", dir + "isolated": "2-3"},
			"performance,powersave", "on", "2-3"},
		{"no sysfs", nil, "unknown", "unknown", "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := GatherEnv(fixedSystem(tc.files))
			if env.CPUGovernor != tc.governor || env.SMT != tc.smt || env.IsolatedCPUs != tc.isolated {
				t.Errorf("governor %q, smt %q, isolated %q; want %q, %q, %q", env.CPUGovernor, env.SMT, env.IsolatedCPUs, tc.governor, tc.smt, tc.isolated)
			}
		})
	}
	if got := cpuList("0-2, 5,x,7-6,9"); !slices.Equal(got, []int{0, 1, 2, 5, 9}) {
		t.Errorf("cpuList = %v", got)
	}
}
