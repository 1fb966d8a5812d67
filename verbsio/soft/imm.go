package soft

import (
	"encoding/binary"
	"math/bits"
)

// Immediate data is "network byte order as in verbs" (verbsio.SendWR.Imm,
// WC.Imm): the uint32 holds the bytes of the wire in memory order, as
// ibv_send_wr.imm_data, a __be32, does, and as the hw provider passes it.
// The wire's ImmDt is a big-endian field, so on a little-endian host the
// value is byte-swapped between the two: an application that sends
// htonl(x) (perftest: its QP number in rdma_cm's UD exchange) puts x on
// the wire big-endian, and a receiver's ntohl(imm) gives x back.

// hostLittle says this host stores integers little-endian.
var hostLittle = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// immToWire is the ImmDt field for a work request's Imm.
func immToWire(imm uint32) uint32 {
	if hostLittle {
		return bits.ReverseBytes32(imm)
	}
	return imm
}

// immFromWire is a completion's Imm for an ImmDt field.
func immFromWire(v uint32) uint32 { return immToWire(v) }
