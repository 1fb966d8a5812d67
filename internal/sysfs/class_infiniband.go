package sysfs

import (
	"errors"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// InfiniBandClassPath is the class directory of RDMA devices.
const InfiniBandClassPath = "class/infiniband"

// Device is one RDMA device under /sys/class/infiniband. Every optional
// attribute is a pointer: nil means the file is missing or could not be
// read (the reason is in Errs), never zero.
//
// sysfs does not have the limits ibv_query_device reports (max_qp,
// max_cqe, max_mr_size, device_cap_flags, vendor_id, ...), nor a port's
// max_mtu and active_mtu; see the package documentation.
type Device struct {
	Name         string    // the class entry's name, e.g. "rxe0"
	NodeType     *NodeType // node_type ("1: CA")
	NodeGUID     *GUID     // node_guid
	SysImageGUID *GUID     // sys_image_guid
	FWVer        *string   // fw_ver; "" for drivers without firmware (rxe, siw)
	HCAType      *string   // hca_type
	BoardID      *string   // board_id
	NodeDesc     *string   // node_desc
	Parent       *string   // parent: the netdev of a software device (rxe, siw)
	NetDevs      []string  // device/net/*: netdevs of the device's PCI function
	UVerbs       *UVerbs   // the infiniband_verbs/uverbsN whose ibdev names this device
	Ports        []Port    // ports/N, by port number
	// Errs lists the files that exist but could not be read or parsed,
	// each a *FileError. A device whose directory cannot be read at all
	// has only a Name and Errs.
	Errs []error
}

// Port is one port of a Device, from ports/N.
type Port struct {
	Number       int        // N
	State        *PortState // state ("4: ACTIVE")
	PhysState    *PhysState // phys_state ("5: LinkUp")
	Rate         *Rate      // rate ("2.5 Gb/sec (1X SDR)")
	LinkLayer    *string    // link_layer: "InfiniBand" or "Ethernet"
	LID          *uint32    // lid ("0x7")
	SMLID        *uint32    // sm_lid
	SMSL         *uint8     // sm_sl
	LMC          *uint8     // lid_mask_count
	CapMask      *uint32    // cap_mask: ibv_devinfo's port_cap_flags
	GIDs         []GID      // gids/N that are not all zero, by index
	GIDTableLen  int        // number of gids/N entries, zero or not: ibv_devinfo's gid_tbl_len
	PKeyTableLen int        // number of pkeys/N entries: ibv_devinfo's pkey_tbl_len
	// Counters and HWCounters hold counters/* and hw_counters/* by file
	// name, whatever the driver provides. A counter that reads "N/A ..."
	// is left out. Nil when the directory does not exist.
	Counters   map[string]uint64
	HWCounters map[string]uint64
	Errs       []error // *FileError for files that exist but failed
}

// InfiniBandClass reads every device under /sys/class/infiniband, in name
// order. The error is only for the class directory itself; it wraps
// fs.ErrNotExist when the kernel has no RDMA devices (or the RDMA core is
// not loaded). A device that cannot be read is still returned, with its
// problems in Device.Errs.
func (f FS) InfiniBandClass() ([]Device, error) {
	names, err := f.list(InfiniBandClassPath)
	if err != nil {
		return nil, &FileError{Op: "list", Path: InfiniBandClassPath, Err: err}
	}
	uv, _ := f.UVerbsClass() // a missing infiniband_verbs class leaves UVerbs nil
	devs := make([]Device, 0, len(names))
	for _, name := range names {
		d := f.device(name)
		d.UVerbs = uverbsFor(uv, name)
		devs = append(devs, d)
	}
	return devs, nil
}

// uverbsFor returns the uverbs device whose ibdev is name, or nil.
func uverbsFor(uv []UVerbs, name string) *UVerbs {
	for i := range uv {
		if uv[i].IBDev != nil && *uv[i].IBDev == name {
			u := uv[i]
			return &u
		}
	}
	return nil
}

// Device reads one device by name. It returns an error wrapping
// fs.ErrNotExist if there is no such class entry; other problems are in
// Device.Errs.
func (f FS) Device(name string) (Device, error) {
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return Device{}, &FileError{Op: "read", Path: path.Join(InfiniBandClassPath, name), Err: errInvalidName}
	}
	if _, err := fs.Lstat(f.fsys, path.Join(InfiniBandClassPath, name)); errors.Is(err, fs.ErrNotExist) {
		return Device{}, &FileError{Op: "read", Path: path.Join(InfiniBandClassPath, name), Err: cause(err)}
	}
	d := f.device(name)
	uv, _ := f.UVerbsClass()
	d.UVerbs = uverbsFor(uv, name)
	return d, nil
}

func (f FS) device(name string) Device {
	dir := path.Join(InfiniBandClassPath, name)
	d := Device{Name: name}
	isDir, err := f.isDir(dir)
	if err == nil && !isDir {
		err = syscall.ENOTDIR
	}
	if err != nil {
		d.Errs = append(d.Errs, &FileError{Op: "read", Path: dir, Err: err})
		return d
	}
	c := &collector{fs: f, dir: dir}
	d.NodeType = optional(c, "node_type", ParseNodeType)
	d.NodeGUID = optional(c, "node_guid", ParseGUID)
	d.SysImageGUID = optional(c, "sys_image_guid", ParseGUID)
	d.FWVer = optional(c, "fw_ver", parseString)
	d.HCAType = optional(c, "hca_type", parseString)
	d.BoardID = optional(c, "board_id", parseString)
	d.NodeDesc = optional(c, "node_desc", parseString)
	d.Parent = optional(c, "parent", parseString)
	if nets, err := f.list(c.path("device/net")); err == nil {
		d.NetDevs = nets
	} else if !errors.Is(err, fs.ErrNotExist) {
		c.fail("list", "device/net", err)
	}

	ports, err := f.list(c.path("ports"))
	if err != nil {
		// Every RDMA device has ports/; its absence is worth reporting.
		c.fail("list", "ports", err)
	}
	nums, _ := numericNames(ports)
	for _, n := range nums {
		d.Ports = append(d.Ports, f.port(dir, n))
	}
	d.Errs = c.errs
	return d
}

func (f FS) port(devDir string, num int) Port {
	c := &collector{fs: f, dir: path.Join(devDir, "ports", strconv.Itoa(num))}
	p := Port{Number: num}
	p.State = optional(c, "state", ParsePortState)
	p.PhysState = optional(c, "phys_state", ParsePhysState)
	p.Rate = optional(c, "rate", ParseRate)
	p.LinkLayer = optional(c, "link_layer", parseString)
	p.LID = optional(c, "lid", parseUint32)
	p.SMLID = optional(c, "sm_lid", parseUint32)
	p.SMSL = optional(c, "sm_sl", parseUint8)
	p.LMC = optional(c, "lid_mask_count", parseUint8)
	p.CapMask = optional(c, "cap_mask", parseUint32)
	linkLayer := ""
	if p.LinkLayer != nil {
		linkLayer = *p.LinkLayer
	}
	p.GIDs, p.GIDTableLen = f.gids(c, linkLayer)
	if keys, err := f.list(c.path("pkeys")); err == nil {
		nums, _ := numericNames(keys)
		p.PKeyTableLen = len(nums)
	} else if !errors.Is(err, fs.ErrNotExist) {
		c.fail("list", "pkeys", err)
	}
	p.Counters = f.counters(c, "counters")
	p.HWCounters = f.counters(c, "hw_counters")
	p.Errs = c.errs
	return p
}

// gids reads the non-zero GIDs of a port and the size of its table. The
// type and netdev of a GID are read only for non-zero entries: the
// kernel fails those reads for empty entries.
func (f FS) gids(c *collector, linkLayer string) ([]GID, int) {
	names, err := f.list(c.path("gids"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.fail("list", "gids", err)
		}
		return nil, 0
	}
	nums, _ := numericNames(names)
	var out []GID
	for _, n := range nums {
		idx := strconv.Itoa(n)
		raw := optional(c, "gids/"+idx, ParseGID)
		if raw == nil || *raw == [16]byte{} {
			continue
		}
		g := GID{Index: n, Raw: *raw}
		if t, ok := c.read("gid_attrs/types/" + idx); ok {
			gt, err := ParseGIDType(t, linkLayer)
			if err != nil {
				c.fail("parse", "gid_attrs/types/"+idx, err)
			}
			g.Type = gt
		}
		// The kernel answers EINVAL for a GID without a netdev (every
		// GID of an InfiniBand port): that is "no netdev", not a failure.
		ndev, err := f.readRaw(c.path("gid_attrs/ndevs/" + idx))
		switch {
		case err == nil:
			g.NetDev = strings.TrimSpace(ndev)
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EINVAL):
		default:
			c.fail("read", "gid_attrs/ndevs/"+idx, err)
		}
		out = append(out, g)
	}
	return out, len(nums)
}

// counters reads every file of dir as a counter.
func (f FS) counters(c *collector, dir string) map[string]uint64 {
	names, err := f.list(c.path(dir))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.fail("list", dir, err)
		}
		return nil
	}
	m := make(map[string]uint64, len(names))
	for _, name := range names {
		rel := dir + "/" + name
		if isDir, err := f.isDir(c.path(rel)); err == nil && isDir {
			continue // a driver's sub-group, not a counter
		}
		v, ok := c.read(rel)
		if !ok {
			continue
		}
		n, err := parseCounter(v)
		if errors.Is(err, errNA) {
			continue
		}
		if err != nil {
			c.fail("parse", rel, err)
			continue
		}
		m[name] = n
	}
	return m
}
