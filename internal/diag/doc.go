// Package diag holds rdiag's pre-flight checks: whether this machine can
// run an RDMA benchmark with kernel RDMA devices, with rperf's built-in
// engine, or both.
//
// Every check is a pure function of injected inputs (a sysfs.Report,
// resource limits, the text of /proc/net/udp, a listing of
// /dev/infiniband, ...) returning Findings: the check's name, a severity
// (PASS, INFO, WARN, FAIL), the observed fact, and a one-line fix. Tests
// fabricate the inputs; Gather collects the real ones on Linux
// (gather_linux.go), and Run does both.
//
// Severities are first graded as if the check's subject were needed,
// then capped by ForEngine for the engine the run will use: a missing
// /dev/infiniband is FAIL for kernel verbs, INFO for the built-in engine,
// WARN when either may be used. ExitCode turns findings into an exit
// status: ExitFail (3, the CLI's "negative verdict" code) when anything
// FAILs, 0 otherwise.
//
// Checks (CheckNames): rdma-devices, dev-infiniband, port-state, mtu,
// roce-gid and memlock concern kernel devices; udp-port, shm, memfd and
// ptrace-scope concern the built-in engine; nofile concerns both.
package diag
