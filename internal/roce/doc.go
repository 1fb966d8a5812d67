// Package roce encodes and decodes RoCEv2 packets: the InfiniBand transport
// headers (BTH and the extension headers RETH, AETH, AtomicETH, AtomicAckETH,
// ImmDt, DETH, IETH, FETH), the invariant CRC (ICRC), and the Ethernet, IPv4,
// IPv6 and UDP headers that carry them.
//
// # Wire format
//
// A RoCEv2 packet is a UDP datagram to port 4791 (UDPPort) whose payload is
//
//	BTH (12 bytes) | extension headers | payload | pad (0-3 bytes) | ICRC (4 bytes)
//
// The opcode in the BTH fixes which extension headers follow and in which
// order, and whether a payload follows them (see Opcode.Layout). The payload
// is padded to a multiple of 4 bytes; BTH.PadCnt says how many pad bytes were
// added. All header fields are big-endian. The ICRC is a CRC-32 over a
// masked copy of the IP, UDP and BTH headers and everything after them up to
// the ICRC; it is stored least-significant byte first (see ICRCIPv4).
//
// # Allocation and errors
//
// Every Marshal, Unmarshal, Encode and Decode method works on a buffer that the
// caller provides and does not allocate, including on its error paths: the
// errors are preallocated *Error values. Callers test them with errors.Is
// against the sentinel kinds (ErrTooShort, ErrUnknownOpcode, ErrPadCount,
// ErrTVer, ErrLength, ErrRange, ErrShortBuffer, ErrNotRoCE, ...). Decoders
// never panic on any input.
//
// Types here are plain values; none is safe for concurrent mutation, and none
// needs to be.
package roce
