package verbsio

// DeviceAttr are a device's attributes and limits (struct ibv_device_attr_ex
// plus the engine's own capability fields). Providers report their true
// limits here.
type DeviceAttr struct {
	FWVer           string    // firmware version
	NodeGUID        uint64    // node GUID (host byte order)
	SysImageGUID    uint64    // system image GUID
	VendorID        uint32    // IEEE vendor ID
	VendorPartID    uint32    // vendor part ID
	HWVer           uint32    // hardware version
	MaxMRSize       uint64    // largest registrable region, bytes
	PageSizeCap     uint64    // supported page sizes (bit mask)
	MaxQP           int       // queue pairs per context
	MaxQPWR         int       // work requests per queue
	DeviceCapFlags  uint64    // IBV_DEVICE_* capability bits
	MaxSGE          int       // scatter/gather entries per send or receive WR
	MaxSGERD        int       // SGEs per RDMA READ
	MaxCQ           int       // completion queues per context
	MaxCQE          int       // entries per completion queue
	MaxMR           int       // memory regions per context
	MaxPD           int       // protection domains per context
	MaxQPRdAtom     int       // outstanding READ/atomic per QP as target
	MaxQPInitRdAtom int       // outstanding READ/atomic per QP as initiator
	MaxResRdAtom    int       // responder resources for READ/atomic
	AtomicCap       AtomicCap // atomicity guarantee
	MaxSRQ          int       // shared receive queues per context
	MaxSRQWR        int       // work requests per SRQ
	MaxSRQSGE       int       // SGEs per SRQ receive
	MaxAH           int       // address handles
	MaxPkeys        int       // P_Key table length
	LocalCAAckDelay uint8     // local CA ACK delay
	PhysPortCnt     int       // number of ports

	// Engine capability fields. Zero means "not supported" for providers
	// that know; Unknown lists the fields a provider cannot know.
	MaxInlineData int            // largest inline payload per send WR
	MaxMsgSize    uint64         // largest message, bytes
	TSO           TSOCaps        // TCP/UDP segmentation offload
	PacketPacing  PacingCaps     // per-QP rate limiting
	MaxDMSize     uint64         // device memory available, bytes
	RawPacketCaps RawPacketCaps  // raw packet QP capabilities
	FlowSteering  FlowCaps       // flow steering (ibv_create_flow); zero Features: none
	Interfaces    []InterfaceCap // accelerated interface families offered
	SendPaths     []string       // rperf send paths the device supports
	Unknown       []string       // names of fields this provider cannot know

	// Ext holds the rest of what ibv_query_device_ex reports (the fields
	// ibv_devinfo -v prints that rperf does not use); nil when the
	// provider does not report them.
	Ext *DeviceAttrEx
}

// DeviceAttrEx is the rest of struct ibv_device_attr_ex, as ibv_devinfo -v
// prints it. A provider that answers only the legacy ibv_query_device
// fills the fields of struct ibv_device_attr and names the extended ones
// (ODPCaps, CompletionTimestampMask, HCACoreClock, DeviceCapFlagsEx,
// RSSCaps, MaxWQTypeRQ, TMCaps, CQModCaps) in DeviceAttr.Unknown.
type DeviceAttrEx struct {
	// Fields of struct ibv_device_attr that DeviceAttr does not carry.
	MaxEERdAtom           int // outstanding READ/atomic per EE context as target
	MaxEEInitRdAtom       int // outstanding READ/atomic per EE context as initiator
	MaxEE                 int // end-to-end contexts
	MaxRDD                int // reliable datagram domains
	MaxMW                 int // memory windows
	MaxRawIPv6QP          int // raw IPv6 datagram QPs
	MaxRawEthyQP          int // raw Ethertype datagram QPs
	MaxMcastGrp           int // multicast groups
	MaxMcastQPAttach      int // QPs per multicast group
	MaxTotalMcastQPAttach int // QPs attached to multicast groups in all
	MaxFMR                int // fast memory regions
	MaxMapPerFMR          int // remaps per FMR before an unmap

	// Extended attributes (ibv_query_device_ex).
	ODP                     ODPCaps   // on-demand paging
	CompletionTimestampMask uint64    // bits of a completion's timestamp; 0: no timestamps
	HCACoreClock            uint64    // the timestamp clock, kHz; 0: not reported
	DeviceCapFlagsEx        uint64    // device_cap_flags_ex: all 64 capability bits
	RSS                     RSSCaps   // receive side scaling
	MaxWQTypeRQ             uint32    // receive work queues
	TM                      TMCaps    // tag matching
	CQMod                   CQModCaps // CQ moderation

	// NumCompVectors is the context's number of completion vectors
	// (struct ibv_context's num_comp_vectors).
	NumCompVectors int
}

// ODPCaps are on-demand paging capabilities (struct ibv_odp_caps and
// xrc_odp_caps): IBV_ODP_SUPPORT* general bits, IBV_ODP_SUPPORT_SEND ...
// bits per transport.
type ODPCaps struct {
	General uint64
	RC      uint32
	UC      uint32
	UD      uint32
	XRC     uint32
}

// RSSCaps are receive side scaling capabilities (struct ibv_rss_caps).
type RSSCaps struct {
	SupportedQP                []QPType
	MaxRWQIndirectionTables    uint32
	MaxRWQIndirectionTableSize uint32
	RxHashFieldsMask           uint64
	RxHashFunction             uint8
}

// TMCaps are tag matching capabilities (struct ibv_tm_caps); MaxNumTags 0
// means no tag matching.
type TMCaps struct {
	MaxRndvHdrSize uint32
	MaxNumTags     uint32
	Flags          uint32 // IBV_TM_CAP_*
	MaxOps         uint32
	MaxSGE         uint32
}

// CQModCaps are CQ moderation capabilities (struct ibv_cq_moderation_caps).
type CQModCaps struct {
	MaxCQCount  uint16
	MaxCQPeriod uint16 // microseconds
}

// TSOCaps describe segmentation offload (tso_caps).
type TSOCaps struct {
	MaxTSO      uint32   // largest payload of one TSO send, bytes; 0: no TSO
	SupportedQP []QPType // QP types that may use TSO
}

// PacingCaps describe packet pacing (packet_pacing_caps).
type PacingCaps struct {
	RateLimitMinKbps uint32   // lowest settable rate
	RateLimitMaxKbps uint32   // highest settable rate; 0: no pacing
	SupportedQP      []QPType // QP types that may be paced
}

// RawPacketCaps are raw packet QP capabilities (IBV_RAW_PACKET_CAP_*).
type RawPacketCaps uint32

// Raw packet capability bits.
const (
	RawCapCVLANStripping RawPacketCaps = 1 << 0
	RawCapScatterFCS     RawPacketCaps = 1 << 1
	RawCapIPCsum         RawPacketCaps = 1 << 2
	RawCapDelayDrop      RawPacketCaps = 1 << 3
)

// InterfaceCap names an accelerated interface family a device offers, with
// its highest version.
type InterfaceCap struct {
	Family  string // e.g. "qp_burst", "cq_poll"
	Version int
}

// PortAttr are a port's attributes (struct ibv_port_attr).
type PortAttr struct {
	State        PortState
	MaxMTU       MTU
	ActiveMTU    MTU
	GIDTblLen    int
	PortCapFlags uint32
	MaxMsgSize   uint64
	LID          uint16
	SMLID        uint16
	LMC          uint8
	SMSL         uint8
	MaxVLNum     uint8
	PkeyTblLen   int
	ActiveWidth  uint8 // IB width code: 1 = 1X, 2 = 4X, 4 = 8X, 8 = 12X, 16 = 2X
	ActiveSpeed  uint8 // IB speed code: 1 = SDR 2.5 Gbps ...
	PhysState    uint8 // 5 = LINK_UP
	LinkLayer    LinkLayer
	Netdev       string // network device the port is bound to, if any

	// Ext holds the rest of struct ibv_port_attr; nil when the provider
	// does not report it (the built-in engine).
	Ext *PortAttrEx
}

// PortAttrEx is the rest of struct ibv_port_attr, as ibv_devinfo -v
// prints it.
type PortAttrEx struct {
	PortCapFlags2 uint16 // IBV_PORT_*2 capability bits
	BadPkeyCntr   uint32 // packets dropped for a bad P_Key
	QKeyViolCntr  uint32 // Q_Key violations
	SubnetTimeout uint8  // 4.096 us * 2^SubnetTimeout
	InitTypeReply uint8
}

// QPCap are a queue pair's queue sizes. CreateQP returns the sizes actually
// granted, which may be larger than asked.
type QPCap struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// QPInitAttr describes a queue pair to create (struct ibv_qp_init_attr).
type QPInitAttr struct {
	Type     QPType
	SendCQ   *CQ
	RecvCQ   *CQ
	SRQ      *SRQ // optional: receive through a shared receive queue
	Cap      QPCap
	SQSigAll bool // every send WR produces a completion
	// Segmenter chooses who cuts messages into path-MTU packets on a
	// packet fabric: the default lets the provider decide.
	Segmenter Segmenter
}

// Segmenter says who cuts a message larger than the path MTU into
// packets: the kernel in one call (TSO/GSO: UDP_SEGMENT on the built-in
// udp fabric), or the engine, one datagram per packet.
type Segmenter uint8

// Segmenters.
const (
	SegmentDefault Segmenter = iota // the provider's choice (kernel where it can)
	SegmentKernel                   // TSO: one kernel call per run of packets; EOPNOTSUPP where unavailable
	SegmentEngine                   // the engine, one datagram per packet
)

// String returns "default", "kernel" or "engine".
func (s Segmenter) String() string {
	switch s {
	case SegmentKernel:
		return "kernel"
	case SegmentEngine:
		return "engine"
	}
	return "default"
}

// QPAttrMask selects the QPAttr fields a Modify call sets (enum ibv_qp_attr_mask).
type QPAttrMask uint32

// QP attribute mask bits, with libibverbs' values.
const (
	QPAttrState            QPAttrMask = 1 << 0
	QPAttrCurState         QPAttrMask = 1 << 1
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	QPAttrAccessFlags      QPAttrMask = 1 << 3
	QPAttrPkeyIndex        QPAttrMask = 1 << 4
	QPAttrPort             QPAttrMask = 1 << 5
	QPAttrQKey             QPAttrMask = 1 << 6
	QPAttrAV               QPAttrMask = 1 << 7
	QPAttrPathMTU          QPAttrMask = 1 << 8
	QPAttrTimeout          QPAttrMask = 1 << 9
	QPAttrRetryCnt         QPAttrMask = 1 << 10
	QPAttrRNRRetry         QPAttrMask = 1 << 11
	QPAttrRQPSN            QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	QPAttrAltPath          QPAttrMask = 1 << 14
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15
	QPAttrSQPSN            QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	QPAttrPathMigState     QPAttrMask = 1 << 18
	QPAttrCap              QPAttrMask = 1 << 19
	QPAttrDestQPN          QPAttrMask = 1 << 20
	QPAttrRateLimit        QPAttrMask = 1 << 25
)

var qpAttrMaskNames = []flagName{
	{uint64(QPAttrState), "STATE"}, {uint64(QPAttrCurState), "CUR_STATE"},
	{uint64(QPAttrEnSQDAsyncNotify), "EN_SQD_ASYNC_NOTIFY"},
	{uint64(QPAttrAccessFlags), "ACCESS_FLAGS"}, {uint64(QPAttrPkeyIndex), "PKEY_INDEX"},
	{uint64(QPAttrPort), "PORT"}, {uint64(QPAttrQKey), "QKEY"}, {uint64(QPAttrAV), "AV"},
	{uint64(QPAttrPathMTU), "PATH_MTU"}, {uint64(QPAttrTimeout), "TIMEOUT"},
	{uint64(QPAttrRetryCnt), "RETRY_CNT"}, {uint64(QPAttrRNRRetry), "RNR_RETRY"},
	{uint64(QPAttrRQPSN), "RQ_PSN"}, {uint64(QPAttrMaxQPRdAtomic), "MAX_QP_RD_ATOMIC"},
	{uint64(QPAttrAltPath), "ALT_PATH"}, {uint64(QPAttrMinRNRTimer), "MIN_RNR_TIMER"},
	{uint64(QPAttrSQPSN), "SQ_PSN"}, {uint64(QPAttrMaxDestRdAtomic), "MAX_DEST_RD_ATOMIC"},
	{uint64(QPAttrPathMigState), "PATH_MIG_STATE"}, {uint64(QPAttrCap), "CAP"},
	{uint64(QPAttrDestQPN), "DEST_QPN"}, {uint64(QPAttrRateLimit), "RATE_LIMIT"},
}

// String lists the mask bits, e.g. "STATE|PKEY_INDEX|PORT|ACCESS_FLAGS".
func (m QPAttrMask) String() string { return flagString(uint64(m), qpAttrMaskNames) }

// AHAttr is an address vector (struct ibv_ah_attr with its GRH).
type AHAttr struct {
	DLID         uint16
	SL           uint8
	PortNum      uint8
	IsGlobal     bool // use the GRH fields (always on RoCE)
	DGID         GID
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
}

// QPAttr are queue pair attributes for Modify and Query (struct ibv_qp_attr).
// Only the fields selected by the mask are read by Modify.
type QPAttr struct {
	State           QPState
	CurState        QPState
	PathMTU         MTU
	QKey            uint32
	RQPSN           uint32 // 24 bits
	SQPSN           uint32 // 24 bits
	DestQPN         uint32 // 24 bits
	AccessFlags     Access // remote access allowed on the QP (RC/UC)
	Cap             QPCap
	AH              AHAttr
	PkeyIndex       uint16
	PortNum         uint8
	Timeout         uint8 // 4.096 us * 2^Timeout; 0 = infinite
	RetryCnt        uint8 // 0..7
	RNRRetry        uint8 // 0..7; 7 = infinite
	MinRNRTimer     uint8 // 0..31, IB encoding
	MaxRdAtomic     uint8 // outstanding READ/atomic as initiator
	MaxDestRdAtomic uint8 // outstanding READ/atomic as responder
	SQDrainNotify   bool
	// RateLimit is the packet pacing rate in kbit/s (0 = unlimited); with
	// MaxBurstSize and TypicalPktSize as ibv_modify_qp_rate_limit takes them.
	RateLimit      uint32
	MaxBurstSize   uint32
	TypicalPktSize uint16
}

// CQInitAttr describes a completion queue to create.
type CQInitAttr struct {
	CQE int // minimum number of entries
	// WCFlags are the completion fields the CQ must deliver
	// (ibv_create_cq_ex's wc_flags); 0 is the standard set. Asking for
	// WCExCompletionTimestamp makes every completion carry WC.Timestamp.
	WCFlags CQWCFlags
}

// SRQInitAttr describes a shared receive queue to create.
type SRQInitAttr struct {
	MaxWR  int
	MaxSGE int
	Limit  int // SRQ limit for the limit event; 0 = not armed
}
