package sysfs

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"
)

// NetClassPath is the class directory of network interfaces.
const NetClassPath = "class/net"

// NetDev is one network interface under /sys/class/net. As for devices,
// nil means missing or unreadable; Errs says which.
type NetDev struct {
	Name      string  // "eth0"
	MTU       *int    // mtu, bytes
	OperState *string // operstate: "up", "down", "unknown", ...
	Carrier   *bool   // carrier; unreadable (EINVAL) while the interface is down
	Address   *string // address: the link-layer address
	IfIndex   *int    // ifindex
	Type      *int    // type: ARPHRD_* (1 Ethernet, 32 InfiniBand, 772 loopback)
	// SpeedMbps is speed in Mb/s; nil when unreadable or when the driver
	// reports it unknown (-1, as virtio_net does).
	SpeedMbps *int
	Errs      []error // *FileError for files that exist but failed
}

// NetClass reads every interface under /sys/class/net, in name order.
// The error is only for the class directory itself.
func (f FS) NetClass() ([]NetDev, error) {
	names, err := f.list(NetClassPath)
	if err != nil {
		return nil, &FileError{Op: "list", Path: NetClassPath, Err: err}
	}
	out := make([]NetDev, 0, len(names))
	for _, name := range names {
		out = append(out, f.netDev(name))
	}
	return out, nil
}

// NetDev reads one interface by name.
func (f FS) NetDev(name string) (NetDev, error) {
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return NetDev{}, &FileError{Op: "read", Path: path.Join(NetClassPath, name), Err: errInvalidName}
	}
	if ok, err := f.isDir(path.Join(NetClassPath, name)); err != nil || !ok {
		if err == nil {
			err = errNotADevice
		}
		return NetDev{}, &FileError{Op: "read", Path: path.Join(NetClassPath, name), Err: err}
	}
	return f.netDev(name), nil
}

func (f FS) netDev(name string) NetDev {
	c := &collector{fs: f, dir: path.Join(NetClassPath, name)}
	n := NetDev{Name: name}
	n.MTU = optional(c, "mtu", parseInt)
	n.OperState = optional(c, "operstate", parseString)
	n.Carrier = whileUp(c, "carrier", parseBool01)
	n.Address = optional(c, "address", parseString)
	n.IfIndex = optional(c, "ifindex", parseInt)
	n.Type = optional(c, "type", parseInt)
	if s := whileUp(c, "speed", parseInt); s != nil && *s >= 0 {
		n.SpeedMbps = s
	}
	n.Errs = c.errs
	return n
}

// whileUp reads an attribute the kernel only answers while the interface
// is up (carrier, speed): EINVAL or an empty value means "not known now",
// not a failure.
func whileUp[T any](c *collector, rel string, parse func(string) (T, error)) *T {
	v, err := c.fs.readRaw(c.path(rel))
	switch {
	case err == nil && strings.TrimSpace(v) == "":
		return nil
	case err == nil:
		t, err := parse(v)
		if err != nil {
			c.fail("parse", rel, err)
			return nil
		}
		return &t
	case isNotExist(err), errors.Is(err, syscall.EINVAL):
		return nil
	default:
		c.fail("read", rel, err)
		return nil
	}
}

func parseBool01(s string) (bool, error) {
	switch strings.TrimSpace(s) {
	case "1":
		return true, nil
	case "0":
		return false, nil
	}
	return false, fmt.Errorf("parse %q: want 0 or 1", s)
}

var (
	errInvalidName = errors.New("invalid name")
	errNotADevice  = errors.New("not a directory")
)
