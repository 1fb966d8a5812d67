package rdiagcmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/diag"
	"github.com/rperf/rperf/internal/sysfs"
)

// findingJSON is one finding of `rdiag check --json`.
type findingJSON struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	What     string `json:"what"`
	Fix      string `json:"fix"`
}

// checkJSON is the whole of `rdiag check --json`.
type checkJSON struct {
	Engine   string         `json:"engine"`
	Result   string         `json:"result"`
	ExitCode int            `json:"exit_code"`
	Counts   map[string]int `json:"counts"`
	Findings []findingJSON  `json:"findings"`
}

// checkOptions are the flags of `rdiag check`.
type checkOptions struct {
	engine  string
	memlock string
	shm     string
	nofile  uint64
	udpPort uint16
	ipv6    bool
}

func newCheckCmd(o *options) *cobra.Command {
	co := &checkOptions{}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Run the pre-flight checks perftest users trip over",
		Long: `Run the pre-flight checks and print each finding as PASS, INFO, WARN or
FAIL, with the fix in one line: RDMA devices and their uverbs nodes,
/dev/infiniband permissions, port and link state, netdev MTU against the port
MTU, a usable RoCE v2 GID, RLIMIT_MEMLOCK against what a test registers, UDP
port 4791, /dev/shm, memfd_create and ptrace scope for the built-in engine,
and RLIMIT_NOFILE.

--engine says which engine the run will use: "kernel" fails on problems with
kernel RDMA devices, "builtin" on problems of rperf's built-in engine, and
"auto" (the default) fails only on what breaks both, warning about the rest.
The exit status is 3 when any finding is FAIL (the same code "rperf compare"
uses for a regression), 0 otherwise; warnings do not fail the check.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.runCheck(cmd.OutOrStdout(), co)
		},
	}
	f := cmd.Flags()
	f.StringVar(&co.engine, "engine", "auto", "engine the run will use: auto, kernel or builtin")
	f.StringVar(&co.memlock, "memlock-need", "64MiB", "memory the test registers, checked against RLIMIT_MEMLOCK (e.g. 2MiB, 1G, 4096)")
	f.StringVar(&co.shm, "shm-need", "64MiB", "free space wanted in /dev/shm")
	f.Uint64Var(&co.nofile, "nofile-need", diag.DefaultNoFileNeed, "file descriptors the run needs")
	f.Uint16Var(&co.udpPort, "udp-port", diag.RoCEv2Port, "UDP port the built-in engine's udp fabric will use")
	f.BoolVar(&co.ipv6, "ipv6", false, "look for an IPv6 RoCE v2 GID (perftest --ipv6)")
	return cmd
}

// parseEngine parses --engine.
func parseEngine(s string) (diag.Engine, error) {
	switch strings.ToLower(s) {
	case "auto":
		return diag.EngineAuto, nil
	case "kernel":
		return diag.EngineKernel, nil
	case "builtin", "built-in":
		return diag.EngineBuiltin, nil
	}
	return 0, cli.Usagef("--engine %q: want auto, kernel or builtin", s)
}

func (o *options) runCheck(w io.Writer, co *checkOptions) error {
	engine, err := parseEngine(co.engine)
	if err != nil {
		return err
	}
	memlock, err := parseSize(co.memlock)
	if err != nil {
		return cli.Usagef("--memlock-need: %v", err)
	}
	shm, err := parseSize(co.shm)
	if err != nil {
		return cli.Usagef("--shm-need: %v", err)
	}
	if co.udpPort == 0 {
		return cli.Usagef("--udp-port 0: want a port number from 1 to 65535")
	}
	if _, err := o.sysfsFS(); err != nil {
		return err
	}
	in, err := o.env.Gather(diag.Env{
		Engine: engine, SysRoot: o.sysfsRoot, MemlockNeed: memlock, ShmNeed: shm,
		NoFileNeed: co.nofile, UDPPort: co.udpPort, IPv6: co.ipv6,
	})
	if err != nil {
		return &cli.EnvironmentError{Err: fmt.Errorf("check: %w", err)}
	}
	in.PortAttrs = o.verbsPortAttrs(in.Sysfs)
	findings := diag.Evaluate(in)
	code := diag.ExitCode(findings)

	out := checkJSON{Engine: engine.String(), Result: diag.Worst(findings).String(), ExitCode: code,
		Counts: map[string]int{}, Findings: []findingJSON{}}
	for _, sev := range []diag.Severity{diag.Pass, diag.Info, diag.Warn, diag.Fail} {
		out.Counts[sev.String()] = 0
	}
	for _, f := range findings {
		out.Counts[f.Severity.String()]++
		out.Findings = append(out.Findings, findingJSON{Check: f.Check, Severity: f.Severity.String(), What: f.What, Fix: f.Fix})
	}
	if o.json {
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else {
		rows := make([][]string, 0, len(findings))
		for _, f := range out.Findings {
			rows = append(rows, []string{f.Severity, f.Check, f.What, orDash(f.Fix)})
		}
		if err := writeTable(w, []string{"RESULT", "CHECK", "WHAT", "FIX"}, rows); err != nil {
			return err
		}
		fmt.Fprintf(w, "result: %s for engine %s (%d FAIL, %d WARN, %d INFO, %d PASS); exit status %d\n",
			out.Result, out.Engine, out.Counts["FAIL"], out.Counts["WARN"], out.Counts["INFO"], out.Counts["PASS"], code)
	}
	if code != 0 {
		return &cli.ExitError{Code: code, Msg: fmt.Sprintf("check: %d finding(s) FAIL", out.Counts["FAIL"])}
	}
	return nil
}

// verbsPortAttrs asks the ibverbs provider for the active and max MTU of
// every kernel port, which sysfs does not have. Only this machine's
// devices can be asked, and only by the ibverbs build; otherwise nil.
func (o *options) verbsPortAttrs(r sysfs.Report) map[diag.PortKey]diag.PortAttr {
	if !o.env.IBVerbsBuilt || !o.realSysfs() {
		return nil
	}
	attrs := map[diag.PortKey]diag.PortAttr{}
	for _, d := range r.Devices {
		q, err := o.env.Open(d.Name)
		if err != nil {
			continue
		}
		for _, p := range d.Ports {
			if p.Number < 1 || p.Number > 255 {
				continue
			}
			pa, err := q.QueryPort(uint8(p.Number))
			if err != nil {
				continue
			}
			attrs[diag.PortKey{Device: d.Name, Port: p.Number}] = diag.PortAttr{
				ActiveMTU: sysfs.MTU(pa.ActiveMTU), MaxMTU: sysfs.MTU(pa.MaxMTU),
			}
		}
		q.Close()
	}
	return attrs
}
