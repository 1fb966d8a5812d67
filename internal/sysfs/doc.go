// Package sysfs reads what Linux exposes about RDMA devices and their
// network interfaces under /sys/class/infiniband, /sys/class/infiniband_verbs
// and /sys/class/net, without libibverbs.
//
// An FS is rooted at a directory laid out like /sys: the real mount point,
// a committed fixture tree (testdata/sys/<machine>), or any fs.FS. Class
// entries are symlinks on real sysfs and plain directories in fixtures;
// names are listed without looking at the entry type, and links are
// followed.
//
// # Degrading, not failing
//
// Every attribute a driver may lack is a pointer, and a missing file
// leaves it nil. A file that exists but cannot be read or parsed also
// leaves it nil and adds a *FileError to the Errs of the device, port or
// netdev it belongs to. One broken device never hides the others, and
// Report never fails as a whole. Reads are single read(2) calls of at
// most MaxFileSize bytes: some drivers answer repeated reads with EAGAIN
// forever, and attributes are at most a page.
//
// # What sysfs does not have
//
// The device limits ibv_query_device returns (max_qp, max_qp_wr, max_cq,
// max_cqe, max_mr, max_mr_size, max_pd, max_sge, max_srq, atomic_cap,
// device_cap_flags, vendor_id, vendor_part_id, hw_ver, page_size_cap,
// ...) and a port's max_mtu, active_mtu, max_msg_sz, max_vl_num and
// port_cap_flags2 from ibv_query_port are not in sysfs. This package has
// no fields for them, so "unknown from sysfs" is never mistaken for zero;
// they belong to a verbs query. Some can be derived (verbs.go): the verbs
// transport of a node type, the verbs width and speed codes of a rate,
// a RoCE port's active MTU from its netdev's MTU (RoCEMTU), and rxe's max
// MTU, which is a driver constant (SoftRoCEMaxMTU). BestGID reproduces
// perftest's choice of GID index.
//
// This package returns typed values only; rdiag's internal/diag/devinfo
// prints them as ibv_devinfo does.
package sysfs
