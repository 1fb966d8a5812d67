package suite

import (
	"os/exec"
	"syscall"
	"time"
)

// ownGroup starts the run in its own process group, and makes the
// timeout or an interrupt kill the whole group: rperf --loopback starts
// its server as a second process.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
}
