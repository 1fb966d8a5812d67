package verbsio

import "golang.org/x/sys/unix"

// DMImpl is a provider's device memory allocation.
type DMImpl interface {
	// CopyTo copies src into the device memory at off.
	CopyTo(off int, src []byte) error
	// CopyFrom copies device memory at off into dst.
	CopyFrom(dst []byte, off int) error
	Len() int
	Free() error
}

// DMProvider is implemented by contexts with device memory.
type DMProvider interface {
	AllocDM(length int, logAlign uint) (DMImpl, error)
}

// DMRegistrar is implemented by PDs that register device memory. The
// region's MRImpl reports its length with a Len method.
type DMRegistrar interface {
	RegDMMR(dm DMImpl, off, length int, access Access) (MRImpl, error)
}

// DM is an allocation of device memory (struct ibv_dm): memory that lives
// on the device (for the built-in engine, a small engine-owned region)
// and is reached with CopyTo/CopyFrom at 4-byte aligned offsets, as
// ibv_memcpy_to_dm requires, or through a memory region registered on it.
type DM struct {
	ctx  *Context
	impl DMImpl
}

// AllocDM allocates length bytes of device memory aligned to 2^logAlign
// (ibv_alloc_dm). It fails with ENOMEM when the device's capacity
// (DeviceAttr.MaxDMSize) is exhausted and EOPNOTSUPP on devices without.
func (c *Context) AllocDM(length int, logAlign uint) (*DM, error) {
	p, ok := c.impl.(DMProvider)
	if !ok {
		return nil, &UnsupportedError{Feature: "device memory", Provider: c.Device.Provider, Reason: "the device has none"}
	}
	if length <= 0 {
		return nil, Errorf("alloc_dm", unix.EINVAL, "length %d", length)
	}
	impl, err := p.AllocDM(length, logAlign)
	if err != nil {
		return nil, err
	}
	return &DM{ctx: c, impl: impl}, nil
}

// Impl returns the provider's implementation.
func (d *DM) Impl() DMImpl { return d.impl }

// Len is the allocation's size in bytes.
func (d *DM) Len() int { return d.impl.Len() }

// CopyTo copies src into device memory at off (ibv_memcpy_to_dm). off and
// len(src) must be multiples of 4 (EINVAL otherwise) and fit the
// allocation.
func (d *DM) CopyTo(off int, src []byte) error { return d.impl.CopyTo(off, src) }

// CopyFrom copies device memory at off into dst (ibv_memcpy_from_dm), with
// CopyTo's rules.
func (d *DM) CopyFrom(dst []byte, off int) error { return d.impl.CopyFrom(dst, off) }

// Free releases the allocation; it fails with EBUSY while memory regions
// are registered on it.
func (d *DM) Free() error { return d.impl.Free() }

// RegDMMR registers length bytes of dm at off as a memory region
// (ibv_reg_dm_mr with IBV_ACCESS_ZERO_BASED): SGEs and remote addresses
// for it are offsets from 0, not virtual addresses.
func (pd *PD) RegDMMR(dm *DM, off, length int, access Access) (*MR, error) {
	r, ok := pd.impl.(DMRegistrar)
	if !ok {
		return nil, &UnsupportedError{Feature: "device memory regions", Provider: pd.ctx.Device.Provider}
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return nil, Errorf("reg_dm_mr", unix.EINVAL, "%s needs LOCAL_WRITE too", access)
	}
	impl, err := r.RegDMMR(dm.impl, off, length, access|AccessZeroBased)
	if err != nil {
		return nil, err
	}
	return &MR{pd: pd, impl: impl, access: access | AccessZeroBased, zeroBased: true}, nil
}
