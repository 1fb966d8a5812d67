package rdiagcmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

// Provider names as they appear in rdiag's output.
const (
	// providerIBVerbs is verbsio/hw's provider (hw.ProviderName).
	providerIBVerbs = "ibverbs"
	// providerSysfs marks a kernel device that only sysfs describes: the
	// --sysfs tree is not this machine's /sys, or no provider lists it.
	providerSysfs = "sysfs"
)

// device is one RDMA device as rdiag shows it: listed by a verbsio
// provider, found in sysfs, or both (a kernel device on this machine).
type device struct {
	info     verbsio.DeviceInfo // Provider is providerSysfs for sysfs-only devices
	sys      *sysfs.Device      // nil for built-in engine devices
	openable bool               // a provider of this binary can open it
}

func (d device) kernel() bool { return d.sys != nil || d.info.Provider == providerIBVerbs }

// inventory is what one run of rdiag knows about the machine's devices.
type inventory struct {
	devices  []device
	report   sysfs.Report
	warnings []string // problems that hide some devices or fields
}

// lookup returns the named device, or an error naming the devices there
// are.
func (inv *inventory) lookup(name string) (device, error) {
	for _, d := range inv.devices {
		if d.info.Name == name {
			return d, nil
		}
	}
	names := make([]string, 0, len(inv.devices))
	for _, d := range inv.devices {
		names = append(names, d.info.Name)
	}
	avail := "there are no RDMA devices"
	if len(names) > 0 {
		avail = "devices here: " + strings.Join(names, ", ")
	}
	return device{}, &cli.EnvironmentError{Err: fmt.Errorf("no RDMA device named %q; %s", name, avail)}
}

// selectDevices returns the named device, or every device for "".
func (inv *inventory) selectDevices(name string) ([]device, error) {
	if name == "" {
		return inv.devices, nil
	}
	d, err := inv.lookup(name)
	if err != nil {
		return nil, err
	}
	return []device{d}, nil
}

// argDevices loads the inventory and selects the device a command's
// optional DEV argument names, or every device without one.
func (o *options) argDevices(args []string) (*inventory, []device, error) {
	inv, err := o.loadInventory()
	if err != nil {
		return nil, nil, err
	}
	name := ""
	if len(args) == 1 {
		name = args[0]
	}
	devs, err := inv.selectDevices(name)
	return inv, devs, err
}

// loadInventory lists the built-in engine's devices through verbsio and
// the kernel's from the --sysfs tree. Kernel devices that the ibverbs
// provider also lists (only when --sysfs is this machine's /sys) carry its
// name and can be opened if this binary was built with it; the provider's
// own listing is ignored for any other tree, whose devices are not on this
// machine.
func (o *options) loadInventory() (*inventory, error) {
	fsys, err := o.sysfsFS()
	if err != nil {
		return nil, err
	}
	inv := &inventory{report: fsys.Report()}
	for _, e := range inv.report.Errs {
		var fe *sysfs.FileError
		if errors.As(e, &fe) && fe.Path == sysfs.InfiniBandClassPath && errors.Is(e, fs.ErrNotExist) {
			continue // no kernel devices: said where it matters
		}
		inv.warnings = append(inv.warnings, e.Error())
	}
	listed, lerr := o.env.Devices()
	if lerr != nil {
		inv.warnings = append(inv.warnings, lerr.Error())
	}
	real := o.realSysfs()
	ibverbs := map[string]verbsio.DeviceInfo{}
	for _, di := range listed {
		if di.Provider == providerIBVerbs {
			if real {
				ibverbs[di.Name] = di
			}
			continue
		}
		inv.devices = append(inv.devices, device{info: di, openable: true})
	}
	seen := map[string]bool{}
	for i := range inv.report.Devices {
		sd := &inv.report.Devices[i]
		d := device{sys: sd, info: sysfsInfo(*sd)}
		if di, ok := ibverbs[sd.Name]; ok {
			d.info.Provider = providerIBVerbs
			d.openable = o.env.IBVerbsBuilt
			if di.Transport != "" {
				d.info.Transport = di.Transport
			}
		}
		seen[sd.Name] = true
		inv.devices = append(inv.devices, d)
	}
	var extra []string
	for name := range ibverbs {
		if !seen[name] {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	for _, name := range extra {
		inv.devices = append(inv.devices, device{info: ibverbs[name], openable: o.env.IBVerbsBuilt})
	}
	return inv, nil
}

// sysfsInfo describes a sysfs device the way a provider lists one.
func sysfsInfo(d sysfs.Device) verbsio.DeviceInfo {
	di := verbsio.DeviceInfo{Name: d.Name, Provider: providerSysfs, Ports: len(d.Ports)}
	if d.NodeType != nil {
		_, di.Transport = d.NodeType.Transport()
	}
	if d.NodeGUID != nil {
		di.NodeGUID = uint64(*d.NodeGUID)
	}
	nds := deviceNetdevs(d)
	if len(nds) > 0 {
		di.Netdev = nds[0]
	}
	return di
}

// deviceNetdevs lists the netdevs of a kernel device, the one its ports
// run on first: its parent (rxe, siw), its PCI function's netdevs, then
// the netdevs its GIDs belong to (VLANs, bonds), without repeats.
func deviceNetdevs(d sysfs.Device) []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, p := range d.Ports {
		add(sysfs.PortNetDev(d, p))
	}
	if d.Parent != nil {
		add(*d.Parent)
	}
	for _, n := range d.NetDevs {
		add(n)
	}
	for _, p := range d.Ports {
		for _, g := range p.GIDs {
			add(g.NetDev)
		}
	}
	return out
}

// deviceJSON is one entry of `rdiag devices --json`.
type deviceJSON struct {
	Name       string   `json:"name"`
	Provider   string   `json:"provider"`
	Fabric     string   `json:"fabric"`
	Transport  string   `json:"transport"`
	NodeGUID   *string  `json:"node_guid"`
	Netdev     string   `json:"netdev"`
	Netdevs    []string `json:"netdevs"`
	Ports      int      `json:"ports"`
	PortStates []string `json:"port_states"`
	Kernel     bool     `json:"kernel"`
	Openable   bool     `json:"openable"`
	UVerbs     string   `json:"uverbs"`
	Errors     []string `json:"errors"`
}

func newDevicesCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "devices",
		Short: "List every RDMA device: the built-in engine's and the kernel's",
		Long: `List every RDMA device: the built-in engine's devices (provider "soft") and
every kernel RDMA device in /sys/class/infiniband under --sysfs (provider
"ibverbs" when this machine's provider lists it, "sysfs" when only the tree
describes it), with provider, fabric, transport, node GUID, netdev, port
count and port states.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, err := o.loadInventory()
			if err != nil {
				return err
			}
			return o.runDevices(cmd.OutOrStdout(), inv)
		},
	}
}

func (o *options) runDevices(w io.Writer, inv *inventory) error {
	out := make([]deviceJSON, 0, len(inv.devices))
	for _, d := range inv.devices {
		out = append(out, o.describeDevice(d))
	}
	if o.json {
		return writeJSON(w, out)
	}
	header := []string{"NAME", "PROVIDER", "FABRIC", "TRANSPORT", "NODE_GUID", "NETDEV", "PORTS", "STATE"}
	var rows [][]string
	for _, d := range out {
		guid := "-"
		if d.NodeGUID != nil {
			guid = *d.NodeGUID
		}
		states := "-"
		if len(d.PortStates) > 0 {
			states = summariseStates(d.PortStates)
		}
		rows = append(rows, []string{d.Name, d.Provider, orDash(d.Fabric), orDash(d.Transport), guid,
			orDash(strings.Join(d.Netdevs, ",")), strconv.Itoa(d.Ports), states})
	}
	if err := writeTable(w, header, rows); err != nil {
		return err
	}
	o.kernelNote(w, inv)
	writeWarnings(w, inv.warnings)
	return nil
}

// kernelNote says why no kernel device was listed.
func (o *options) kernelNote(w io.Writer, inv *inventory) {
	for _, d := range inv.devices {
		if d.kernel() {
			return
		}
	}
	if inv.report.NoInfiniBandClass() {
		fmt.Fprintf(w, "note: no kernel RDMA devices: %s has no class/infiniband (no RDMA driver loaded)\n", o.sysfsRoot)
	} else {
		fmt.Fprintf(w, "note: no kernel RDMA devices in %s/class/infiniband\n", strings.TrimSuffix(o.sysfsRoot, "/"))
	}
}

func writeWarnings(w io.Writer, warnings []string) {
	for _, s := range warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
}

// describeDevice fills the devices entry of d. Port states come from sysfs
// for kernel devices and from a port query for built-in ones.
func (o *options) describeDevice(d device) deviceJSON {
	j := deviceJSON{
		Name: d.info.Name, Provider: d.info.Provider, Fabric: d.info.Fabric,
		Transport: d.info.Transport, Netdev: d.info.Netdev, Ports: d.info.Ports,
		Kernel: d.kernel(), Openable: d.openable,
		Netdevs: []string{}, PortStates: []string{}, Errors: []string{},
	}
	if d.info.NodeGUID != 0 || (d.sys != nil && d.sys.NodeGUID != nil) {
		s := sysfs.GUID(d.info.NodeGUID).String()
		j.NodeGUID = &s
	}
	if d.info.Netdev != "" {
		j.Netdevs = append(j.Netdevs, d.info.Netdev)
	}
	if d.sys != nil {
		j.Netdevs = deviceNetdevs(*d.sys)
		if len(j.Netdevs) == 0 {
			j.Netdevs = []string{}
		}
		if d.sys.UVerbs != nil {
			j.UVerbs = d.sys.UVerbs.Name
		}
		for _, p := range d.sys.Ports {
			st := "unknown"
			if p.State != nil {
				st = portStateName(p.State.Code)
			}
			j.PortStates = append(j.PortStates, st)
		}
		for _, e := range allErrs(*d.sys) {
			j.Errors = append(j.Errors, e.Error())
		}
		return j
	}
	if !d.openable {
		return j
	}
	q, err := o.env.Open(d.info.Name)
	if err != nil {
		j.Errors = append(j.Errors, err.Error())
		return j
	}
	defer q.Close()
	for p := 1; p <= d.info.Ports && p <= 255; p++ {
		pa, err := q.QueryPort(uint8(p))
		if err != nil {
			j.PortStates = append(j.PortStates, "unknown")
			j.Errors = append(j.Errors, err.Error())
			continue
		}
		j.PortStates = append(j.PortStates, portStateName(int(pa.State)))
	}
	return j
}

// allErrs returns the sysfs errors of a device and its ports.
func allErrs(d sysfs.Device) []error {
	errs := append([]error(nil), d.Errs...)
	for _, p := range d.Ports {
		errs = append(errs, p.Errs...)
	}
	return errs
}

// summariseStates prints one state for a device whose ports agree, else
// "1:ACTIVE,2:DOWN".
func summariseStates(states []string) string {
	same := true
	for _, s := range states[1:] {
		same = same && s == states[0]
	}
	if same {
		return states[0]
	}
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = strconv.Itoa(i+1) + ":" + s
	}
	return strings.Join(parts, ",")
}

// portStateName is the name of a logical port state (enum ibv_port_state).
func portStateName(code int) string {
	names := [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}
	if code >= 0 && code < len(names) {
		return names[code]
	}
	return "STATE_" + strconv.Itoa(code)
}

// physStateName is the name of a physical port state.
func physStateName(code int) string {
	names := [...]string{"NOP", "SLEEP", "POLLING", "DISABLED", "PORT_CONFIGURATION_TRAINING", "LINK_UP", "LINK_ERROR_RECOVERY", "PHY_TEST"}
	if code >= 0 && code < len(names) {
		return names[code]
	}
	return "PHYS_" + strconv.Itoa(code)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
