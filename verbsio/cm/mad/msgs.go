package mad

import (
	"fmt"

	"github.com/rperf/rperf/verbsio"
)

// Private data sizes of the CM messages (the bytes after each message's
// fields, to the end of the MAD).
const (
	REQPrivateDataSize     = 92
	MRAPrivateDataSize     = 222
	REJPrivateDataSize     = 148
	REPPrivateDataSize     = 196
	RTUPrivateDataSize     = 224
	DREQPrivateDataSize    = 220
	DREPPrivateDataSize    = 224
	SIDRREQPrivateDataSize = 216
	SIDRREPPrivateDataSize = 136
	ARILength              = 72 // REJ additional rejection information
	SIDRInfoLength         = 72 // SIDR_REP additional information
)

// Transport service types of a REQ (its 2-bit field; 3 means "see the
// extended transport type", where 1 is XRC).
const (
	TransportRC       = 0
	TransportUC       = 1
	TransportRD       = 2
	TransportExtended = 3
)

// Message REJected or MRAed (the 2-bit field of REJ and MRA).
const (
	MsgREQ   = 0
	MsgREP   = 1
	MsgOther = 2
)

// Path is one path of a REQ (primary or alternate).
type Path struct {
	LocalLID        uint16
	RemoteLID       uint16
	LocalGID        verbsio.GID
	RemoteGID       verbsio.GID
	FlowLabel       uint32 // 20 bits
	PacketRate      uint8  // 6 bits, IB rate encoding
	TrafficClass    uint8
	HopLimit        uint8
	SL              uint8 // 4 bits
	SubnetLocal     bool
	LocalACKTimeout uint8 // 5 bits: 4.096 us * 2^t
}

func (p *Path) encode(e *encoder, base int) {
	e.put("LocalLID", base, 0, 16, uint64(p.LocalLID))
	e.put("RemoteLID", base+2, 0, 16, uint64(p.RemoteLID))
	e.bytes("LocalGID", base+4, p.LocalGID[:])
	e.bytes("RemoteGID", base+20, p.RemoteGID[:])
	e.put("FlowLabel", base+36, 0, 20, uint64(p.FlowLabel))
	e.put("PacketRate", base+39, 2, 6, uint64(p.PacketRate))
	e.put("TrafficClass", base+40, 0, 8, uint64(p.TrafficClass))
	e.put("HopLimit", base+41, 0, 8, uint64(p.HopLimit))
	e.put("SL", base+42, 0, 4, uint64(p.SL))
	e.flag("SubnetLocal", base+42, 4, p.SubnetLocal)
	e.put("LocalACKTimeout", base+43, 0, 5, uint64(p.LocalACKTimeout))
}

func (p *Path) decode(d *decoder, base int) {
	p.LocalLID = uint16(d.bits(base, 0, 16))
	p.RemoteLID = uint16(d.bits(base+2, 0, 16))
	p.LocalGID = d.gid(base + 4)
	p.RemoteGID = d.gid(base + 20)
	p.FlowLabel = uint32(d.bits(base+36, 0, 20))
	p.PacketRate = d.u8(base+39, 2, 6)
	p.TrafficClass = d.u8(base+40, 0, 8)
	p.HopLimit = d.u8(base+41, 0, 8)
	p.SL = d.u8(base+42, 0, 4)
	p.SubnetLocal = d.flag(base+42, 4)
	p.LocalACKTimeout = d.u8(base+43, 0, 5)
}

// REQ is a connection request (IBTA Table 106).
type REQ struct {
	LocalCommID             uint32
	ServiceID               uint64
	LocalCAGUID             uint64
	LocalQKey               uint32
	LocalQPN                uint32 // 24 bits
	ResponderResources      uint8
	LocalEECN               uint32 // 24 bits
	InitiatorDepth          uint8
	RemoteEECN              uint32 // 24 bits
	RemoteCMResponseTimeout uint8  // 5 bits
	TransportServiceType    uint8  // 2 bits: TransportRC, TransportUC, ...
	EndToEndFlowControl     bool
	StartingPSN             uint32 // 24 bits
	LocalCMResponseTimeout  uint8  // 5 bits
	RetryCount              uint8  // 3 bits
	PKey                    uint16
	PathMTU                 uint8 // 4 bits, IB MTU enum (3 = 1024)
	RDCExists               bool
	RNRRetryCount           uint8 // 3 bits
	MaxCMRetries            uint8 // 4 bits
	SRQ                     bool
	ExtendedTransportType   uint8 // 3 bits
	Primary                 Path
	Alternate               Path
	SAPSupported            bool
	PrivateData             [REQPrivateDataSize]byte
}

// Attr returns AttrREQ.
func (*REQ) Attr() AttrID { return AttrREQ }

func (m *REQ) encode(e *encoder) {
	e.put("LocalCommID", 0, 0, 32, uint64(m.LocalCommID))
	e.put("ServiceID", 8, 0, 64, m.ServiceID)
	e.put("LocalCAGUID", 16, 0, 64, m.LocalCAGUID)
	e.put("LocalQKey", 28, 0, 32, uint64(m.LocalQKey))
	e.put("LocalQPN", 32, 0, 24, uint64(m.LocalQPN))
	e.put("ResponderResources", 35, 0, 8, uint64(m.ResponderResources))
	e.put("LocalEECN", 36, 0, 24, uint64(m.LocalEECN))
	e.put("InitiatorDepth", 39, 0, 8, uint64(m.InitiatorDepth))
	e.put("RemoteEECN", 40, 0, 24, uint64(m.RemoteEECN))
	e.put("RemoteCMResponseTimeout", 43, 0, 5, uint64(m.RemoteCMResponseTimeout))
	e.put("TransportServiceType", 43, 5, 2, uint64(m.TransportServiceType))
	e.flag("EndToEndFlowControl", 43, 7, m.EndToEndFlowControl)
	e.put("StartingPSN", 44, 0, 24, uint64(m.StartingPSN))
	e.put("LocalCMResponseTimeout", 47, 0, 5, uint64(m.LocalCMResponseTimeout))
	e.put("RetryCount", 47, 5, 3, uint64(m.RetryCount))
	e.put("PKey", 48, 0, 16, uint64(m.PKey))
	e.put("PathMTU", 50, 0, 4, uint64(m.PathMTU))
	e.flag("RDCExists", 50, 4, m.RDCExists)
	e.put("RNRRetryCount", 50, 5, 3, uint64(m.RNRRetryCount))
	e.put("MaxCMRetries", 51, 0, 4, uint64(m.MaxCMRetries))
	e.flag("SRQ", 51, 4, m.SRQ)
	e.put("ExtendedTransportType", 51, 5, 3, uint64(m.ExtendedTransportType))
	m.Primary.encode(e, 52)
	m.Alternate.encode(e, 96)
	e.flag("SAPSupported", 139, 5, m.SAPSupported)
	e.bytes("PrivateData", 140, m.PrivateData[:])
}

func (m *REQ) decode(d *decoder) {
	m.LocalCommID = d.u32(0, 32)
	m.ServiceID = d.u64(8)
	m.LocalCAGUID = d.u64(16)
	m.LocalQKey = d.u32(28, 32)
	m.LocalQPN = d.u32(32, 24)
	m.ResponderResources = d.u8(35, 0, 8)
	m.LocalEECN = d.u32(36, 24)
	m.InitiatorDepth = d.u8(39, 0, 8)
	m.RemoteEECN = d.u32(40, 24)
	m.RemoteCMResponseTimeout = d.u8(43, 0, 5)
	m.TransportServiceType = d.u8(43, 5, 2)
	m.EndToEndFlowControl = d.flag(43, 7)
	m.StartingPSN = d.u32(44, 24)
	m.LocalCMResponseTimeout = d.u8(47, 0, 5)
	m.RetryCount = d.u8(47, 5, 3)
	m.PKey = d.u16(48)
	m.PathMTU = d.u8(50, 0, 4)
	m.RDCExists = d.flag(50, 4)
	m.RNRRetryCount = d.u8(50, 5, 3)
	m.MaxCMRetries = d.u8(51, 0, 4)
	m.SRQ = d.flag(51, 4)
	m.ExtendedTransportType = d.u8(51, 5, 3)
	m.Primary.decode(d, 52)
	m.Alternate.decode(d, 96)
	m.SAPSupported = d.flag(139, 5)
	d.bytes(140, m.PrivateData[:])
}

// HasAlternate reports whether the REQ carries an alternate path (Linux's
// test: a non-zero alternate local LID).
func (m *REQ) HasAlternate() bool { return m.Alternate.LocalLID != 0 }

// String summarizes the request.
func (m *REQ) String() string {
	return fmt.Sprintf("REQ comm %#x sid %#016x qpn %#x psn %#x %s mtu %s %s->%s",
		m.LocalCommID, m.ServiceID, m.LocalQPN, m.StartingPSN, transportName(m.TransportServiceType, m.ExtendedTransportType),
		mtuName(m.PathMTU), m.Primary.LocalGID, m.Primary.RemoteGID)
}

// MRA is a message receipt acknowledgement: "I got it, answer coming
// within ServiceTimeout" (IBTA Table 107).
type MRA struct {
	LocalCommID    uint32
	RemoteCommID   uint32
	MessageMRAed   uint8 // 2 bits: MsgREQ, MsgREP, MsgOther
	ServiceTimeout uint8 // 5 bits
	PrivateData    [MRAPrivateDataSize]byte
}

// Attr returns AttrMRA.
func (*MRA) Attr() AttrID { return AttrMRA }

func (m *MRA) encode(e *encoder) {
	e.put("LocalCommID", 0, 0, 32, uint64(m.LocalCommID))
	e.put("RemoteCommID", 4, 0, 32, uint64(m.RemoteCommID))
	e.put("MessageMRAed", 8, 0, 2, uint64(m.MessageMRAed))
	e.put("ServiceTimeout", 9, 0, 5, uint64(m.ServiceTimeout))
	e.bytes("PrivateData", 10, m.PrivateData[:])
}

func (m *MRA) decode(d *decoder) {
	m.LocalCommID = d.u32(0, 32)
	m.RemoteCommID = d.u32(4, 32)
	m.MessageMRAed = d.u8(8, 0, 2)
	m.ServiceTimeout = d.u8(9, 0, 5)
	d.bytes(10, m.PrivateData[:])
}

// String summarizes the MRA.
func (m *MRA) String() string {
	return fmt.Sprintf("MRA comm %#x->%#x of %s service timeout %d", m.LocalCommID, m.RemoteCommID,
		msgName(m.MessageMRAed), m.ServiceTimeout)
}

// REJ is a connection reject (IBTA Table 108).
type REJ struct {
	LocalCommID        uint32
	RemoteCommID       uint32
	MessageRejected    uint8 // 2 bits: MsgREQ, MsgREP, MsgOther
	RejectedInfoLength uint8 // 7 bits: bytes of ARI in use
	Reason             RejectReason
	ARI                [ARILength]byte
	PrivateData        [REJPrivateDataSize]byte
}

// Attr returns AttrREJ.
func (*REJ) Attr() AttrID { return AttrREJ }

func (m *REJ) encode(e *encoder) {
	e.put("LocalCommID", 0, 0, 32, uint64(m.LocalCommID))
	e.put("RemoteCommID", 4, 0, 32, uint64(m.RemoteCommID))
	e.put("MessageRejected", 8, 0, 2, uint64(m.MessageRejected))
	e.put("RejectedInfoLength", 9, 0, 7, uint64(m.RejectedInfoLength))
	e.put("Reason", 10, 0, 16, uint64(m.Reason))
	e.bytes("ARI", 12, m.ARI[:])
	e.bytes("PrivateData", 84, m.PrivateData[:])
}

func (m *REJ) decode(d *decoder) {
	m.LocalCommID = d.u32(0, 32)
	m.RemoteCommID = d.u32(4, 32)
	m.MessageRejected = d.u8(8, 0, 2)
	m.RejectedInfoLength = d.u8(9, 0, 7)
	m.Reason = RejectReason(d.u16(10))
	d.bytes(12, m.ARI[:])
	d.bytes(84, m.PrivateData[:])
}

// String summarizes the reject.
func (m *REJ) String() string {
	return fmt.Sprintf("REJ comm %#x->%#x of %s reason %d (%s)", m.LocalCommID, m.RemoteCommID,
		msgName(m.MessageRejected), uint16(m.Reason), m.Reason)
}

// REP is a connection reply (IBTA Table 110).
type REP struct {
	LocalCommID         uint32
	RemoteCommID        uint32
	LocalQKey           uint32
	LocalQPN            uint32 // 24 bits
	LocalEECN           uint32 // 24 bits
	StartingPSN         uint32 // 24 bits
	ResponderResources  uint8
	InitiatorDepth      uint8
	TargetACKDelay      uint8 // 5 bits
	FailoverAccepted    uint8 // 2 bits
	EndToEndFlowControl bool
	RNRRetryCount       uint8 // 3 bits
	SRQ                 bool
	LocalCAGUID         uint64
	PrivateData         [REPPrivateDataSize]byte
}

// Attr returns AttrREP.
func (*REP) Attr() AttrID { return AttrREP }

func (m *REP) encode(e *encoder) {
	e.put("LocalCommID", 0, 0, 32, uint64(m.LocalCommID))
	e.put("RemoteCommID", 4, 0, 32, uint64(m.RemoteCommID))
	e.put("LocalQKey", 8, 0, 32, uint64(m.LocalQKey))
	e.put("LocalQPN", 12, 0, 24, uint64(m.LocalQPN))
	e.put("LocalEECN", 16, 0, 24, uint64(m.LocalEECN))
	e.put("StartingPSN", 20, 0, 24, uint64(m.StartingPSN))
	e.put("ResponderResources", 24, 0, 8, uint64(m.ResponderResources))
	e.put("InitiatorDepth", 25, 0, 8, uint64(m.InitiatorDepth))
	e.put("TargetACKDelay", 26, 0, 5, uint64(m.TargetACKDelay))
	e.put("FailoverAccepted", 26, 5, 2, uint64(m.FailoverAccepted))
	e.flag("EndToEndFlowControl", 26, 7, m.EndToEndFlowControl)
	e.put("RNRRetryCount", 27, 0, 3, uint64(m.RNRRetryCount))
	e.flag("SRQ", 27, 3, m.SRQ)
	e.put("LocalCAGUID", 28, 0, 64, m.LocalCAGUID)
	e.bytes("PrivateData", 36, m.PrivateData[:])
}

func (m *REP) decode(d *decoder) {
	m.LocalCommID = d.u32(0, 32)
	m.RemoteCommID = d.u32(4, 32)
	m.LocalQKey = d.u32(8, 32)
	m.LocalQPN = d.u32(12, 24)
	m.LocalEECN = d.u32(16, 24)
	m.StartingPSN = d.u32(20, 24)
	m.ResponderResources = d.u8(24, 0, 8)
	m.InitiatorDepth = d.u8(25, 0, 8)
	m.TargetACKDelay = d.u8(26, 0, 5)
	m.FailoverAccepted = d.u8(26, 5, 2)
	m.EndToEndFlowControl = d.flag(26, 7)
	m.RNRRetryCount = d.u8(27, 0, 3)
	m.SRQ = d.flag(27, 3)
	m.LocalCAGUID = d.u64(28)
	d.bytes(36, m.PrivateData[:])
}

// String summarizes the reply.
func (m *REP) String() string {
	return fmt.Sprintf("REP comm %#x->%#x qpn %#x psn %#x resp_res %d init_depth %d rnr_retry %d",
		m.LocalCommID, m.RemoteCommID, m.LocalQPN, m.StartingPSN, m.ResponderResources, m.InitiatorDepth, m.RNRRetryCount)
}

// RTU is ready to use: the active side's last message of the handshake
// (IBTA Table 111).
type RTU struct {
	LocalCommID  uint32
	RemoteCommID uint32
	PrivateData  [RTUPrivateDataSize]byte
}

// Attr returns AttrRTU.
func (*RTU) Attr() AttrID { return AttrRTU }

func (m *RTU) encode(e *encoder) {
	e.put("LocalCommID", 0, 0, 32, uint64(m.LocalCommID))
	e.put("RemoteCommID", 4, 0, 32, uint64(m.RemoteCommID))
	e.bytes("PrivateData", 8, m.PrivateData[:])
}

func (m *RTU) decode(d *decoder) {
	m.LocalCommID = d.u32(0, 32)
	m.RemoteCommID = d.u32(4, 32)
	d.bytes(8, m.PrivateData[:])
}

// String summarizes the RTU.
func (m *RTU) String() string {
	return fmt.Sprintf("RTU comm %#x->%#x", m.LocalCommID, m.RemoteCommID)
}

// DREQ is a disconnect request (IBTA Table 112).
type DREQ struct {
	LocalCommID  uint32
	RemoteCommID uint32
	RemoteQPN    uint32 // 24 bits: the receiver's QPN
	PrivateData  [DREQPrivateDataSize]byte
}

// Attr returns AttrDREQ.
func (*DREQ) Attr() AttrID { return AttrDREQ }

func (m *DREQ) encode(e *encoder) {
	e.put("LocalCommID", 0, 0, 32, uint64(m.LocalCommID))
	e.put("RemoteCommID", 4, 0, 32, uint64(m.RemoteCommID))
	e.put("RemoteQPN", 8, 0, 24, uint64(m.RemoteQPN))
	e.bytes("PrivateData", 12, m.PrivateData[:])
}

func (m *DREQ) decode(d *decoder) {
	m.LocalCommID = d.u32(0, 32)
	m.RemoteCommID = d.u32(4, 32)
	m.RemoteQPN = d.u32(8, 24)
	d.bytes(12, m.PrivateData[:])
}

// String summarizes the DREQ.
func (m *DREQ) String() string {
	return fmt.Sprintf("DREQ comm %#x->%#x remote qpn %#x", m.LocalCommID, m.RemoteCommID, m.RemoteQPN)
}

// DREP is a disconnect reply (IBTA Table 113).
type DREP struct {
	LocalCommID  uint32
	RemoteCommID uint32
	PrivateData  [DREPPrivateDataSize]byte
}

// Attr returns AttrDREP.
func (*DREP) Attr() AttrID { return AttrDREP }

func (m *DREP) encode(e *encoder) {
	e.put("LocalCommID", 0, 0, 32, uint64(m.LocalCommID))
	e.put("RemoteCommID", 4, 0, 32, uint64(m.RemoteCommID))
	e.bytes("PrivateData", 8, m.PrivateData[:])
}

func (m *DREP) decode(d *decoder) {
	m.LocalCommID = d.u32(0, 32)
	m.RemoteCommID = d.u32(4, 32)
	d.bytes(8, m.PrivateData[:])
}

// String summarizes the DREP.
func (m *DREP) String() string {
	return fmt.Sprintf("DREP comm %#x->%#x", m.LocalCommID, m.RemoteCommID)
}

// SIDRREQ is a service ID resolution request: which UD QP serves this
// service (IBTA Table 119).
type SIDRREQ struct {
	RequestID   uint32
	PKey        uint16
	ServiceID   uint64
	PrivateData [SIDRREQPrivateDataSize]byte
}

// Attr returns AttrSIDRREQ.
func (*SIDRREQ) Attr() AttrID { return AttrSIDRREQ }

func (m *SIDRREQ) encode(e *encoder) {
	e.put("RequestID", 0, 0, 32, uint64(m.RequestID))
	e.put("PKey", 4, 0, 16, uint64(m.PKey))
	e.put("ServiceID", 8, 0, 64, m.ServiceID)
	e.bytes("PrivateData", 16, m.PrivateData[:])
}

func (m *SIDRREQ) decode(d *decoder) {
	m.RequestID = d.u32(0, 32)
	m.PKey = d.u16(4)
	m.ServiceID = d.u64(8)
	d.bytes(16, m.PrivateData[:])
}

// String summarizes the SIDR_REQ.
func (m *SIDRREQ) String() string {
	return fmt.Sprintf("SIDR_REQ id %#x sid %#016x pkey %#04x", m.RequestID, m.ServiceID, m.PKey)
}

// SIDRREP answers a SIDR_REQ (IBTA Table 120).
type SIDRREP struct {
	RequestID            uint32
	Status               SIDRStatus
	AdditionalInfoLength uint8
	QPN                  uint32 // 24 bits
	ServiceID            uint64
	QKey                 uint32
	AdditionalInfo       [SIDRInfoLength]byte
	PrivateData          [SIDRREPPrivateDataSize]byte
}

// Attr returns AttrSIDRREP.
func (*SIDRREP) Attr() AttrID { return AttrSIDRREP }

func (m *SIDRREP) encode(e *encoder) {
	e.put("RequestID", 0, 0, 32, uint64(m.RequestID))
	e.put("Status", 4, 0, 8, uint64(m.Status))
	e.put("AdditionalInfoLength", 5, 0, 8, uint64(m.AdditionalInfoLength))
	e.put("QPN", 8, 0, 24, uint64(m.QPN))
	e.put("ServiceID", 12, 0, 64, m.ServiceID)
	e.put("QKey", 20, 0, 32, uint64(m.QKey))
	e.bytes("AdditionalInfo", 24, m.AdditionalInfo[:])
	e.bytes("PrivateData", 96, m.PrivateData[:])
}

func (m *SIDRREP) decode(d *decoder) {
	m.RequestID = d.u32(0, 32)
	m.Status = SIDRStatus(d.u8(4, 0, 8))
	m.AdditionalInfoLength = d.u8(5, 0, 8)
	m.QPN = d.u32(8, 24)
	m.ServiceID = d.u64(12)
	m.QKey = d.u32(20, 32)
	d.bytes(24, m.AdditionalInfo[:])
	d.bytes(96, m.PrivateData[:])
}

// String summarizes the SIDR_REP.
func (m *SIDRREP) String() string {
	return fmt.Sprintf("SIDR_REP id %#x status %d (%s) qpn %#x qkey %#x sid %#016x",
		m.RequestID, uint8(m.Status), m.Status, m.QPN, m.QKey, m.ServiceID)
}

func msgName(v uint8) string {
	switch v {
	case MsgREQ:
		return "REQ"
	case MsgREP:
		return "REP"
	case MsgOther:
		return "other"
	}
	return fmt.Sprintf("msg %d", v)
}

func transportName(t, ext uint8) string {
	switch t {
	case TransportRC:
		return "RC"
	case TransportUC:
		return "UC"
	case TransportRD:
		return "RD"
	}
	if ext == 1 {
		return "XRC"
	}
	return fmt.Sprintf("transport %d/%d", t, ext)
}

func mtuName(m uint8) string {
	if m >= 1 && m <= 5 {
		return fmt.Sprint(128 << m)
	}
	return fmt.Sprintf("enum %d", m)
}
