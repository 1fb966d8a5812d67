package diag

import (
	"github.com/rperf/rperf/internal/sysfs"
)

// Inputs is everything the checks look at. Gather fills it from the
// running machine; tests fabricate it.
type Inputs struct {
	// Engine decides how severe findings of engine-specific checks are
	// (see ForEngine).
	Engine Engine

	// Sysfs is the RDMA and network view of sysfs.
	Sysfs sysfs.Report
	// PortAttrs holds what a verbs query adds (active and max MTU) per
	// port; nil when no verbs provider could be asked.
	PortAttrs map[PortKey]PortAttr
	// IPv6 asks for IPv6 GIDs, like perftest's --ipv6.
	IPv6 bool

	Memlock      Limit  // RLIMIT_MEMLOCK
	MemlockNeed  uint64 // bytes of memory the run registers
	CapIPCLock   bool   // CAP_IPC_LOCK in the effective set
	CapSysPtrace bool   // CAP_SYS_PTRACE in the effective set
	CapNetRaw    bool   // CAP_NET_RAW in the effective set

	DevInfiniband DevDir // /dev/infiniband
	Creds         Creds  // who opens the device nodes

	UDPSockets []UDPSocket // /proc/net/udp and /proc/net/udp6
	UDPErr     error       // error reading them
	UDPPort    uint16      // the built-in engine's UDP port

	Shm         ShmStat // /dev/shm
	ShmNeed     uint64  // bytes wanted free in /dev/shm
	MemfdErr    error   // result of probing memfd_create
	PtraceScope int     // kernel.yama.ptrace_scope
	PtraceErr   error   // error reading it (fs.ErrNotExist: no Yama)

	NoFile     Limit  // RLIMIT_NOFILE
	NoFileNeed uint64 // descriptors the run needs
}

// Defaults for the needs an Env leaves zero.
const (
	DefaultMemlockNeed = 64 << 20 // 64 MiB of registered memory
	DefaultShmNeed     = 64 << 20 // 64 MiB free in /dev/shm
	DefaultNoFileNeed  = 1024     // descriptors
)

// Evaluate runs every check on in and returns the findings in the order
// of CheckNames, with severities adjusted for in.Engine. Each check
// yields at least one finding.
func Evaluate(in Inputs) []Finding {
	var uverbs []string
	for _, d := range in.Sysfs.Devices {
		if d.UVerbs != nil {
			uverbs = append(uverbs, d.UVerbs.Name)
		}
	}
	port := in.UDPPort
	if port == 0 {
		port = RoCEv2Port
	}
	var out []Finding
	out = append(out, RDMADevices(in.Sysfs)...)
	out = append(out, DevInfiniband(in.DevInfiniband, uverbs, in.Creds)...)
	out = append(out, Ports(in.Sysfs, in.PortAttrs, in.IPv6)...)
	out = append(out,
		Memlock(in.Memlock, in.CapIPCLock, orDefault(in.MemlockNeed, DefaultMemlockNeed)),
		UDPPort(in.UDPSockets, port, in.UDPErr),
		Shm(in.Shm, orDefault(in.ShmNeed, DefaultShmNeed)),
		Memfd(in.MemfdErr),
		PtraceScope(in.PtraceScope, in.PtraceErr, in.CapSysPtrace),
		NoFile(in.NoFile, orDefault(in.NoFileNeed, DefaultNoFileNeed)),
		NetRaw(in.CapNetRaw),
	)
	return ForEngine(out, in.Engine)
}

func orDefault(v, d uint64) uint64 {
	if v == 0 {
		return d
	}
	return v
}

// Env says where Gather looks and what the run needs. The zero value
// checks the real machine for EngineAuto with the default needs.
type Env struct {
	Engine      Engine
	SysRoot     string // sysfs mount point; "" means /sys
	ProcRoot    string // procfs mount point; "" means /proc
	DevRoot     string // devtmpfs mount point; "" means /dev
	MemlockNeed uint64 // 0 means DefaultMemlockNeed
	ShmNeed     uint64 // 0 means DefaultShmNeed
	NoFileNeed  uint64 // 0 means DefaultNoFileNeed
	UDPPort     uint16 // 0 means RoCEv2Port
	IPv6        bool   // prefer IPv6 GIDs (perftest --ipv6)
}

func (e Env) withDefaults() Env {
	if e.SysRoot == "" {
		e.SysRoot = sysfs.DefaultMountPoint
	}
	if e.ProcRoot == "" {
		e.ProcRoot = "/proc"
	}
	if e.DevRoot == "" {
		e.DevRoot = "/dev"
	}
	e.MemlockNeed = orDefault(e.MemlockNeed, DefaultMemlockNeed)
	e.ShmNeed = orDefault(e.ShmNeed, DefaultShmNeed)
	e.NoFileNeed = orDefault(e.NoFileNeed, DefaultNoFileNeed)
	if e.UDPPort == 0 {
		e.UDPPort = RoCEv2Port
	}
	return e
}

// Run gathers the inputs on this machine and evaluates them. Problems
// with the machine become findings; the error is only for a platform
// where gathering is not supported.
func Run(env Env) ([]Finding, error) {
	in, err := Gather(env)
	if err != nil {
		return nil, err
	}
	return Evaluate(in), nil
}
