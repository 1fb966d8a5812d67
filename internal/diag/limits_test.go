package diag

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

func TestMemlock(t *testing.T) {
	const need = 64 << 20
	tests := []struct {
		name     string
		lim      Limit
		capIPC   bool
		want     Severity
		wantWhat string
		wantFix  string
	}{
		{name: "unreadable", lim: Limit{Err: syscall.EPERM}, want: Warn, wantWhat: "cannot read"},
		{name: "CAP_IPC_LOCK overrides a low limit", lim: Limit{Soft: 64 << 10, Hard: 64 << 10}, capIPC: true, want: Pass, wantWhat: "CAP_IPC_LOCK"},
		{name: "unlimited", lim: Limit{Soft: Unlimited, Hard: Unlimited}, want: Pass, wantWhat: "soft unlimited, hard unlimited"},
		{name: "exactly enough", lim: Limit{Soft: need, Hard: need}, want: Pass},
		{name: "soft too low, hard allows", lim: Limit{Soft: 64 << 10, Hard: Unlimited}, want: Warn, wantWhat: "soft limit 64 KiB", wantFix: "ulimit -l unlimited"},
		{name: "soft too low, hard finite", lim: Limit{Soft: 8 << 20, Hard: 128 << 20}, want: Warn, wantFix: "ulimit -l 131072"},
		{name: "hard too low", lim: Limit{Soft: 8 << 20, Hard: 8 << 20}, want: Fail, wantWhat: "soft 8 MiB, hard 8 MiB is below the 64 MiB", wantFix: "LimitMEMLOCK=infinity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Memlock(tt.lim, tt.capIPC, need)
			checkFinding(t, f, CheckMemlock, tt.want)
			if !strings.Contains(f.What, tt.wantWhat) {
				t.Errorf("What = %q, want it to contain %q", f.What, tt.wantWhat)
			}
			if !strings.Contains(f.Fix, tt.wantFix) {
				t.Errorf("Fix = %q, want it to contain %q", f.Fix, tt.wantFix)
			}
		})
	}
}

func TestNoFile(t *testing.T) {
	tests := []struct {
		name string
		lim  Limit
		want Severity
	}{
		{"unreadable", Limit{Err: errors.New("boom")}, Warn},
		{"enough", Limit{Soft: 1048576, Hard: 1048576}, Pass},
		{"unlimited", Limit{Soft: Unlimited, Hard: Unlimited}, Pass},
		{"soft low, hard allows", Limit{Soft: 256, Hard: 4096}, Warn},
		{"hard low", Limit{Soft: 256, Hard: 512}, Fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkFinding(t, NoFile(tt.lim, 1024), CheckNoFile, tt.want)
		})
	}
}
