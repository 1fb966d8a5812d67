//go:build !linux

package main

// rperf measures through Linux: memfd shared memory and process_vm_*, UDP
// and packet sockets, sysfs, rdma-core. Elsewhere the build stops here,
// with the reason as the compiler's message.
var _ int = "rperf builds on Linux only: its engine and probes use memfd, process_vm_readv, UDP and packet sockets and sysfs (docs/ARCHITECTURE.md, Platforms)"
