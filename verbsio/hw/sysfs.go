package hw

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

// sysfsRoot plays the role of /sys. Tests point it at a fixture tree.
var sysfsRoot fs.FS = os.DirFS("/sys")

const ibClass = "class/infiniband"

// sysfsDevices lists the kernel RDMA devices under class/infiniband of
// fsys, best effort: a device whose attributes cannot be read is listed
// with what could be read. A missing class directory (no RDMA core in the
// kernel, or no devices) gives an empty list and no error.
func sysfsDevices(fsys fs.FS) ([]verbsio.DeviceInfo, error) {
	ents, err := fs.ReadDir(fsys, ibClass)
	if errors.Is(err, fs.ErrNotExist) {
		return []verbsio.DeviceInfo{}, nil
	}
	if err != nil {
		return []verbsio.DeviceInfo{}, verbsio.Errorf("get_device_list", errnoOf(err, 5 /* EIO */), "read /sys/%s: %v", ibClass, err)
	}
	out := make([]verbsio.DeviceInfo, 0, len(ents))
	for _, e := range ents {
		// Entries are symlinks on real sysfs and directories in fixtures;
		// take every name.
		name := e.Name()
		info := verbsio.DeviceInfo{Name: name, Provider: ProviderName}
		if s, err := readAttr(fsys, name, "node_guid"); err == nil {
			if g, err := sysfs.ParseGUID(s); err == nil {
				info.NodeGUID = uint64(g)
			}
		}
		if s, err := readAttr(fsys, name, "node_type"); err == nil {
			if t, err := sysfs.ParseNodeType(s); err == nil {
				_, info.Transport = t.Transport()
			}
		}
		info.Ports = len(sysfsPortNumbers(fsys, name))
		info.Netdev = sysfsNetdev(fsys, name)
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// sysfsPortNumbers returns the names of the ports/N entries of device dev.
func sysfsPortNumbers(fsys fs.FS, dev string) []string {
	ents, err := fs.ReadDir(fsys, path.Join(ibClass, dev, "ports"))
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// sysfsNetdev returns the network device of dev: its parent (rxe, siw),
// else the first netdev of its PCI function, else "".
func sysfsNetdev(fsys fs.FS, dev string) string {
	if s, err := readAttr(fsys, dev, "parent"); err == nil && s != "" {
		return s
	}
	ents, err := fs.ReadDir(fsys, path.Join(ibClass, dev, "device", "net"))
	if err == nil && len(ents) > 0 {
		return ents[0].Name()
	}
	return ""
}

// sysfsPortNetdev returns the netdev of GID index 0 of a port
// (gid_attrs/ndevs/0), falling back to the device's netdev.
func sysfsPortNetdev(fsys fs.FS, dev string, port int) string {
	if s := sysfsGIDNetdev(fsys, dev, port, 0); s != "" {
		return s
	}
	return sysfsNetdev(fsys, dev)
}

// readAttr reads one attribute file of dev, trimmed, with a single bounded
// read (sysfs attributes are at most a page).
func readAttr(fsys fs.FS, dev, name string) (string, error) {
	f, err := fsys.Open(path.Join(ibClass, dev, name))
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, sysfs.MaxFileSize)
	n, err := f.Read(buf)
	if n == 0 && err != nil {
		return "", err
	}
	return strings.TrimSpace(string(buf[:n])), nil
}
