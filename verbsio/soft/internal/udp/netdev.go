package udp

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
)

// Netdev is a network device with IP addresses: one udp-fabric device.
type Netdev struct {
	Name     string
	Index    int
	MTU      int
	Up       bool
	Loopback bool
	HW       net.HardwareAddr
	// Addrs are the device's addresses in GID table order: IPv6
	// link-local first (as Linux rxe lists its default GID), then IPv4,
	// then other IPv6.
	Addrs []netip.Addr
}

func addrRank(a netip.Addr) int {
	switch {
	case a.Is6() && a.IsLinkLocalUnicast():
		return 0
	case a.Is4():
		return 1
	}
	return 2
}

func netdevOf(ifc net.Interface) (Netdev, error) {
	d := Netdev{Name: ifc.Name, Index: ifc.Index, MTU: ifc.MTU, Up: ifc.Flags&net.FlagUp != 0,
		Loopback: ifc.Flags&net.FlagLoopback != 0, HW: ifc.HardwareAddr}
	addrs, err := ifc.Addrs()
	if err != nil {
		return d, fmt.Errorf("addresses of %s: %w", ifc.Name, err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		d.Addrs = append(d.Addrs, ip.Unmap())
	}
	sort.SliceStable(d.Addrs, func(i, j int) bool { return addrRank(d.Addrs[i]) < addrRank(d.Addrs[j]) })
	return d, nil
}

// Netdevs lists the devices of the calling thread's network namespace that
// have at least one IP address.
func Netdevs() ([]Netdev, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list network devices: %w", err)
	}
	var out []Netdev
	for _, ifc := range ifs {
		d, err := netdevOf(ifc)
		if err != nil || len(d.Addrs) == 0 {
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

// NetdevByName returns one device.
func NetdevByName(name string) (Netdev, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return Netdev{}, fmt.Errorf("network device %s: %w", name, err)
	}
	return netdevOf(*ifc)
}
