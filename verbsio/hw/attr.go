package hw

import (
	"io/fs"
	"path"
	"strconv"

	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

// qpTypesFromMask lists the QP types whose bit (1 << IBV_QPT_x) is set in a
// supported_qpts mask of ibv_device_attr_ex, in QP type order.
func qpTypesFromMask(m uint32) []verbsio.QPType {
	var out []verbsio.QPType
	for _, t := range []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD, verbsio.QPTypeRawPacket} {
		if m&(1<<t) != 0 {
			out = append(out, t)
		}
	}
	return out
}

// gidTypeFromSysfs maps a sysfs GID type to verbsio's (unknown reads as IB).
func gidTypeFromSysfs(t sysfs.GIDType) verbsio.GIDType {
	switch t {
	case sysfs.GIDTypeRoCEv1:
		return verbsio.GIDTypeRoCEv1
	case sysfs.GIDTypeRoCEv2:
		return verbsio.GIDTypeRoCEv2
	}
	return verbsio.GIDTypeIB
}

// sysfsGIDType reads ports/PORT/gid_attrs/types/INDEX of dev; linkLayer
// tells "IB/RoCE v1" apart.
func sysfsGIDType(fsys fs.FS, dev string, port, index int, linkLayer string) sysfs.GIDType {
	s, err := readAttr(fsys, dev, path.Join("ports", strconv.Itoa(port), "gid_attrs", "types", strconv.Itoa(index)))
	if err != nil {
		return sysfs.GIDTypeUnknown
	}
	t, _ := sysfs.ParseGIDType(s, linkLayer)
	return t
}

// sysfsGIDNetdev reads ports/PORT/gid_attrs/ndevs/INDEX of dev.
func sysfsGIDNetdev(fsys fs.FS, dev string, port, index int) string {
	s, _ := readAttr(fsys, dev, path.Join("ports", strconv.Itoa(port), "gid_attrs", "ndevs", strconv.Itoa(index)))
	return s
}
