// Package fakecm is a test double of librdmacm for the kernel
// connection manager of package cm: C functions with librdmacm's
// signatures (a struct rperf_rdmacm table) over C identifiers and events,
// so that the ibverbs build's mapping of the cm API onto librdmacm, cgo
// crossing included, runs without an RDMA device. A test queues the events
// the kernel would report and reads back what the calls handed the
// library (connection parameters, private data, options).
//
// Only tests import it; it has code only in the ibverbs build.
package fakecm
