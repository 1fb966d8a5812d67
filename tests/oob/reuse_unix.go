//go:build unix

package oob

import "syscall"

// setReuseAddr sets SO_REUSEADDR on the listening socket, as perftest
// does, so a server can be restarted while the previous run's connection
// is still in TIME_WAIT. (Go sets it on Unix listeners anyway; setting it
// here keeps the behaviour explicit and independent of that default.)
func setReuseAddr(network, address string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
