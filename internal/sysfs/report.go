package sysfs

import "errors"

// Report is everything this package reads from one sysfs tree. Building
// it never fails as a whole: a class that cannot be listed leaves its
// slice empty and adds a *FileError to Errs, and a device or netdev that
// cannot be read carries its own Errs.
type Report struct {
	Devices []Device // /sys/class/infiniband/*
	UVerbs  []UVerbs // /sys/class/infiniband_verbs/uverbs*
	// ABIVersion is /sys/class/infiniband_verbs/abi_version; nil when
	// ib_uverbs is not loaded.
	ABIVersion *int
	NetDevs    []NetDev // /sys/class/net/*
	// Errs holds class-level failures, each a *FileError. A missing
	// class/infiniband (no RDMA devices, or no RDMA core loaded) is
	// reported here too, as an error wrapping fs.ErrNotExist, because
	// callers must be able to tell "no devices" from "empty list".
	Errs []error
}

// Report reads the InfiniBand, InfiniBand verbs and network classes.
func (f FS) Report() Report {
	var r Report
	var err error
	if r.Devices, err = f.InfiniBandClass(); err != nil {
		r.Errs = append(r.Errs, err)
	}
	if r.UVerbs, err = f.UVerbsClass(); err != nil && !isNotExist(err) {
		r.Errs = append(r.Errs, err)
	}
	if v, err := f.ABIVersion(); err == nil {
		r.ABIVersion = &v
	} else if !isNotExist(err) {
		r.Errs = append(r.Errs, err)
	}
	if r.NetDevs, err = f.NetClass(); err != nil {
		r.Errs = append(r.Errs, err)
	}
	return r
}

// NetDev returns the report's netdev with the given name, or nil.
func (r Report) NetDev(name string) *NetDev {
	for i := range r.NetDevs {
		if r.NetDevs[i].Name == name {
			return &r.NetDevs[i]
		}
	}
	return nil
}

// NoInfiniBandClass reports whether /sys/class/infiniband is missing,
// which means the RDMA core is not loaded (no device was ever created).
// An existing but empty class has no devices either; check len(Devices).
func (r Report) NoInfiniBandClass() bool {
	for _, err := range r.Errs {
		var fe *FileError
		if errors.As(err, &fe) && fe.Path == InfiniBandClassPath && isNotExist(err) {
			return true
		}
	}
	return false
}

// PortNetDev returns the name of the netdev behind an Ethernet port:
// the device's parent (rxe, siw), else the netdev of its GIDs, else the
// single netdev of its PCI function. Empty when none is known.
func PortNetDev(d Device, p Port) string {
	if d.Parent != nil && *d.Parent != "" {
		return *d.Parent
	}
	// The netdev of the lowest GID: the kernel fills the table from the
	// port's own netdev first, then its upper devices (VLANs, bonds).
	for _, g := range p.GIDs {
		if g.NetDev != "" {
			return g.NetDev
		}
	}
	if len(d.NetDevs) == 1 {
		return d.NetDevs[0]
	}
	return ""
}
