package sysfs

import (
	"path"
	"strings"
)

// InfiniBandVerbsClassPath is the class directory of the uverbs character
// devices (/dev/infiniband/uverbsN) through which user space opens RDMA
// devices.
const InfiniBandVerbsClassPath = "class/infiniband_verbs"

// UVerbs is one /sys/class/infiniband_verbs/uverbsN entry. Its existence
// is what separates "the kernel has an RDMA device" from "user space can
// open it through /dev/infiniband/uverbsN".
type UVerbs struct {
	Name       string  // "uverbs0": the node name under /dev/infiniband
	IBDev      *string // ibdev: the RDMA device it opens
	ABIVersion *int    // abi_version: the driver's uverbs ABI
	Dev        *string // dev: "major:minor" of the character device
	Errs       []error // *FileError for files that exist but failed
}

// UVerbsClass reads the uverbsN entries of /sys/class/infiniband_verbs,
// in name order. Entries are recognised by name ("uverbs" prefix), not by
// file type, because on real sysfs they are symlinks.
func (f FS) UVerbsClass() ([]UVerbs, error) {
	names, err := f.list(InfiniBandVerbsClassPath)
	if err != nil {
		return nil, &FileError{Op: "list", Path: InfiniBandVerbsClassPath, Err: err}
	}
	var out []UVerbs
	for _, name := range names {
		if !strings.HasPrefix(name, "uverbs") {
			continue
		}
		c := &collector{fs: f, dir: path.Join(InfiniBandVerbsClassPath, name)}
		u := UVerbs{Name: name}
		u.IBDev = optional(c, "ibdev", parseString)
		u.ABIVersion = optional(c, "abi_version", parseInt)
		u.Dev = optional(c, "dev", parseString)
		u.Errs = c.errs
		out = append(out, u)
	}
	return out, nil
}

// ABIVersion reads /sys/class/infiniband_verbs/abi_version, the uverbs
// core ABI version (6 on every kernel since 2.6). The error wraps
// fs.ErrNotExist when ib_uverbs is not loaded.
func (f FS) ABIVersion() (int, error) {
	c := &collector{fs: f, dir: InfiniBandVerbsClassPath}
	v, err := f.readRaw(c.path("abi_version"))
	if err != nil {
		return 0, &FileError{Op: "read", Path: c.path("abi_version"), Err: err}
	}
	n, err := parseInt(v)
	if err != nil {
		return 0, &FileError{Op: "parse", Path: c.path("abi_version"), Err: err}
	}
	return n, nil
}
