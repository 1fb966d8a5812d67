package rdiagcmd

import (
	"fmt"

	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

// Sources of a value, as the capability report and --json name them.
const (
	srcQueryDevice = "query_device" // the provider's QueryDevice (ibv_query_device_ex)
	srcQueryPort   = "query_port"   // the provider's QueryPort (ibv_query_port)
	srcSysfs       = "sysfs"        // read from the --sysfs tree
	srcNetdevMTU   = "netdev_mtu"   // derived from the port's netdev MTU
	srcDriver      = "driver"       // a driver constant (rxe's max MTU)
)

// portView is one port of one device, from a verbs port query or from
// sysfs. Nil pointers and zero MTUs are unknown.
type portView struct {
	Number        int
	State         *int
	PhysState     *int
	LinkLayer     string // "InfiniBand", "Ethernet", "Unspecified"; "" unknown
	Rate          *sysfs.Rate
	ActiveMTU     sysfs.MTU
	MaxMTU        sysfs.MTU
	ActiveMTUFrom string
	MaxMTUFrom    string
	Netdev        string
	NetdevMTU     *int
	LID, SMLID    *uint32
	LMC, SMSL     *uint8
	CapMask       *uint32
	GIDTblLen     *int
	PKeyTblLen    *int
	MaxMsgSize    *uint64
	MaxVLNum      *uint8
	GIDs          []sysfs.GID
	IWARP         bool // an iWARP port: Ethernet, but no RoCE GIDs
	Errs          []error
}

// sysfsPortView describes a sysfs port. Active and max MTU, which sysfs
// does not have, are derived where that is exact: rxe's max MTU is a
// driver constant, and a RoCE port's active MTU is the largest IB MTU its
// netdev's MTU leaves room for after the RoCE headers (capped by the max
// MTU when known).
func sysfsPortView(r sysfs.Report, d sysfs.Device, p sysfs.Port) portView {
	v := portView{Number: p.Number, Rate: p.Rate, LID: p.LID, SMLID: p.SMLID, LMC: p.LMC, SMSL: p.SMSL,
		CapMask: p.CapMask, GIDs: p.GIDs, Errs: p.Errs}
	if p.State != nil {
		c := p.State.Code
		v.State = &c
	}
	if p.PhysState != nil {
		c := p.PhysState.Code
		v.PhysState = &c
	}
	if p.LinkLayer != nil {
		v.LinkLayer = *p.LinkLayer
	}
	if p.GIDTableLen > 0 {
		n := p.GIDTableLen
		v.GIDTblLen = &n
	}
	if p.PKeyTableLen > 0 {
		n := p.PKeyTableLen
		v.PKeyTblLen = &n
	}
	v.Netdev = sysfs.PortNetDev(d, p)
	if nd := r.NetDev(v.Netdev); nd != nil {
		v.NetdevMTU = nd.MTU
	}
	iwarp := d.NodeType != nil && d.NodeType.Code == sysfs.NodeRNIC
	v.IWARP = iwarp
	if sysfs.IsSoftRoCE(d) {
		v.MaxMTU, v.MaxMTUFrom = sysfs.SoftRoCEMaxMTU, srcDriver
	}
	if v.LinkLayer == sysfs.LinkLayerEthernet && !iwarp && v.NetdevMTU != nil {
		fit := sysfs.RoCEMTU(*v.NetdevMTU, sysfs.RoCEOverheadFor(d))
		if v.MaxMTU != 0 && fit > v.MaxMTU {
			fit = v.MaxMTU
		}
		if fit != 0 {
			v.ActiveMTU, v.ActiveMTUFrom = fit, srcNetdevMTU
		}
	}
	return v
}

// verbsPortView describes a port from a verbs port query and GID table.
// netdevMTU looks up a netdev's MTU (nil when unknown).
func verbsPortView(num int, pa verbsio.PortAttr, gids []verbsio.GIDEntry, netdevMTU func(string) *int) portView {
	state, phys := int(pa.State), int(pa.PhysState)
	lid, smlid := uint32(pa.LID), uint32(pa.SMLID)
	lmc, smsl, vl := pa.LMC, pa.SMSL, pa.MaxVLNum
	capMask := pa.PortCapFlags
	gtl, ptl := pa.GIDTblLen, pa.PkeyTblLen
	msg := pa.MaxMsgSize
	v := portView{
		Number: num, State: &state, PhysState: &phys, LinkLayer: pa.LinkLayer.String(),
		ActiveMTU: sysfs.MTU(pa.ActiveMTU), MaxMTU: sysfs.MTU(pa.MaxMTU),
		ActiveMTUFrom: srcQueryPort, MaxMTUFrom: srcQueryPort,
		Netdev: pa.Netdev, LID: &lid, SMLID: &smlid, LMC: &lmc, SMSL: &smsl, MaxVLNum: &vl,
		CapMask: &capMask, GIDTblLen: &gtl, PKeyTblLen: &ptl, MaxMsgSize: &msg,
	}
	if pa.Netdev != "" && netdevMTU != nil {
		v.NetdevMTU = netdevMTU(pa.Netdev)
	}
	v.Rate = rateFromCodes(pa.ActiveWidth, pa.ActiveSpeed)
	linkLayer := ""
	if pa.LinkLayer == verbsio.LinkLayerEthernet {
		linkLayer = sysfs.LinkLayerEthernet
	}
	for _, g := range gids {
		if g.GID.IsZero() {
			continue
		}
		v.GIDs = append(v.GIDs, sysfs.GID{Index: g.Index, Raw: g.GID, Type: gidTypeOf(g.Type, linkLayer), NetDev: g.Netdev})
	}
	return v
}

// gidTypeOf maps a verbs GID type to sysfs's, which tells IB from RoCE v1
// by the link layer.
func gidTypeOf(t verbsio.GIDType, linkLayer string) sysfs.GIDType {
	switch t {
	case verbsio.GIDTypeRoCEv2:
		return sysfs.GIDTypeRoCEv2
	case verbsio.GIDTypeRoCEv1:
		return sysfs.GIDTypeRoCEv1
	}
	if linkLayer == sysfs.LinkLayerEthernet {
		return sysfs.GIDTypeRoCEv1
	}
	return sysfs.GIDTypeIB
}

// Lane counts of the verbs active_width codes, and lane speeds (name and
// the Gb/s the kernel's rate file uses) of the active_speed codes.
var (
	widthLanes = map[uint8]int{1: 1, 2: 4, 4: 8, 8: 12, 16: 2}
	laneSpeeds = map[uint8]struct {
		name string
		gbps float64
	}{
		1: {"SDR", 2.5}, 2: {"DDR", 5}, 4: {"QDR", 10}, 8: {"FDR10", 10},
		16: {"FDR", 14}, 32: {"EDR", 25}, 64: {"HDR", 50}, 128: {"NDR", 100},
	}
)

// rateFromCodes turns verbs width and speed codes into a rate; nil when
// either is zero or unknown (the built-in engine has no lanes).
func rateFromCodes(width, speed uint8) *sysfs.Rate {
	lanes, ok1 := widthLanes[width]
	sp, ok2 := laneSpeeds[speed]
	if !ok1 || !ok2 {
		return nil
	}
	return &sysfs.Rate{Gbps: float64(lanes) * sp.gbps, Width: lanes, Speed: sp.name}
}

// rateText formats a rate as the sysfs rate file does: "100 Gb/sec (4X EDR)".
func rateText(r *sysfs.Rate) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%g Gb/sec (%dX %s)", r.Gbps, r.Width, r.Speed)
}

// mtuBytes returns an MTU's size, or nil when unknown.
func mtuBytes(m sysfs.MTU) *int {
	if m.Bytes() == 0 {
		return nil
	}
	b := m.Bytes()
	return &b
}
