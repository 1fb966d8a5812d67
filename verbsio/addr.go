package verbsio

import "unsafe"

// addrOf returns the virtual address of b's first byte (0 for an empty slice).
func addrOf(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// AddrOf returns the virtual address of b's first byte, as SGEs and remote
// addresses use it (0 for an empty slice).
func AddrOf(b []byte) uint64 { return addrOf(b) }
