package rdiagcmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/diag/devinfo"
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

// Sources of a value, as the capability report and --json name them.
const (
	srcQueryDevice = "query_device" // the provider's QueryDevice (ibv_query_device_ex)
	srcSysfs       = "sysfs"        // read from the --sysfs tree
	srcCreateQP    = "create_qp"    // what the device granted QPs the provider created
)

// devView is everything rdiag learned about one device: its description
// (from sysfs, a provider's answers, or both) and the notes to print.
type devView struct {
	dev   device
	desc  devinfo.Device
	notes []string // open or query failures, sysfs files that failed
}

// viaVerbs reports whether the device's attributes came from a provider.
func (v devView) viaVerbs() bool { return v.desc.Attr != nil }

// view describes a device: it opens it through its provider when this
// binary can (the built-in engine, or a kernel device with the ibverbs
// build on this machine's /sys), and describes it from sysfs otherwise,
// saying why the verbs-only fields are unknown.
func (o *options) view(inv *inventory, d device) devView {
	v := devView{dev: d}
	src := devinfo.Sources{Info: d.info, Sys: d.sys}
	if d.sys != nil {
		for _, e := range allErrs(*d.sys) {
			v.notes = append(v.notes, e.Error())
		}
	}
	if d.sys != nil || o.realSysfs() {
		// The tree's netdevs are the sysfs device's own, and this
		// machine's for a provider's devices.
		src.NetdevMTU = func(name string) *int {
			if nd := inv.report.NetDev(name); nd != nil {
				return nd.MTU
			}
			return nil
		}
	}
	if d.openable && (d.sys == nil || o.realSysfs()) {
		src.Verbs, src.Why = o.queryVerbs(d, &v.notes)
		if src.Verbs != nil && d.kernel() {
			src.NotReported = whyNotPlumbed
		}
	}
	if src.Verbs == nil {
		switch {
		case src.Why != "":
		case !d.kernel():
			src.Why = "unknown: the provider could not be asked"
		case !o.env.IBVerbsBuilt:
			src.Why = whyNeedIBVerbs
		case !o.realSysfs():
			src.Why = whyOtherMachine
		default:
			src.Why = whyNeedIBVerbs
		}
	}
	v.desc = devinfo.Describe(src)
	return v
}

// queryVerbs asks the device's provider for its attributes, ports and
// GID tables; nil and the reason when it could not be opened or queried.
// Failures of single ports are added to notes and the port left out.
func (o *options) queryVerbs(d device, notes *[]string) (*devinfo.Verbs, string) {
	q, err := o.env.Open(d.info.Name)
	if err != nil {
		*notes = append(*notes, "open: "+err.Error())
		return nil, "unknown: cannot open " + d.info.Name + ": " + err.Error()
	}
	defer q.Close()
	attr, err := q.QueryDevice()
	if err != nil {
		*notes = append(*notes, err.Error())
		return nil, "unknown: query_device failed: " + err.Error()
	}
	vb := &devinfo.Verbs{Attr: attr}
	n := attr.PhysPortCnt
	if n == 0 {
		n = d.info.Ports
	}
	for p := 1; p <= n && p <= 255; p++ {
		pa, err := q.QueryPort(uint8(p))
		if err != nil {
			*notes = append(*notes, err.Error())
			continue
		}
		gids, err := q.QueryGIDTable(uint8(p))
		if err != nil {
			*notes = append(*notes, err.Error())
		}
		vb.Ports = append(vb.Ports, devinfo.VerbsPort{Number: p, Attr: pa, GIDs: gids})
	}
	return vb, ""
}

func ptr[T any](v T) *T { return &v }

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
		j := v.infoJSON()
		if !o.json {
			if i > 0 {
				fmt.Fprintln(w)
			}
			devinfo.Write(w, v.desc, verbose)
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

func (v devView) infoJSON() infoJSON {
	device, ports := devinfo.Lines(v.desc)
	j := infoJSON{
		Name: v.dev.info.Name, Provider: v.dev.info.Provider, Fabric: v.dev.info.Fabric,
		Netdev: v.dev.info.Netdev, Source: srcSysfs,
		Devinfo: devinfo.JSON(device), Ports: []infoPortJSON{},
		Unknown: map[string]string{}, Notes: append([]string{}, v.notes...),
	}
	j.Devinfo["hca_id"] = ptr(v.desc.Name)
	if v.viaVerbs() {
		j.Source = srcQueryDevice
	}
	for i, p := range v.desc.Ports {
		pj := infoPortJSON{Port: p.Number, Devinfo: devinfo.JSON(ports[i]), GIDs: []gidJSON{}}
		best, hasBest := perftestPick(p, false)
		for _, g := range p.GIDs {
			pj.GIDs = append(pj.GIDs, newGIDJSON(v.dev.info.Name, p, g, hasBest && best.Index == g.Index))
		}
		j.Ports = append(j.Ports, pj)
	}
	j.capabilities(v)
	return j
}
