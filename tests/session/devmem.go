package session

import (
	"fmt"

	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/verbsio"
)

// Send-path support: message buffers in device memory (the dm path) and
// the probe state that path-specific completion pollers share with the
// Waiter.

// allocBuffers allocates total bytes of message buffers and registers
// them with access: host memory from the context (Dev.Alloc), or on the
// dm path device memory (AllocDM, RegDMMR), whose region is zero-based: SGE and remote addresses are offsets, which MR.Addr (0)
// and MR.SGE already account for, so the key exchange carries offsets.
func (s *Session) allocBuffers(total int, access verbsio.Access) error {
	name := s.Dev.Device.Name
	if s.Spec.Path != sendpath.DM {
		var err error
		if s.Buf, err = s.Dev.Alloc(total); err != nil {
			return fmt.Errorf("allocate %d bytes of message buffers on %s: %w", total, name, err)
		}
		if s.MR, err = s.PD.RegMR(s.Buf, access); err != nil {
			return fmt.Errorf("register %d bytes on %s: %w", total, name, err)
		}
		return nil
	}
	if have := s.DevAttr.MaxDMSize; uint64(total) > have {
		return fmt.Errorf("the message buffers need %d bytes of device memory, more than %s's %d (max_dm_size): use a smaller message size or fewer QPs", total, name, have)
	}
	dm, err := s.Dev.AllocDM(total, 12)
	if err != nil {
		return fmt.Errorf("allocate %d bytes of device memory on %s: %w", total, name, err)
	}
	if s.MR, err = s.PD.RegDMMR(dm, 0, total, access); err != nil {
		dm.Free()
		return fmt.Errorf("register %d bytes of device memory on %s: %w", total, name, err)
	}
	s.DM = dm
	return nil
}

// freeBuffers releases what allocBuffers allocated, after the MR.
func (s *Session) freeBuffers() error {
	var err error
	switch {
	case s.DM != nil:
		err = s.DM.Free()
	case s.Buf != nil:
		err = s.Dev.Free(s.Buf)
	}
	s.DM, s.Buf = nil, nil
	return err
}

// StoreByte writes b at offset off of the message buffers: a plain store
// to host memory, or for device memory a copy of the aligned 4-byte word
// that holds it (device memory is written in words; the other three bytes
// become 0). It never allocates.
func (s *Session) StoreByte(off int, b byte) error {
	if s.DM == nil {
		s.Buf[off] = b
		return nil
	}
	w := s.dmWord[:]
	clear(w)
	w[off&3] = b
	return s.DM.CopyTo(off&^3, w)
}

// PeekByte reads the byte at offset off of the message buffers, for
// spinning on memory the peer writes: an atomic load from host memory
// (LoadByte), or a copy of the aligned 4-byte word from device memory.
// It never allocates.
func (s *Session) PeekByte(off int) (byte, error) {
	if s.DM == nil {
		return LoadByte(s.Buf, off), nil
	}
	w := s.dmWord[:]
	if err := s.DM.CopyFrom(w, off&^3); err != nil {
		return 0, err
	}
	return w[off&3], nil
}

// Probing reports whether a liveness probe (a zero-length RDMA WRITE with
// ID ProbeID) is outstanding on the send CQ.
func (s *Session) Probing() bool { return s.probing }

// ProbeCompleted records that a loop took the probe's completion from the
// send CQ itself (a path-specific poller, Completions).
func (s *Session) ProbeCompleted() { s.probing = false }
