package roce

import (
	"encoding/binary"

	"github.com/rperf/rperf/internal/psn"
)

// Header lengths in bytes.
const (
	BTHLen          = 12
	RETHLen         = 16
	AETHLen         = 4
	AtomicETHLen    = 28
	AtomicAckETHLen = 8
	ImmDtLen        = 4
	DETHLen         = 8
	IETHLen         = 4
	FETHLen         = 4
	CNPPadLen       = 16
	ICRCLen         = 4
)

// DefaultPKey is the default partition key (full membership of the default
// partition), the only one RoCE devices normally use.
const DefaultPKey = 0xffff

// BTH is the base transport header (12 bytes), present in every packet.
type BTH struct {
	Opcode Opcode
	SE     bool   // solicited event
	M      bool   // MigReq: migration state
	PadCnt uint8  // pad bytes after the payload, 0-3
	TVer   uint8  // transport header version, 4 bits, must be 0
	PKey   uint16 // partition key; DefaultPKey (0xffff) normally
	FECN   bool   // forward explicit congestion notification
	BECN   bool   // backward explicit congestion notification
	Resv6  uint8  // 6 reserved bits after BECN; 0 on the wire, kept for exact re-encoding
	DestQP uint32 // destination QP number, 24 bits
	AckReq bool   // the requester asks for an acknowledgement
	Resv7  uint8  // 7 reserved bits after AckReq; 0 on the wire, kept for exact re-encoding
	PSN    psn.PSN
}

var (
	errBTHShort  = newErr("decode bth", "fewer than 12 bytes", ErrTooShort)
	errBTHBuf    = newErr("encode bth", "buffer shorter than 12 bytes", ErrShortBuffer)
	errBTHRange  = newErr("encode bth", "field wider than its bits (PadCnt>3, TVer>15, Resv6>63, DestQP or PSN>24 bits, Resv7>127)", ErrRange)
	errRETHShort = newErr("decode reth", "fewer than 16 bytes", ErrTooShort)
	errRETHBuf   = newErr("encode reth", "buffer shorter than 16 bytes", ErrShortBuffer)
	errAETHShort = newErr("decode aeth", "fewer than 4 bytes", ErrTooShort)
	errAETHBuf   = newErr("encode aeth", "buffer shorter than 4 bytes", ErrShortBuffer)
	errAETHRange = newErr("encode aeth", "MSN wider than 24 bits", ErrRange)
	errAtomShort = newErr("decode atomiceth", "fewer than 28 bytes", ErrTooShort)
	errAtomBuf   = newErr("encode atomiceth", "buffer shorter than 28 bytes", ErrShortBuffer)
	errAAckShort = newErr("decode atomicacketh", "fewer than 8 bytes", ErrTooShort)
	errAAckBuf   = newErr("encode atomicacketh", "buffer shorter than 8 bytes", ErrShortBuffer)
	errImmShort  = newErr("decode immdt", "fewer than 4 bytes", ErrTooShort)
	errImmBuf    = newErr("encode immdt", "buffer shorter than 4 bytes", ErrShortBuffer)
	errDETHShort = newErr("decode deth", "fewer than 8 bytes", ErrTooShort)
	errDETHBuf   = newErr("encode deth", "buffer shorter than 8 bytes", ErrShortBuffer)
	errDETHRange = newErr("encode deth", "SrcQP wider than 24 bits", ErrRange)
	errIETHShort = newErr("decode ieth", "fewer than 4 bytes", ErrTooShort)
	errIETHBuf   = newErr("encode ieth", "buffer shorter than 4 bytes", ErrShortBuffer)
	errFETHShort = newErr("decode feth", "fewer than 4 bytes", ErrTooShort)
	errFETHBuf   = newErr("encode feth", "buffer shorter than 4 bytes", ErrShortBuffer)
	errFETHRange = newErr("encode feth", "field wider than its bits (PlacementType>15, Selectivity>3, Reserved>2^26-1)", ErrRange)
	errCNPShort  = newErr("decode cnp", "fewer than 16 bytes", ErrTooShort)
	errCNPBuf    = newErr("encode cnp", "buffer shorter than 16 bytes", ErrShortBuffer)
)

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Marshal writes the header into b[:BTHLen].
func (h *BTH) Marshal(b []byte) error {
	if len(b) < BTHLen {
		return errBTHBuf
	}
	if h.PadCnt > 3 || h.TVer > 0xf || h.Resv6 > 0x3f || h.DestQP > psn.Mask || h.PSN > psn.Mask || h.Resv7 > 0x7f {
		return errBTHRange
	}
	b[0] = byte(h.Opcode)
	b[1] = b2u(h.SE)<<7 | b2u(h.M)<<6 | h.PadCnt<<4 | h.TVer
	binary.BigEndian.PutUint16(b[2:], h.PKey)
	binary.BigEndian.PutUint32(b[4:], uint32(b2u(h.FECN))<<31|uint32(b2u(h.BECN))<<30|uint32(h.Resv6)<<24|h.DestQP)
	binary.BigEndian.PutUint32(b[8:], uint32(b2u(h.AckReq))<<31|uint32(h.Resv7)<<24|uint32(h.PSN))
	return nil
}

// Unmarshal reads the header from b[:BTHLen]. It checks only the length; the
// opcode and TVer are checked by Packet.Decode.
func (h *BTH) Unmarshal(b []byte) error {
	if len(b) < BTHLen {
		return errBTHShort
	}
	h.Opcode = Opcode(b[0])
	h.SE = b[1]&0x80 != 0
	h.M = b[1]&0x40 != 0
	h.PadCnt = b[1] >> 4 & 3
	h.TVer = b[1] & 0xf
	h.PKey = binary.BigEndian.Uint16(b[2:])
	w := binary.BigEndian.Uint32(b[4:])
	h.FECN = w&(1<<31) != 0
	h.BECN = w&(1<<30) != 0
	h.Resv6 = uint8(w >> 24 & 0x3f)
	h.DestQP = w & psn.Mask
	w = binary.BigEndian.Uint32(b[8:])
	h.AckReq = w&(1<<31) != 0
	h.Resv7 = uint8(w >> 24 & 0x7f)
	h.PSN = psn.PSN(w & psn.Mask)
	return nil
}
