package rdiagcmd

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

// This file lays out `rdiag info` the way `ibv_devinfo [-v]` prints a
// device (rdma-core's libibverbs/examples/devinfo.c): "hca_id:", then one
// "label:<tabs>value" line per field (device fields aligned at column 40,
// port fields at column 48, with 8-column tabs), continuation lines for
// flag names, and "port:" blocks. Fields the source cannot know carry the
// reason instead of a value, so a zero is never invented.

// field is one line of devinfo output.
type field struct {
	label   string
	value   *string  // nil: unknown (see why)
	why     string   // for unknown fields
	sub     []string // continuation lines (flag names)
	indent  int      // tab stops before the label; 0 means the section default
	verbose bool     // printed only with -v
	header  bool     // a section title without a value ("tso_caps:")
}

func known(label, value string) field { return field{label: label, value: &value} }

func unknown(label, why string) field { return field{label: label, why: why} }

func (f field) v() field { f.verbose = true; return f }

// devinfoPort is one "port:" block.
type devinfoPort struct {
	number int
	fields []field
}

// devinfo is one device in devinfo layout.
type devinfo struct {
	name   string
	fields []field
	ports  []devinfoPort
}

// Column at which devinfo's device and port values start.
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

// write prints d; verbose adds the -v fields.
func (d devinfo) write(w io.Writer, verbose bool) {
	fmt.Fprintf(w, "hca_id:\t%s\n", d.name)
	writeFields(w, d.fields, 1, deviceValueCol, verbose)
	for _, p := range d.ports {
		fmt.Fprintf(w, "\t\tport:\t%d\n", p.number)
		writeFields(w, p.fields, 3, portValueCol, verbose)
	}
	fmt.Fprintln(w)
}

func writeFields(w io.Writer, fields []field, indent, col int, verbose bool) {
	for _, f := range fields {
		if f.verbose && !verbose {
			continue
		}
		in := indent
		if f.indent > 0 {
			in = f.indent
		}
		lead := strings.Repeat("\t", in)
		if f.header {
			fmt.Fprintf(w, "%s%s:\n", lead, f.label)
			for _, s := range f.sub {
				fmt.Fprintf(w, "\t\t\t\t\t%s\n", s)
			}
			continue
		}
		val := f.why
		if f.value != nil {
			val = *f.value
		}
		fmt.Fprintf(w, "%s%s:%s%s\n", lead, f.label, tabsTo(in*8+len(f.label)+1, col), val)
		for _, s := range f.sub {
			fmt.Fprintf(w, "\t\t\t\t\t%s\n", s)
		}
	}
}

// fieldsJSON returns the fields as devinfo label -> value, null when
// unknown. Spaces in a label become underscores ("completion
// timestamp_mask" is "completion_timestamp_mask"). Section titles are
// left out; flag names are in the capability report.
func fieldsJSON(fields []field) map[string]*string {
	m := make(map[string]*string, len(fields))
	for _, f := range fields {
		if f.header {
			continue
		}
		m[strings.ReplaceAll(f.label, " ", "_")] = f.value
	}
	return m
}

// transportText formats a provider's transport name as devinfo does:
// "InfiniBand (0)". The built-in engine's "engine" is printed as is.
func transportText(t string) string {
	for code, name := range []string{"InfiniBand", "iWARP", "usNIC", "usNIC UDP"} {
		if t == name {
			return fmt.Sprintf("%s (%d)", name, code)
		}
	}
	if t == "" {
		return "unknown"
	}
	return t
}

// deviceCapNames are the IBV_DEVICE_* capability bits by value, as
// devinfo names them.
var deviceCapNames = []struct {
	bit  uint64
	name string
}{
	{1 << 0, "RESIZE_MAX_WR"}, {1 << 1, "BAD_PKEY_CNTR"}, {1 << 2, "BAD_QKEY_CNTR"},
	{1 << 3, "RAW_MULTI"}, {1 << 4, "AUTO_PATH_MIG"}, {1 << 5, "CHANGE_PHY_PORT"},
	{1 << 6, "UD_AV_PORT_ENFORCE"}, {1 << 7, "CURR_QP_STATE_MOD"}, {1 << 8, "SHUTDOWN_PORT"},
	{1 << 9, "INIT_TYPE"}, {1 << 10, "PORT_ACTIVE_EVENT"}, {1 << 11, "SYS_IMAGE_GUID"},
	{1 << 12, "RC_RNR_NAK_GEN"}, {1 << 13, "SRQ_RESIZE"}, {1 << 14, "N_NOTIFY_CQ"},
	{1 << 17, "MEM_WINDOW"}, {1 << 18, "UD_IP_CSUM"}, {1 << 20, "XRC"},
	{1 << 21, "MEM_MGT_EXTENSIONS"}, {1 << 23, "MEM_WINDOW_TYPE_2A"}, {1 << 24, "MEM_WINDOW_TYPE_2B"},
	{1 << 25, "RC_IP_CSUM"}, {1 << 26, "RAW_IP_CSUM"}, {1 << 29, "MANAGED_FLOW_STEERING"},
}

// deviceCapFlagNames names the set bits of device_cap_flags; bits devinfo
// has no name for are listed as "Unknown flags: 0x...".
func deviceCapFlagNames(flags uint64) []string {
	var out []string
	for _, c := range deviceCapNames {
		if flags&c.bit != 0 {
			out = append(out, c.name)
			flags &^= c.bit
		}
	}
	if flags&0xffffffff != 0 {
		out = append(out, fmt.Sprintf("Unknown flags: 0x%x", flags&0xffffffff))
	}
	return out
}

// rawPacketCapNames names raw packet capability bits.
func rawPacketCapNames(c verbsio.RawPacketCaps) []string {
	var out []string
	for _, n := range []struct {
		bit  verbsio.RawPacketCaps
		name string
	}{
		{verbsio.RawCapCVLANStripping, "CVLAN_STRIPPING"}, {verbsio.RawCapScatterFCS, "SCATTER_FCS"},
		{verbsio.RawCapIPCsum, "IP_CSUM"}, {verbsio.RawCapDelayDrop, "DELAY_DROP"},
	} {
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

// vlText formats max_vl_num as devinfo does: "1 (1)", "8 (4)".
func vlText(v uint8) string {
	names := map[uint8]string{1: "1", 2: "2", 3: "4", 4: "8", 5: "15"}
	n, ok := names[v]
	if !ok {
		n = "invalid value"
	}
	return fmt.Sprintf("%s (%d)", n, v)
}

// gidLabel is devinfo's "GID[  0]" label.
func gidLabel(i int) string { return fmt.Sprintf("GID[%3d]", i) }

// gidDevinfo formats a GID line's value as devinfo does. A GID whose type
// could not be read is still shown, with "type unknown"; devinfo skips
// entries whose lower 64 bits are zero, and so does this.
func gidDevinfo(g sysfs.GID, linkLayer string) (string, bool) {
	if s, ok := g.Devinfo(linkLayer); ok {
		return s, true
	}
	if [8]byte(g.Raw[8:]) == [8]byte{} {
		return "", false
	}
	return g.SysfsString() + ", type unknown", true
}

// portFields lays out one port. kernelWhy is the reason to give for
// fields devinfo shows that this source cannot know; "" leaves them out
// (they do not apply to the built-in engine).
func portFields(p portView, kernelWhy string) []field {
	var fs []field
	add := func(f field) { fs = append(fs, f) }
	addKnown := func(label string, ok bool, value func() string, why string, verbose bool) {
		var f field
		switch {
		case ok:
			f = known(label, value())
		case why == "":
			return
		default:
			f = unknown(label, why)
		}
		f.verbose = verbose
		add(f)
	}
	missing := "unknown: not in sysfs"
	addKnown("state", p.State != nil, func() string { return sysfs.PortState{Code: *p.State}.Devinfo() }, missing, false)
	mtuWhy := kernelWhy
	if mtuWhy == "" {
		mtuWhy = missing
	}
	addKnown("max_mtu", p.MaxMTU != 0, func() string { return p.MaxMTU.Devinfo() }, mtuWhy, false)
	addKnown("active_mtu", p.ActiveMTU != 0, func() string { return p.ActiveMTU.Devinfo() }, mtuWhy, false)
	addKnown("sm_lid", p.SMLID != nil, func() string { return strconv.FormatUint(uint64(*p.SMLID), 10) }, missing, false)
	addKnown("port_lid", p.LID != nil, func() string { return strconv.FormatUint(uint64(*p.LID), 10) }, missing, false)
	addKnown("port_lmc", p.LMC != nil, func() string { return sysfs.DevinfoLMC(*p.LMC) }, missing, false)
	addKnown("link_layer", p.LinkLayer != "", func() string {
		if p.LinkLayer == verbsio.LinkLayerUnspecified.String() {
			return p.LinkLayer
		}
		return sysfs.DevinfoLinkLayer(p.LinkLayer)
	}, missing, false)
	addKnown("max_msg_sz", p.MaxMsgSize != nil, func() string { return fmt.Sprintf("0x%x", *p.MaxMsgSize) }, kernelWhy, true)
	addKnown("port_cap_flags", p.CapMask != nil, func() string { return sysfs.DevinfoCapMask(*p.CapMask) }, missing, true)
	addKnown("port_cap_flags2", false, nil, kernelWhy, true)
	addKnown("max_vl_num", p.MaxVLNum != nil, func() string { return vlText(*p.MaxVLNum) }, kernelWhy, true)
	addKnown("bad_pkey_cntr", false, nil, kernelWhy, true)
	addKnown("qkey_viol_cntr", false, nil, kernelWhy, true)
	addKnown("sm_sl", p.SMSL != nil, func() string { return strconv.Itoa(int(*p.SMSL)) }, missing, true)
	addKnown("pkey_tbl_len", p.PKeyTblLen != nil, func() string { return strconv.Itoa(*p.PKeyTblLen) }, missing, true)
	addKnown("gid_tbl_len", p.GIDTblLen != nil, func() string { return strconv.Itoa(*p.GIDTblLen) }, missing, true)
	addKnown("subnet_timeout", false, nil, kernelWhy, true)
	addKnown("init_type_reply", false, nil, kernelWhy, true)
	rateWhy := missing
	if kernelWhy == "" {
		rateWhy = "" // the built-in engine has no lanes
	}
	addKnown("active_width", p.Rate != nil, func() string { return p.Rate.DevinfoActiveWidth() }, rateWhy, true)
	addKnown("active_speed", p.Rate != nil, func() string { return p.Rate.DevinfoActiveSpeed() }, rateWhy, true)
	addKnown("phys_state", p.PhysState != nil, func() string { return sysfs.PhysState{Code: *p.PhysState}.Devinfo() }, missing, true)
	for _, g := range p.GIDs {
		if s, ok := gidDevinfo(g, p.LinkLayer); ok {
			add(known(gidLabel(g.Index), s).v())
		}
	}
	return fs
}
