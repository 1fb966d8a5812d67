//go:build !unix

package oob

import "syscall"

// setReuseAddr leaves socket options alone where SO_REUSEADDR has
// different semantics (Windows) or no meaning.
func setReuseAddr(network, address string, rc syscall.RawConn) error {
	return nil
}
