package roce

// ValidMTU reports whether n bytes is an InfiniBand path MTU: 256, 512,
// 1024, 2048 or 4096 (verbsio.MTU numbers them as libibverbs does).
func ValidMTU(n int) bool { return n >= 256 && n <= 4096 && n&(n-1) == 0 }

// Segmentation says how a message of some length is cut into packets for a
// path MTU: how many packets, and the opcodes of the first, middle, last and
// single-packet cases.
type Segmentation struct {
	Packets int // at least 1: a zero-length message is one packet
	Length  int // message length in bytes
	MTU     int // payload bytes per packet except the last
	Only    Opcode
	First   Opcode
	Middle  Opcode
	Last    Opcode
}

var (
	errSegMTU    = newErr("segment", "invalid path MTU", ErrRange)
	errSegLen    = newErr("segment", "negative or over 2^31 message length", ErrRange)
	errSegOpcode = newErr("segment", "opcode is not the ONLY opcode of a segmentable operation", ErrUnknownOpcode)
	errSegUD     = newErr("segment", "UD message longer than the path MTU", ErrLength)
	errSegIndex  = newErr("segment", "packet index out of range", ErrRange)
)

// Segment cuts a message of length bytes into packets of at most mtu bytes
// of payload (a path MTU in bytes, see ValidMTU). only names the operation by its single-packet opcode:
// SEND_ONLY, SEND_ONLY_WITH_IMMEDIATE, SEND_ONLY_WITH_INVALIDATE,
// RDMA_WRITE_ONLY, RDMA_WRITE_ONLY_WITH_IMMEDIATE (RC or UC),
// RDMA_READ_RESPONSE_ONLY (the responder's side of a READ), or a UD SEND,
// which must fit one packet. Immediate data and invalidate go on the last
// packet; the RETH goes on the first packet of a WRITE.
//
// For an RDMA READ request the number of response packets, and so the PSNs
// the request consumes, is Segment(RCReadResponseOnly, length, mtu).Packets.
func Segment(only Opcode, length int, mtu int) (Segmentation, error) {
	if !ValidMTU(mtu) {
		return Segmentation{}, errSegMTU
	}
	if length < 0 || length > 1<<31 {
		return Segmentation{}, errSegLen
	}
	s := Segmentation{Length: length, MTU: mtu, Only: only}
	s.Packets = 1
	if length > s.MTU {
		s.Packets = (length + s.MTU - 1) / s.MTU
	}
	t := only & 0xe0
	switch only {
	case RCSendOnly, UCSendOnly:
		s.First, s.Middle, s.Last = t|0x00, t|0x01, t|0x02
	case RCSendOnlyImm, UCSendOnlyImm:
		s.First, s.Middle, s.Last = t|0x00, t|0x01, t|0x03
	case RCSendOnlyInv:
		s.First, s.Middle, s.Last = RCSendFirst, RCSendMiddle, RCSendLastInv
	case RCWriteOnly, UCWriteOnly:
		s.First, s.Middle, s.Last = t|0x06, t|0x07, t|0x08
	case RCWriteOnlyImm, UCWriteOnlyImm:
		s.First, s.Middle, s.Last = t|0x06, t|0x07, t|0x09
	case RCReadResponseOnly:
		s.First, s.Middle, s.Last = RCReadResponseFirst, RCReadResponseMiddle, RCReadResponseLast
	case UDSendOnly, UDSendOnlyImm:
		if s.Packets > 1 {
			return Segmentation{}, errSegUD
		}
		s.First, s.Middle, s.Last = only, only, only
	default:
		return Segmentation{}, errSegOpcode
	}
	return s, nil
}

// Opcode returns the opcode of packet i (0-based) of the message.
func (s Segmentation) Opcode(i int) (Opcode, error) {
	switch {
	case i < 0 || i >= s.Packets:
		return 0, errSegIndex
	case s.Packets == 1:
		return s.Only, nil
	case i == 0:
		return s.First, nil
	case i == s.Packets-1:
		return s.Last, nil
	}
	return s.Middle, nil
}

// PayloadLen returns the payload length of packet i (0-based): MTU bytes for
// every packet but the last, which carries the rest.
func (s Segmentation) PayloadLen(i int) (int, error) {
	if i < 0 || i >= s.Packets {
		return 0, errSegIndex
	}
	if i < s.Packets-1 {
		return s.MTU, nil
	}
	return s.Length - s.MTU*(s.Packets-1), nil
}
