//go:build !linux

package main

// rdiag reads Linux's sysfs and procfs and opens devices through rperf's
// engine and rdma-core. Elsewhere the build stops here, with the reason as
// the compiler's message.
var _ int = "rdiag builds on Linux only: it reads sysfs and procfs and opens devices through rperf's Linux engine and rdma-core (docs/ARCHITECTURE.md, Platforms)"
