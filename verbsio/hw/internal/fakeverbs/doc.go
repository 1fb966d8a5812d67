// Package fakeverbs is a test double of a libibverbs provider for the
// tests of package hw: C objects (context, QP, CQ, SRQ) whose ops table
// points at C functions that record the work requests posted to them and
// hand out queued completions, so that the whole post and poll path of the
// ibverbs build, cgo crossing included, runs without an RDMA device. It
// also exports libibverbs constants and struct offsets for the tests to
// compare verbsio's values and the Go mirrors with.
//
// Only tests import it; it has code only in the ibverbs build.
package fakeverbs
