// Package shm holds the operating-system pieces of the built-in engine's
// shared-memory fabric: memfd-backed segments, handles on peer processes
// (pidfd, pidfd_getfd, process_vm_readv/writev), futexes on shared memory
// and a watcher that learns when peer processes exit.
//
// Everything here is setup or slow path except Proc.WriteAt/ReadAt, which
// move bytes into and out of memory that was not allocated shareable, and
// the futex calls, which run only when a waiter sleeps.
package shm
