//go:build !linux

package suite

import (
	"os/exec"
	"time"
)

// ownGroup bounds the wait for the run's output after the timeout or an
// interrupt killed it.
func ownGroup(cmd *exec.Cmd) { cmd.WaitDelay = 5 * time.Second }
