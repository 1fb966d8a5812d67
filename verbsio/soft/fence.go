//go:build !amd64

package soft

import "sync/atomic"

// storeFence orders earlier stores before later ones: an atomic
// read-modify-write is a full barrier (DMB on arm64).
func storeFence() {
	var w atomic.Uint32
	w.Add(1)
}
