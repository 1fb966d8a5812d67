//go:build linux

// Command rdiag inspects RDMA devices (rperf's built-in engine and the
// kernel's), checks that this machine can run RDMA benchmarks, and
// summarises RoCEv2 packet captures. See docs/rdiag.md. It builds on
// Linux only (docs/ARCHITECTURE.md, "Platforms").
package main

import (
	"os"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/cli/providers"
	"github.com/rperf/rperf/internal/cli/rdiagcmd"
)

func main() {
	os.Exit(cli.Main(rdiagcmd.NewRoot(rdiagcmd.Default(providers.IBVerbs)), os.Args[1:], os.Stderr))
}
