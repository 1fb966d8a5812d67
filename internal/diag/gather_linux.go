package diag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/sysfs"
)

// Gather reads the inputs of every check from this machine: sysfs under
// env.SysRoot, limits and capabilities of this process, /proc/net/udp*,
// /dev/infiniband and /dev/shm under env.DevRoot, a memfd_create probe
// and Yama's ptrace_scope. What cannot be read is recorded in the inputs
// and becomes a finding; Gather itself does not fail on Linux.
func Gather(env Env) (Inputs, error) {
	env = env.withDefaults()
	in := Inputs{
		Engine:      env.Engine,
		IPv6:        env.IPv6,
		MemlockNeed: env.MemlockNeed,
		ShmNeed:     env.ShmNeed,
		NoFileNeed:  env.NoFileNeed,
		UDPPort:     env.UDPPort,
	}

	if fsys, err := sysfs.NewFS(env.SysRoot); err != nil {
		in.Sysfs.Errs = append(in.Sysfs.Errs, err)
	} else {
		in.Sysfs = fsys.Report()
	}

	in.Memlock = getrlimit(unix.RLIMIT_MEMLOCK)
	in.NoFile = getrlimit(unix.RLIMIT_NOFILE)
	if status, err := os.ReadFile(filepath.Join(env.ProcRoot, "self", "status")); err == nil {
		if caps, err := ParseCapEff(string(status)); err == nil {
			in.CapIPCLock = HasCap(caps, CapIPCLock)
			in.CapSysPtrace = HasCap(caps, CapSysPtrace)
			in.CapNetRaw = HasCap(caps, CapNetRaw)
		}
	}

	in.UDPSockets, in.UDPErr = readUDP(env.ProcRoot)
	in.DevInfiniband = listDevDir(filepath.Join(env.DevRoot, "infiniband"))
	in.Creds = currentCreds()
	in.Shm = statShm(filepath.Join(env.DevRoot, "shm"))
	in.MemfdErr = probeMemfd()
	in.PtraceScope, in.PtraceErr = readPtraceScope(env.ProcRoot)
	return in, nil
}

func getrlimit(resource int) Limit {
	var rl unix.Rlimit
	if err := unix.Getrlimit(resource, &rl); err != nil {
		return Limit{Err: fmt.Errorf("getrlimit: %w", err)}
	}
	return Limit{Soft: rl.Cur, Hard: rl.Max}
}

// readUDP parses /proc/net/udp and /proc/net/udp6. A missing udp6 (IPv6
// disabled) is not an error.
func readUDP(procRoot string) ([]UDPSocket, error) {
	var all []UDPSocket
	for _, name := range []string{"udp", "udp6"} {
		text, err := os.ReadFile(filepath.Join(procRoot, "net", name))
		if err != nil {
			if name == "udp6" && errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("read /proc/net/%s: %w", name, err)
		}
		socks, err := ParseProcNetUDP(string(text), binary.NativeEndian)
		if err != nil {
			return nil, err
		}
		all = append(all, socks...)
	}
	return all, nil
}

func listDevDir(dir string) DevDir {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return DevDir{Err: err}
	}
	var d DevDir
	for _, e := range ents {
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // vanished or a dangling link: treated as absent
		}
		n := DevNode{Name: e.Name(), Mode: fi.Mode()}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n.UID, n.GID = st.Uid, st.Gid
		}
		d.Nodes = append(d.Nodes, n)
	}
	return d
}

func currentCreds() Creds {
	c := Creds{UID: uint32(os.Geteuid()), GIDs: []uint32{uint32(os.Getegid())}}
	if groups, err := os.Getgroups(); err == nil {
		for _, g := range groups {
			c.GIDs = append(c.GIDs, uint32(g))
		}
	}
	return c
}

func statShm(dir string) ShmStat {
	if _, err := os.Stat(dir); err != nil {
		return ShmStat{Err: err}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return ShmStat{Err: fmt.Errorf("statfs %s: %w", dir, err)}
	}
	bsize := uint64(st.Bsize)
	return ShmStat{Total: st.Blocks * bsize, Free: st.Bavail * bsize}
}

// probeMemfd creates, sizes and closes a memfd, as the built-in engine
// does for every shared region.
func probeMemfd() error {
	fd, err := unix.MemfdCreate("rdiag-probe", unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("memfd_create: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(os.Getpagesize())); err != nil {
		return fmt.Errorf("ftruncate memfd: %w", err)
	}
	return nil
}

func readPtraceScope(procRoot string) (int, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, PtraceScopePath))
	if err != nil {
		return 0, err
	}
	return ParsePtraceScope(string(b))
}
