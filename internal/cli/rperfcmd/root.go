// Package rperfcmd is rperf's command line: the eight perftest-style test
// commands (send-lat, write-lat, read-lat, atomic-lat, send-bw, write-bw,
// read-bw, atomic-bw) with perftest's flags, rperf's own reporting flags
// and --loopback; paths and dm-lat, which compare send paths; pacing; and
// baseline; compare, plot and suite (packages comparecmd, plotcmd,
// suitecmd).
//
// The commands are thin: they check their flags, build the test's
// configuration and let its Check judge the values, open the device, set
// up the out-of-band connection (listen without a host argument, connect
// with one), hand the configuration to tests/latency or tests/bw (or
// tests/paths, tests/dm, tests/pacing), and print what comes back:
// perftest's table, rperf's true statistics, and on request a JSON
// document and .hgrm histograms.
//
// Files: root.go (the root command), testcmd.go (the test commands),
// flags.go (their flags), check.go (Check's problems in flag terms),
// device.go (the device and the sizes it takes), connect.go (the
// out-of-band connection), output.go (every header, table and document),
// progress.go, loopback.go, udp.go (the udp fabric's flags), path.go
// (--path), pathscmd.go (paths, dm-lat), pacingcmd.go, baselinecmd.go.
package rperfcmd

import (
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli/rperfcmd/comparecmd"
	"github.com/rperf/rperf/internal/cli/rperfcmd/plotcmd"
	"github.com/rperf/rperf/internal/cli/rperfcmd/suitecmd"
	"github.com/rperf/rperf/tests/session"
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
and direct verbs against generic, and packet pacing's accuracy. rperf
baseline measures this machine's own limits beside the engine's figures.

Exit codes: 0 success, 1 the run failed, 2 wrong or conflicting flags (or
peers started with different ones), 3 rperf compare found a regression,
4 this machine cannot run the test (no such device, no atomics),
130 interrupted.`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	for _, t := range session.Tests {
		root.AddCommand(newTestCommand(t))
	}
	for _, t := range session.RawTests {
		if t == session.FSRate {
			root.AddCommand(newFSRateCommand())
			continue
		}
		root.AddCommand(newRawCommand(t))
	}
	root.AddCommand(newPathsCommand(), newDMLatCommand(), newPacingCommand(), newRpingCommand(), newBaselineCommand())
	root.AddCommand(comparecmd.New(nil), plotcmd.New(nil))
	root.AddCommand(suitecmd.New(nil))
	return root
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
