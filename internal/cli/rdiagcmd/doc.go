// Package rdiagcmd is the rdiag command tree: device inspection
// (devices, info, ports, gids), pre-flight checks (check) and capture
// summaries (pcap). cmd/rdiag only wires it to os.Args.
//
// Devices come from two places. The built-in engine's devices are listed
// and opened through the verbsio registry (provider "soft"). Kernel RDMA
// devices are read from /sys/class/infiniband, /sys/class/infiniband_verbs
// and /sys/class/net under the --sysfs root (internal/sysfs), so that a
// fixture tree or a copy from another machine can be inspected; when the
// root is this machine's /sys the ibverbs provider's devices are matched
// by name, and the ibverbs build opens them for the fields only a verbs
// query knows. Without that build those fields print "unknown: needs the
// ibverbs build (make build-ibverbs)", never zero.
//
// Every command prints a table (info: ibv_devinfo-style text and a
// capability table) and, with --json, JSON whose snake_case field names
// are stable; docs/rdiag.md documents them. Env injects the verbsio
// registry and the pre-flight gatherer, so tests run the commands against
// fixture trees and deterministic engines.
//
// Exit status follows internal/cli: 0 ok, 1 failure (I/O, unreadable
// capture), 2 usage (bad flags, --sysfs not a directory), 3 a FAIL finding
// of "rdiag check" (diag.ExitFail, the code "rperf compare" uses for a
// regression: the tool ran and its verdict is negative), 4 the machine
// cannot do what was asked (no such device).
package rdiagcmd
