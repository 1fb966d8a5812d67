// Package rperfcmd is rperf's command line: the eight perftest-style test
// commands (send-lat, write-lat, read-lat, atomic-lat, send-bw, write-bw,
// read-bw, atomic-bw) with perftest's flags, rperf's own reporting flags,
// and --loopback.
//
// The commands are thin: they check the flags, open the device, set up
// the out-of-band connection (listen without a host argument, connect with
// one), hand a configuration to tests/latency or tests/bw, and print what
// comes back: perftest's table, rperf's true statistics, and on request a
// JSON document and .hgrm histograms.
package rperfcmd

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli/rperfcmd/comparecmd"
	"github.com/rperf/rperf/internal/cli/rperfcmd/plotcmd"
	"github.com/rperf/rperf/internal/cli/rperfcmd/suitecmd"
)

// New returns rperf's root command.
func New() *cobra.Command {
	root := &cobra.Command{
		Use:   "rperf",
		Short: "RDMA latency and bandwidth tests, perftest-compatible, with true statistics",
		Long: `rperf runs perftest's latency and bandwidth tests with perftest's flags and
table, followed by the true statistics of the same samples (exact min, max,
mean and stdev, HdrHistogram percentiles with nothing dropped), and writes a
versioned JSON document on request.

Without a host argument a command serves; with one it connects to that
server (TCP port 18515, -p). --loopback runs both sides on this host:

  rperf write-lat --loopback

Without -d, the built-in shared-memory device shm0 is used, so rperf runs on
any Linux machine. rperf compare checks a run against a baseline (for CI),
and rperf plot draws results as SVG. rperf paths, dm-lat and pacing compare
the send paths (--path on every test): burst, inline, device memory, TSO
and direct verbs against generic, and packet pacing's accuracy.

Exit codes: 0 success, 1 the run failed, 2 wrong or conflicting flags (or
peers started with different ones), 3 rperf compare found a regression,
4 this machine cannot run the test (no such device, no atomics),
130 interrupted.`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	for _, k := range kinds {
		root.AddCommand(newTestCommand(k))
	}
	root.AddCommand(newPathsCommand(), newDMLatCommand(), newPacingCommand())
	root.AddCommand(comparecmd.New(nil), plotcmd.New(nil))
	root.AddCommand(suitecmd.New(nil))
	return root
}

func newTestCommand(k kind) *cobra.Command {
	o := &options{k: k}
	cmd := &cobra.Command{
		Use:   k.command() + " [host]",
		Short: k.short(),
		Long: fmt.Sprintf(`%s.

Without a host, serve; with a host, connect to the server there. Flags are
perftest's, spelled as perftest spells them; rperf adds --json, --hgrm,
--percentiles, --warmup, --loopback, --max-size and --timeout.

Examples:
  rperf %[2]s --loopback               both sides on this host
  rperf %[2]s                          server
  rperf %[2]s server-host --json r.json client, results also as JSON`, k.short(), k.command()),
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(args); err != nil {
				return err
			}
			return oneLine(run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	o.register(cmd.Flags())
	return cmd
}

// version is rperf's module version, or "devel" with the VCS revision.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "devel"
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "-" + s.Value[:12]
		}
	}
	return v
}

// oneLine keeps an error on one line, as cli.Main prints it.
func oneLine(err error) error {
	if err == nil || !strings.Contains(err.Error(), "\n") {
		return err
	}
	return &lineError{err}
}

type lineError struct{ err error }

func (e *lineError) Error() string { return strings.ReplaceAll(e.err.Error(), "\n", "; ") }
func (e *lineError) Unwrap() error { return e.err }
