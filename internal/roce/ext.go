package roce

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/rperf/rperf/internal/psn"
)

// RETH is the RDMA extended transport header (16 bytes) of RDMA WRITE
// FIRST/ONLY, RDMA READ requests, FLUSH and ATOMIC WRITE.
type RETH struct {
	VA     uint64 // remote virtual address
	RKey   uint32 // remote key
	DMALen uint32 // length of the whole RDMA operation in bytes
}

// Marshal writes the header into b[:RETHLen].
func (h *RETH) Marshal(b []byte) error {
	if len(b) < RETHLen {
		return errRETHBuf
	}
	binary.BigEndian.PutUint64(b, h.VA)
	binary.BigEndian.PutUint32(b[8:], h.RKey)
	binary.BigEndian.PutUint32(b[12:], h.DMALen)
	return nil
}

// Unmarshal reads the header from b[:RETHLen].
func (h *RETH) Unmarshal(b []byte) error {
	if len(b) < RETHLen {
		return errRETHShort
	}
	h.VA = binary.BigEndian.Uint64(b)
	h.RKey = binary.BigEndian.Uint32(b[8:])
	h.DMALen = binary.BigEndian.Uint32(b[12:])
	return nil
}

// Syndrome is the 8-bit AETH syndrome. Bits 6-5 give the kind (ACK, RNR NAK,
// NAK); bits 4-0 are the credit count, RNR timer or NAK code; bit 7 is
// reserved.
type Syndrome uint8

// SyndromeKind is bits 6-5 of a syndrome.
type SyndromeKind uint8

// Syndrome kinds.
const (
	SynACK      SyndromeKind = 0x00
	SynRNRNAK   SyndromeKind = 0x20
	SynReserved SyndromeKind = 0x40
	SynNAK      SyndromeKind = 0x60
)

// String returns "ack", "rnr_nak", "reserved" or "nak".
func (k SyndromeKind) String() string {
	switch k {
	case SynACK:
		return "ack"
	case SynRNRNAK:
		return "rnr_nak"
	case SynNAK:
		return "nak"
	}
	return "reserved"
}

// NAKCode is the low five bits of a NAK syndrome.
type NAKCode uint8

// NAK codes.
const (
	NAKPSNSequenceError     NAKCode = 0
	NAKInvalidRequest       NAKCode = 1
	NAKRemoteAccessError    NAKCode = 2
	NAKRemoteOperationalErr NAKCode = 3
	NAKInvalidRDRequest     NAKCode = 4
)

// String returns the code in snake_case ("psn_sequence_error"), or
// "reserved_N" for codes 5-31.
func (c NAKCode) String() string {
	switch c {
	case NAKPSNSequenceError:
		return "psn_sequence_error"
	case NAKInvalidRequest:
		return "invalid_request"
	case NAKRemoteAccessError:
		return "remote_access_error"
	case NAKRemoteOperationalErr:
		return "remote_operational_error"
	case NAKInvalidRDRequest:
		return "invalid_rd_request"
	}
	return "reserved_" + strconv.Itoa(int(c))
}

// Well-known syndromes.
const (
	// SyndromeACKUnlimited is an ACK with the credit field 0x1f, which
	// means "no end-to-end flow control credits advertised" (what Linux rxe
	// sends).
	SyndromeACKUnlimited Syndrome = 0x1f
	// SyndromeNAKPSNSeqErr is a NAK for a PSN sequence error.
	SyndromeNAKPSNSeqErr Syndrome = 0x60
	// SyndromeNAKInvalidRequest is a NAK for an invalid request.
	SyndromeNAKInvalidRequest Syndrome = 0x61
	// SyndromeNAKRemoteAccess is a NAK for a remote access error.
	SyndromeNAKRemoteAccess Syndrome = 0x62
	// SyndromeNAKRemoteOp is a NAK for a remote operational error.
	SyndromeNAKRemoteOp Syndrome = 0x63
)

// ACKSyndrome returns an ACK syndrome carrying the 5-bit credit count code.
func ACKSyndrome(credits uint8) Syndrome { return Syndrome(SynACK) | Syndrome(credits&0x1f) }

// RNRNAKSyndrome returns an RNR NAK syndrome carrying the 5-bit RNR timer
// code (see RNRTimer).
func RNRNAKSyndrome(timer uint8) Syndrome { return Syndrome(SynRNRNAK) | Syndrome(timer&0x1f) }

// NAKSyndrome returns a NAK syndrome with the given code.
func NAKSyndrome(code NAKCode) Syndrome { return Syndrome(SynNAK) | Syndrome(code&0x1f) }

// Kind returns bits 6-5 of the syndrome.
func (s Syndrome) Kind() SyndromeKind { return SyndromeKind(s & 0x60) }

// Value returns the low five bits: the credit count code of an ACK, the
// timer code of an RNR NAK, the NAK code of a NAK.
func (s Syndrome) Value() uint8 { return uint8(s & 0x1f) }

// IsACK reports whether the syndrome is a positive acknowledgement.
func (s Syndrome) IsACK() bool { return s.Kind() == SynACK }

// IsRNRNAK reports whether the syndrome is a receiver-not-ready NAK.
func (s Syndrome) IsRNRNAK() bool { return s.Kind() == SynRNRNAK }

// IsNAK reports whether the syndrome is a NAK other than RNR.
func (s Syndrome) IsNAK() bool { return s.Kind() == SynNAK }

// Credits returns the credit count code of an ACK (0x1f: none advertised).
func (s Syndrome) Credits() uint8 { return s.Value() }

// NAKCode returns the NAK code of a NAK syndrome.
func (s Syndrome) NAKCode() NAKCode { return NAKCode(s.Value()) }

// String describes the syndrome: "ack(credits=31)", "rnr_nak(timer=14)",
// "nak(remote_access_error)" or "reserved(0x5f)".
func (s Syndrome) String() string {
	switch s.Kind() {
	case SynACK:
		return "ack(credits=" + strconv.Itoa(int(s.Value())) + ")"
	case SynRNRNAK:
		return "rnr_nak(timer=" + strconv.Itoa(int(s.Value())) + ")"
	case SynNAK:
		return "nak(" + s.NAKCode().String() + ")"
	}
	return "reserved(0x" + strconv.FormatUint(uint64(s), 16) + ")"
}

// rnrTimer holds the IBA minimum RNR NAK timer values in units of 10 µs;
// code 0 is 655.36 ms.
var rnrTimer = [32]uint32{
	65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
}

// RNRTimer returns the delay that a 5-bit RNR timer code stands for
// (code 1 is 10 µs, code 31 is 491.52 ms, code 0 is 655.36 ms). Bits above
// the fifth are ignored.
func RNRTimer(code uint8) time.Duration {
	return time.Duration(rnrTimer[code&0x1f]) * 10 * time.Microsecond
}

// AETH is the ACK extended transport header (4 bytes) of ACKs, atomic ACKs
// and the first, last and only READ responses.
type AETH struct {
	Syndrome Syndrome
	MSN      uint32 // message sequence number, 24 bits
}

// Marshal writes the header into b[:AETHLen].
func (h *AETH) Marshal(b []byte) error {
	if len(b) < AETHLen {
		return errAETHBuf
	}
	if h.MSN > psn.Mask {
		return errAETHRange
	}
	binary.BigEndian.PutUint32(b, uint32(h.Syndrome)<<24|h.MSN)
	return nil
}

// Unmarshal reads the header from b[:AETHLen].
func (h *AETH) Unmarshal(b []byte) error {
	if len(b) < AETHLen {
		return errAETHShort
	}
	w := binary.BigEndian.Uint32(b)
	h.Syndrome = Syndrome(w >> 24)
	h.MSN = w & psn.Mask
	return nil
}

// AtomicETH is the atomic extended transport header (28 bytes, packed) of
// COMPARE_SWAP and FETCH_ADD.
type AtomicETH struct {
	VA      uint64 // remote virtual address, 8-byte aligned
	RKey    uint32
	SwapAdd uint64 // swap value (COMPARE_SWAP) or addend (FETCH_ADD)
	Compare uint64 // compare value (COMPARE_SWAP only)
}

// Marshal writes the header into b[:AtomicETHLen].
func (h *AtomicETH) Marshal(b []byte) error {
	if len(b) < AtomicETHLen {
		return errAtomBuf
	}
	binary.BigEndian.PutUint64(b, h.VA)
	binary.BigEndian.PutUint32(b[8:], h.RKey)
	binary.BigEndian.PutUint64(b[12:], h.SwapAdd)
	binary.BigEndian.PutUint64(b[20:], h.Compare)
	return nil
}

// Unmarshal reads the header from b[:AtomicETHLen].
func (h *AtomicETH) Unmarshal(b []byte) error {
	if len(b) < AtomicETHLen {
		return errAtomShort
	}
	h.VA = binary.BigEndian.Uint64(b)
	h.RKey = binary.BigEndian.Uint32(b[8:])
	h.SwapAdd = binary.BigEndian.Uint64(b[12:])
	h.Compare = binary.BigEndian.Uint64(b[20:])
	return nil
}

// AtomicAckETH is the atomic ACK extended transport header (8 bytes): the
// value the target held before the atomic operation.
type AtomicAckETH struct {
	OrigData uint64
}

// Marshal writes the header into b[:AtomicAckETHLen].
func (h *AtomicAckETH) Marshal(b []byte) error {
	if len(b) < AtomicAckETHLen {
		return errAAckBuf
	}
	binary.BigEndian.PutUint64(b, h.OrigData)
	return nil
}

// Unmarshal reads the header from b[:AtomicAckETHLen].
func (h *AtomicAckETH) Unmarshal(b []byte) error {
	if len(b) < AtomicAckETHLen {
		return errAAckShort
	}
	h.OrigData = binary.BigEndian.Uint64(b)
	return nil
}

// ImmDt is the immediate data header (4 bytes). The value is opaque to the
// transport; Data holds the four wire bytes read as a big-endian number,
// which is the host-order value of libibverbs' network-order imm_data.
type ImmDt struct {
	Data uint32
}

// Marshal writes the header into b[:ImmDtLen].
func (h *ImmDt) Marshal(b []byte) error {
	if len(b) < ImmDtLen {
		return errImmBuf
	}
	binary.BigEndian.PutUint32(b, h.Data)
	return nil
}

// Unmarshal reads the header from b[:ImmDtLen].
func (h *ImmDt) Unmarshal(b []byte) error {
	if len(b) < ImmDtLen {
		return errImmShort
	}
	h.Data = binary.BigEndian.Uint32(b)
	return nil
}

// DETH is the datagram extended transport header (8 bytes) of UD packets.
type DETH struct {
	QKey  uint32
	Resv8 uint8  // reserved byte; 0 on the wire, kept for exact re-encoding
	SrcQP uint32 // source QP number, 24 bits
}

// Marshal writes the header into b[:DETHLen].
func (h *DETH) Marshal(b []byte) error {
	if len(b) < DETHLen {
		return errDETHBuf
	}
	if h.SrcQP > psn.Mask {
		return errDETHRange
	}
	binary.BigEndian.PutUint32(b, h.QKey)
	binary.BigEndian.PutUint32(b[4:], uint32(h.Resv8)<<24|h.SrcQP)
	return nil
}

// Unmarshal reads the header from b[:DETHLen].
func (h *DETH) Unmarshal(b []byte) error {
	if len(b) < DETHLen {
		return errDETHShort
	}
	h.QKey = binary.BigEndian.Uint32(b)
	w := binary.BigEndian.Uint32(b[4:])
	h.Resv8 = uint8(w >> 24)
	h.SrcQP = w & psn.Mask
	return nil
}

// IETH is the invalidate extended transport header (4 bytes) of SEND with
// invalidate: the R_Key to invalidate.
type IETH struct {
	RKey uint32
}

// Marshal writes the header into b[:IETHLen].
func (h *IETH) Marshal(b []byte) error {
	if len(b) < IETHLen {
		return errIETHBuf
	}
	binary.BigEndian.PutUint32(b, h.RKey)
	return nil
}

// Unmarshal reads the header from b[:IETHLen].
func (h *IETH) Unmarshal(b []byte) error {
	if len(b) < IETHLen {
		return errIETHShort
	}
	h.RKey = binary.BigEndian.Uint32(b)
	return nil
}

// FETH is the flush extended transport header (4 bytes) of RC FLUSH.
type FETH struct {
	PlacementType uint8  // bits 3-0
	Selectivity   uint8  // bits 5-4: selectivity level
	Reserved      uint32 // bits 31-6; 0 on the wire, kept for exact re-encoding
}

// Marshal writes the header into b[:FETHLen].
func (h *FETH) Marshal(b []byte) error {
	if len(b) < FETHLen {
		return errFETHBuf
	}
	if h.PlacementType > 0xf || h.Selectivity > 3 || h.Reserved >= 1<<26 {
		return errFETHRange
	}
	binary.BigEndian.PutUint32(b, h.Reserved<<6|uint32(h.Selectivity)<<4|uint32(h.PlacementType))
	return nil
}

// Unmarshal reads the header from b[:FETHLen].
func (h *FETH) Unmarshal(b []byte) error {
	if len(b) < FETHLen {
		return errFETHShort
	}
	w := binary.BigEndian.Uint32(b)
	h.PlacementType = uint8(w & 0xf)
	h.Selectivity = uint8(w >> 4 & 3)
	h.Reserved = w >> 6
	return nil
}

// CNPPad is the 16 reserved bytes that follow the BTH of a CNP.
type CNPPad [CNPPadLen]byte

// Marshal writes the bytes into b[:CNPPadLen].
func (h *CNPPad) Marshal(b []byte) error {
	if len(b) < CNPPadLen {
		return errCNPBuf
	}
	copy(b, h[:])
	return nil
}

// Unmarshal reads the bytes from b[:CNPPadLen].
func (h *CNPPad) Unmarshal(b []byte) error {
	if len(b) < CNPPadLen {
		return errCNPShort
	}
	copy(h[:], b)
	return nil
}
