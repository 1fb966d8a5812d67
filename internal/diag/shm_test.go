package diag

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

func TestShm(t *testing.T) {
	const need = 64 << 20
	tests := []struct {
		name     string
		st       ShmStat
		want     Severity
		wantWhat string
	}{
		{"plenty", ShmStat{Total: 8 << 30, Free: 8 << 30}, Pass, "/dev/shm has 8 GiB free of 8 GiB"},
		{"exactly enough", ShmStat{Total: need, Free: need}, Pass, "64 MiB free"},
		{"docker default, partly used", ShmStat{Total: 64 << 20, Free: 10 << 20}, Warn, "10 MiB free of 64 MiB; 64 MiB wanted"},
		{"missing", ShmStat{Err: &fs.PathError{Op: "stat", Path: "/dev/shm", Err: fs.ErrNotExist}}, Warn, "does not exist"},
		{"unreadable", ShmStat{Err: syscall.EACCES}, Warn, "cannot examine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Shm(tt.st, need)
			checkFinding(t, f, CheckShm, tt.want)
			if !strings.Contains(f.What, tt.wantWhat) {
				t.Errorf("What = %q, want it to contain %q", f.What, tt.wantWhat)
			}
		})
	}
}

func TestMemfd(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		want    Severity
		wantFix string
	}{
		{"works", nil, Pass, ""},
		{"old kernel", fmt.Errorf("memfd_create: %w", syscall.ENOSYS), Fail, "3.17"},
		{"not on this OS", errors.ErrUnsupported, Fail, "3.17"},
		{"seccomp", fmt.Errorf("memfd_create: %w", syscall.EPERM), Fail, "seccomp"},
		{"LSM", syscall.EACCES, Fail, "seccomp"},
		{"out of memory", syscall.ENOMEM, Fail, "memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Memfd(tt.err)
			checkFinding(t, f, CheckMemfd, tt.want)
			if !strings.Contains(f.Fix, tt.wantFix) {
				t.Errorf("Fix = %q, want it to contain %q", f.Fix, tt.wantFix)
			}
		})
	}
}

func TestPtraceScope(t *testing.T) {
	noYama := &fs.PathError{Op: "open", Path: "/proc/sys/kernel/yama/ptrace_scope", Err: fs.ErrNotExist}
	tests := []struct {
		name     string
		scope    int
		err      error
		capPtr   bool
		want     Severity
		wantWhat string
	}{
		{"no Yama (this machine)", 0, noYama, false, Pass, "Yama is not enabled"},
		{"unreadable", 0, syscall.EACCES, false, Warn, "cannot read"},
		{"0: classic", 0, nil, false, Pass, "is 0"},
		{"1: restricted", 1, nil, false, Info, "PR_SET_PTRACER"},
		{"2 with CAP_SYS_PTRACE", 2, nil, true, Pass, "has it"},
		{"2 without", 2, nil, false, Warn, "only CAP_SYS_PTRACE holders"},
		{"3: no attach", 3, nil, true, Warn, "until reboot"},
		{"unknown value", 7, nil, false, Warn, "does not know"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := PtraceScope(tt.scope, tt.err, tt.capPtr)
			checkFinding(t, f, CheckPtraceScope, tt.want)
			if !strings.Contains(f.What, tt.wantWhat) {
				t.Errorf("What = %q, want it to contain %q", f.What, tt.wantWhat)
			}
		})
	}
}

func TestParsePtraceScope(t *testing.T) {
	for in, want := range map[string]int{"0\n": 0, "1": 1, " 3 \n": 3} {
		got, err := ParsePtraceScope(in)
		if err != nil || got != want {
			t.Errorf("ParsePtraceScope(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParsePtraceScope("x"); err == nil {
		t.Error(`ParsePtraceScope("x") succeeded`)
	}
}

func TestParseCapEff(t *testing.T) {
	const status = "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t00000000a8044001\nCapBnd:\t000001ffffffffff\n"
	caps, err := ParseCapEff(status)
	if err != nil {
		t.Fatal(err)
	}
	if caps != 0xa8044001 {
		t.Errorf("CapEff = %#x", caps)
	}
	if !HasCap(caps, CapIPCLock) {
		t.Error("bit 14 (CAP_IPC_LOCK) not found in 0xa8044001")
	}
	if HasCap(caps, CapSysPtrace) {
		t.Error("bit 19 (CAP_SYS_PTRACE) found in 0xa8044001")
	}
	if _, err := ParseCapEff("Name:\tx\n"); err == nil {
		t.Error("ParseCapEff without CapEff succeeded")
	}
	if _, err := ParseCapEff("CapEff:\tzz\n"); err == nil {
		t.Error("ParseCapEff with a bad value succeeded")
	}
}

// TestNetRaw: CAP_NET_RAW held passes; missing is INFO, naming the raw
// devices, what still works and how to grant it; CapEff's bit 13 is it.
func TestNetRaw(t *testing.T) {
	if f := NetRaw(true); f.Severity != Pass || f.Check != CheckNetRaw {
		t.Errorf("held: %v", f)
	}
	f := NetRaw(false)
	if f.Severity != Info || !strings.Contains(f.What, "CAP_NET_RAW") || !strings.Contains(f.What, "raw_<netdev>") || !strings.Contains(f.Fix, "cap_net_raw") {
		t.Errorf("missing: %v", f)
	}
	caps, _ := ParseCapEff("CapEff:\t0000000000002000\n")
	if !HasCap(caps, CapNetRaw) || HasCap(caps, CapIPCLock) {
		t.Errorf("CapEff 0x2000: CAP_NET_RAW %v", HasCap(caps, CapNetRaw))
	}
}
