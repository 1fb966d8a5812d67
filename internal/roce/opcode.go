package roce

import "strconv"

// Opcode is the BTH OpCode: a transport base (bits 7-5) plus an operation
// (bits 4-0).
type Opcode uint8

// Transport is the transport service an opcode belongs to: the top three
// bits of the opcode.
type Transport uint8

// Transport services.
const (
	RC  Transport = 0x00 // reliable connection
	UC  Transport = 0x20 // unreliable connection
	RD  Transport = 0x40 // reliable datagram (no opcode of it is decoded here)
	UD  Transport = 0x60 // unreliable datagram
	CNP Transport = 0x80 // congestion notification
	// Manufacturer is the vendor-specific opcode range 0xe0-0xff.
	Manufacturer Transport = 0xe0
)

// String returns "RC", "UC", "RD", "UD", "CNP", "MANUFACTURER" or "RESERVED".
func (t Transport) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case RD:
		return "RD"
	case UD:
		return "UD"
	case CNP:
		return "CNP"
	case Manufacturer:
		return "MANUFACTURER"
	}
	return "RESERVED"
}

// Opcodes known to this package (IBA volume 1 and annex A17; the names follow
// include/rdma/ib_pack.h without the IB_OPCODE_ prefix).
const (
	RCSendFirst          Opcode = 0x00
	RCSendMiddle         Opcode = 0x01
	RCSendLast           Opcode = 0x02
	RCSendLastImm        Opcode = 0x03
	RCSendOnly           Opcode = 0x04
	RCSendOnlyImm        Opcode = 0x05
	RCWriteFirst         Opcode = 0x06
	RCWriteMiddle        Opcode = 0x07
	RCWriteLast          Opcode = 0x08
	RCWriteLastImm       Opcode = 0x09
	RCWriteOnly          Opcode = 0x0a
	RCWriteOnlyImm       Opcode = 0x0b
	RCReadRequest        Opcode = 0x0c
	RCReadResponseFirst  Opcode = 0x0d
	RCReadResponseMiddle Opcode = 0x0e
	RCReadResponseLast   Opcode = 0x0f
	RCReadResponseOnly   Opcode = 0x10
	RCAck                Opcode = 0x11
	RCAtomicAck          Opcode = 0x12
	RCCompareSwap        Opcode = 0x13
	RCFetchAdd           Opcode = 0x14
	RCSendLastInv        Opcode = 0x16
	RCSendOnlyInv        Opcode = 0x17
	RCFlush              Opcode = 0x1c
	RCAtomicWrite        Opcode = 0x1d

	UCSendFirst    Opcode = 0x20
	UCSendMiddle   Opcode = 0x21
	UCSendLast     Opcode = 0x22
	UCSendLastImm  Opcode = 0x23
	UCSendOnly     Opcode = 0x24
	UCSendOnlyImm  Opcode = 0x25
	UCWriteFirst   Opcode = 0x26
	UCWriteMiddle  Opcode = 0x27
	UCWriteLast    Opcode = 0x28
	UCWriteLastImm Opcode = 0x29
	UCWriteOnly    Opcode = 0x2a
	UCWriteOnlyImm Opcode = 0x2b

	UDSendOnly    Opcode = 0x64
	UDSendOnlyImm Opcode = 0x65

	// CNPOpcode is the RoCEv2 congestion notification packet: BTH, 16
	// reserved bytes, ICRC.
	CNPOpcode Opcode = 0x81
)

// Ext names an extension header that can follow the BTH.
type Ext uint8

// Extension headers.
const (
	ExtNone      Ext = iota
	ExtRETH          // RDMA extended transport header, 16 bytes
	ExtAETH          // ACK extended transport header, 4 bytes
	ExtAtomicETH     // atomic extended transport header, 28 bytes
	ExtAtomicAck     // atomic ACK extended transport header, 8 bytes
	ExtImmDt         // immediate data, 4 bytes
	ExtDETH          // datagram extended transport header, 8 bytes
	ExtIETH          // invalidate extended transport header, 4 bytes
	ExtFETH          // flush extended transport header, 4 bytes
	ExtCNPPad        // the 16 reserved bytes of a CNP
)

var extNames = [...]string{"NONE", "RETH", "AETH", "AtomicETH", "AtomicAckETH", "ImmDt", "DETH", "IETH", "FETH", "CNPReserved"}
var extLens = [...]int{0, RETHLen, AETHLen, AtomicETHLen, AtomicAckETHLen, ImmDtLen, DETHLen, IETHLen, FETHLen, CNPPadLen}

// String returns the header's name as the IBA spells it.
func (e Ext) String() string {
	if int(e) < len(extNames) {
		return extNames[e]
	}
	return "Ext(" + strconv.Itoa(int(e)) + ")"
}

// Len returns the header's length in bytes, or 0 for ExtNone and unknown
// values.
func (e Ext) Len() int {
	if int(e) < len(extLens) {
		return extLens[e]
	}
	return 0
}

// Kind groups opcodes by what they do.
type Kind uint8

// Opcode kinds.
const (
	KindInvalid      Kind = iota
	KindSend              // SEND_*
	KindWrite             // RDMA_WRITE_*
	KindReadRequest       // RDMA_READ_REQUEST
	KindReadResponse      // RDMA_READ_RESPONSE_*
	KindAck               // ACKNOWLEDGE
	KindAtomicAck         // ATOMIC_ACKNOWLEDGE
	KindAtomic            // COMPARE_SWAP, FETCH_ADD
	KindFlush             // FLUSH
	KindAtomicWrite       // ATOMIC_WRITE
	KindCNP               // congestion notification
)

var kindNames = [...]string{"invalid", "send", "write", "read_request", "read_response", "ack", "atomic_ack", "atomic", "flush", "atomic_write", "cnp"}

// String returns the kind in snake_case ("read_response").
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Position says where a packet sits in a multi-packet message.
type Position uint8

// Positions.
const (
	PosOnly   Position = iota // the whole message in one packet
	PosFirst                  // first of several
	PosMiddle                 // neither first nor last
	PosLast                   // last of several
)

// String returns "only", "first", "middle" or "last".
func (p Position) String() string {
	switch p {
	case PosOnly:
		return "only"
	case PosFirst:
		return "first"
	case PosMiddle:
		return "middle"
	case PosLast:
		return "last"
	}
	return "position(" + strconv.Itoa(int(p)) + ")"
}

// Layout describes the headers of an opcode: the extension headers that
// follow the BTH in wire order, their combined length with the BTH, and
// whether a payload follows.
type Layout struct {
	Ext       [2]Ext // in wire order; unused entries are ExtNone
	NumExt    int    // how many entries of Ext are used
	HeaderLen int    // BTH plus extension headers, in bytes
	Payload   bool   // whether the opcode carries payload (possibly empty)
}

// Has reports whether the layout includes extension header e.
func (l Layout) Has(e Ext) bool {
	for i := 0; i < l.NumExt && i < len(l.Ext); i++ {
		if l.Ext[i] == e {
			return true
		}
	}
	return false
}

type opInfo struct {
	name   string
	kind   Kind
	pos    Position
	imm    bool
	inv    bool
	valid  bool
	layout Layout
}

var opTable [256]opInfo

func def(op Opcode, name string, kind Kind, pos Position, payload bool, ext ...Ext) {
	info := opInfo{name: name, kind: kind, pos: pos, valid: true}
	info.layout.Payload = payload
	info.layout.HeaderLen = BTHLen
	for i, e := range ext {
		info.layout.Ext[i] = e
		info.layout.HeaderLen += e.Len()
		if e == ExtImmDt {
			info.imm = true
		}
		if e == ExtIETH {
			info.inv = true
		}
	}
	info.layout.NumExt = len(ext)
	opTable[op] = info
}

func init() {
	// SEND and RDMA WRITE exist for RC and UC with the same layout.
	for _, t := range []struct {
		base Opcode
		name string
	}{{0x00, "RC_"}, {0x20, "UC_"}} {
		b, n := t.base, t.name
		def(b|0x00, n+"SEND_FIRST", KindSend, PosFirst, true)
		def(b|0x01, n+"SEND_MIDDLE", KindSend, PosMiddle, true)
		def(b|0x02, n+"SEND_LAST", KindSend, PosLast, true)
		def(b|0x03, n+"SEND_LAST_WITH_IMMEDIATE", KindSend, PosLast, true, ExtImmDt)
		def(b|0x04, n+"SEND_ONLY", KindSend, PosOnly, true)
		def(b|0x05, n+"SEND_ONLY_WITH_IMMEDIATE", KindSend, PosOnly, true, ExtImmDt)
		def(b|0x06, n+"RDMA_WRITE_FIRST", KindWrite, PosFirst, true, ExtRETH)
		def(b|0x07, n+"RDMA_WRITE_MIDDLE", KindWrite, PosMiddle, true)
		def(b|0x08, n+"RDMA_WRITE_LAST", KindWrite, PosLast, true)
		def(b|0x09, n+"RDMA_WRITE_LAST_WITH_IMMEDIATE", KindWrite, PosLast, true, ExtImmDt)
		def(b|0x0a, n+"RDMA_WRITE_ONLY", KindWrite, PosOnly, true, ExtRETH)
		def(b|0x0b, n+"RDMA_WRITE_ONLY_WITH_IMMEDIATE", KindWrite, PosOnly, true, ExtRETH, ExtImmDt)
	}
	def(RCReadRequest, "RC_RDMA_READ_REQUEST", KindReadRequest, PosOnly, false, ExtRETH)
	def(RCReadResponseFirst, "RC_RDMA_READ_RESPONSE_FIRST", KindReadResponse, PosFirst, true, ExtAETH)
	def(RCReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", KindReadResponse, PosMiddle, true)
	def(RCReadResponseLast, "RC_RDMA_READ_RESPONSE_LAST", KindReadResponse, PosLast, true, ExtAETH)
	def(RCReadResponseOnly, "RC_RDMA_READ_RESPONSE_ONLY", KindReadResponse, PosOnly, true, ExtAETH)
	def(RCAck, "RC_ACKNOWLEDGE", KindAck, PosOnly, false, ExtAETH)
	def(RCAtomicAck, "RC_ATOMIC_ACKNOWLEDGE", KindAtomicAck, PosOnly, false, ExtAETH, ExtAtomicAck)
	def(RCCompareSwap, "RC_COMPARE_SWAP", KindAtomic, PosOnly, false, ExtAtomicETH)
	def(RCFetchAdd, "RC_FETCH_ADD", KindAtomic, PosOnly, false, ExtAtomicETH)
	def(RCSendLastInv, "RC_SEND_LAST_WITH_INVALIDATE", KindSend, PosLast, true, ExtIETH)
	def(RCSendOnlyInv, "RC_SEND_ONLY_WITH_INVALIDATE", KindSend, PosOnly, true, ExtIETH)
	def(RCFlush, "RC_FLUSH", KindFlush, PosOnly, false, ExtFETH, ExtRETH)
	def(RCAtomicWrite, "RC_ATOMIC_WRITE", KindAtomicWrite, PosOnly, true, ExtRETH)
	def(UDSendOnly, "UD_SEND_ONLY", KindSend, PosOnly, true, ExtDETH)
	def(UDSendOnlyImm, "UD_SEND_ONLY_WITH_IMMEDIATE", KindSend, PosOnly, true, ExtDETH, ExtImmDt)
	def(CNPOpcode, "CNP", KindCNP, PosOnly, false, ExtCNPPad)
}

// Opcodes returns every opcode this package knows, in numeric order.
func Opcodes() []Opcode {
	var ops []Opcode
	for i := range opTable {
		if opTable[i].valid {
			ops = append(ops, Opcode(i))
		}
	}
	return ops
}

// Known reports whether this package knows op's layout.
func (op Opcode) Known() bool { return opTable[op].valid }

// String returns the IBA name without the IB_OPCODE_ prefix
// ("RC_SEND_FIRST", "UD_SEND_ONLY_WITH_IMMEDIATE", "CNP"), or "OPCODE_0xNN"
// for an opcode this package does not know.
func (op Opcode) String() string {
	if info := &opTable[op]; info.valid {
		return info.name
	}
	const hex = "0123456789abcdef"
	return "OPCODE_0x" + string([]byte{hex[op>>4], hex[op&0xf]})
}

// Transport returns the opcode's transport service.
func (op Opcode) Transport() Transport { return Transport(op & 0xe0) }

// Layout returns the opcode's header layout. It is the zero Layout for an
// unknown opcode.
func (op Opcode) Layout() Layout { return opTable[op].layout }

// HasPayload reports whether packets with this opcode carry a payload.
func (op Opcode) HasPayload() bool { return opTable[op].layout.Payload }

// Kind returns what the opcode does, KindInvalid if unknown.
func (op Opcode) Kind() Kind { return opTable[op].kind }

// Position returns where a packet with this opcode sits in its message.
func (op Opcode) Position() Position { return opTable[op].pos }

// HasImm reports whether the opcode carries ImmDt.
func (op Opcode) HasImm() bool { return opTable[op].imm }

// HasInv reports whether the opcode carries an IETH (send with invalidate).
func (op Opcode) HasInv() bool { return opTable[op].inv }

// IsRequest reports whether the opcode is sent by a requester: sends, RDMA
// writes, read requests, atomics, flush and atomic write. Each request
// consumes at least one PSN of the requester's sequence.
func (op Opcode) IsRequest() bool {
	switch opTable[op].kind {
	case KindSend, KindWrite, KindReadRequest, KindAtomic, KindFlush, KindAtomicWrite:
		return true
	}
	return false
}

// IsResponse reports whether the opcode is sent by a responder: read
// responses, ACKs (including NAKs) and atomic ACKs.
func (op Opcode) IsResponse() bool {
	switch opTable[op].kind {
	case KindReadResponse, KindAck, KindAtomicAck:
		return true
	}
	return false
}
