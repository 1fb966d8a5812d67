package verbsio

// SGE names Length bytes at Addr inside the memory region whose local key
// is LKey (struct ibv_sge). Addr is a virtual address in this process; use
// (*MR).Addr plus an offset.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// RemoteAddr is the target of an RDMA or atomic operation: a virtual address
// in the peer's address space and the rkey of a region that covers it.
type RemoteAddr struct {
	Addr uint64
	RKey uint32
}

// AtomicArgs are the operands of an atomic operation. For compare-and-swap,
// CompareAdd is the value to compare with and Swap the new value; for
// fetch-and-add, CompareAdd is the value to add.
type AtomicArgs struct {
	CompareAdd uint64
	Swap       uint64
}

// UDAddr addresses a datagram: the address handle of the destination port,
// the destination QP number and its Q_Key.
type UDAddr struct {
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// SendWR is one send work request (struct ibv_send_wr without the chain
// pointer: a batch is a slice). PostSend copies what it needs and keeps no
// reference to the request or its SGL after it returns.
type SendWR struct {
	ID     uint64 // returned in the completion
	Opcode Opcode
	Flags  SendFlags
	SGL    []SGE  // local buffers: gathered for sends and writes, scattered for reads
	Imm    uint32 // immediate data, network byte order as in verbs
	Remote RemoteAddr
	Atomic AtomicArgs
	UD     UDAddr
	TSO    TSO // OpTSO: the headers and the segment size
}

// RecvWR is one receive work request (struct ibv_recv_wr without the chain
// pointer).
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// WC is a work completion (struct ibv_wc).
type WC struct {
	ID        uint64   // the work request's ID
	Status    Status   // SUCCESS or the error
	Opcode    WCOpcode // valid when Status is SUCCESS (and for flushed receives)
	VendorErr uint32   // provider-specific detail for errors
	ByteLen   uint32   // bytes received (receives), or transferred
	Imm       uint32   // immediate data when Flags has WCWithImm
	QPN       uint32   // the local QP number
	SrcQP     uint32   // the remote QP number (UD receives)
	Flags     WCFlags
	PkeyIndex uint16
	SLID      uint16
	SL        uint8
	// Timestamp is when the device completed the work, in its clock
	// (ibv_wc_read_completion_ts); 0 when the CQ or device gives none.
	Timestamp uint64
	// FlowTag is the tag of the steering rule that delivered a receive
	// (ibv_wc_read_flow_tag); 0 when the rule has none.
	FlowTag uint32
}
