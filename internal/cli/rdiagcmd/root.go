package rdiagcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/diag"
	"github.com/rperf/rperf/internal/sysfs"
	"github.com/rperf/rperf/verbsio"
)

// Querier is what rdiag asks of an open device. *verbsio.Context
// satisfies it; tests substitute fakes.
type Querier interface {
	QueryDevice() (verbsio.DeviceAttr, error)
	QueryPort(port uint8) (verbsio.PortAttr, error)
	QueryGIDTable(port uint8) ([]verbsio.GIDEntry, error)
	Close() error
}

// Env is everything rdiag takes from the machine besides sysfs: the
// devices of the registered verbsio providers, a way to open them, and the
// pre-flight gatherer. Default returns the real one; tests inject
// deterministic ones.
type Env struct {
	// Devices lists the devices of every registered verbsio provider. A
	// partial list comes with an error.
	Devices func() ([]verbsio.DeviceInfo, error)
	// Open opens a device listed by Devices.
	Open func(name string) (Querier, error)
	// Gather collects the inputs of the pre-flight checks.
	Gather func(env diag.Env) (diag.Inputs, error)
	// IBVerbsBuilt says whether the ibverbs provider in this binary can
	// open kernel devices (verbsio/hw.Built).
	IBVerbsBuilt bool
	// LocalSysfs reports whether a --sysfs root is this machine's sysfs,
	// whose kernel devices the ibverbs provider lists and opens. Nil
	// means: the root resolves to /sys.
	LocalSysfs func(root string) bool
}

// Default returns the Env of the running binary: the verbsio registry
// (whatever providers the binary imports) and diag.Gather.
func Default(ibverbsBuilt bool) Env {
	return Env{
		Devices: func() ([]verbsio.DeviceInfo, error) {
			devs, err := verbsio.Devices()
			out := make([]verbsio.DeviceInfo, 0, len(devs))
			for _, d := range devs {
				out = append(out, d.DeviceInfo)
			}
			return out, err
		},
		Open: func(name string) (Querier, error) {
			// Query only: the udp fabric would otherwise bind its UDP port
			// and clash with a test running beside rdiag.
			c, err := verbsio.OpenWith(name, verbsio.OpenOptions{QueryOnly: true})
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		Gather:       diag.Gather,
		IBVerbsBuilt: ibverbsBuilt,
	}
}

// options are the flags every command shares.
type options struct {
	env       Env
	sysfsRoot string
	json      bool
}

// NewRoot returns the rdiag command tree.
func NewRoot(env Env) *cobra.Command {
	o := &options{env: env}
	root := &cobra.Command{
		Use:   "rdiag",
		Short: "Inspect RDMA devices and check that this machine can run RDMA benchmarks",
		Long: `rdiag inspects the RDMA devices of this machine (rperf's built-in engine and
the kernel's devices in /sys/class/infiniband), prints what ibv_devinfo would
and a capability report, shows ports and GID tables, runs the pre-flight
checks perftest users trip over, and summarises RoCEv2 packet captures.

Every command prints a table (or ibv_devinfo-style text) by default and JSON
with --json. Exit status: 0 ok, 1 failure, 2 usage, 3 "rdiag check" found a
FAIL, 4 this machine cannot do what was asked (for example no such device).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&o.sysfsRoot, "sysfs", sysfs.DefaultMountPoint, "root of the sysfs tree to read kernel RDMA devices from (a fixture or a copy from another machine)")
	pf.BoolVar(&o.json, "json", false, "print JSON instead of a table (field names are stable; see docs/rdiag.md)")
	root.AddCommand(
		newDevicesCmd(o),
		newInfoCmd(o),
		newPortsCmd(o),
		newGIDsCmd(o),
		newCheckCmd(o),
		newPcapCmd(o),
		newCountersCmd(o),
	)
	return root
}

// sysfsFS opens the --sysfs tree. A root that is not a directory is a
// usage error: nothing can be read from it.
func (o *options) sysfsFS() (sysfs.FS, error) {
	fsys, err := sysfs.NewFS(o.sysfsRoot)
	if err != nil {
		if _, statErr := os.Stat(o.sysfsRoot); statErr != nil {
			return sysfs.FS{}, cli.Usagef("--sysfs %s: no such directory", o.sysfsRoot)
		}
		return sysfs.FS{}, cli.Usagef("--sysfs %s: not a directory", o.sysfsRoot)
	}
	return fsys, nil
}

// realSysfs reports whether --sysfs names this machine's /sys, where the
// kernel devices are the ones the ibverbs provider sees and can open. For
// any other tree (a fixture, a copy from another machine) the devices are
// only described, never opened.
func (o *options) realSysfs() bool {
	if o.env.LocalSysfs != nil {
		return o.env.LocalSysfs(o.sysfsRoot)
	}
	abs, err := filepath.Abs(o.sysfsRoot)
	if err != nil {
		return false
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	return abs == sysfs.DefaultMountPoint
}

// writeJSON prints v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	return nil
}
