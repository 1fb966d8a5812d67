package sysfs

import (
	"strings"

	"github.com/rperf/rperf/verbsio"
)

// This file holds what libibverbs or a driver reports that can be derived
// from sysfs values: the verbs transport of a node type, the verbs width
// and speed codes of a rate, and the IB MTU a RoCE port runs at. rdiag's
// internal/diag/devinfo turns them into ibv_devinfo's text.

// Transport returns the libibverbs transport of a node type (enum
// ibv_transport_type) and the name libibverbs gives it. libibverbs derives it
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
		return 4, "unspecified"
	default:
		return -1, "invalid transport"
	}
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

// MTU is an InfiniBand path MTU as verbs encode it (enum ibv_mtu):
// verbsio's type.
type MTU = verbsio.MTU

// MTU codes.
const (
	MTU256  = verbsio.MTU256
	MTU512  = verbsio.MTU512
	MTU1024 = verbsio.MTU1024
	MTU2048 = verbsio.MTU2048
	MTU4096 = verbsio.MTU4096
)

// MTUFromBytes returns the code for exactly 256, 512, 1024, 2048 or 4096.
func MTUFromBytes(n int) (MTU, bool) {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m, true
		}
	}
	return 0, false
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
