package sysfs

import (
	"fmt"
	"strings"
)

// This file turns sysfs values into the text ibv_devinfo (rdma-core's
// libibverbs/examples/devinfo.c, as in rdma-core 44) prints for the same
// field, so that rdiag can print familiar output without libibverbs.

// Devinfo formats the state as ibv_devinfo's "state:" line does:
// "PORT_ACTIVE (4)".
func (s PortState) Devinfo() string {
	name := "invalid state"
	switch s.Code {
	case PortDown:
		name = "PORT_DOWN"
	case PortInit:
		name = "PORT_INIT"
	case PortArmed:
		name = "PORT_ARMED"
	case PortActive:
		name = "PORT_ACTIVE"
	}
	return fmt.Sprintf("%s (%d)", name, s.Code)
}

// Devinfo formats the physical state as ibv_devinfo's "phys_state:" line
// does: "LINK_UP (5)". The misspelling in state 4 is devinfo's.
func (s PhysState) Devinfo() string {
	names := [...]string{
		PhysSleep:              "SLEEP",
		PhysPolling:            "POLLING",
		PhysDisabled:           "DISABLED",
		PhysPortConfigTraining: "PORT_CONFIGURATION TRAINNING",
		PhysLinkUp:             "LINK_UP",
		PhysLinkErrorRecovery:  "LINK_ERROR_RECOVERY",
		PhysPhyTest:            "PHY TEST",
	}
	name := "invalid physical state"
	if s.Code > 0 && s.Code < len(names) {
		name = names[s.Code]
	}
	return fmt.Sprintf("%s (%d)", name, s.Code)
}

// Transport returns the libibverbs transport of a node type (enum
// ibv_transport_type) and devinfo's name for it. libibverbs derives it
// from this same sysfs file. Unknown node types give (-1, "invalid
// transport").
func (t NodeType) Transport() (int, string) {
	switch t.Code {
	case NodeCA, NodeSwitch, NodeRouter:
		return 0, "InfiniBand"
	case NodeRNIC:
		return 1, "iWARP"
	case NodeUSNIC:
		return 2, "usNIC"
	case NodeUSNICUDP:
		return 3, "usNIC UDP"
	case NodeUnspecified:
		return 4, "invalid transport"
	default:
		return -1, "invalid transport"
	}
}

// DevinfoTransport formats the transport as ibv_devinfo's "transport:"
// line does: "InfiniBand (0)".
func (t NodeType) DevinfoTransport() string {
	code, name := t.Transport()
	return fmt.Sprintf("%s (%d)", name, code)
}

// Width codes of enum ibv_port_attr.active_width, by lane count.
var widthCodes = map[int]uint8{1: 1, 4: 2, 8: 4, 12: 8, 2: 16}

// Speed codes of enum ibv_port_attr.active_speed, by the rate file's
// speed name.
var speedCodes = map[string]uint32{
	"SDR": 1, "DDR": 2, "QDR": 4, "FDR10": 8, "FDR": 16,
	"EDR": 32, "HDR": 64, "NDR": 128, "XDR": 256,
}

// ActiveWidth returns the verbs active_width code (1X=1, 4X=2, 8X=4,
// 12X=8, 2X=16); ok is false for a lane count verbs has no code for.
func (r Rate) ActiveWidth() (code uint8, ok bool) {
	code, ok = widthCodes[r.Width]
	return code, ok
}

// ActiveSpeed returns the verbs active_speed code (SDR=1 ... XDR=256);
// ok is false for an unknown speed name.
func (r Rate) ActiveSpeed() (code uint32, ok bool) {
	code, ok = speedCodes[strings.ToUpper(r.Speed)]
	return code, ok
}

// DevinfoActiveWidth formats the width as ibv_devinfo's "active_width:"
// line does: "1X (1)", "4X (2)".
func (r Rate) DevinfoActiveWidth() string {
	code, ok := r.ActiveWidth()
	if !ok {
		return fmt.Sprintf("invalid widthX (%d)", code)
	}
	return fmt.Sprintf("%dX (%d)", r.Width, code)
}

// DevinfoActiveSpeed formats the speed as ibv_devinfo's "active_speed:"
// line does: "2.5 Gbps (1)", "25.0 Gbps (32)".
func (r Rate) DevinfoActiveSpeed() string {
	code, _ := r.ActiveSpeed()
	name := "invalid speed"
	switch code {
	case 1:
		name = "2.5 Gbps"
	case 2:
		name = "5.0 Gbps"
	case 4, 8:
		name = "10.0 Gbps"
	case 16:
		name = "14.0 Gbps"
	case 32:
		name = "25.0 Gbps"
	case 64:
		name = "50.0 Gbps"
	case 128:
		name = "100.0 Gbps"
	case 256:
		name = "200.0 Gbps"
	}
	return fmt.Sprintf("%s (%d)", name, code)
}

// DevinfoLinkLayer formats a link_layer value as ibv_devinfo's
// "link_layer:" line does. The kernel and devinfo use the same words;
// anything else (or nothing) is "Unknown".
func DevinfoLinkLayer(linkLayer string) string {
	switch linkLayer {
	case LinkLayerInfiniBand, LinkLayerEthernet:
		return linkLayer
	default:
		return "Unknown"
	}
}

// DevinfoFWVer returns what ibv_devinfo prints for "fw_ver:" given the
// sysfs fw_ver. devinfo takes the string from ibv_query_device, which
// formats the driver's raw 64-bit firmware version as "%d.%d.%d" unless
// the provider supplies its own string; drivers with an empty sysfs
// fw_ver (rxe, siw) have raw version 0, hence "0.0.0". For every other
// driver the two strings are the same.
func DevinfoFWVer(sysfsFWVer string) string {
	if sysfsFWVer == "" {
		return "0.0.0"
	}
	return sysfsFWVer
}

// DevinfoLMC formats lid_mask_count as ibv_devinfo's "port_lmc:" does:
// "0x00".
func DevinfoLMC(lmc uint8) string { return fmt.Sprintf("0x%02x", lmc) }

// DevinfoCapMask formats cap_mask as ibv_devinfo's "port_cap_flags:"
// does: "0x00010000".
func DevinfoCapMask(capMask uint32) string { return fmt.Sprintf("0x%08x", capMask) }

// Devinfo formats a GID as ibv_devinfo -v prints it after "GID[  N]:",
// for a port with the given link layer: RoCE v2 GIDs in inet_ntop form,
// others as eight 4-digit hex groups, with ", RoCE v1" / ", RoCE v2"
// appended on Ethernet ports ("fe80::5054:ff:fe77:1, RoCE v2").
//
// ok is false when devinfo prints no line for the GID: its lower 64 bits
// are zero (devinfo's null_gid test), or its type could not be read.
func (g GID) Devinfo(linkLayer string) (line string, ok bool) {
	if [8]byte(g.Raw[8:]) == [8]byte{} {
		return "", false
	}
	var text string
	switch g.Type {
	case GIDTypeRoCEv2:
		text = g.String()
	case GIDTypeRoCEv1, GIDTypeIB:
		text = g.SysfsString()
	default:
		return "", false
	}
	if linkLayer == LinkLayerEthernet {
		switch g.Type {
		case GIDTypeRoCEv2:
			text += ", RoCE v2"
		default:
			text += ", RoCE v1"
		}
	}
	return text, true
}

// MTU is an InfiniBand path MTU as verbs encode it (enum ibv_mtu).
type MTU uint8

// MTU codes.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes (256 ... 4096), or 0 for an invalid code.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// MTUFromBytes returns the code for exactly 256, 512, 1024, 2048 or 4096.
func MTUFromBytes(n int) (MTU, bool) {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m, true
		}
	}
	return 0, false
}

// Devinfo formats the MTU as ibv_devinfo's "max_mtu:" and "active_mtu:"
// lines do: "1024 (3)".
func (m MTU) Devinfo() string {
	if m.Bytes() == 0 {
		return fmt.Sprintf("invalid MTU (%d)", m)
	}
	return fmt.Sprintf("%d (%d)", m.Bytes(), m)
}

// Header overheads that RoCE drivers subtract from the netdev MTU before
// rounding down to an IB MTU.
const (
	// RoCEHeaderOverhead is the kernel's iboe_get_mtu: GRH 40 + UDP 8 +
	// BTH 12 + XRC ETH 4 + AtomicETH 28 + ICRC 4 bytes. Hardware RoCE
	// drivers and rdma_cm use it.
	RoCEHeaderOverhead = 96
	// RXEHeaderOverhead is rdma_rxe's RXE_MAX_HDR_LENGTH.
	RXEHeaderOverhead = 80
)

// RoCEMTU returns the IB MTU a RoCE port runs at over a netdev with the
// given MTU: the largest of 256 ... 4096 that fits in netdevMTU minus
// overhead. It returns 0 when not even 256 fits.
//
// ibv_devinfo's active_mtu for the rxe fixture: eth0 has MTU 1500,
// 1500 - 80 = 1420, and the largest IB MTU not above that is 1024.
func RoCEMTU(netdevMTU, overhead int) MTU {
	room := netdevMTU - overhead
	for m := MTU4096; m >= MTU256; m-- {
		if m.Bytes() <= room {
			return m
		}
	}
	return 0
}

// IsSoftRoCE reports whether d looks like rdma_rxe: an InfiniBand-CA
// node with a parent netdev (only software devices have a parent file;
// siw, the other one, is an RNIC).
func IsSoftRoCE(d Device) bool {
	return d.Parent != nil && d.NodeType != nil && d.NodeType.Code == NodeCA
}

// RoCEOverheadFor returns the header overhead d's driver subtracts from
// its netdev MTU: RXEHeaderOverhead for rxe, RoCEHeaderOverhead otherwise.
func RoCEOverheadFor(d Device) int {
	if IsSoftRoCE(d) {
		return RXEHeaderOverhead
	}
	return RoCEHeaderOverhead
}

// SoftRoCEMaxMTU is rdma_rxe's max_mtu (RXE_PORT_MAX_MTU). Hardware
// drivers' max_mtu is only known to ibv_query_port.
const SoftRoCEMaxMTU = MTU4096

// VerbsOnlyDeviceFields are the ibv_devinfo -v device fields sysfs cannot
// provide: they come from ibv_query_device(_ex). Show them as unknown
// unless a verbs provider answered; never as zero.
var VerbsOnlyDeviceFields = []string{
	"vendor_id", "vendor_part_id", "hw_ver", "max_mr_size", "page_size_cap",
	"max_qp", "max_qp_wr", "device_cap_flags", "max_sge", "max_sge_rd",
	"max_cq", "max_cqe", "max_mr", "max_pd", "max_qp_rd_atom",
	"max_ee_rd_atom", "max_res_rd_atom", "max_qp_init_rd_atom",
	"max_ee_init_rd_atom", "atomic_cap", "max_ee", "max_rdd", "max_mw",
	"max_raw_ipv6_qp", "max_raw_ethy_qp", "max_mcast_grp",
	"max_mcast_qp_attach", "max_total_mcast_qp_attach", "max_ah",
	"max_fmr", "max_map_per_fmr", "max_srq", "max_srq_wr", "max_srq_sge",
	"max_pkeys", "local_ca_ack_delay", "device_cap_flags_ex", "max_tso",
	"max_rwq_indirection_tables", "max_rwq_indirection_table_size",
	"rx_hash_function", "rx_hash_fields_mask", "max_wq_type_rq",
	"qp_rate_limit_min", "qp_rate_limit_max", "num_comp_vectors",
	"hca_core_clock", "completion timestamp_mask",
}

// VerbsOnlyPortFields are the ibv_devinfo -v port fields sysfs cannot
// provide: they come from ibv_query_port. (For RoCE, active_mtu can be
// derived from the netdev MTU with RoCEMTU, and rxe's max_mtu is
// SoftRoCEMaxMTU.)
var VerbsOnlyPortFields = []string{
	"max_mtu", "active_mtu", "max_msg_sz", "port_cap_flags2", "max_vl_num",
	"bad_pkey_cntr", "qkey_viol_cntr", "subnet_timeout", "init_type_reply",
}
