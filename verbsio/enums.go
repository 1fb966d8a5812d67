package verbsio

import "strconv"

// Opcode is a send work request opcode (enum ibv_wr_opcode).
type Opcode uint8

// Send work request opcodes.
const (
	OpRDMAWrite      Opcode = iota // IBV_WR_RDMA_WRITE
	OpRDMAWriteImm                 // IBV_WR_RDMA_WRITE_WITH_IMM
	OpSend                         // IBV_WR_SEND
	OpSendImm                      // IBV_WR_SEND_WITH_IMM
	OpRDMARead                     // IBV_WR_RDMA_READ
	OpAtomicCmpSwp                 // IBV_WR_ATOMIC_CMP_AND_SWP
	OpAtomicFetchAdd               // IBV_WR_ATOMIC_FETCH_AND_ADD
	opcodeCount
)

var opcodeNames = [...]string{
	OpRDMAWrite:      "RDMA_WRITE",
	OpRDMAWriteImm:   "RDMA_WRITE_WITH_IMM",
	OpSend:           "SEND",
	OpSendImm:        "SEND_WITH_IMM",
	OpRDMARead:       "RDMA_READ",
	OpAtomicCmpSwp:   "ATOMIC_CMP_AND_SWP",
	OpAtomicFetchAdd: "ATOMIC_FETCH_AND_ADD",
}

// String returns the libibverbs name without the IBV_WR_ prefix.
func (o Opcode) String() string {
	if o == OpTSO {
		return "TSO"
	}
	if o < opcodeCount {
		return opcodeNames[o]
	}
	return "Opcode(" + strconv.Itoa(int(o)) + ")"
}

// Valid reports whether o is a known opcode.
func (o Opcode) Valid() bool { return o < opcodeCount }

// IsAtomic reports whether o is an atomic operation.
func (o Opcode) IsAtomic() bool { return o == OpAtomicCmpSwp || o == OpAtomicFetchAdd }

// WCOpcode is the opcode of a work completion (enum ibv_wc_opcode).
type WCOpcode uint8

// Work completion opcodes.
const (
	WCSend            WCOpcode = iota // IBV_WC_SEND
	WCRDMAWrite                       // IBV_WC_RDMA_WRITE
	WCRDMARead                        // IBV_WC_RDMA_READ
	WCCompSwap                        // IBV_WC_COMP_SWAP
	WCFetchAdd                        // IBV_WC_FETCH_ADD
	WCRecv                            // IBV_WC_RECV
	WCRecvRDMAWithImm                 // IBV_WC_RECV_RDMA_WITH_IMM
	wcOpcodeCount
)

var wcOpcodeNames = [...]string{
	WCSend:            "SEND",
	WCRDMAWrite:       "RDMA_WRITE",
	WCRDMARead:        "RDMA_READ",
	WCCompSwap:        "COMP_SWAP",
	WCFetchAdd:        "FETCH_ADD",
	WCRecv:            "RECV",
	WCRecvRDMAWithImm: "RECV_RDMA_WITH_IMM",
}

// String returns the libibverbs name without the IBV_WC_ prefix.
func (o WCOpcode) String() string {
	if o < wcOpcodeCount {
		return wcOpcodeNames[o]
	}
	return "WCOpcode(" + strconv.Itoa(int(o)) + ")"
}

// IsRecv reports whether the completion belongs to the receive queue.
func (o WCOpcode) IsRecv() bool { return o >= WCRecv }

// WCOpcodeOf returns the completion opcode that a send work request of
// opcode o produces.
func WCOpcodeOf(o Opcode) WCOpcode {
	switch o {
	case OpRDMAWrite, OpRDMAWriteImm:
		return WCRDMAWrite
	case OpRDMARead:
		return WCRDMARead
	case OpAtomicCmpSwp:
		return WCCompSwap
	case OpAtomicFetchAdd:
		return WCFetchAdd
	default:
		return WCSend
	}
}

// Status is a work completion status (enum ibv_wc_status). Its numeric
// values are those of libibverbs.
type Status uint8

// Work completion statuses.
const (
	StatusSuccess        Status = 0  // IBV_WC_SUCCESS
	StatusLocLenErr      Status = 1  // IBV_WC_LOC_LEN_ERR
	StatusLocQPOpErr     Status = 2  // IBV_WC_LOC_QP_OP_ERR
	StatusLocEECOpErr    Status = 3  // IBV_WC_LOC_EEC_OP_ERR
	StatusLocProtErr     Status = 4  // IBV_WC_LOC_PROT_ERR
	StatusWRFlushErr     Status = 5  // IBV_WC_WR_FLUSH_ERR
	StatusMWBindErr      Status = 6  // IBV_WC_MW_BIND_ERR
	StatusBadRespErr     Status = 7  // IBV_WC_BAD_RESP_ERR
	StatusLocAccessErr   Status = 8  // IBV_WC_LOC_ACCESS_ERR
	StatusRemInvReqErr   Status = 9  // IBV_WC_REM_INV_REQ_ERR
	StatusRemAccessErr   Status = 10 // IBV_WC_REM_ACCESS_ERR
	StatusRemOpErr       Status = 11 // IBV_WC_REM_OP_ERR
	StatusRetryExcErr    Status = 12 // IBV_WC_RETRY_EXC_ERR
	StatusRNRRetryExcErr Status = 13 // IBV_WC_RNR_RETRY_EXC_ERR
	StatusLocRDDViolErr  Status = 14 // IBV_WC_LOC_RDD_VIOL_ERR
	StatusRemInvRDReqErr Status = 15 // IBV_WC_REM_INV_RD_REQ_ERR
	StatusRemAbortErr    Status = 16 // IBV_WC_REM_ABORT_ERR
	StatusInvEECNErr     Status = 17 // IBV_WC_INV_EECN_ERR
	StatusInvEECStateErr Status = 18 // IBV_WC_INV_EEC_STATE_ERR
	StatusFatalErr       Status = 19 // IBV_WC_FATAL_ERR
	StatusRespTimeoutErr Status = 20 // IBV_WC_RESP_TIMEOUT_ERR
	StatusGeneralErr     Status = 21 // IBV_WC_GENERAL_ERR
	statusCount
)

var statusNames = [...]string{
	"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR",
	"WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR",
	"REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR", "RETRY_EXC_ERR",
	"RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR",
	"REM_ABORT_ERR", "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR",
	"RESP_TIMEOUT_ERR", "GENERAL_ERR",
}

var statusText = [...]string{
	"success", "local length error", "local QP operation error",
	"local EE context operation error", "local protection error",
	"Work Request Flushed Error", "memory bind operation error",
	"bad response error", "local access error", "remote invalid request error",
	"remote access error", "remote operation error",
	"transport retry counter exceeded", "RNR retry counter exceeded",
	"local RDD violation error", "remote invalid RD request",
	"aborted error", "invalid EE context number", "invalid EE context state",
	"fatal error", "response timeout error", "general error",
}

// String returns the status name without the IBV_WC_ prefix, e.g.
// "REM_ACCESS_ERR".
func (s Status) String() string {
	if s < statusCount {
		return statusNames[s]
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Text returns libibverbs' ibv_wc_status_str text, e.g. "remote access error".
func (s Status) Text() string {
	if s < statusCount {
		return statusText[s]
	}
	return "unknown"
}

// QPType is a queue pair transport type (enum ibv_qp_type).
type QPType uint8

// Queue pair types.
const (
	QPTypeRC        QPType = 2 // IBV_QPT_RC: reliable connected
	QPTypeUC        QPType = 3 // IBV_QPT_UC: unreliable connected
	QPTypeUD        QPType = 4 // IBV_QPT_UD: unreliable datagram
	QPTypeRawPacket QPType = 8 // IBV_QPT_RAW_PACKET
)

// String returns "RC", "UC", "UD" or "RAW_PACKET".
func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	case QPTypeRawPacket:
		return "RAW_PACKET"
	}
	return "QPType(" + strconv.Itoa(int(t)) + ")"
}

// ParseQPType parses "RC", "UC", "UD" or "RAW_PACKET" (case-insensitive).
func ParseQPType(s string) (QPType, bool) {
	switch upper(s) {
	case "RC":
		return QPTypeRC, true
	case "UC":
		return QPTypeUC, true
	case "UD":
		return QPTypeUD, true
	case "RAW_PACKET", "RAW", "RAWETH":
		return QPTypeRawPacket, true
	}
	return 0, false
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// QPState is a queue pair state (enum ibv_qp_state).
type QPState uint8

// Queue pair states.
const (
	QPStateReset QPState = iota // IBV_QPS_RESET
	QPStateInit                 // IBV_QPS_INIT
	QPStateRTR                  // IBV_QPS_RTR: ready to receive
	QPStateRTS                  // IBV_QPS_RTS: ready to send
	QPStateSQD                  // IBV_QPS_SQD: send queue drained
	QPStateSQE                  // IBV_QPS_SQE: send queue error
	QPStateErr                  // IBV_QPS_ERR
	qpStateCount
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String returns the state name, e.g. "RTS".
func (s QPState) String() string {
	if s < qpStateCount {
		return qpStateNames[s]
	}
	return "QPState(" + strconv.Itoa(int(s)) + ")"
}

// Access is a set of memory region access flags (enum ibv_access_flags).
type Access uint32

// Memory access flags.
const (
	AccessLocalWrite   Access = 1 << 0 // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = 1 << 1 // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   Access = 1 << 2 // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = 1 << 3 // IBV_ACCESS_REMOTE_ATOMIC
	AccessZeroBased    Access = 1 << 5 // IBV_ACCESS_ZERO_BASED
	accessKnown               = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic | AccessZeroBased
)

// String lists the flags, e.g. "LOCAL_WRITE|REMOTE_WRITE".
func (a Access) String() string {
	return flagString(uint64(a), []flagName{
		{uint64(AccessLocalWrite), "LOCAL_WRITE"},
		{uint64(AccessRemoteWrite), "REMOTE_WRITE"},
		{uint64(AccessRemoteRead), "REMOTE_READ"},
		{uint64(AccessRemoteAtomic), "REMOTE_ATOMIC"},
		{uint64(AccessZeroBased), "ZERO_BASED"},
	})
}

// SendFlags are send work request flags (enum ibv_send_flags).
type SendFlags uint8

// Send flags.
const (
	SendFence     SendFlags = 1 << 0 // IBV_SEND_FENCE
	SendSignaled  SendFlags = 1 << 1 // IBV_SEND_SIGNALED: produce a completion on success
	SendSolicited SendFlags = 1 << 2 // IBV_SEND_SOLICITED
	SendInline    SendFlags = 1 << 3 // IBV_SEND_INLINE: copy the payload at post time
)

// String lists the flags, e.g. "SIGNALED|INLINE".
func (f SendFlags) String() string {
	return flagString(uint64(f), []flagName{
		{uint64(SendFence), "FENCE"},
		{uint64(SendSignaled), "SIGNALED"},
		{uint64(SendSolicited), "SOLICITED"},
		{uint64(SendInline), "INLINE"},
		{uint64(SendIPCsum), "IP_CSUM"},
	})
}

// WCFlags are work completion flags (enum ibv_wc_flags).
type WCFlags uint8

// Work completion flags.
const (
	WCWithGRH WCFlags = 1 << 0 // IBV_WC_GRH: a GRH is present in the first 40 bytes (UD)
	WCWithImm WCFlags = 1 << 1 // IBV_WC_WITH_IMM: Imm is valid
)

type flagName struct {
	bit  uint64
	name string
}

func flagString(v uint64, names []flagName) string {
	if v == 0 {
		return "0"
	}
	s := ""
	for _, n := range names {
		if v&n.bit != 0 {
			if s != "" {
				s += "|"
			}
			s += n.name
			v &^= n.bit
		}
	}
	if v != 0 {
		if s != "" {
			s += "|"
		}
		s += "0x" + strconv.FormatUint(v, 16)
	}
	return s
}

// MTU is an InfiniBand path MTU (enum ibv_mtu): 1 = 256 bytes ... 5 = 4096.
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// Valid reports whether m is one of MTU256..MTU4096.
func (m MTU) Valid() bool { return m >= MTU256 && m <= MTU4096 }

// String returns e.g. "4096".
func (m MTU) String() string {
	if !m.Valid() {
		return "MTU(" + strconv.Itoa(int(m)) + ")"
	}
	return strconv.Itoa(m.Bytes())
}

// MTUFromBytes returns the largest IB MTU that is at most n bytes, and false
// if n is below 256.
func MTUFromBytes(n int) (MTU, bool) {
	for m := MTU4096; m >= MTU256; m-- {
		if m.Bytes() <= n {
			return m, true
		}
	}
	return 0, false
}

// AtomicCap says which atomics a device performs atomically (enum ibv_atomic_cap).
type AtomicCap uint8

// Atomic capabilities.
const (
	AtomicNone AtomicCap = 0 // IBV_ATOMIC_NONE
	AtomicHCA  AtomicCap = 1 // IBV_ATOMIC_HCA: atomic with respect to this device
	AtomicGlob AtomicCap = 2 // IBV_ATOMIC_GLOB: atomic with respect to CPUs too
)

// String returns ibv_devinfo's spelling, e.g. "ATOMIC_HCA (1)".
func (a AtomicCap) String() string {
	switch a {
	case AtomicNone:
		return "ATOMIC_NONE (0)"
	case AtomicHCA:
		return "ATOMIC_HCA (1)"
	case AtomicGlob:
		return "ATOMIC_GLOB (2)"
	}
	return "AtomicCap(" + strconv.Itoa(int(a)) + ")"
}

// PortState is a port's logical state (enum ibv_port_state).
type PortState uint8

// Port states.
const (
	PortNop         PortState = 0 // IBV_PORT_NOP
	PortDown        PortState = 1 // IBV_PORT_DOWN
	PortInit        PortState = 2 // IBV_PORT_INIT
	PortArmed       PortState = 3 // IBV_PORT_ARMED
	PortActive      PortState = 4 // IBV_PORT_ACTIVE
	PortActiveDefer PortState = 5 // IBV_PORT_ACTIVE_DEFER
)

// String returns ibv_devinfo's spelling, e.g. "PORT_ACTIVE (4)".
func (s PortState) String() string {
	names := [...]string{"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"}
	if int(s) < len(names) {
		return names[s] + " (" + strconv.Itoa(int(s)) + ")"
	}
	return "invalid state (" + strconv.Itoa(int(s)) + ")"
}

// LinkLayer is a port's link layer.
type LinkLayer uint8

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = 0 // IBV_LINK_LAYER_UNSPECIFIED
	LinkLayerInfiniBand  LinkLayer = 1 // IBV_LINK_LAYER_INFINIBAND
	LinkLayerEthernet    LinkLayer = 2 // IBV_LINK_LAYER_ETHERNET
)

// String returns "InfiniBand", "Ethernet" or "Unspecified".
func (l LinkLayer) String() string {
	switch l {
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unspecified"
}

// GIDType is the type of a GID table entry.
type GIDType uint8

// GID types.
const (
	GIDTypeIB     GIDType = 0 // IBV_GID_TYPE_IB
	GIDTypeRoCEv1 GIDType = 1 // IBV_GID_TYPE_ROCE_V1
	GIDTypeRoCEv2 GIDType = 2 // IBV_GID_TYPE_ROCE_V2
)

// String returns "IB", "RoCE v1" or "RoCE v2" (sysfs's spelling).
func (t GIDType) String() string {
	switch t {
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return "IB"
}
