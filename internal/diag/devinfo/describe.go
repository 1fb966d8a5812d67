package devinfo

import (
	"slices"

	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

// Where a port's MTU came from.
const (
	FromQueryPort = "query_port" // a provider's QueryPort (ibv_query_port)
	FromNetdevMTU = "netdev_mtu" // derived from the port's netdev MTU
	FromDriver    = "driver"     // a driver constant (rxe's max MTU)
)

// Reasons Describe gives itself.
const (
	// WhyNotInSysfs: the sysfs file is missing or could not be read.
	WhyNotInSysfs = "unknown: not in sysfs"
	// WhyUnreadable: the device's sysfs directory could not be read.
	WhyUnreadable = "unknown: the device's sysfs directory is unreadable"
)

// Sources are what rdiag has for one device: its listing, its sysfs entry
// (nil for the built-in engine), and a provider's answers (nil when no
// provider could be asked).
type Sources struct {
	// Info is the device as listed: by a provider, or made from sysfs.
	Info verbsio.DeviceInfo
	// Sys is the device's entry in the --sysfs tree; nil for the built-in
	// engine's devices.
	Sys *sysfs.Device
	// Verbs holds the provider's answers; nil when none answered.
	Verbs *Verbs
	// NetdevMTU looks up a netdev's MTU (nil when unknown); a nil
	// NetdevMTU knows none.
	NetdevMTU func(name string) *int
	// Why is printed for every field only a verbs query knows when Verbs
	// is nil ("unknown: needs the ibverbs build (make build-ibverbs)").
	Why string
	// NotReported is printed for the fields a libibverbs device has but
	// the provider's answer lacks (a nil DeviceAttr.Ext or PortAttr.Ext,
	// or a name in DeviceAttr.Unknown); "" leaves those fields out, as
	// for the built-in engine, to which they do not apply.
	NotReported string
}

// Verbs is what a provider answered for a device.
type Verbs struct {
	Attr  verbsio.DeviceAttr
	Ports []VerbsPort // the ports that answered, by number
}

// VerbsPort is one port's QueryPort and QueryGIDTable answers.
type VerbsPort struct {
	Number int
	Attr   verbsio.PortAttr
	GIDs   []verbsio.GIDEntry
}

// Device is one device as ibv_devinfo shows it, with rdiag's additions
// (netdevs, MTU sources). Fields a verbs query alone knows are in Attr.
type Device struct {
	Name         string
	Transport    Value[string] // "InfiniBand", "iWARP", "usNIC", "usNIC UDP", "engine", ...
	FWVer        Value[string] // "" is printed as ibv_devinfo does: not at all
	NodeGUID     Value[uint64]
	SysImageGUID Value[uint64]
	BoardID      Value[string] // from sysfs, as ibv_devinfo reads it; left out when absent
	PhysPortCnt  Value[int]
	// Attr is the provider's QueryDevice answer; nil when none answered,
	// and then AttrWhy is printed for each of its fields.
	Attr    *verbsio.DeviceAttr
	AttrWhy string
	// NotReported is printed for what Attr lacks (see Sources).
	NotReported string
	Ports       []Port
}

// Port is one port of a Device.
type Port struct {
	Number    int
	State     Value[int]    // enum ibv_port_state
	PhysState Value[int]    // IBA PortPhysicalState
	LinkLayer Value[string] // "InfiniBand", "Ethernet", "Unspecified", or sysfs's word
	// Width and Speed are the verbs active_width and active_speed codes;
	// Rate is the same as lanes, lane speed and total.
	Width Value[uint8]
	Speed Value[uint32]
	Rate  Value[Rate]
	// MaxMTU and ActiveMTU, with where each came from (FromQueryPort,
	// FromNetdevMTU, FromDriver).
	MaxMTU, ActiveMTU         Value[verbsio.MTU]
	MaxMTUFrom, ActiveMTUFrom string
	LID, SMLID                Value[uint32]
	LMC, SMSL                 Value[uint8]
	CapFlags                  Value[uint32]
	GIDTblLen, PKeyTblLen     Value[int]
	MaxMsgSz                  Value[uint64]
	MaxVLNum                  Value[uint8]
	// Ext is the rest of ibv_query_port's answer; nil when not known
	// (why: the Device's AttrWhy, or NotReported).
	Ext  *verbsio.PortAttrEx
	GIDs []sysfs.GID // the non-zero entries, by index
	// Netdev is the port's network device and NetdevMTU its MTU.
	Netdev    string
	NetdevMTU *int
	IWARP     bool // an iWARP port: Ethernet, but no RoCE GIDs
}

// Rate is a port's signalling rate: lanes, lane speed name ("EDR") and
// the total in Gb/s, as the kernel's rate file gives them.
type Rate struct {
	Gbps  float64
	Width int
	Speed string
}

// Describe fills a Device from its sources: a provider's answers where
// there are some, sysfs for the rest, and reasons for what neither knows.
func Describe(s Sources) Device {
	d := Device{Name: s.Info.Name, NotReported: s.NotReported}
	sd := s.Sys
	if s.Info.Transport == "" {
		d.Transport = Unknown[string](WhyNotInSysfs)
	} else {
		d.Transport = Known(s.Info.Transport)
	}
	if sd != nil && sd.BoardID != nil {
		d.BoardID = Known(*sd.BoardID)
	}
	unreadable := sd != nil && sd.NodeType == nil && len(sd.Ports) == 0 && len(sd.Errs) > 0
	switch {
	case s.Verbs != nil:
		a := s.Verbs.Attr
		d.Attr = &a
		d.FWVer = Known(a.FWVer)
		d.NodeGUID, d.SysImageGUID = Known(a.NodeGUID), Known(a.SysImageGUID)
	case sd != nil:
		d.AttrWhy = s.Why
		if sd.FWVer != nil {
			d.FWVer = Known(libibverbsFWVer(*sd.FWVer))
		} else {
			d.FWVer = Unknown[string](WhyNotInSysfs)
		}
		d.NodeGUID = guidValue(sd.NodeGUID)
		d.SysImageGUID = guidValue(sd.SysImageGUID)
	default:
		d.AttrWhy = s.Why
		d.FWVer = Unknown[string](s.Why)
		if s.Info.NodeGUID != 0 {
			d.NodeGUID = Known(s.Info.NodeGUID)
		}
	}
	switch {
	case d.Attr != nil && d.Attr.PhysPortCnt > 0:
		d.PhysPortCnt = Known(d.Attr.PhysPortCnt)
	case unreadable:
		d.PhysPortCnt = Unknown[int](WhyUnreadable)
	default:
		d.PhysPortCnt = Known(s.Info.Ports)
	}

	if s.Verbs != nil {
		for _, vp := range s.Verbs.Ports {
			p := verbsPort(vp, s.NetdevMTU, s.NotReported != "")
			p.IWARP = s.Info.Transport == "iWARP"
			if !p.Rate.OK && sd != nil {
				if i := slices.IndexFunc(sd.Ports, func(sp sysfs.Port) bool { return sp.Number == vp.Number }); i >= 0 && sd.Ports[i].Rate != nil {
					p.Rate = Known(rateOf(*sd.Ports[i].Rate))
				}
			}
			d.Ports = append(d.Ports, p)
		}
		return d
	}
	if sd != nil {
		for _, sp := range sd.Ports {
			d.Ports = append(d.Ports, sysfsPort(*sd, sp, s.NetdevMTU, s.Why))
		}
	}
	return d
}

// libibverbsFWVer is the fw_ver ibv_query_device answers for a sysfs
// fw_ver: libibverbs formats the driver's raw 64-bit firmware version as
// "%d.%d.%d" unless the provider has its own string, and drivers whose
// sysfs fw_ver is empty (rxe, siw) have raw version 0. Every other
// driver's string is the same in both.
func libibverbsFWVer(sysfsFWVer string) string {
	if sysfsFWVer == "" {
		return "0.0.0"
	}
	return sysfsFWVer
}

func guidValue(g *sysfs.GUID) Value[uint64] {
	if g == nil {
		return Unknown[uint64](WhyNotInSysfs)
	}
	return Known(uint64(*g))
}

func rateOf(r sysfs.Rate) Rate { return Rate{Gbps: r.Gbps, Width: r.Width, Speed: r.Speed} }

// sysfsPort describes a sysfs port. Active and max MTU, which sysfs does
// not have, are derived where that is exact: rxe's max MTU is a driver
// constant, and a RoCE port's active MTU is the largest IB MTU its
// netdev's MTU leaves room for after the RoCE headers (capped by the max
// MTU when known). why is printed for the fields only a verbs query knows.
func sysfsPort(d sysfs.Device, p sysfs.Port, netdevMTU func(string) *int, why string) Port {
	v := Port{Number: p.Number,
		LID: from(p.LID, WhyNotInSysfs), SMLID: from(p.SMLID, WhyNotInSysfs),
		LMC: from(p.LMC, WhyNotInSysfs), SMSL: from(p.SMSL, WhyNotInSysfs),
		CapFlags: from(p.CapMask, WhyNotInSysfs), GIDs: p.GIDs,
		MaxMsgSz: Unknown[uint64](why), MaxVLNum: Unknown[uint8](why),
	}
	v.State = Unknown[int](WhyNotInSysfs)
	if p.State != nil {
		v.State = Known(p.State.Code)
	}
	v.PhysState = Unknown[int](WhyNotInSysfs)
	if p.PhysState != nil {
		v.PhysState = Known(p.PhysState.Code)
	}
	v.LinkLayer = from(p.LinkLayer, WhyNotInSysfs)
	v.Rate, v.Width, v.Speed = Unknown[Rate](WhyNotInSysfs), Unknown[uint8](WhyNotInSysfs), Unknown[uint32](WhyNotInSysfs)
	if p.Rate != nil {
		v.Rate = Known(rateOf(*p.Rate))
		w, _ := p.Rate.ActiveWidth() // 0 ("invalid") for a lane count verbs has no code for
		sp, _ := p.Rate.ActiveSpeed()
		v.Width, v.Speed = Known(w), Known(sp)
	}
	v.GIDTblLen, v.PKeyTblLen = Unknown[int](WhyNotInSysfs), Unknown[int](WhyNotInSysfs)
	if p.GIDTableLen > 0 {
		v.GIDTblLen = Known(p.GIDTableLen)
	}
	if p.PKeyTableLen > 0 {
		v.PKeyTblLen = Known(p.PKeyTableLen)
	}
	v.Netdev = sysfs.PortNetDev(d, p)
	if netdevMTU != nil && v.Netdev != "" {
		v.NetdevMTU = netdevMTU(v.Netdev)
	}
	v.IWARP = d.NodeType != nil && d.NodeType.Code == sysfs.NodeRNIC
	mtuWhy := why
	if mtuWhy == "" {
		mtuWhy = WhyNotInSysfs
	}
	v.MaxMTU, v.ActiveMTU = Unknown[verbsio.MTU](mtuWhy), Unknown[verbsio.MTU](mtuWhy)
	if sysfs.IsSoftRoCE(d) {
		v.MaxMTU, v.MaxMTUFrom = Known(sysfs.SoftRoCEMaxMTU), FromDriver
	}
	if v.LinkLayer.V == sysfs.LinkLayerEthernet && !v.IWARP && v.NetdevMTU != nil {
		fit := sysfs.RoCEMTU(*v.NetdevMTU, sysfs.RoCEOverheadFor(d))
		if v.MaxMTU.OK && fit > v.MaxMTU.V {
			fit = v.MaxMTU.V
		}
		if fit != 0 {
			v.ActiveMTU, v.ActiveMTUFrom = Known(fit), FromNetdevMTU
		}
	}
	return v
}

// verbsPort describes a port from a provider's QueryPort and QueryGIDTable.
// Width and speed codes of 0 are left out unless the device is a
// libibverbs one (kernel): the built-in engine has no lanes.
func verbsPort(vp VerbsPort, netdevMTU func(string) *int, kernel bool) Port {
	pa := vp.Attr
	v := Port{
		Number: vp.Number, State: Known(int(pa.State)), PhysState: Known(int(pa.PhysState)),
		LinkLayer: Known(pa.LinkLayer.String()),
		MaxMTU:    Known(pa.MaxMTU), ActiveMTU: Known(pa.ActiveMTU),
		MaxMTUFrom: FromQueryPort, ActiveMTUFrom: FromQueryPort,
		LID: Known(uint32(pa.LID)), SMLID: Known(uint32(pa.SMLID)),
		LMC: Known(pa.LMC), SMSL: Known(pa.SMSL), CapFlags: Known(pa.PortCapFlags),
		GIDTblLen: Known(pa.GIDTblLen), PKeyTblLen: Known(pa.PkeyTblLen),
		MaxMsgSz: Known(pa.MaxMsgSize), MaxVLNum: Known(pa.MaxVLNum),
		Ext: pa.Ext, Netdev: pa.Netdev,
	}
	if pa.Netdev != "" && netdevMTU != nil {
		v.NetdevMTU = netdevMTU(pa.Netdev)
	}
	if kernel || pa.ActiveWidth != 0 || pa.ActiveSpeed != 0 {
		v.Width, v.Speed = Known(pa.ActiveWidth), Known(uint32(pa.ActiveSpeed))
	}
	if r, ok := RateFromCodes(pa.ActiveWidth, uint32(pa.ActiveSpeed)); ok {
		v.Rate = Known(r)
	}
	linkLayer := ""
	if pa.LinkLayer == verbsio.LinkLayerEthernet {
		linkLayer = sysfs.LinkLayerEthernet
	}
	for _, g := range vp.GIDs {
		if g.GID.IsZero() {
			continue
		}
		v.GIDs = append(v.GIDs, sysfs.GID{Index: g.Index, Raw: g.GID, Type: gidType(g.Type, linkLayer), NetDev: g.Netdev})
	}
	return v
}

// gidType maps a verbs GID type to sysfs's, which tells IB from RoCE v1
// by the link layer.
func gidType(t verbsio.GIDType, linkLayer string) sysfs.GIDType {
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
	laneSpeeds = map[uint32]struct {
		name string
		gbps float64
	}{
		1: {"SDR", 2.5}, 2: {"DDR", 5}, 4: {"QDR", 10}, 8: {"FDR10", 10},
		16: {"FDR", 14}, 32: {"EDR", 25}, 64: {"HDR", 50}, 128: {"NDR", 100}, 256: {"XDR", 200},
	}
)

// RateFromCodes turns verbs width and speed codes into a rate; false when
// either has no name (the built-in engine has no lanes: both are 0).
func RateFromCodes(width uint8, speed uint32) (Rate, bool) {
	lanes, ok1 := widthLanes[width]
	sp, ok2 := laneSpeeds[speed]
	if !ok1 || !ok2 {
		return Rate{}, false
	}
	return Rate{Gbps: float64(lanes) * sp.gbps, Width: lanes, Speed: sp.name}, true
}

// VerbsOnly returns the labels of the device and port lines whose values
// only a verbs query knows: those a device described from sysfs alone
// prints with Sources.Why. (For RoCE ports, Describe derives active_mtu
// from the netdev MTU, and rxe's max_mtu from the driver.)
func VerbsOnly() (device, port []string) {
	const marker = "\x00verbs only"
	d := Describe(Sources{
		Info: verbsio.DeviceInfo{Name: "x", Transport: "InfiniBand", Ports: 1},
		Sys:  &sysfs.Device{Name: "x", Ports: []sysfs.Port{{Number: 1}}},
		Why:  marker,
	})
	dev, ports := Lines(d)
	pick := func(lines []Line) []string {
		var out []string
		for _, l := range lines {
			if l.Why == marker {
				out = append(out, l.Label)
			}
		}
		return out
	}
	return pick(dev), pick(ports[0])
}
