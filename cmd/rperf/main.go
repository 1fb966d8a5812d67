//go:build linux

// Command rperf runs perftest's RDMA latency and bandwidth tests with
// true statistics and versioned JSON output. See rperf --help and the
// README. It builds on Linux only (docs/ARCHITECTURE.md, "Platforms").
package main

import (
	"os"

	"github.com/rperf/rperf/internal/cli"
	_ "github.com/rperf/rperf/internal/cli/providers"
	"github.com/rperf/rperf/internal/cli/rperfcmd"
)

func main() {
	os.Exit(cli.Main(rperfcmd.New(), os.Args[1:], os.Stderr))
}
