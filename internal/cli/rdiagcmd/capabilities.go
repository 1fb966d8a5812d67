package rdiagcmd

import (
	"fmt"
	"io"
	"math/bits"
	"strconv"
	"strings"

	"github.com/rperf/rperf/internal/diag/devinfo"
	"github.com/rperf/rperf/verbsio"
)

// capabilitiesJSON is the capability report of `rdiag info --json`. A
// null value (or a null list) is unknown; the reason is in the device's
// "unknown" object under the same key. An empty list is "none".
type capabilitiesJSON struct {
	MaxQP          *int            `json:"max_qp"`
	MaxQPWR        *int            `json:"max_qp_wr"`
	MaxSGE         *int            `json:"max_sge"`
	MaxSGERD       *int            `json:"max_sge_rd"`
	MaxCQ          *int            `json:"max_cq"`
	MaxCQE         *int            `json:"max_cqe"`
	MaxMR          *int            `json:"max_mr"`
	MaxMRSize      *uint64         `json:"max_mr_size"`
	MaxPD          *int            `json:"max_pd"`
	MaxSRQ         *int            `json:"max_srq"`
	MaxInlineData  *int            `json:"max_inline_data"`
	MaxMsgSize     *uint64         `json:"max_msg_size"`
	MTU            []portMTUJSON   `json:"mtu"`
	AtomicCap      *string         `json:"atomic_cap"`
	DeviceCapFlags []string        `json:"device_cap_flags"`
	TSO            *tsoJSON        `json:"tso"`
	PacketPacing   *pacingJSON     `json:"packet_pacing"`
	MaxDMSize      *uint64         `json:"max_dm_size"`
	RawPacketCaps  []string        `json:"raw_packet_caps"`
	MaxRawEthyQP   *int            `json:"max_raw_ethy_qp"`
	FlowSteering   *steeringJSON   `json:"flow_steering"`
	HCACoreClock   *timestampJSON  `json:"hca_core_clock"`
	SendPaths      []string        `json:"send_paths"`
	Interfaces     []interfaceJSON `json:"interfaces"`
}

// portMTUJSON is one port's MTUs in bytes and where each came from
// ("query_port", "netdev_mtu", "driver"); null when unknown.
type portMTUJSON struct {
	Port         int     `json:"port"`
	Active       *int    `json:"active"`
	Max          *int    `json:"max"`
	ActiveSource *string `json:"active_source"`
	MaxSource    *string `json:"max_source"`
}

// tsoJSON is the TSO capability (tso_caps).
type tsoJSON struct {
	Supported bool     `json:"supported"`
	MaxTSO    uint32   `json:"max_tso"`
	QPTypes   []string `json:"qp_types"`
}

// pacingJSON is the packet pacing capability (packet_pacing_caps).
type pacingJSON struct {
	Supported bool     `json:"supported"`
	MinKbps   uint32   `json:"min_kbps"`
	MaxKbps   uint32   `json:"max_kbps"`
	QPTypes   []string `json:"qp_types"`
}

// steeringJSON is flow steering (ibv_create_flow): the spec kinds,
// actions and rule kinds the device takes. Supported without Features
// means the device steers (IBV_DEVICE_MANAGED_FLOW_STEERING) but its
// provider does not say which specs.
type steeringJSON struct {
	Supported   bool     `json:"supported"`
	Features    []string `json:"features"`
	MaxPriority uint16   `json:"max_priority"`
	MaxTag      uint32   `json:"max_tag"`
}

// timestampJSON is the completion timestamp clock (ibv_query_device_ex's
// completion_timestamp_mask and hca_core_clock): a CQ created with the
// timestamp flag stamps completions in ticks of this clock.
type timestampJSON struct {
	Supported bool   `json:"supported"`
	Mask      uint64 `json:"completion_timestamp_mask"`
	ClockKHz  uint64 `json:"clock_khz"`
}

// interfaceJSON is an accelerated interface family and its version.
type interfaceJSON struct {
	Family  string `json:"family"`
	Version int    `json:"version"`
}

// capRow is one line of the capability table.
type capRow struct{ key, value, source string }

// capabilities fills j.Capabilities, j.Unknown and the table rows from v.
func (j *infoJSON) capabilities(v devView) {
	c := &j.Capabilities
	a := v.desc.Attr
	row := func(key, value, source string) { j.rows = append(j.rows, capRow{key, value, source}) }
	unknownRow := func(key, why string) {
		j.Unknown[key] = strings.TrimPrefix(strings.TrimPrefix(why, "unknown"), ": ")
		if j.Unknown[key] == "" {
			j.Unknown[key] = "the provider reports it as unknown"
		}
		row(key, why, "-")
	}
	// isUnknown: no provider answered, or it listed the DeviceAttr field.
	isUnknown := func(key, attrField string) bool {
		switch {
		case a == nil:
			unknownRow(key, v.desc.AttrWhy)
			return true
		case devinfo.AttrUnknown(a, attrField):
			unknownRow(key, whyProviderUnknown)
			return true
		}
		return false
	}
	intCap := func(key, attrField string, dst **int, val func() int) {
		if isUnknown(key, attrField) {
			return
		}
		n := val()
		*dst = &n
		row(key, strconv.Itoa(n), srcQueryDevice)
	}
	intCap("max_qp", "MaxQP", &c.MaxQP, func() int { return a.MaxQP })
	intCap("max_qp_wr", "MaxQPWR", &c.MaxQPWR, func() int { return a.MaxQPWR })
	intCap("max_sge", "MaxSGE", &c.MaxSGE, func() int { return a.MaxSGE })
	intCap("max_sge_rd", "MaxSGERD", &c.MaxSGERD, func() int { return a.MaxSGERD })
	intCap("max_cq", "MaxCQ", &c.MaxCQ, func() int { return a.MaxCQ })
	intCap("max_cqe", "MaxCQE", &c.MaxCQE, func() int { return a.MaxCQE })
	intCap("max_mr", "MaxMR", &c.MaxMR, func() int { return a.MaxMR })
	if !isUnknown("max_mr_size", "MaxMRSize") {
		c.MaxMRSize = ptr(a.MaxMRSize)
		row("max_mr_size", bytesText(a.MaxMRSize), srcQueryDevice)
	}
	intCap("max_pd", "MaxPD", &c.MaxPD, func() int { return a.MaxPD })
	intCap("max_srq", "MaxSRQ", &c.MaxSRQ, func() int { return a.MaxSRQ })
	if !isUnknown("max_inline_data", "MaxInlineData") {
		c.MaxInlineData = ptr(a.MaxInlineData)
		src := srcQueryDevice
		if v.dev.kernel() {
			src = srcCreateQP // libibverbs reports it per QP: the provider probed it
		}
		row("max_inline_data", bytesText(uint64(a.MaxInlineData)), src)
	}
	if !isUnknown("max_msg_size", "MaxMsgSize") {
		c.MaxMsgSize = ptr(a.MaxMsgSize)
		row("max_msg_size", bytesText(a.MaxMsgSize), srcQueryDevice)
	}

	c.MTU = []portMTUJSON{}
	for _, p := range v.desc.Ports {
		m := portMTUJSON{Port: p.Number, Active: mtuBytes(p.ActiveMTU), Max: mtuBytes(p.MaxMTU)}
		if m.Active != nil {
			m.ActiveSource = ptr(p.ActiveMTUFrom)
		}
		if m.Max != nil {
			m.MaxSource = ptr(p.MaxMTUFrom)
		}
		c.MTU = append(c.MTU, m)
		key := "mtu (port " + strconv.Itoa(p.Number) + ")"
		text := "active " + mtuText(m.Active) + ", max " + mtuText(m.Max)
		var src []string
		if m.ActiveSource != nil {
			s := *m.ActiveSource
			if s == devinfo.FromNetdevMTU && p.NetdevMTU != nil {
				s = fmt.Sprintf("%s (%s MTU %d)", s, p.Netdev, *p.NetdevMTU)
			}
			src = append(src, "active: "+s)
		}
		if m.MaxSource != nil {
			src = append(src, "max: "+*m.MaxSource)
		}
		if m.Active == nil || m.Max == nil {
			why := "not reported by the provider"
			if a == nil && v.desc.AttrWhy != "" {
				why = v.desc.AttrWhy
			}
			j.Unknown["mtu"] = strings.TrimPrefix(why, "unknown: ")
			text += " (" + why + ")"
		}
		row(key, text, orDash(strings.Join(src, "; ")))
	}

	if !isUnknown("atomic_cap", "AtomicCap") {
		c.AtomicCap = ptr(a.AtomicCap.String())
		row("atomic_cap", atomicText(a.AtomicCap), srcQueryDevice)
	}
	if !isUnknown("device_cap_flags", "DeviceCapFlags") {
		c.DeviceCapFlags = append([]string{}, devinfo.DeviceCapFlagNames(a.DeviceCapFlags)...)
		row("device_cap_flags", fmt.Sprintf("0x%08x (%d flags, named by info -v)", uint32(a.DeviceCapFlags), len(c.DeviceCapFlags)), srcQueryDevice)
	}
	if !isUnknown("tso", "TSO") {
		t := &tsoJSON{Supported: a.TSO.MaxTSO > 0, MaxTSO: a.TSO.MaxTSO, QPTypes: qpTypeNames(a.TSO.SupportedQP)}
		c.TSO = t
		text := "not supported (max_tso 0)"
		if t.Supported {
			text = fmt.Sprintf("yes: up to %s per send; QP types %s", bytesText(uint64(t.MaxTSO)), qpTypesText(a.TSO.SupportedQP))
		}
		row("tso", text, srcQueryDevice)
	}
	if !isUnknown("packet_pacing", "PacketPacing") {
		pp := a.PacketPacing
		p := &pacingJSON{Supported: pp.RateLimitMaxKbps > 0, MinKbps: pp.RateLimitMinKbps, MaxKbps: pp.RateLimitMaxKbps, QPTypes: qpTypeNames(pp.SupportedQP)}
		c.PacketPacing = p
		text := "not supported (qp_rate_limit_max 0)"
		if p.Supported {
			text = fmt.Sprintf("yes: %d to %d kbps; QP types %s", p.MinKbps, p.MaxKbps, qpTypesText(pp.SupportedQP))
		}
		row("packet_pacing", text, srcQueryDevice)
	}
	if !isUnknown("max_dm_size", "MaxDMSize") {
		c.MaxDMSize = ptr(a.MaxDMSize)
		text := "not supported (0 bytes)"
		if a.MaxDMSize > 0 {
			text = bytesText(a.MaxDMSize)
		}
		row("max_dm_size", text, srcQueryDevice)
	}
	if !isUnknown("raw_packet_caps", "RawPacketCaps") {
		c.RawPacketCaps = append([]string{}, devinfo.RawPacketCapNames(a.RawPacketCaps)...)
		row("raw_packet_caps", orNone(strings.Join(c.RawPacketCaps, ", ")), srcQueryDevice)
	}
	c.rawRows(v, row, unknownRow)
	if !isUnknown("send_paths", "SendPaths") {
		c.SendPaths = append([]string{}, a.SendPaths...)
		row("send_paths", orNone(strings.Join(a.SendPaths, ", ")), srcQueryDevice)
	}
	if !isUnknown("interfaces", "Interfaces") {
		c.Interfaces = []interfaceJSON{}
		var parts []string
		for _, in := range a.Interfaces {
			c.Interfaces = append(c.Interfaces, interfaceJSON{Family: in.Family, Version: in.Version})
			parts = append(parts, fmt.Sprintf("%s v%d", in.Family, in.Version))
		}
		row("interfaces", orNone(strings.Join(parts, ", ")), srcQueryDevice)
	}
}

func writeCapabilities(w io.Writer, j infoJSON) error {
	fmt.Fprintf(w, "capabilities of %s (%s):\n", j.Name, capSourceText(j))
	rows := make([][]string, 0, len(j.rows))
	for _, r := range j.rows {
		rows = append(rows, []string{r.key, r.value, r.source})
	}
	return writeTable(w, []string{"CAPABILITY", "VALUE", "SOURCE"}, rows)
}

func capSourceText(j infoJSON) string {
	if j.Source == srcQueryDevice {
		return "provider " + j.Provider + " answered QueryDevice"
	}
	return "from sysfs only"
}

// mtuBytes returns a known MTU's size, or nil.
func mtuBytes(m devinfo.Value[verbsio.MTU]) *int {
	if !m.OK || m.V.Bytes() == 0 {
		return nil
	}
	return ptr(m.V.Bytes())
}

func mtuText(n *int) string {
	if n == nil {
		return "unknown"
	}
	return strconv.Itoa(*n)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// atomicText explains an atomic capability.
func atomicText(a verbsio.AtomicCap) string {
	switch a {
	case verbsio.AtomicNone:
		return a.String() + ": no atomic operations"
	case verbsio.AtomicHCA:
		return a.String() + ": atomic with respect to this device's operations"
	case verbsio.AtomicGlob:
		return a.String() + ": atomic with respect to this device and the CPUs"
	}
	return a.String()
}

// bytesText prints a byte count, with its binary-unit size when it is at
// least 1 KiB: "1024 bytes (1 KiB)".
func bytesText(n uint64) string {
	s := strconv.FormatUint(n, 10) + " bytes"
	if n == ^uint64(0) {
		return s + " (no limit)"
	}
	if n < 1024 {
		return s
	}
	return s + " (" + binaryUnits(n) + ")"
}

// binaryUnits formats n with a binary unit: "64 MiB", "1.5 GiB".
func binaryUnits(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == float64(uint64(v)) {
		return fmt.Sprintf("%d %s", uint64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// devCapManagedFlowSteering is IBV_DEVICE_MANAGED_FLOW_STEERING.
const devCapManagedFlowSteering = 1 << 29

// rawRows adds the raw Ethernet capabilities: raw QPs, flow steering and
// the completion timestamp clock (ibv_query_device_ex's; unknown on a legacy
// answer).
func (c *capabilitiesJSON) rawRows(v devView, row func(key, value, source string), unknownRow func(key, why string)) {
	a := v.desc.Attr
	if a == nil {
		// No provider answered (a kernel device without the ibverbs
		// build): the raw rows are unknown for the rows above's reason,
		// not missing.
		for _, key := range []string{"max_raw_ethy_qp", "flow_steering", "hca_core_clock"} {
			unknownRow(key, v.desc.AttrWhy)
		}
		return
	}
	ext := func(key string) bool {
		switch {
		case a.Ext == nil && v.desc.NotReported != "":
			unknownRow(key, v.desc.NotReported)
		case a.Ext == nil:
		case devinfo.AttrUnknown(a, "CompletionTimestampMask") && key == "hca_core_clock":
			unknownRow(key, whyProviderUnknown)
		default:
			return true
		}
		return false
	}
	if ext("max_raw_ethy_qp") {
		c.MaxRawEthyQP = ptr(a.Ext.MaxRawEthyQP)
		text := "0 (no RAW_PACKET QPs)"
		if n := a.Ext.MaxRawEthyQP; n > 0 {
			text = strconv.Itoa(n)
		}
		row("max_raw_ethy_qp", text, srcQueryDevice)
	}
	fs := a.FlowSteering
	st := &steeringJSON{Supported: fs.Features != 0 || a.DeviceCapFlags&devCapManagedFlowSteering != 0,
		Features: append([]string{}, fs.Features.Names()...), MaxPriority: fs.MaxPriority, MaxTag: fs.MaxTag}
	c.FlowSteering = st
	switch {
	case fs.Features != 0:
		row("flow_steering", fmt.Sprintf("yes: %s; priorities 0..%d, tags up to %d", strings.Join(st.Features, ", "), fs.MaxPriority, fs.MaxTag), srcQueryDevice)
	case st.Supported:
		row("flow_steering", "yes (MANAGED_FLOW_STEERING); the provider does not report which specs", srcQueryDevice)
	default:
		row("flow_steering", "not supported", srcQueryDevice)
	}
	if ext("hca_core_clock") {
		x := a.Ext
		t := &timestampJSON{Supported: x.CompletionTimestampMask != 0 && x.HCACoreClock != 0, Mask: x.CompletionTimestampMask, ClockKHz: x.HCACoreClock}
		c.HCACoreClock = t
		text := "no completion timestamps (completion_timestamp_mask or hca_core_clock 0)"
		if t.Supported {
			text = fmt.Sprintf("%d kHz, %d-bit completion stamps", t.ClockKHz, bits.OnesCount64(t.Mask))
		}
		row("hca_core_clock", text, srcQueryDevice)
	}
}
