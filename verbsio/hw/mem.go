package hw

import (
	"os"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// mmapAnon maps length bytes, rounded up to whole pages, of private
// anonymous memory. The mapping is outside the Go heap, page-aligned and
// zeroed; the garbage collector never scans, moves or frees it.
func mmapAnon(length int) ([]byte, error) {
	pg := os.Getpagesize()
	n := (length + pg - 1) / pg * pg
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, verbsio.Errorf("alloc", errnoOf(err, unix.ENOMEM), "mmap %d bytes", n)
	}
	return m, nil
}
