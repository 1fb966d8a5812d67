// Package soft is rperf's built-in verbs engine: a real RDMA-semantics
// transport in pure Go that needs no kernel RDMA support. Importing it
// registers the provider "soft" with verbsio and its devices: "shm0",
// which connects processes on one host through shared memory, and
// "udp_<netdev>", which speaks RoCEv2 over UDP sockets between hosts (and
// with Linux Soft-RoCE).
//
// # Layout
//
// The verbs objects and their rules are shared by every device: the QP
// state machine and attributes (qp.go), work request validation and the
// local side of every request (wr.go), completion queues (cq.go), memory
// regions, protection domains and the access checks (mr.go), SRQs,
// address handles, device memory, the interface families and direct
// verbs. What moves the bytes is the context's fabric, chosen when the
// context opens (fabric.go): the shm fabric in shm_*.go, the udp fabric in
// udp_*.go. docs/verbsio.md describes both and how to add one.
//
// # The shared-memory fabric
//
// Every context owns a control segment (a memfd) that describes, to peers,
// its memory regions, queue pairs, completion queues and shared receive
// queues. A context's GID names the segment: fd72:7066:<pid>:<fd>:<nonce>,
// so the perftest-style exchange of QPN, PSN, rkey, address and GID is all
// a peer needs. The peer fetches the segment with pidfd_getfd (or
// /proc/PID/fd) and maps it.
//
// The initiator does the work, as a NIC would at doorbell time: PostSend
// writes WQEs into the send ring and executes them at once. RDMA WRITE, READ
// and atomics operate directly on the target's memory, which Context.Alloc
// placed in memfds that the initiator maps; memory that was not allocated
// shareable is reached with process_vm_readv/writev. SEND claims the next
// WQE of the target's receive ring, scatters into its buffers and produces
// the receive completion into the target's completion ring. The target's
// code does not run.
//
// Before a byte moves, the engine checks the rkey against the target's
// region table (key, bounds, access rights, PD of the target QP) and checks
// what the table says against its own mapping sizes, so neither a wrong key
// nor a corrupt table can make it touch memory outside a mapping. Violations
// complete with REM_ACCESS_ERR (remote) or LOC_PROT_ERR (local) and move the
// QP to ERR. A peer that exits is noticed through its pidfd; the QP's work
// then completes with RETRY_EXC_ERR and WR_FLUSH_ERR.
//
// Progress needs no thread: posting and polling drive it. A send that must
// wait (no receive posted: RNR; target QP not ready yet) stays at the head
// of the send queue and is retried from Poll and Wait under the QP's
// min_rnr_timer, rnr_retry, timeout and retry_cnt.
//
// # The udp fabric
//
// Posting transmits; polling receives, acknowledges, answers READs and
// retransmits. A target that does not poll runs Context.StartProgress.
// Every packet from the network is checked (ICRC, P_Key, QPN, source
// address, PSN, opcode sequence) and every access it asks for goes through
// the same checks as a local request before a byte moves.
//
// # Concurrency
//
// As verbsio says, a QP, an SRQ and the CQs they use are driven by one
// goroutine at a time; setup calls may come from any goroutine. The engine
// starts two goroutines at most per context: on shm a watcher, blocked in
// poll(2) on the pidfds of peer processes; on udp the background progress
// that StartProgress starts.
package soft
