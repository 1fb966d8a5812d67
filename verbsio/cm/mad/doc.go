// Package mad encodes and decodes the management datagrams (MADs) of the
// InfiniBand Communication Manager (IBTA Vol 1 chapter 12, class 0x07,
// class version 2) as Linux's ib_cm sends them to QP1, and the private-data
// header that rdma_cm puts in front of the consumer's data.
//
// # Wire format
//
// A CM MAD is 256 bytes: the 24-byte common MAD header (Header) and 232
// bytes of message data. Every CM message fills the 232 bytes, its private
// data running to the end. All fields are big-endian bit fields, numbered
// from the most significant bit of their first byte, at the byte offsets of
// the IBTA message tables (relative to the start of the message data):
//
//	REQ      (0x0010) Table 106  REP      (0x0013) Table 110
//	MRA      (0x0011) Table 107  RTU      (0x0014) Table 111
//	REJ      (0x0012) Table 108  DREQ     (0x0015) Table 112
//	SIDR_REQ (0x0017) Table 119  DREP     (0x0016) Table 113
//	SIDR_REP (0x0018) Table 120
//
// LAP and APR (alternate paths) are not decoded: Linux ignores them on RoCE.
//
// Decode checks the header (base version 1, class 0x07, class version 2,
// method Send) and the length, and returns an *Error naming the problem
// otherwise; it never panics. Encode writes every field and zeroes the
// reserved bits; a value wider than its field is an error, never silently
// cut. Reserved bits that a sender set are ignored on decode, as the
// specification asks, so Encode(Decode(b)) equals b with its reserved bits
// cleared (Reserved gives them), which the tests check on every MAD of the
// captured Linux traffic.
//
// # rdma_cm
//
// rdma_cm's connections and SIDR requests carry a 36-byte header at the
// start of the private data (CMAHeader: version 0, IP version, the active
// side's port, source and destination IP addresses), and the service ID
// names an rdma_cm port space and port (ServiceID).
package mad
