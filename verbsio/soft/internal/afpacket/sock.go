package afpacket

import (
	"errors"
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoCapNetRaw is wrapped by the error of opening a packet socket
// without the CAP_NET_RAW capability.
var ErrNoCapNetRaw = errors.New("packet sockets need the CAP_NET_RAW capability: run as root, or grant it with setcap cap_net_raw+ep on the binary")

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// socket opens a packet socket that receives nothing until bound.
func socket(ifname string) (fd, ifindex int, err error) {
	fd, ifc, err := socketMTU(ifname)
	return fd, ifc.Index, err
}

// socketMTU is socket, also returning the interface (with its MTU).
func socketMTU(ifname string) (fd int, ifc *net.Interface, err error) {
	ifc, err = net.InterfaceByName(ifname)
	if err != nil {
		return -1, &net.Interface{}, fmt.Errorf("afpacket: %w", err)
	}
	fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return -1, ifc, fmt.Errorf("afpacket: open a packet socket on %s: %w", ifname, ErrNoCapNetRaw)
		}
		return -1, ifc, fmt.Errorf("afpacket: open a packet socket on %s: %w", ifname, err)
	}
	return fd, ifc, nil
}

// bind attaches fd to the device; proto ETH_P_ALL receives every frame,
// 0 none (a send-only socket).
func bind(fd, ifindex int, proto uint16) error {
	sa := unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: ifindex}
	if err := unix.Bind(fd, &sa); err != nil {
		return fmt.Errorf("afpacket: bind to interface %d: %w", ifindex, err)
	}
	return nil
}

func setInt(fd, opt, v int, what string) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, opt, v); err != nil {
		return fmt.Errorf("afpacket: %s: %w", what, err)
	}
	return nil
}

// Offload names a device's transmit offloads (ethtool's legacy values).
type Offload uint32

// Offloads that Features reads and SetFeature sets.
const (
	OffloadTxCsum Offload = 0x16 // ETHTOOL_GTXCSUM: the device computes checksums
	OffloadTSO    Offload = 0x1e // ETHTOOL_GTSO: the device segments TCP
	OffloadSG     Offload = 0x18 // ETHTOOL_GSG: scatter-gather
)

type ethtoolValue struct{ cmd, data uint32 }

type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer // a pointer the stack copier sees, not a uintptr
	_    [16]byte
}

func ethtool(ifname string, cmd, val uint32) (uint32, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	v := ethtoolValue{cmd: cmd, data: val}
	var r ifreqData
	copy(r.name[:], ifname)
	r.data = unsafe.Pointer(&v)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&r))); e != 0 {
		return 0, e
	}
	return v.data, nil
}

// Feature reports whether an offload is on for the device (the calling
// thread's network namespace).
func Feature(ifname string, o Offload) (bool, error) {
	v, err := ethtool(ifname, uint32(o), 0)
	if err != nil {
		return false, fmt.Errorf("afpacket: ethtool %s %#x: %w", ifname, uint32(o), err)
	}
	return v != 0, nil
}

// SetFeature turns an offload on or off (CAP_NET_ADMIN). Turning off
// checksum offload turns off TSO with it, as the kernel ties them.
func SetFeature(ifname string, o Offload, on bool) error {
	v := uint32(0)
	if on {
		v = 1
	}
	if _, err := ethtool(ifname, uint32(o)+1, v); err != nil {
		return fmt.Errorf("afpacket: ethtool set %s %#x=%d: %w", ifname, uint32(o)+1, v, err)
	}
	return nil
}

// ethtoolDrvinfo is struct ethtool_drvinfo (ETHTOOL_GDRVINFO).
type ethtoolDrvinfo struct {
	cmd                                                    uint32
	driver, version, fwVersion, busInfo, eromVersion       [32]byte
	_                                                      [12]byte
	nPrivFlags, nStats, testinfoLen, eedumpLen, regdumpLen uint32
}

// Driver returns the name of the device's driver ("veth", "bridge",
// "virtio_net", "mlx5_core", ...), in the calling thread's network
// namespace.
func Driver(ifname string) (string, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	info := ethtoolDrvinfo{cmd: 0x3} // ETHTOOL_GDRVINFO
	var r ifreqData
	copy(r.name[:], ifname)
	r.data = unsafe.Pointer(&info)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&r))); e != 0 {
		return "", fmt.Errorf("afpacket: ethtool driver info of %s: %w", ifname, e)
	}
	return unix.ByteSliceToString(info.driver[:]), nil
}
