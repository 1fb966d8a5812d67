package verbsio

// Endpoint is what one side of a connection tells the other (perftest's
// KEY message): its QP number, first PSN, address, and a buffer the peer
// may access.
type Endpoint struct {
	LID   uint16
	QPN   uint32
	PSN   uint32
	GID   GID
	RKey  uint32
	VAddr uint64
	// OutReads is the number of outstanding READ/atomic requests the side
	// accepts as responder (perftest's OUT_READS field).
	OutReads uint8
}

// ConnectOptions are the QP attributes used to connect; zero fields take
// perftest's defaults.
type ConnectOptions struct {
	Port        uint8  // default 1
	Access      Access // remote access granted to the peer (RC/UC)
	PathMTU     MTU    // default: the port's active MTU
	QKey        uint32 // UD; default 0x11111111 (perftest's DEF_QKEY)
	Timeout     uint8  // default 14 (perftest's -u)
	RetryCnt    uint8  // default 7
	RNRRetry    uint8  // default 7 (retry for ever)
	MinRNRTimer uint8  // default 12 (0.64 ms)
	SGIDIndex   uint8
	MaxRdAtomic uint8 // outstanding READ/atomic as initiator; default 16
	// ZeroRNRRetry asks for rnr_retry 0 (fail at the first receiver-not-
	// ready); a zero RNRRetry otherwise means the default.
	ZeroRNRRetry bool
}

// DefaultQKey is perftest's Q_Key for UD.
const DefaultQKey = 0x11111111

// Connect moves qp from RESET through INIT and RTR to RTS towards remote,
// with the attributes perftest uses (ctx_modify_qp_to_init/rtr/rts). For UD
// only INIT, RTR and RTS are set; remote is not used.
func (qp *QP) Connect(local, remote Endpoint, o ConnectOptions) error {
	if o.Port == 0 {
		o.Port = 1
	}
	if o.QKey == 0 {
		o.QKey = DefaultQKey
	}
	if o.Timeout == 0 {
		o.Timeout = 14
	}
	if o.RetryCnt == 0 {
		o.RetryCnt = 7
	}
	if o.RNRRetry == 0 && !o.ZeroRNRRetry {
		o.RNRRetry = 7
	}
	if o.MinRNRTimer == 0 {
		o.MinRNRTimer = 12
	}
	if o.MaxRdAtomic == 0 {
		o.MaxRdAtomic = 16
	}
	if o.PathMTU == 0 {
		pa, err := qp.pd.ctx.QueryPort(o.Port)
		if err != nil {
			return err
		}
		o.PathMTU = pa.ActiveMTU
	}
	init := QPAttr{State: QPStateInit, PortNum: o.Port, PkeyIndex: 0}
	mask := QPAttrState | QPAttrPkeyIndex | QPAttrPort
	switch qp.typ {
	case QPTypeUD:
		init.QKey = o.QKey
		mask |= QPAttrQKey
	case QPTypeRawPacket:
		mask = QPAttrState | QPAttrPort
	default:
		init.AccessFlags = o.Access
		mask |= QPAttrAccessFlags
	}
	if err := qp.Modify(&init, mask); err != nil {
		return err
	}
	rtr := QPAttr{State: QPStateRTR}
	mask = QPAttrState
	if qp.typ == QPTypeRC || qp.typ == QPTypeUC {
		rtr.PathMTU = o.PathMTU
		rtr.DestQPN = remote.QPN
		rtr.RQPSN = remote.PSN
		rtr.AH = AHAttr{DLID: remote.LID, PortNum: o.Port, IsGlobal: true, DGID: remote.GID, SGIDIndex: o.SGIDIndex, HopLimit: 0xff}
		mask |= QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN
		if qp.typ == QPTypeRC {
			rtr.MaxDestRdAtomic = local.OutReads
			if rtr.MaxDestRdAtomic == 0 {
				rtr.MaxDestRdAtomic = o.MaxRdAtomic
			}
			rtr.MinRNRTimer = o.MinRNRTimer
			mask |= QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
		}
	}
	if err := qp.Modify(&rtr, mask); err != nil {
		return err
	}
	rts := QPAttr{State: QPStateRTS, SQPSN: local.PSN}
	mask = QPAttrState
	if qp.typ != QPTypeRawPacket {
		mask |= QPAttrSQPSN
	}
	if qp.typ == QPTypeRC {
		rts.Timeout = o.Timeout
		rts.RetryCnt = o.RetryCnt
		rts.RNRRetry = o.RNRRetry
		rts.MaxRdAtomic = remote.OutReads
		if rts.MaxRdAtomic == 0 {
			rts.MaxRdAtomic = o.MaxRdAtomic
		}
		mask |= QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic
	}
	return qp.Modify(&rts, mask)
}
