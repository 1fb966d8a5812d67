package devinfo

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

// The words ibv_devinfo (rdma-core 44, libibverbs/examples/devinfo.c)
// prints for values, as functions of the values.

// TransportText is the "transport:" value of a transport name:
// "InfiniBand (0)", and "invalid transport (-1)" for the transport
// libibverbs gives a node type it does not know. Other names (the
// built-in engine's "engine") are printed as they are.
func TransportText(name string) string {
	for code, n := range []string{"InfiniBand", "iWARP", "usNIC", "usNIC UDP", "unspecified"} {
		if name == n {
			return fmt.Sprintf("%s (%d)", n, code)
		}
	}
	if name == "invalid transport" {
		return name + " (-1)"
	}
	return name
}

// PortStateText is the "state:" value: "PORT_ACTIVE (4)".
func PortStateText(code int) string {
	name := "invalid state"
	switch code {
	case sysfs.PortDown:
		name = "PORT_DOWN"
	case sysfs.PortInit:
		name = "PORT_INIT"
	case sysfs.PortArmed:
		name = "PORT_ARMED"
	case sysfs.PortActive:
		name = "PORT_ACTIVE"
	}
	return fmt.Sprintf("%s (%d)", name, code)
}

// PhysStateText is the "phys_state:" value: "LINK_UP (5)". The
// misspelling of state 4 is devinfo's.
func PhysStateText(code int) string {
	names := [...]string{
		sysfs.PhysSleep:              "SLEEP",
		sysfs.PhysPolling:            "POLLING",
		sysfs.PhysDisabled:           "DISABLED",
		sysfs.PhysPortConfigTraining: "PORT_CONFIGURATION TRAINNING",
		sysfs.PhysLinkUp:             "LINK_UP",
		sysfs.PhysLinkErrorRecovery:  "LINK_ERROR_RECOVERY",
		sysfs.PhysPhyTest:            "PHY TEST",
	}
	name := "invalid physical state"
	if code > 0 && code < len(names) {
		name = names[code]
	}
	return fmt.Sprintf("%s (%d)", name, code)
}

// MTUText is the "max_mtu:" and "active_mtu:" value: "1024 (3)".
func MTUText(m verbsio.MTU) string {
	if !m.Valid() {
		return fmt.Sprintf("invalid MTU (%d)", m)
	}
	return fmt.Sprintf("%d (%d)", m.Bytes(), m)
}

// LinkLayerText is the "link_layer:" value: "InfiniBand", "Ethernet",
// "Unspecified", or "Unknown" for anything else.
func LinkLayerText(linkLayer string) string {
	switch linkLayer {
	case sysfs.LinkLayerInfiniBand, sysfs.LinkLayerEthernet, verbsio.LinkLayerUnspecified.String():
		return linkLayer
	}
	return "Unknown"
}

// WidthText is the "active_width:" value: "1X (1)", "4X (2)".
func WidthText(code uint8) string {
	lanes, ok := widthLanes[code]
	w := "invalid width"
	if ok {
		w = strconv.Itoa(lanes)
	}
	return fmt.Sprintf("%sX (%d)", w, code)
}

// SpeedText is the "active_speed:" value: "2.5 Gbps (1)", "25.0 Gbps (32)".
func SpeedText(code uint32) string {
	name := "invalid speed"
	if sp, ok := laneSpeeds[code]; ok {
		name = fmt.Sprintf("%.1f Gbps", sp.gbps)
	}
	return fmt.Sprintf("%s (%d)", name, code)
}

// LaneSpeedText is a lane speed with its name: "EDR (25.0 Gbps)".
func LaneSpeedText(r Rate) string {
	for _, sp := range laneSpeeds {
		if sp.name == strings.ToUpper(r.Speed) {
			return fmt.Sprintf("%s (%.1f Gbps)", r.Speed, sp.gbps)
		}
	}
	return r.Speed + " (invalid speed)"
}

// VLText is the "max_vl_num:" value: "1 (1)", "8 (4)".
func VLText(v uint8) string {
	names := map[uint8]string{1: "1", 2: "2", 3: "4", 4: "8", 5: "15"}
	n, ok := names[v]
	if !ok {
		n = "invalid value"
	}
	return fmt.Sprintf("%s (%d)", n, v)
}

// AtomicCapText is the "atomic_cap:" value: "ATOMIC_HCA (1)".
func AtomicCapText(a verbsio.AtomicCap) string {
	names := [...]string{"ATOMIC_NONE", "ATOMIC_HCA", "ATOMIC_GLOB"}
	if int(a) < len(names) {
		return fmt.Sprintf("%s (%d)", names[a], a)
	}
	return fmt.Sprintf("invalid atomic capability (%d)", a)
}

// GUIDText formats a GUID as devinfo does: "5054:00ff:fe77:0001".
func GUIDText(g uint64) string { return sysfs.GUID(g).String() }

// GIDText is the value of a "GID[  N]:" line for a port with the given
// link layer: RoCE v2 GIDs in inet_ntop form, others as eight 4-digit hex
// groups, with ", RoCE v1" / ", RoCE v2" after it on Ethernet ports
// ("fe80::5054:ff:fe77:1, RoCE v2").
//
// ok is false when devinfo prints no line for the GID: its lower 64 bits
// are zero (devinfo's null_gid), or its type is unknown (devinfo prints
// nothing for a type it could not read).
func GIDText(g sysfs.GID, linkLayer string) (text string, ok bool) {
	if [8]byte(g.Raw[8:]) == [8]byte{} {
		return "", false
	}
	switch g.Type {
	case sysfs.GIDTypeRoCEv2:
		text = g.String()
	case sysfs.GIDTypeRoCEv1, sysfs.GIDTypeIB:
		text = g.SysfsString()
	default:
		return "", false
	}
	if linkLayer == sysfs.LinkLayerEthernet {
		if g.Type == sysfs.GIDTypeRoCEv2 {
			text += ", RoCE v2"
		} else {
			text += ", RoCE v1"
		}
	}
	return text, true
}

// flagNames lists the names of the set bits of v in the table's order,
// then "Unknown flags: 0x%X" for the bits without a name.
func flagNames(v uint64, table []flagName) []string {
	var out []string
	rest := v
	for _, f := range table {
		if v&f.bit != 0 {
			out = append(out, f.name)
			rest &^= f.bit
		}
	}
	if rest != 0 {
		out = append(out, fmt.Sprintf("Unknown flags: 0x%X", rest))
	}
	return out
}

type flagName struct {
	bit  uint64
	name string
}

// deviceCapNames are the IBV_DEVICE_* bits of device_cap_flags.
var deviceCapNames = []flagName{
	{1 << 0, "RESIZE_MAX_WR"}, {1 << 1, "BAD_PKEY_CNTR"}, {1 << 2, "BAD_QKEY_CNTR"},
	{1 << 3, "RAW_MULTI"}, {1 << 4, "AUTO_PATH_MIG"}, {1 << 5, "CHANGE_PHY_PORT"},
	{1 << 6, "UD_AV_PORT_ENFORCE"}, {1 << 7, "CURR_QP_STATE_MOD"}, {1 << 8, "SHUTDOWN_PORT"},
	{1 << 9, "INIT_TYPE"}, {1 << 10, "PORT_ACTIVE_EVENT"}, {1 << 11, "SYS_IMAGE_GUID"},
	{1 << 12, "RC_RNR_NAK_GEN"}, {1 << 13, "SRQ_RESIZE"}, {1 << 14, "N_NOTIFY_CQ"},
	{1 << 17, "MEM_WINDOW"}, {1 << 18, "UD_IP_CSUM"}, {1 << 20, "XRC"},
	{1 << 21, "MEM_MGT_EXTENSIONS"}, {1 << 23, "MEM_WINDOW_TYPE_2A"}, {1 << 24, "MEM_WINDOW_TYPE_2B"},
	{1 << 25, "RC_IP_CSUM"}, {1 << 26, "RAW_IP_CSUM"}, {1 << 29, "MANAGED_FLOW_STEERING"},
}

// DeviceCapFlagNames names the bits of device_cap_flags (its low 32
// bits) as devinfo lists them under the field.
func DeviceCapFlagNames(flags uint64) []string {
	return flagNames(flags&0xffffffff, deviceCapNames)
}

// deviceCapFlagsExNames names the upper 32 bits of device_cap_flags_ex,
// which devinfo lists under it (the lower 32 are device_cap_flags).
func deviceCapFlagsExNames(flags uint64) []string {
	return flagNames(flags&^0xffffffff, []flagName{
		{1 << 32, "RAW_SCATTER_FCS"}, {1 << 36, "PCI_WRITE_END_PADDING"},
	})
}

// odpGeneralNames names general ODP capability bits.
func odpGeneralNames(v uint64) []string {
	return flagNames(v, []flagName{{1 << 0, "ODP_SUPPORT"}, {1 << 1, "ODP_SUPPORT_IMPLICIT"}})
}

// odpTransportNames names per-transport ODP capability bits; none is "NO
// SUPPORT".
func odpTransportNames(v uint32) []string {
	if v == 0 {
		return []string{"NO SUPPORT"}
	}
	return flagNames(uint64(v), []flagName{
		{1 << 0, "SUPPORT_SEND"}, {1 << 1, "SUPPORT_RECV"}, {1 << 2, "SUPPORT_WRITE"},
		{1 << 3, "SUPPORT_READ"}, {1 << 4, "SUPPORT_ATOMIC"}, {1 << 5, "SUPPORT_SRQ"},
	})
}

// rawPacketCaps are the raw packet capability bits with rdiag's name and
// devinfo's line for each.
var rawPacketCaps = []struct {
	bit        verbsio.RawPacketCaps
	name, line string
}{
	{verbsio.RawCapCVLANStripping, "CVLAN_STRIPPING", "C-VLAN stripping offload"},
	{verbsio.RawCapScatterFCS, "SCATTER_FCS", "Scatter FCS offload"},
	{verbsio.RawCapIPCsum, "IP_CSUM", "IP csum offload"},
	{verbsio.RawCapDelayDrop, "DELAY_DROP", "Delay drop"},
}

// rawPacketCapLines are devinfo's lines for raw packet capability bits
// (it has none for bits it does not know).
func rawPacketCapLines(c verbsio.RawPacketCaps) []string {
	var out []string
	for _, n := range rawPacketCaps {
		if c&n.bit != 0 {
			out = append(out, n.line)
		}
	}
	return out
}

// RawPacketCapNames names raw packet capability bits as rdiag's
// capability report does ("CVLAN_STRIPPING"), other bits as one "0x..".
func RawPacketCapNames(c verbsio.RawPacketCaps) []string {
	var out []string
	for _, n := range rawPacketCaps {
		if c&n.bit != 0 {
			out = append(out, n.name)
			c &^= n.bit
		}
	}
	if c != 0 {
		out = append(out, fmt.Sprintf("0x%x", uint32(c)))
	}
	return out
}

// supportedQPNames lists QP types as devinfo's supported_qp lines do:
// SUPPORT_RAW_PACKET, then SUPPORT_UD, then (newer devinfo, and rperf's
// engine) SUPPORT_RC and SUPPORT_UC, then "Unknown flags: 0x%X" for other
// types' bits (1 << IBV_QPT_x).
func supportedQPNames(ts []verbsio.QPType) []string {
	var mask uint64
	for _, t := range ts {
		mask |= 1 << t
	}
	return flagNames(mask, []flagName{
		{1 << verbsio.QPTypeRawPacket, "SUPPORT_RAW_PACKET"}, {1 << verbsio.QPTypeUD, "SUPPORT_UD"},
		{1 << verbsio.QPTypeRC, "SUPPORT_RC"}, {1 << verbsio.QPTypeUC, "SUPPORT_UC"},
	})
}
