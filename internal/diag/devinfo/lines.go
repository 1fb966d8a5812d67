package devinfo

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

// Line is one line of ibv_devinfo's output (with the lines under it).
type Line struct {
	Indent int    // tabs before the label
	Label  string // "max_qp"; for a statement, what its JSON key names
	// Value is the value; nil with Why unknown, nil without Why a section
	// title ("tso_caps:").
	Value *string
	Why   string
	// Tabs is the number of tabs between "label:" and the value; 0: up
	// to the value column (40 for the device, 48 for ports).
	Tabs int
	// Sub are the lines under it, at five tabs (flag names).
	Sub []string
	// List marks a title whose value is the list under it
	// ("rc_odp_caps:" and its flags), as opposed to a section title.
	List bool
	// Statement is a line printed as it is ("core clock not supported");
	// Value holds its meaning for JSON.
	Statement string
	Blank     bool // an empty line (devinfo prints some inside a device)
	Verbose   bool // printed only with -v
}

// Columns at which devinfo's device and port values start.
const (
	deviceValueCol = 40
	portValueCol   = 48
)

// tabsTo returns the tabs that move from column col to target (at least
// one), with tab stops every 8 columns.
func tabsTo(col, target int) string {
	n := 0
	for n == 0 || col < target {
		col = (col/8 + 1) * 8
		n++
	}
	return strings.Repeat("\t", n)
}

// Lines lays d out as ibv_devinfo -v does: the device's lines and each
// port's (Verbose marks the lines only -v prints).
func Lines(d Device) (device []Line, ports [][]Line) {
	device = deviceLines(d)
	for _, p := range d.Ports {
		ports = append(ports, portLines(d, p))
	}
	return device, ports
}

// Write prints d as ibv_devinfo [-v] does.
func Write(w io.Writer, d Device, verbose bool) {
	device, ports := Lines(d)
	fmt.Fprintf(w, "hca_id:\t%s\n", d.Name)
	writeLines(w, device, 1, deviceValueCol, verbose)
	for i, p := range d.Ports {
		fmt.Fprintf(w, "\t\tport:\t%d\n", p.Number)
		writeLines(w, ports[i], 3, portValueCol, verbose)
		fmt.Fprintln(w)
	}
	if len(d.Ports) == 0 {
		fmt.Fprintln(w)
	}
}

func writeLines(w io.Writer, lines []Line, indent, col int, verbose bool) {
	for _, l := range lines {
		if l.Verbose && !verbose {
			continue
		}
		in := indent
		if l.Indent > 0 {
			in = l.Indent
		}
		lead := strings.Repeat("\t", in)
		switch {
		case l.Blank:
			fmt.Fprintln(w)
		case l.Statement != "":
			fmt.Fprintf(w, "%s%s\n", lead, l.Statement)
		case l.Value == nil && l.Why == "":
			fmt.Fprintf(w, "%s%s:\n", lead, l.Label)
		default:
			val := l.Why
			if l.Value != nil {
				val = *l.Value
			}
			tabs := tabsTo(in*8+len(l.Label)+1, col)
			if l.Tabs > 0 {
				tabs = strings.Repeat("\t", l.Tabs)
			}
			fmt.Fprintf(w, "%s%s:%s%s\n", lead, l.Label, tabs, val)
		}
		for _, s := range l.Sub {
			fmt.Fprintf(w, "\t\t\t\t\t%s\n", s)
		}
	}
}

// JSON returns the lines as label -> value, nil when unknown. Spaces in a
// label become underscores ("completion timestamp_mask" is
// "completion_timestamp_mask"); a list ("rc_odp_caps") has its lines
// joined with ", "; a statement has its meaning ("not supported"). Section
// titles ("tso_caps"), blank lines and GID lines are left out, and of a
// label that appears twice the first is kept.
func JSON(lines []Line) map[string]*string {
	m := make(map[string]*string, len(lines))
	for _, l := range lines {
		if l.Blank || strings.HasPrefix(l.Label, "GID[") {
			continue
		}
		v := l.Value
		if l.List {
			s := strings.Join(l.Sub, ", ")
			v = &s
		} else if l.Value == nil && l.Why == "" {
			continue
		}
		key := strings.ReplaceAll(l.Label, " ", "_")
		if _, dup := m[key]; !dup {
			m[key] = v
		}
	}
	return m
}

// lineBuilder collects lines; known/unknown add one.
type lineBuilder struct {
	lines   []Line
	verbose bool // mark what is added as -v only
}

func (b *lineBuilder) add(l Line) *Line {
	l.Verbose = l.Verbose || b.verbose
	b.lines = append(b.lines, l)
	return &b.lines[len(b.lines)-1]
}

func (b *lineBuilder) known(label, value string) *Line {
	return b.add(Line{Label: label, Value: &value})
}

// value adds a field that may be unknown; a zero Value is left out.
func value[T any](b *lineBuilder, label string, v Value[T], format func(T) string) {
	switch {
	case v.OK:
		b.known(label, format(v.V))
	case v.Why != "":
		b.add(Line{Label: label, Why: v.Why})
	}
}

func hex0x(format string) func(uint64) string {
	return func(v uint64) string { return fmt.Sprintf(format, v) }
}

func deviceLines(d Device) []Line {
	b := &lineBuilder{}
	value(b, "transport", d.Transport, TransportText)
	if d.FWVer.OK && d.FWVer.V == "" {
		// devinfo prints fw_ver only when the provider has one.
	} else {
		value(b, "fw_ver", d.FWVer, func(s string) string { return s })
	}
	value(b, "node_guid", d.NodeGUID, GUIDText)
	value(b, "sys_image_guid", d.SysImageGUID, GUIDText)
	a := d.Attr
	attr := func(label string, format func(*verbsio.DeviceAttr) string) {
		if a == nil {
			b.add(Line{Label: label, Why: d.AttrWhy})
			return
		}
		b.known(label, format(a))
	}
	attr("vendor_id", func(a *verbsio.DeviceAttr) string { return fmt.Sprintf("0x%04x", a.VendorID) })
	attr("vendor_part_id", func(a *verbsio.DeviceAttr) string { return strconv.FormatUint(uint64(a.VendorPartID), 10) })
	attr("hw_ver", func(a *verbsio.DeviceAttr) string { return fmt.Sprintf("0x%X", a.HWVer) })
	if d.BoardID.OK && d.BoardID.V != "" {
		b.known("board_id", d.BoardID.V)
	}
	value(b, "phys_port_cnt", d.PhysPortCnt, strconv.Itoa)
	b.verbose = true
	if a == nil {
		unknownVerbose(b, d.AttrWhy)
	} else {
		verboseDevice(b, d, a)
	}
	return b.lines
}

// unknownVerbose lays out the -v device fields when no provider answered:
// each where devinfo prints it, with the reason; a section whose lines
// depend on values is one line.
func unknownVerbose(b *lineBuilder, why string) {
	for _, l := range []string{"max_mr_size", "page_size_cap", "max_qp", "max_qp_wr", "device_cap_flags",
		"max_sge", "max_sge_rd", "max_cq", "max_cqe", "max_mr", "max_pd", "max_qp_rd_atom", "max_ee_rd_atom",
		"max_res_rd_atom", "max_qp_init_rd_atom", "max_ee_init_rd_atom", "atomic_cap", "max_ee", "max_rdd",
		"max_mw", "max_raw_ipv6_qp", "max_raw_ethy_qp", "max_mcast_grp", "max_mcast_qp_attach",
		"max_total_mcast_qp_attach", "max_ah", "max_fmr", "max_map_per_fmr", "max_srq", "max_srq_wr",
		"max_srq_sge", "max_pkeys", "local_ca_ack_delay"} {
		b.add(Line{Label: l, Why: why})
	}
	extended(b, nil, func(string) (bool, string) { return false, why })
}

// verboseDevice lays out the -v device fields of a provider's answer, as
// devinfo prints them.
func verboseDevice(b *lineBuilder, d Device, a *verbsio.DeviceAttr) {
	x := a.Ext
	num := func(label string, n int) { b.known(label, strconv.Itoa(n)) }
	// ext adds a field of DeviceAttrEx: unknown (NotReported) or left out
	// without one.
	ext := func(label string, n func(*verbsio.DeviceAttrEx) int) {
		switch {
		case x != nil:
			num(label, n(x))
		case d.NotReported != "":
			b.add(Line{Label: label, Why: d.NotReported})
		}
	}
	b.known("max_mr_size", fmt.Sprintf("0x%x", a.MaxMRSize))
	b.known("page_size_cap", fmt.Sprintf("0x%x", a.PageSizeCap))
	num("max_qp", a.MaxQP)
	num("max_qp_wr", a.MaxQPWR)
	b.known("device_cap_flags", fmt.Sprintf("0x%08x", uint32(a.DeviceCapFlags))).Sub = DeviceCapFlagNames(a.DeviceCapFlags)
	num("max_sge", a.MaxSGE)
	num("max_sge_rd", a.MaxSGERD)
	num("max_cq", a.MaxCQ)
	num("max_cqe", a.MaxCQE)
	num("max_mr", a.MaxMR)
	num("max_pd", a.MaxPD)
	num("max_qp_rd_atom", a.MaxQPRdAtom)
	ext("max_ee_rd_atom", func(x *verbsio.DeviceAttrEx) int { return x.MaxEERdAtom })
	num("max_res_rd_atom", a.MaxResRdAtom)
	num("max_qp_init_rd_atom", a.MaxQPInitRdAtom)
	ext("max_ee_init_rd_atom", func(x *verbsio.DeviceAttrEx) int { return x.MaxEEInitRdAtom })
	b.known("atomic_cap", AtomicCapText(a.AtomicCap))
	ext("max_ee", func(x *verbsio.DeviceAttrEx) int { return x.MaxEE })
	ext("max_rdd", func(x *verbsio.DeviceAttrEx) int { return x.MaxRDD })
	ext("max_mw", func(x *verbsio.DeviceAttrEx) int { return x.MaxMW })
	ext("max_raw_ipv6_qp", func(x *verbsio.DeviceAttrEx) int { return x.MaxRawIPv6QP })
	ext("max_raw_ethy_qp", func(x *verbsio.DeviceAttrEx) int { return x.MaxRawEthyQP })
	ext("max_mcast_grp", func(x *verbsio.DeviceAttrEx) int { return x.MaxMcastGrp })
	ext("max_mcast_qp_attach", func(x *verbsio.DeviceAttrEx) int { return x.MaxMcastQPAttach })
	ext("max_total_mcast_qp_attach", func(x *verbsio.DeviceAttrEx) int { return x.MaxTotalMcastQPAttach })
	num("max_ah", a.MaxAH)
	ext("max_fmr", func(x *verbsio.DeviceAttrEx) int { return x.MaxFMR })
	if x == nil || x.MaxFMR != 0 {
		ext("max_map_per_fmr", func(x *verbsio.DeviceAttrEx) int { return x.MaxMapPerFMR })
	}
	num("max_srq", a.MaxSRQ)
	if a.MaxSRQ != 0 {
		num("max_srq_wr", a.MaxSRQWR)
		num("max_srq_sge", a.MaxSRQSGE)
	}
	num("max_pkeys", a.MaxPkeys)
	num("local_ca_ack_delay", int(a.LocalCAAckDelay))
	extended(b, a, func(name string) (bool, string) {
		switch name {
		case "RawPacketCaps", "TSO", "PacketPacing", "MaxDMSize":
			// DeviceAttr's own fields: known unless the provider listed them.
			return !attrUnknown(a, name), whyListed
		}
		switch {
		case x == nil:
			return false, d.NotReported
		case attrUnknown(a, name):
			return false, whyListed // a legacy answer: ibv_query_device only
		}
		return true, ""
	})
}

// extended lays out, in devinfo's order, what ibv_query_device_ex adds to
// ibv_query_device, and the capabilities DeviceAttr carries among them.
// know says whether a group of fields (named as in DeviceAttr.Unknown) is
// known, and if not, the reason to print ("": leave it out).
func extended(b *lineBuilder, a *verbsio.DeviceAttr, know func(group string) (bool, string)) {
	var x *verbsio.DeviceAttrEx
	if a != nil {
		x = a.Ext
	}
	// group adds the lines of one group: known, or each label with the
	// reason, at indent.
	group := func(name string, indent int, labels ...string) bool {
		ok, why := know(name)
		if !ok && why != "" {
			for _, l := range labels {
				b.add(Line{Indent: indent, Label: l, Why: why})
			}
		}
		return ok
	}
	if group("ODPCaps", 0, "general_odp_caps", "rc_odp_caps", "uc_odp_caps", "ud_odp_caps", "xrc_odp_caps") {
		b.add(Line{Label: "general_odp_caps", Sub: odpGeneralNames(x.ODP.General), List: true})
		for _, t := range []struct {
			label string
			caps  uint32
		}{{"rc_odp_caps", x.ODP.RC}, {"uc_odp_caps", x.ODP.UC}, {"ud_odp_caps", x.ODP.UD}, {"xrc_odp_caps", x.ODP.XRC}} {
			b.add(Line{Label: t.label, Sub: odpTransportNames(t.caps), List: true})
		}
	}
	if group("CompletionTimestampMask", 0, "completion timestamp_mask") {
		if x.CompletionTimestampMask != 0 {
			b.add(Line{Label: "completion timestamp_mask", Tabs: 3, Value: ptr(fmt.Sprintf("0x%016x", x.CompletionTimestampMask))})
		} else {
			b.add(Line{Label: "completion timestamp_mask", Value: ptr("not supported"), Statement: "completion_timestamp_mask not supported"})
		}
	}
	if group("HCACoreClock", 0, "hca_core_clock") {
		if x.HCACoreClock != 0 {
			b.known("hca_core_clock", fmt.Sprintf("%dkHZ", x.HCACoreClock))
		} else {
			b.add(Line{Label: "hca_core_clock", Value: ptr("not supported"), Statement: "core clock not supported"})
		}
	}
	if group("RawPacketCaps", 0, "raw packet caps") && a.RawPacketCaps != 0 {
		b.add(Line{Label: "raw packet caps", Sub: rawPacketCapLines(a.RawPacketCaps), List: true})
	}
	if group("DeviceCapFlagsEx", 0, "device_cap_flags_ex") {
		b.known("device_cap_flags_ex", fmt.Sprintf("0x%X", x.DeviceCapFlagsEx)).Sub = deviceCapFlagsExNames(x.DeviceCapFlagsEx)
	}
	if ok, why := know("TSO"); ok || why != "" {
		b.add(Line{Label: "tso_caps"})
	}
	if group("TSO", 2, "max_tso") {
		b.add(Line{Indent: 2, Label: "max_tso", Tabs: 3, Value: ptr(strconv.FormatUint(uint64(a.TSO.MaxTSO), 10))})
		if a.TSO.MaxTSO > 0 {
			b.add(Line{Indent: 2, Label: "supported_qp", Sub: supportedQPNames(a.TSO.SupportedQP)})
		}
	}
	if ok, why := know("RSSCaps"); ok || why != "" {
		b.add(Line{Label: "rss_caps"})
	}
	if group("RSSCaps", 2, "max_rwq_indirection_tables", "max_rwq_indirection_table_size", "rx_hash_function", "rx_hash_fields_mask") {
		r := x.RSS
		b.add(Line{Indent: 2, Label: "max_rwq_indirection_tables", Tabs: 3, Value: ptr(strconv.FormatUint(uint64(r.MaxRWQIndirectionTables), 10))})
		b.add(Line{Indent: 2, Label: "max_rwq_indirection_table_size", Tabs: 3, Value: ptr(strconv.FormatUint(uint64(r.MaxRWQIndirectionTableSize), 10))})
		b.add(Line{Indent: 2, Label: "rx_hash_function", Tabs: 4, Value: ptr(fmt.Sprintf("0x%x", r.RxHashFunction))})
		b.add(Line{Indent: 2, Label: "rx_hash_fields_mask", Tabs: 4, Value: ptr(fmt.Sprintf("0x%X", r.RxHashFieldsMask))})
		if len(r.SupportedQP) > 0 {
			b.add(Line{Indent: 2, Label: "supported_qp", Sub: supportedQPNames(r.SupportedQP)})
		}
	}
	if group("MaxWQTypeRQ", 0, "max_wq_type_rq") {
		b.known("max_wq_type_rq", strconv.FormatUint(uint64(x.MaxWQTypeRQ), 10))
	}
	if ok, why := know("PacketPacing"); ok || why != "" {
		b.add(Line{Label: "packet_pacing_caps"})
	}
	if group("PacketPacing", 2, "qp_rate_limit_min", "qp_rate_limit_max") {
		pp := a.PacketPacing
		b.add(Line{Indent: 2, Label: "qp_rate_limit_min", Value: ptr(fmt.Sprintf("%dkbps", pp.RateLimitMinKbps))})
		b.add(Line{Indent: 2, Label: "qp_rate_limit_max", Value: ptr(fmt.Sprintf("%dkbps", pp.RateLimitMaxKbps))})
		if pp.RateLimitMaxKbps > 0 {
			b.add(Line{Indent: 2, Label: "supported_qp", Sub: supportedQPNames(pp.SupportedQP)})
		}
	}
	if group("TMCaps", 0, "tag matching") {
		if tm := x.TM; tm.MaxNumTags != 0 {
			b.add(Line{Label: "max_rndv_hdr_size", Value: ptr(strconv.FormatUint(uint64(tm.MaxRndvHdrSize), 10))})
			b.add(Line{Label: "max_num_tags", Value: ptr(strconv.FormatUint(uint64(tm.MaxNumTags), 10))})
			b.add(Line{Label: "max_ops", Value: ptr(strconv.FormatUint(uint64(tm.MaxOps), 10))})
			b.add(Line{Label: "max_sge", Value: ptr(strconv.FormatUint(uint64(tm.MaxSGE), 10))})
			var flags []string
			if tm.Flags&1 != 0 {
				flags = append(flags, "IBV_TM_CAP_RC")
			}
			b.add(Line{Label: "flags", Sub: flags, List: true})
		} else {
			b.add(Line{Label: "tag matching", Value: ptr("not supported"), Statement: "tag matching not supported"})
		}
	}
	if group("CQModCaps", 0, "cq moderation caps") {
		if c := x.CQMod; c.MaxCQCount != 0 && c.MaxCQPeriod != 0 {
			b.add(Line{Blank: true})
			b.add(Line{Label: "cq moderation caps"})
			b.add(Line{Indent: 2, Label: "max_cq_count", Tabs: 1, Value: ptr(strconv.Itoa(int(c.MaxCQCount)))})
			b.add(Line{Indent: 2, Label: "max_cq_period", Tabs: 1, Value: ptr(fmt.Sprintf("%d us", c.MaxCQPeriod))})
			b.add(Line{Blank: true})
		}
	}
	if group("MaxDMSize", 0, "maximum available device memory") && a.MaxDMSize > 0 {
		b.known("maximum available device memory", fmt.Sprintf("%dBytes", a.MaxDMSize))
		b.add(Line{Blank: true})
	}
	if group("NumCompVectors", 0, "num_comp_vectors") {
		b.known("num_comp_vectors", strconv.Itoa(x.NumCompVectors))
	}
}

// whyListed is the reason for a DeviceAttr field its provider listed in
// Unknown.
const whyListed = "unknown"

func ptr[T any](v T) *T { return &v }

// attrUnknown reports whether the provider listed a DeviceAttr field as
// unknown. Names are matched without regard to case or underscores, so
// "MaxInlineData" and "max_inline_data" are the same field.
func attrUnknown(a *verbsio.DeviceAttr, name string) bool {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	for _, u := range a.Unknown {
		if norm(u) == norm(name) {
			return true
		}
	}
	return false
}

// AttrUnknown reports whether the provider listed the DeviceAttr field
// name (in any case, with or without underscores) as unknown.
func AttrUnknown(a *verbsio.DeviceAttr, name string) bool { return attrUnknown(a, name) }

func portLines(d Device, p Port) []Line {
	b := &lineBuilder{}
	value(b, "state", p.State, PortStateText)
	value(b, "max_mtu", p.MaxMTU, MTUText)
	value(b, "active_mtu", p.ActiveMTU, MTUText)
	value(b, "sm_lid", p.SMLID, func(v uint32) string { return strconv.FormatUint(uint64(v), 10) })
	value(b, "port_lid", p.LID, func(v uint32) string { return strconv.FormatUint(uint64(v), 10) })
	value(b, "port_lmc", p.LMC, func(v uint8) string { return fmt.Sprintf("0x%02x", v) })
	value(b, "link_layer", p.LinkLayer, LinkLayerText)
	b.verbose = true
	why := d.AttrWhy
	if d.Attr != nil {
		why = d.NotReported
	}
	ext := func(label string, format func(*verbsio.PortAttrEx) string) {
		switch {
		case p.Ext != nil:
			b.known(label, format(p.Ext))
		case why != "":
			b.add(Line{Label: label, Why: why})
		}
	}
	value(b, "max_msg_sz", p.MaxMsgSz, hex0x("0x%x"))
	value(b, "port_cap_flags", p.CapFlags, func(v uint32) string { return fmt.Sprintf("0x%08x", v) })
	ext("port_cap_flags2", func(x *verbsio.PortAttrEx) string { return fmt.Sprintf("0x%04x", x.PortCapFlags2) })
	value(b, "max_vl_num", p.MaxVLNum, VLText)
	ext("bad_pkey_cntr", func(x *verbsio.PortAttrEx) string { return fmt.Sprintf("0x%x", x.BadPkeyCntr) })
	ext("qkey_viol_cntr", func(x *verbsio.PortAttrEx) string { return fmt.Sprintf("0x%x", x.QKeyViolCntr) })
	value(b, "sm_sl", p.SMSL, func(v uint8) string { return strconv.Itoa(int(v)) })
	value(b, "pkey_tbl_len", p.PKeyTblLen, strconv.Itoa)
	value(b, "gid_tbl_len", p.GIDTblLen, strconv.Itoa)
	ext("subnet_timeout", func(x *verbsio.PortAttrEx) string { return strconv.Itoa(int(x.SubnetTimeout)) })
	ext("init_type_reply", func(x *verbsio.PortAttrEx) string { return strconv.Itoa(int(x.InitTypeReply)) })
	value(b, "active_width", p.Width, WidthText)
	value(b, "active_speed", p.Speed, SpeedText)
	// devinfo shows the physical state of InfiniBand-transport devices
	// (IB and RoCE) only.
	if t := d.Transport; !t.OK || t.V == "InfiniBand" || t.V == "engine" {
		value(b, "phys_state", p.PhysState, PhysStateText)
	}
	linkLayer := ""
	if p.LinkLayer.OK {
		linkLayer = p.LinkLayer.V
	}
	for _, g := range p.GIDs {
		if s, ok := gidLine(g, linkLayer); ok {
			b.known(fmt.Sprintf("GID[%3d]", g.Index), s)
		}
	}
	return b.lines
}

// gidLine is a GID line's value: GIDText, except that a GID whose type
// sysfs could not read is still shown, marked "type unknown" (devinfo
// would print nothing for it).
func gidLine(g sysfs.GID, linkLayer string) (string, bool) {
	if s, ok := GIDText(g, linkLayer); ok {
		return s, true
	}
	if [8]byte(g.Raw[8:]) == [8]byte{} {
		return "", false
	}
	return g.SysfsString() + ", type unknown", true
}
