package diag

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/rperf/rperf/internal/diag/devinfo"
	"github.com/rperf/rperf/internal/sysfs"
)

// PortKey names one port of one RDMA device.
type PortKey struct {
	Device string
	Port   int
}

// String returns "device/port", e.g. "rxe0/1".
func (k PortKey) String() string { return fmt.Sprintf("%s/%d", k.Device, k.Port) }

// PortAttr is what a verbs query (ibv_query_port) adds to sysfs for a
// port. A zero MTU means "not known": sysfs has no MTU, and without a
// verbs provider nobody could ask.
type PortAttr struct {
	ActiveMTU sysfs.MTU
	MaxMTU    sysfs.MTU
}

// RDMADevices reports which RDMA devices sysfs shows, whether each has a
// uverbs character device (without one, user space cannot open it), and
// sysfs files that could not be read.
func RDMADevices(r sysfs.Report) []Finding {
	var out []Finding
	add := func(sev Severity, what, fix string) {
		out = append(out, Finding{Check: CheckRDMADevices, Severity: sev, What: what, Fix: fix})
	}
	for _, err := range r.Errs {
		var fe *sysfs.FileError
		if errors.As(err, &fe) && fe.Path == sysfs.InfiniBandClassPath && errors.Is(err, fs.ErrNotExist) {
			continue // reported below as "no devices"
		}
		add(Warn, fmt.Sprintf("sysfs: %v", err), "values from this class are unknown; check dmesg for errors")
	}
	if len(r.Devices) == 0 {
		what := "no RDMA devices in /sys/class/infiniband"
		if r.NoInfiniBandClass() {
			what = "no /sys/class/infiniband: no RDMA driver is loaded and no RDMA device exists"
		}
		add(Fail, what, `for Soft-RoCE: "modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <netdev>"; or run with the built-in engine`)
		return out
	}
	for _, d := range r.Devices {
		if d.NodeType == nil && len(d.Ports) == 0 && len(d.Errs) > 0 {
			add(Warn, fmt.Sprintf("%s: unreadable: %v", d.Name, d.Errs[0]), "ignore this entry, or check dmesg for the driver's errors")
			continue
		}
		if n := countErrs(d); n > 0 {
			add(Warn, fmt.Sprintf("%s: %d sysfs file(s) could not be read; those values are unknown (first: %v)", d.Name, n, firstErr(d)), "check dmesg for the driver's errors")
		}
		if d.UVerbs == nil {
			add(Fail, fmt.Sprintf("%s: no uverbs character device in /sys/class/infiniband_verbs, so user space cannot open it", d.Name), `load the verbs module: "modprobe ib_uverbs"`)
			continue
		}
		add(Pass, fmt.Sprintf("%s: %s, %d port(s), user space opens it as /dev/infiniband/%s", d.Name, nodeTypeText(d), len(d.Ports), d.UVerbs.Name), "")
	}
	return out
}

func countErrs(d sysfs.Device) int {
	n := len(d.Errs)
	for _, p := range d.Ports {
		n += len(p.Errs)
	}
	return n
}

func firstErr(d sysfs.Device) error {
	if len(d.Errs) > 0 {
		return d.Errs[0]
	}
	for _, p := range d.Ports {
		if len(p.Errs) > 0 {
			return p.Errs[0]
		}
	}
	return nil
}

func nodeTypeText(d sysfs.Device) string {
	if d.NodeType == nil {
		return "node type unknown"
	}
	_, transport := d.NodeType.Transport()
	return fmt.Sprintf("%s (%s)", d.NodeType.Name, transport)
}

func linkLayer(p sysfs.Port) string {
	if p.LinkLayer == nil {
		return ""
	}
	return *p.LinkLayer
}

func isIWARP(d sysfs.Device) bool {
	return d.NodeType != nil && d.NodeType.Code == sysfs.NodeRNIC
}

// PortState checks that a port is ACTIVE with its physical link up. nd
// is the port's netdev on Ethernet ports (nil if unknown).
func PortState(d sysfs.Device, p sysfs.Port, nd *sysfs.NetDev) Finding {
	key := PortKey{d.Name, p.Number}
	f := Finding{Check: CheckPortState}
	if p.State == nil {
		f.Severity = Warn
		f.What = fmt.Sprintf("%s: port state unreadable", key)
		f.Fix = `check "rdma link show"`
		return f
	}
	state := devinfo.PortStateText(p.State.Code)
	phys := "phys_state unknown"
	if p.PhysState != nil {
		phys = devinfo.PhysStateText(p.PhysState.Code)
	}
	ndText := ""
	if nd != nil {
		ndText = ", netdev " + nd.Name
		if nd.OperState != nil {
			ndText += " " + *nd.OperState
		}
	}
	what := fmt.Sprintf("%s: %s, %s%s", key, state, phys, ndText)
	if p.Rate != nil {
		what += fmt.Sprintf(", %g Gb/s (%dX %s)", p.Rate.Gbps, p.Rate.Width, p.Rate.Speed)
	}
	f.What = what
	eth := linkLayer(p) == sysfs.LinkLayerEthernet
	switch p.State.Code {
	case sysfs.PortActive:
		if p.PhysState != nil && p.PhysState.Code != sysfs.PhysLinkUp {
			f.Severity = Warn
			f.Fix = "the logical state says ACTIVE but the physical link is not up; check the cable and the peer port"
			return f
		}
		f.Severity = Pass
	case sysfs.PortActiveDefer:
		f.Severity = Warn
		f.Fix = "the port is about to leave ACTIVE; check the link and the subnet manager"
	case sysfs.PortArmed:
		f.Severity = Fail
		f.Fix = "the subnet manager configured the port but has not activated it; check the SM (opensm) log"
	case sysfs.PortInit:
		f.Severity = Fail
		if eth {
			f.Fix = fmt.Sprintf(`bring the netdev up: "ip link set dev %s up"`, netdevName(nd))
		} else {
			f.Fix = `no subnet manager has configured the port: run one on the fabric ("systemctl start opensm")`
		}
	case sysfs.PortDown:
		f.Severity = Fail
		switch {
		case eth && nd != nil && nd.OperState != nil && *nd.OperState != "up":
			f.Fix = fmt.Sprintf(`bring the netdev up: "ip link set dev %s up"`, nd.Name)
		case p.PhysState != nil && p.PhysState.Code == sysfs.PhysDisabled:
			if eth {
				f.Fix = fmt.Sprintf(`the port is disabled: "ip link set dev %s up"`, netdevName(nd))
			} else {
				f.Fix = `the port is disabled: enable it ("ibportstate <lid> <port> enable") or check the switch`
			}
		case p.PhysState != nil && p.PhysState.Code == sysfs.PhysPolling:
			f.Fix = "no physical link: check the cable, the transceiver and the switch port"
		default:
			f.Fix = "no link: check the cable and the peer port"
		}
	default:
		f.Severity = Fail
		f.Fix = `unknown port state; check "rdma link show" and dmesg`
	}
	return f
}

func netdevName(nd *sysfs.NetDev) string {
	if nd == nil {
		return "<netdev>"
	}
	return nd.Name
}

// PortMTU checks that a RoCE port's IB MTU matches what its netdev's MTU
// allows: the largest of 256 ... 4096 that fits in the netdev MTU minus
// the RoCE headers (sysfs.RoCEMTU). attr carries active and max MTU when
// a verbs query was possible; without it the derived MTU is reported.
func PortMTU(d sysfs.Device, p sysfs.Port, nd *sysfs.NetDev, attr PortAttr) Finding {
	key := PortKey{d.Name, p.Number}
	f := Finding{Check: CheckMTU}
	switch {
	case isIWARP(d):
		f.Severity = Info
		f.What = fmt.Sprintf("%s: iWARP runs over TCP; the netdev MTU applies, there is no IB MTU", key)
		return f
	case linkLayer(p) != sysfs.LinkLayerEthernet:
		f.Severity = Info
		f.What = fmt.Sprintf("%s: %s link: the IB MTU comes from the subnet manager, not a netdev", key, devinfo.LinkLayerText(linkLayer(p)))
		if attr.ActiveMTU != 0 {
			f.What += fmt.Sprintf("; active_mtu %s", devinfo.MTUText(attr.ActiveMTU))
		}
		return f
	case nd == nil:
		f.Severity = Warn
		f.What = fmt.Sprintf("%s: cannot tell which netdev carries this RoCE port", key)
		f.Fix = `check "rdma link show"`
		return f
	case nd.MTU == nil:
		f.Severity = Warn
		f.What = fmt.Sprintf("%s: MTU of netdev %s unreadable", key, nd.Name)
		f.Fix = fmt.Sprintf(`check "ip link show %s"`, nd.Name)
		return f
	}
	overhead := sysfs.RoCEOverheadFor(d)
	fit := sysfs.RoCEMTU(*nd.MTU, overhead)
	maxMTU := attr.MaxMTU
	if maxMTU == 0 {
		maxMTU = sysfs.MTU4096 // every RoCE driver supports 4096
	}
	base := fmt.Sprintf("%s: netdev %s MTU %d", key, nd.Name, *nd.MTU)
	switch {
	case fit == 0:
		f.Severity = Fail
		f.What = fmt.Sprintf("%s leaves no room for the smallest IB MTU (256 + %d bytes of headers)", base, overhead)
		f.Fix = fmt.Sprintf(`"ip link set dev %s mtu 1500"`, nd.Name)
	case attr.ActiveMTU != 0 && attr.ActiveMTU > fit:
		f.Severity = Fail
		f.What = fmt.Sprintf("%s fits IB MTU %d, but the port's active_mtu is %d: full-size RoCE packets will be dropped", base, fit.Bytes(), attr.ActiveMTU.Bytes())
		f.Fix = fmt.Sprintf(`raise the netdev MTU to at least %d ("ip link set dev %s mtu %d"), or run with a smaller MTU (-m %d)`, attr.ActiveMTU.Bytes()+overhead, nd.Name, attr.ActiveMTU.Bytes()+overhead, fit.Bytes())
	case attr.ActiveMTU != 0 && attr.ActiveMTU < fit:
		f.Severity = Warn
		f.What = fmt.Sprintf("%s fits IB MTU %d, but the port's active_mtu is only %d", base, fit.Bytes(), attr.ActiveMTU.Bytes())
		f.Fix = "the driver did not follow the netdev MTU change; re-create the device (rdma link delete/add) or reload the driver"
	case fit < maxMTU:
		f.Severity = Info
		f.What = fmt.Sprintf("%s gives IB MTU %d (after %d bytes of RoCE headers); the port supports %d", base, fit.Bytes(), overhead, maxMTU.Bytes())
		f.Fix = fmt.Sprintf(`for IB MTU %d use netdev MTU %d or more on every host and switch in the path ("ip link set dev %s mtu 9000")`, maxMTU.Bytes(), maxMTU.Bytes()+overhead, nd.Name)
	default:
		f.Severity = Pass
		f.What = fmt.Sprintf("%s gives IB MTU %d", base, fit.Bytes())
	}
	return f
}

// RoCEGID checks that an Ethernet port has a usable RoCE v2 GID and
// reports the one perftest would pick (sysfs.BestGID); ipv6 is
// perftest's --ipv6.
func RoCEGID(d sysfs.Device, p sysfs.Port, ipv6 bool) Finding {
	key := PortKey{d.Name, p.Number}
	f := Finding{Check: CheckRoCEGID}
	if isIWARP(d) || linkLayer(p) != sysfs.LinkLayerEthernet {
		f.Severity = Info
		f.What = fmt.Sprintf("%s: not a RoCE port; RoCE GIDs do not apply", key)
		return f
	}
	nd := sysfs.PortNetDev(d, p)
	if nd == "" {
		nd = "<netdev>"
	}
	family := "IPv4"
	if ipv6 {
		family = "IPv6"
	}
	var v2, unknown int
	for _, g := range p.GIDs {
		switch g.Type {
		case sysfs.GIDTypeRoCEv2:
			v2++
		case sysfs.GIDTypeUnknown:
			unknown++
		}
	}
	best, ok := sysfs.BestGID(p.GIDs, ipv6)
	switch {
	case !ok:
		f.Severity = Fail
		f.What = fmt.Sprintf("%s: the GID table is empty: %s has no IP address", key, nd)
		f.Fix = fmt.Sprintf(`give the netdev an address: "ip addr add <addr>/<len> dev %s"`, nd)
		return f
	case v2 == 0 && unknown > 0:
		f.Severity = Warn
		f.What = fmt.Sprintf("%s: %d GID type(s) unreadable and no RoCE v2 GID confirmed", key, unknown)
		f.Fix = `check "rdma link show" and dmesg`
		return f
	case v2 == 0:
		f.Severity = Warn
		f.What = fmt.Sprintf("%s: only RoCE v1 GIDs; RoCE v2 (UDP 4791, routable) is not available", key)
		f.Fix = "enable RoCE v2 in the driver, or use a RoCE v1 GID on both ends (-x)"
		return f
	}
	pick := fmt.Sprintf("GID[%d] %s %s on %s", best.Index, best, best.Type, orUnknown(best.NetDev))
	switch {
	case best.Type != sysfs.GIDTypeRoCEv2:
		f.Severity = Warn
		f.What = fmt.Sprintf("%s: perftest would pick %s, not a RoCE v2 GID", key, pick)
		f.Fix = "choose a RoCE v2 GID index explicitly (-x)"
	case best.IsIPv4Mapped() == ipv6:
		f.Severity = Warn
		f.What = fmt.Sprintf("%s: no %s RoCE v2 GID; perftest would pick %s", key, family, pick)
		f.Fix = fmt.Sprintf(`give %s an %s address ("ip addr add <addr>/<len> dev %s"), or choose a GID index explicitly (-x)`, nd, family, nd)
	case best.IsLinkLocal():
		f.Severity = Warn
		f.What = fmt.Sprintf("%s: perftest would pick the link-local %s, which does not cross routers", key, pick)
		f.Fix = fmt.Sprintf(`give %s a routable address ("ip addr add <addr>/<len> dev %s")`, nd, nd)
	default:
		f.Severity = Pass
		f.What = fmt.Sprintf("%s: perftest would pick %s", key, pick)
	}
	return f
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown netdev"
	}
	return s
}

// Ports runs PortState, PortMTU and RoCEGID on every port in r. attrs may
// be nil. A report without ports yields one INFO finding per check, so
// every check appears in the output.
func Ports(r sysfs.Report, attrs map[PortKey]PortAttr, ipv6 bool) []Finding {
	var state, mtu, gid []Finding
	for _, d := range r.Devices {
		for _, p := range d.Ports {
			var nd *sysfs.NetDev
			if name := sysfs.PortNetDev(d, p); name != "" {
				nd = r.NetDev(name)
			}
			state = append(state, PortState(d, p, nd))
			mtu = append(mtu, PortMTU(d, p, nd, attrs[PortKey{d.Name, p.Number}]))
			gid = append(gid, RoCEGID(d, p, ipv6))
		}
	}
	if len(state) == 0 {
		none := "no RDMA ports to check"
		state = []Finding{{Check: CheckPortState, Severity: Info, What: none}}
		mtu = []Finding{{Check: CheckMTU, Severity: Info, What: none}}
		gid = []Finding{{Check: CheckRoCEGID, Severity: Info, What: none}}
	}
	return append(append(state, mtu...), gid...)
}
