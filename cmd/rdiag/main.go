// Command rdiag inspects RDMA devices (rperf's built-in engine and the
// kernel's), checks that this machine can run RDMA benchmarks, and
// summarises RoCEv2 packet captures. See docs/rdiag.md.
package main

import (
	"os"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/cli/rdiagcmd"
	"github.com/rperf/rperf/verbsio/hw"
	_ "github.com/rperf/rperf/verbsio/soft"
)

func main() {
	os.Exit(cli.Main(rdiagcmd.NewRoot(rdiagcmd.Default(hw.Built)), os.Args[1:], os.Stderr))
}
