package verbsio

import "golang.org/x/sys/unix"

// Extended CQs (ibv_create_cq_ex): a CQ asks at creation for the
// completion fields it needs beyond the standard ones, the completion
// timestamp among them. A device that stamps completions reports the bits
// of its clock (DeviceAttrEx.CompletionTimestampMask) and the clock's
// frequency (DeviceAttrEx.HCACoreClock); WC.Timestamp is then in ticks of
// that clock. The built-in engine's clock counts nanoseconds of
// CLOCK_REALTIME (1,000,000 kHz), on every fabric.

// CQWCFlags are the fields an extended CQ delivers (enum
// ibv_create_cq_wc_flags), with libibverbs' values.
type CQWCFlags uint64

// Completion fields of an extended CQ.
const (
	WCExByteLen                      CQWCFlags = 1 << 0  // IBV_WC_EX_WITH_BYTE_LEN
	WCExImm                          CQWCFlags = 1 << 1  // IBV_WC_EX_WITH_IMM
	WCExQPNum                        CQWCFlags = 1 << 2  // IBV_WC_EX_WITH_QP_NUM
	WCExSrcQP                        CQWCFlags = 1 << 3  // IBV_WC_EX_WITH_SRC_QP
	WCExSLID                         CQWCFlags = 1 << 4  // IBV_WC_EX_WITH_SLID
	WCExSL                           CQWCFlags = 1 << 5  // IBV_WC_EX_WITH_SL
	WCExDLIDPathBits                 CQWCFlags = 1 << 6  // IBV_WC_EX_WITH_DLID_PATH_BITS
	WCExCompletionTimestamp          CQWCFlags = 1 << 7  // IBV_WC_EX_WITH_COMPLETION_TIMESTAMP: WC.Timestamp in the device's clock
	WCExCVLAN                        CQWCFlags = 1 << 8  // IBV_WC_EX_WITH_CVLAN
	WCExFlowTag                      CQWCFlags = 1 << 9  // IBV_WC_EX_WITH_FLOW_TAG: WC.FlowTag
	WCExTMInfo                       CQWCFlags = 1 << 10 // IBV_WC_EX_WITH_TM_INFO
	WCExCompletionTimestampWallclock CQWCFlags = 1 << 11 // IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK

	// WCExStandard is the standard set (IBV_WC_STANDARD_FLAGS): what
	// every CQ delivers, the Accelerated Verbs slides' WC_BASE.
	WCExStandard = WCExByteLen | WCExImm | WCExQPNum | WCExSrcQP | WCExSLID | WCExSL | WCExDLIDPathBits
	// WCExTS is the slides' WC_TS: the completion timestamp.
	WCExTS = WCExCompletionTimestamp

	wcExKnown = WCExStandard | WCExCompletionTimestamp | WCExCVLAN | WCExFlowTag | WCExTMInfo | WCExCompletionTimestampWallclock
)

var cqWCFlagNames = []flagName{
	{uint64(WCExByteLen), "BYTE_LEN"}, {uint64(WCExImm), "IMM"}, {uint64(WCExQPNum), "QP_NUM"},
	{uint64(WCExSrcQP), "SRC_QP"}, {uint64(WCExSLID), "SLID"}, {uint64(WCExSL), "SL"},
	{uint64(WCExDLIDPathBits), "DLID_PATH_BITS"}, {uint64(WCExCompletionTimestamp), "COMPLETION_TIMESTAMP"},
	{uint64(WCExCVLAN), "CVLAN"}, {uint64(WCExFlowTag), "FLOW_TAG"}, {uint64(WCExTMInfo), "TM_INFO"},
	{uint64(WCExCompletionTimestampWallclock), "COMPLETION_TIMESTAMP_WALLCLOCK"},
}

// String lists the flags without IBV_WC_EX_WITH_, e.g.
// "BYTE_LEN|COMPLETION_TIMESTAMP".
func (f CQWCFlags) String() string { return flagString(uint64(f), cqWCFlagNames) }

// Timestamped reports whether the flags ask for a completion timestamp
// (in the device's clock or as wall-clock time).
func (f CQWCFlags) Timestamped() bool {
	return f&(WCExCompletionTimestamp|WCExCompletionTimestampWallclock) != 0
}

// CreateCQEx creates a completion queue that delivers the fields
// attr.WCFlags names (ibv_create_cq_ex). Unknown flags are EINVAL; a
// timestamp the device cannot give is EOPNOTSUPP from the provider.
func (c *Context) CreateCQEx(attr CQInitAttr) (*CQ, error) {
	if attr.WCFlags&^wcExKnown != 0 {
		return nil, Errorf("create_cq_ex", unix.EINVAL, "unknown wc_flags 0x%x (known: %s)", uint64(attr.WCFlags&^wcExKnown), wcExKnown)
	}
	impl, err := c.impl.CreateCQ(attr)
	if err != nil {
		return nil, err
	}
	return &CQ{ctx: c, impl: impl, wcFlags: attr.WCFlags}, nil
}

// WCFlags are the fields the CQ was created to deliver (0 for CreateCQ).
func (cq *CQ) WCFlags() CQWCFlags { return cq.wcFlags }

// TimestampClock converts a completion timestamp into nanoseconds with
// the device's clock rate (hca_core_clock, kHz); ok is false when the
// device reports no clock.
func TimestampClock(ts, hcaCoreClockKHz uint64) (ns uint64, ok bool) {
	if hcaCoreClockKHz == 0 {
		return 0, false
	}
	if hcaCoreClockKHz == 1_000_000 {
		return ts, true
	}
	// ts ticks at hcaCoreClockKHz*1000 per second.
	sec := ts / (hcaCoreClockKHz * 1000)
	rem := ts % (hcaCoreClockKHz * 1000)
	return sec*1_000_000_000 + rem*1_000_000/hcaCoreClockKHz, true
}
