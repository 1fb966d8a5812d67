package diag

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// DevNode is one node under /dev/infiniband.
type DevNode struct {
	Name     string      // "uverbs0", "rdma_cm", "umad0"
	Mode     fs.FileMode // type and permission bits, as os.Stat reports them
	UID, GID uint32      // owner
}

// DevDir is the listing of /dev/infiniband. Err wraps fs.ErrNotExist
// when the directory does not exist.
type DevDir struct {
	Nodes []DevNode
	Err   error
}

// Creds are the credentials a device node is opened with.
type Creds struct {
	UID  uint32   // effective user ID
	GIDs []uint32 // effective group ID and supplementary groups
}

// canReadWrite reports whether creds may open n for reading and writing,
// by the owner/group/other permission bits. UID 0 may always.
func (c Creds) canReadWrite(n DevNode) bool {
	if c.UID == 0 {
		return true
	}
	perm := n.Mode.Perm()
	var bits fs.FileMode
	switch {
	case c.UID == n.UID:
		bits = perm >> 6
	case slices.Contains(c.GIDs, n.GID):
		bits = perm >> 3
	default:
		bits = perm
	}
	return bits&6 == 6
}

func isCharDev(m fs.FileMode) bool {
	return m&fs.ModeDevice != 0 && m&fs.ModeCharDevice != 0
}

// DevInfiniband checks /dev/infiniband: that it exists, that each uverbs
// node sysfs names (uverbs, e.g. ["uverbs0"]) is there as a character
// device this user can open read-write, and that rdma_cm is usable (only
// rdma_cm connection setup needs it).
func DevInfiniband(dir DevDir, uverbs []string, creds Creds) []Finding {
	var out []Finding
	add := func(sev Severity, what, fix string) {
		out = append(out, Finding{Check: CheckDevInfiniband, Severity: sev, What: what, Fix: fix})
	}
	if dir.Err != nil {
		what := fmt.Sprintf("cannot list /dev/infiniband: %v", dir.Err)
		if errors.Is(dir.Err, fs.ErrNotExist) {
			what = "/dev/infiniband does not exist, so no kernel RDMA device can be opened"
		}
		add(Fail, what, `"modprobe ib_uverbs rdma_ucm" (in a container: pass --device=/dev/infiniband); the built-in engine needs neither`)
		return out
	}
	nodes := map[string]DevNode{}
	var found []string
	for _, n := range dir.Nodes {
		nodes[n.Name] = n
		if strings.HasPrefix(n.Name, "uverbs") {
			found = append(found, n.Name)
		}
	}
	want := uverbs
	if len(want) == 0 {
		want = found
	}
	if len(want) == 0 {
		add(Fail, "/dev/infiniband has no uverbs nodes", `"modprobe ib_uverbs" and check that an RDMA device exists ("rdma link show")`)
	}
	for _, name := range want {
		n, ok := nodes[name]
		switch {
		case !ok:
			add(Fail, fmt.Sprintf("/dev/infiniband/%s is missing although sysfs has it", name),
				fmt.Sprintf("check udev; in a container pass --device=/dev/infiniband/%s", name))
		case !isCharDev(n.Mode):
			add(Fail, fmt.Sprintf("/dev/infiniband/%s is not a character device (%s)", name, n.Mode),
				`remove it and let udev re-create it ("udevadm trigger --subsystem-match=infiniband_verbs")`)
		case !creds.canReadWrite(n):
			add(Fail, fmt.Sprintf("/dev/infiniband/%s is %s owned by %d:%d; uid %d cannot open it read-write", name, n.Mode, n.UID, n.GID, creds.UID),
				"install rdma-core's udev rules (they make uverbs nodes 0666), or add the user to the owning group")
		default:
			add(Pass, fmt.Sprintf("/dev/infiniband/%s is a %s character device this user can open", name, n.Mode.Perm()), "")
		}
	}
	switch n, ok := nodes["rdma_cm"]; {
	case !ok:
		add(Warn, "/dev/infiniband/rdma_cm is missing: rdma_cm connection setup (-R) is unavailable", `"modprobe rdma_ucm"`)
	case !isCharDev(n.Mode) || !creds.canReadWrite(n):
		add(Warn, fmt.Sprintf("/dev/infiniband/rdma_cm is %s owned by %d:%d; uid %d cannot use rdma_cm connection setup (-R)", n.Mode, n.UID, n.GID, creds.UID),
			"install rdma-core's udev rules, or add the user to the owning group")
	default:
		add(Pass, "/dev/infiniband/rdma_cm is usable", "")
	}
	return out
}
