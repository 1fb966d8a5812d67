package shm

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Segment is a memfd mapped shared and read-write into this process.
type Segment struct {
	fd  int
	ino uint64
	mem []byte
}

// PageSize is the system page size.
var PageSize = unix.Getpagesize()

// RoundPage rounds n up to a multiple of the page size.
func RoundPage(n int) int { return (n + PageSize - 1) &^ (PageSize - 1) }

// Create makes a memfd of size bytes (rounded up to pages) and maps it.
func Create(name string, size int) (*Segment, error) {
	if size <= 0 {
		return nil, fmt.Errorf("create shared segment %s: size %d", name, size)
	}
	size = RoundPage(size)
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create %s: %w", name, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("size shared segment %s to %d bytes: %w (is /dev/shm or memory full?)", name, size, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("map shared segment %s: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, fmt.Errorf("stat shared segment %s: %w", name, err)
	}
	return &Segment{fd: fd, ino: st.Ino, mem: mem}, nil
}

// Bytes is the mapping.
func (s *Segment) Bytes() []byte { return s.mem }

// FD is the memfd's descriptor number in this process.
func (s *Segment) FD() int { return s.fd }

// Ino is the memfd's inode number; peers check it after fetching the fd.
func (s *Segment) Ino() uint64 { return s.ino }

// Close unmaps the segment and closes the memfd. Peers that mapped it keep
// their mapping until they unmap it.
func (s *Segment) Close() error {
	if s.mem == nil {
		return nil
	}
	err := unix.Munmap(s.mem)
	if cerr := unix.Close(s.fd); err == nil {
		err = cerr
	}
	s.mem = nil
	return err
}

// MapFD maps size bytes of the file fd shared and read-write, after checking
// that fd is the expected inode and is at least size bytes long. It closes
// fd in every case.
func MapFD(fd int, ino uint64, size int) ([]byte, error) {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat peer segment: %w", err)
	}
	if st.Ino != ino {
		return nil, fmt.Errorf("peer segment changed: inode %d, expected %d", st.Ino, ino)
	}
	if size <= 0 || st.Size < int64(size) {
		return nil, fmt.Errorf("peer segment is %d bytes, expected %d", st.Size, size)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map peer segment: %w", err)
	}
	return mem, nil
}

// Unmap releases a mapping returned by MapFD.
func Unmap(mem []byte) error {
	if len(mem) == 0 {
		return nil
	}
	return unix.Munmap(mem)
}
