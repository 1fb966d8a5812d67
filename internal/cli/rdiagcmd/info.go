package rdiagcmd

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

// Reasons printed instead of a value rdiag cannot know.
const (
	// whyNeedIBVerbs: a kernel device's verbs-only field in a build
	// without the ibverbs provider.
	whyNeedIBVerbs = "unknown: needs the ibverbs build (make build-ibverbs)"
	// whyOtherMachine: the --sysfs tree is not this machine's.
	whyOtherMachine = "unknown: not in sysfs, and --sysfs is not this machine's /sys, so no verbs query can answer"
	// whyNotPlumbed: libibverbs knows it, rperf's provider does not pass it on.
	whyNotPlumbed = "unknown: not reported by rperf's ibverbs provider"
	// whyProviderUnknown: the provider listed the field in DeviceAttr.Unknown.
	whyProviderUnknown = "unknown"
)

// devView is everything rdiag learned about one device.
type devView struct {
	dev   device
	attr  *verbsio.DeviceAttr // nil when no provider answered
	why   string              // why attr is nil, or why kernel-only fields are unknown
	ports []portView
	notes []string // open or query failures, sysfs files that failed
}

// viaVerbs reports whether the device's attributes came from a provider.
func (v devView) viaVerbs() bool { return v.attr != nil }

// view opens the device through its provider when this binary can (the
// built-in engine, or a kernel device with the ibverbs build on this
// machine's /sys), and otherwise describes it from sysfs.
func (o *options) view(inv *inventory, d device) devView {
	v := devView{dev: d}
	if d.sys != nil {
		for _, e := range allErrs(*d.sys) {
			v.notes = append(v.notes, e.Error())
		}
	}
	if d.openable && (d.sys == nil || o.realSysfs()) {
		if o.verbsView(inv, &v) {
			return v
		}
	}
	switch {
	case v.why != "":
	case !d.kernel():
		v.why = "unknown: the provider could not be asked"
	case !o.env.IBVerbsBuilt:
		v.why = whyNeedIBVerbs
	case !o.realSysfs():
		v.why = whyOtherMachine
	default:
		v.why = whyNeedIBVerbs
	}
	if d.sys != nil {
		for _, p := range d.sys.Ports {
			v.ports = append(v.ports, sysfsPortView(inv.report, *d.sys, p))
		}
	}
	return v
}

// verbsView fills v from a provider query; false when the device could
// not be opened or queried (v.why then says so).
func (o *options) verbsView(inv *inventory, v *devView) bool {
	q, err := o.env.Open(v.dev.info.Name)
	if err != nil {
		v.why = "unknown: cannot open " + v.dev.info.Name + ": " + err.Error()
		v.notes = append(v.notes, "open: "+err.Error())
		return false
	}
	defer q.Close()
	attr, err := q.QueryDevice()
	if err != nil {
		v.why = "unknown: query_device failed: " + err.Error()
		v.notes = append(v.notes, err.Error())
		return false
	}
	v.attr = &attr
	if v.dev.kernel() {
		v.why = whyNotPlumbed
	}
	n := attr.PhysPortCnt
	if n == 0 {
		n = v.dev.info.Ports
	}
	var netdevMTU func(string) *int
	if o.realSysfs() {
		netdevMTU = func(name string) *int {
			if nd := inv.report.NetDev(name); nd != nil {
				return nd.MTU
			}
			return nil
		}
	}
	for p := 1; p <= n && p <= 255; p++ {
		pa, err := q.QueryPort(uint8(p))
		if err != nil {
			v.notes = append(v.notes, err.Error())
			continue
		}
		gids, err := q.QueryGIDTable(uint8(p))
		if err != nil {
			v.notes = append(v.notes, err.Error())
		}
		pv := verbsPortView(p, pa, gids, netdevMTU)
		pv.IWARP = v.dev.info.Transport == "iWARP"
		if pv.Rate == nil && v.dev.sys != nil {
			if i := slices.IndexFunc(v.dev.sys.Ports, func(sp sysfs.Port) bool { return sp.Number == p }); i >= 0 {
				pv.Rate = v.dev.sys.Ports[i].Rate
			}
		}
		v.ports = append(v.ports, pv)
	}
	return true
}

// devinfo lays the view out as ibv_devinfo does.
func (v devView) devinfo() devinfo {
	di := devinfo{name: v.dev.info.Name}
	add := func(f field) { di.fields = append(di.fields, f) }
	sd := v.dev.sys
	kernelWhy := ""
	if v.dev.kernel() {
		kernelWhy = v.why
	}

	// transport, fw_ver, node_guid and sys_image_guid.
	unreadable := sd != nil && sd.NodeType == nil && len(sd.Ports) == 0 && len(sd.Errs) > 0
	if v.dev.info.Transport == "" {
		add(unknown("transport", "unknown: not in sysfs"))
	} else {
		add(known("transport", transportText(v.dev.info.Transport)))
	}
	switch {
	case v.attr != nil:
		add(known("fw_ver", v.attr.FWVer))
		add(known("node_guid", sysfs.GUID(v.attr.NodeGUID).String()))
		add(known("sys_image_guid", sysfs.GUID(v.attr.SysImageGUID).String()))
	case sd != nil:
		add(sysfsField("fw_ver", sd.FWVer, sysfs.DevinfoFWVer))
		add(sysfsField("node_guid", sd.NodeGUID, sysfs.GUID.String))
		add(sysfsField("sys_image_guid", sd.SysImageGUID, sysfs.GUID.String))
	default:
		add(unknown("fw_ver", v.why))
		if v.dev.info.NodeGUID != 0 {
			add(known("node_guid", sysfs.GUID(v.dev.info.NodeGUID).String()))
		}
	}
	a := v.attr
	num := func(label string, val func(*verbsio.DeviceAttr) string, verbose bool) {
		f := unknown(label, v.why)
		if a != nil {
			f = known(label, val(a))
		}
		f.verbose = verbose
		add(f)
	}
	num("vendor_id", func(a *verbsio.DeviceAttr) string { return fmt.Sprintf("0x%04x", a.VendorID) }, false)
	num("vendor_part_id", func(a *verbsio.DeviceAttr) string { return strconv.FormatUint(uint64(a.VendorPartID), 10) }, false)
	num("hw_ver", func(a *verbsio.DeviceAttr) string { return fmt.Sprintf("0x%X", a.HWVer) }, false)
	if sd != nil && sd.BoardID != nil {
		add(known("board_id", *sd.BoardID))
	}
	switch {
	case a != nil && a.PhysPortCnt > 0:
		add(known("phys_port_cnt", strconv.Itoa(a.PhysPortCnt)))
	case unreadable:
		add(unknown("phys_port_cnt", "unknown: the device's sysfs directory is unreadable"))
	default:
		add(known("phys_port_cnt", strconv.Itoa(v.dev.info.Ports)))
	}

	if a == nil {
		// Every -v device field is a verbs query's answer.
		for _, label := range sysfs.VerbsOnlyDeviceFields {
			switch label {
			case "vendor_id", "vendor_part_id", "hw_ver":
				continue
			}
			add(unknown(label, v.why).v())
		}
	} else {
		di.fields = append(di.fields, v.verboseDeviceFields(kernelWhy)...)
	}
	for _, p := range v.ports {
		di.ports = append(di.ports, devinfoPort{number: p.Number, fields: portFields(p, kernelWhy)})
	}
	return di
}

// sysfsField is a device field read from sysfs; missing or unreadable
// files make it unknown.
func sysfsField[T any](label string, p *T, format func(T) string) field {
	if p == nil {
		return unknown(label, "unknown: not in sysfs")
	}
	return known(label, format(*p))
}

// verboseDeviceFields are the -v device fields from DeviceAttr. Fields
// ibv_devinfo shows that DeviceAttr does not carry are unknown for kernel
// devices (kernelWhy) and left out for the built-in engine, to which they
// do not apply.
func (v devView) verboseDeviceFields(kernelWhy string) []field {
	a := v.attr
	var fs []field
	add := func(f field) { fs = append(fs, f.v()) }
	d := func(label string, n int) { add(known(label, strconv.Itoa(n))) }
	notCarried := func(labels ...string) {
		if kernelWhy == "" {
			return
		}
		for _, l := range labels {
			add(unknown(l, kernelWhy))
		}
	}
	add(known("max_mr_size", fmt.Sprintf("0x%x", a.MaxMRSize)))
	add(known("page_size_cap", fmt.Sprintf("0x%x", a.PageSizeCap)))
	d("max_qp", a.MaxQP)
	d("max_qp_wr", a.MaxQPWR)
	f := known("device_cap_flags", fmt.Sprintf("0x%08x", uint32(a.DeviceCapFlags)))
	f.sub = deviceCapFlagNames(a.DeviceCapFlags)
	add(f)
	d("max_sge", a.MaxSGE)
	d("max_sge_rd", a.MaxSGERD)
	d("max_cq", a.MaxCQ)
	d("max_cqe", a.MaxCQE)
	d("max_mr", a.MaxMR)
	d("max_pd", a.MaxPD)
	d("max_qp_rd_atom", a.MaxQPRdAtom)
	notCarried("max_ee_rd_atom")
	d("max_res_rd_atom", a.MaxResRdAtom)
	d("max_qp_init_rd_atom", a.MaxQPInitRdAtom)
	notCarried("max_ee_init_rd_atom")
	add(known("atomic_cap", a.AtomicCap.String()))
	notCarried("max_ee", "max_rdd", "max_mw", "max_raw_ipv6_qp", "max_raw_ethy_qp", "max_mcast_grp",
		"max_mcast_qp_attach", "max_total_mcast_qp_attach")
	d("max_ah", a.MaxAH)
	notCarried("max_fmr", "max_map_per_fmr")
	d("max_srq", a.MaxSRQ)
	d("max_srq_wr", a.MaxSRQWR)
	d("max_srq_sge", a.MaxSRQSGE)
	d("max_pkeys", a.MaxPkeys)
	d("local_ca_ack_delay", int(a.LocalCAAckDelay))
	notCarried("completion timestamp_mask", "hca_core_clock", "device_cap_flags_ex")

	unknownField := func(name string) bool { return attrUnknown(a, name) }
	add(field{label: "tso_caps", header: true})
	if unknownField("TSO") {
		add(field{label: "max_tso", why: whyProviderUnknown, indent: 2})
	} else {
		add(field{label: "max_tso", value: ptr(strconv.FormatUint(uint64(a.TSO.MaxTSO), 10)), indent: 2})
		if a.TSO.MaxTSO > 0 {
			add(field{label: "supported_qp", header: true, indent: 2, sub: supportNames(a.TSO.SupportedQP)})
		}
	}
	notCarried("max_rwq_indirection_tables", "max_rwq_indirection_table_size", "rx_hash_function",
		"rx_hash_fields_mask", "max_wq_type_rq")
	add(field{label: "packet_pacing_caps", header: true})
	if unknownField("PacketPacing") {
		add(field{label: "qp_rate_limit_min", why: whyProviderUnknown, indent: 2})
		add(field{label: "qp_rate_limit_max", why: whyProviderUnknown, indent: 2})
	} else {
		add(field{label: "qp_rate_limit_min", value: ptr(fmt.Sprintf("%dkbps", a.PacketPacing.RateLimitMinKbps)), indent: 2})
		add(field{label: "qp_rate_limit_max", value: ptr(fmt.Sprintf("%dkbps", a.PacketPacing.RateLimitMaxKbps)), indent: 2})
		if a.PacketPacing.RateLimitMaxKbps > 0 {
			add(field{label: "supported_qp", header: true, indent: 2, sub: supportNames(a.PacketPacing.SupportedQP)})
		}
	}
	if !unknownField("MaxDMSize") && a.MaxDMSize > 0 {
		add(known("maximum available device memory", fmt.Sprintf("%dBytes", a.MaxDMSize)))
	}
	notCarried("num_comp_vectors")
	return fs
}

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

func qpTypesText(ts []verbsio.QPType) string {
	if len(ts) == 0 {
		return "none"
	}
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

// supportNames lists QP types as devinfo's supported_qp lines do:
// "SUPPORT_UD", "SUPPORT_RAW_PACKET".
func supportNames(ts []verbsio.QPType) []string {
	s := make([]string, 0, len(ts))
	for _, t := range ts {
		s = append(s, "SUPPORT_"+t.String())
	}
	return s
}

func qpTypeNames(ts []verbsio.QPType) []string {
	s := make([]string, 0, len(ts))
	for _, t := range ts {
		s = append(s, t.String())
	}
	return s
}

// infoJSON is one device of `rdiag info --json`.
type infoJSON struct {
	Name         string             `json:"name"`
	Provider     string             `json:"provider"`
	Fabric       string             `json:"fabric"`
	Netdev       string             `json:"netdev"`
	Source       string             `json:"source"`
	Devinfo      map[string]*string `json:"devinfo"`
	Ports        []infoPortJSON     `json:"ports"`
	Capabilities capabilitiesJSON   `json:"capabilities"`
	Unknown      map[string]string  `json:"unknown"`
	Notes        []string           `json:"notes"`
	rows         []capRow           // the capability report as a table
}

// infoPortJSON is one port of infoJSON.
type infoPortJSON struct {
	Port    int                `json:"port"`
	Devinfo map[string]*string `json:"devinfo"`
	GIDs    []gidJSON          `json:"gids"`
}

func newInfoCmd(o *options) *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "info [DEV]",
		Short: "Show ibv_devinfo's fields and a capability report for one device or all",
		Long: `Show the fields ibv_devinfo prints for a device (-v: all of ibv_devinfo -v's
fields that apply), then a capability report: queue, SGE, CQE and MR limits,
max inline, MTU, atomics, TSO, packet pacing, device memory, raw packet caps,
send paths and accelerated interface families. Built-in engine devices are
opened and queried; kernel devices are described from sysfs (and queried
through libibverbs in the ibverbs build). A field that cannot be known says
why instead of printing zero. Without DEV, every device is shown.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, devs, err := o.argDevices(args)
			if err != nil {
				return err
			}
			return o.runInfo(cmd.OutOrStdout(), inv, devs, verbose, len(args) == 1)
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every ibv_devinfo -v field, GIDs included")
	return cmd
}

func (o *options) runInfo(w io.Writer, inv *inventory, devs []device, verbose, single bool) error {
	var out []infoJSON
	for i, d := range devs {
		v := o.view(inv, d)
		di := v.devinfo()
		j := v.infoJSON(di)
		if !o.json {
			if i > 0 {
				fmt.Fprintln(w)
			}
			di.write(w, verbose)
			if err := writeCapabilities(w, j); err != nil {
				return err
			}
			for _, n := range j.Notes {
				fmt.Fprintf(w, "note: %s\n", n)
			}
		}
		out = append(out, j)
	}
	if !o.json {
		if len(devs) == 0 {
			fmt.Fprintln(w, "no RDMA devices")
		}
		writeWarnings(w, inv.warnings)
		return nil
	}
	if single && len(out) == 1 {
		return writeJSON(w, out[0])
	}
	if out == nil {
		out = []infoJSON{}
	}
	return writeJSON(w, out)
}

func (v devView) infoJSON(di devinfo) infoJSON {
	j := infoJSON{
		Name: v.dev.info.Name, Provider: v.dev.info.Provider, Fabric: v.dev.info.Fabric,
		Netdev: v.dev.info.Netdev, Source: srcSysfs,
		Devinfo: fieldsJSON(di.fields), Ports: []infoPortJSON{},
		Unknown: map[string]string{}, Notes: append([]string{}, v.notes...),
	}
	j.Devinfo["hca_id"] = ptr(di.name)
	if v.viaVerbs() {
		j.Source = srcQueryDevice
	}
	for i, p := range v.ports {
		pj := infoPortJSON{Port: p.Number, Devinfo: fieldsJSON(di.ports[i].fields), GIDs: []gidJSON{}}
		for k := range pj.Devinfo {
			if strings.HasPrefix(k, "GID[") {
				delete(pj.Devinfo, k)
			}
		}
		best, hasBest := perftestPick(p, false)
		for _, g := range p.GIDs {
			pj.GIDs = append(pj.GIDs, newGIDJSON(v.dev.info.Name, p, g, hasBest && best.Index == g.Index))
		}
		j.Ports = append(j.Ports, pj)
	}
	j.capabilities(v)
	return j
}
