//go:build linux

package oob

import (
	"syscall"
	"testing"
)

func TestListenSetsReuseAddr(t *testing.T) {
	ln, err := Listen(testCtx(t), "127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rc, err := ln.ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil || v == 0 {
		t.Errorf("SO_REUSEADDR = %d, %v; want set", v, gerr)
	}
}
