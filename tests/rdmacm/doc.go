// Package rdmacm is perftest's -R (--rdma_cm) for rperf's tests: the
// out-of-band messages travel as SENDs on an RC connection that rdma_cm
// sets up (a Channel, a net.Conn for oob.NewConn with Options.RDMACM), and
// the test's QPs are created and connected through rdma_cm as well
// (Channel.ConnectQPs), between the two synchronising key exchanges of
// perftest's create_rdma_cm_connection().
//
// The sequence is perftest 4.5's, as captured between two Linux rxe
// devices (verbsio/cm/testdata/rxe-cm1.pcap, frames 9–34 and 75–78):
//
//  1. The client connects one RC identifier to the server's port (18515
//     by default, RDMA_PS_TCP); the server accepts it on a listener it
//     then destroys. Each side keeps receives posted on that QP; every
//     message of the exchange (versions, page size, MTU, keys, reports)
//     is one SEND of exactly the bytes perftest writes to its socket, and
//     keys are its binary struct pingpong_dest.
//  2. After the handshake, one empty key exchange; the server listens on
//     the same port again, the client connects one identifier per test QP
//     (RDMA_PS_UDP and SIDR for UD), asking for out_reads responder
//     resources and initiator depth in READ and atomic tests, 0 otherwise;
//     a client that is refused (the server is not listening yet) tries
//     again after 100 ms, ten times, as perftest does; then one more empty
//     key exchange.
//  3. The test's own key exchanges follow on the channel; the QPs are
//     already in RTS, moved by the CM.
//  4. After the closing exchange the client disconnects the test QPs and
//     the server the channel.
//
// UD tests where the server sends too (latency, bidirectional bandwidth)
// add perftest's message: the client sends its QP number to the server's
// UD QP in a SEND_WITH_IMM's immediate data, which the server waits for.
package rdmacm
