package ibcm

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// REQParam are the parameters of a connection request (ib_cm_req_param).
type REQParam struct {
	// Local is our GID, Peer the passive side's QP1; AH is the address
	// vector towards it (its DGID, flow label, traffic class, hop limit and
	// SL go into the REQ's primary path).
	Local verbsio.GID
	Peer  verbsio.MADAddr
	AH    verbsio.AHAttr
	// PacketLifeTime is the path's packet life time (timeout encoding);
	// rdma_cm uses 18 on RoCE.
	PacketLifeTime uint8
	ServiceID      uint64
	QPN            uint32
	QPType         verbsio.QPType // RC or UC
	// StartingPSN is the PSN our QP receives from: the peer sends from it.
	StartingPSN             uint32
	ResponderResources      uint8
	InitiatorDepth          uint8
	RemoteCMResponseTimeout uint8
	LocalCMResponseTimeout  uint8
	RetryCount              uint8
	RNRRetryCount           uint8
	MaxCMRetries            uint8
	PathMTU                 verbsio.MTU
	PKey                    uint16
	SRQ                     bool
	FlowControl             bool
	PrivateData             []byte
}

// SendREQ starts a connection (ib_send_cm_req): the REQ is sent again
// after 2 * the packet life time + the remote CM response timeout, up to
// MaxCMRetries times; then REQError.
func (c *CM) SendREQ(now time.Time, id *ID, p REQParam) error {
	if id.state != Idle || id.destroyed {
		return stateErr("send REQ", id)
	}
	if p.QPType != verbsio.QPTypeRC && p.QPType != verbsio.QPTypeUC {
		return fmt.Errorf("send REQ: QP type %s cannot be connected (RC or UC): %w", p.QPType, unix.EINVAL)
	}
	if err := privateData("send REQ", p.PrivateData, mad.REQPrivateDataSize); err != nil {
		return err
	}
	if p.QPN > 0xffffff || p.StartingPSN > 0xffffff || !p.PathMTU.Valid() || p.RetryCount > 7 || p.RNRRetryCount > 7 ||
		p.MaxCMRetries > 15 || p.PacketLifeTime > 30 || p.RemoteCMResponseTimeout > 31 || p.LocalCMResponseTimeout > 31 {
		return fmt.Errorf("send REQ: a parameter is out of range (%+v): %w", p, unix.EINVAL)
	}
	id.serviceID = p.ServiceID
	id.local, id.av, id.ah = p.Local, p.Peer, p.AH
	id.avTimeout = p.PacketLifeTime + 1
	id.timeout = 2*mad.LinuxTimeout(p.PacketLifeTime) + mad.LinuxTimeout(p.RemoteCMResponseTimeout)
	id.maxCMRetries = p.MaxCMRetries
	id.initDepth = p.InitiatorDepth
	id.respRes = p.ResponderResources
	id.retryCount = p.RetryCount
	id.pathMTU = uint8(p.PathMTU)
	id.pkey = p.PKey
	id.qpType = p.QPType
	id.localQPN = p.QPN
	id.rqPSN = p.StartingPSN
	id.tid = c.formTID(id)
	m := &mad.REQ{
		LocalCommID: id.localID, ServiceID: p.ServiceID, LocalCAGUID: c.cfg.CAGUID,
		LocalQPN: p.QPN, ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		RemoteCMResponseTimeout: p.RemoteCMResponseTimeout, EndToEndFlowControl: p.FlowControl,
		StartingPSN: p.StartingPSN, LocalCMResponseTimeout: p.LocalCMResponseTimeout, RetryCount: p.RetryCount,
		PKey: p.PKey, PathMTU: uint8(p.PathMTU), RNRRetryCount: p.RNRRetryCount, MaxCMRetries: p.MaxCMRetries, SRQ: p.SRQ,
		Primary: mad.Path{LocalGID: p.Local, RemoteGID: p.AH.DGID, FlowLabel: p.AH.FlowLabel & 0xfffff,
			TrafficClass: p.AH.TrafficClass, HopLimit: p.AH.HopLimit, SL: p.AH.SL & 0xf,
			SubnetLocal:     p.AH.HopLimit <= 1,
			LocalACKTimeout: mad.ACKTimeout(c.cfg.ACKDelay, p.PacketLifeTime)},
	}
	if p.QPType == verbsio.QPTypeUC {
		m.TransportServiceType = mad.TransportUC
	}
	if p.AH.HopLimit <= 1 {
		m.Primary.RemoteLID = p.AH.DLID
	} else {
		// Linux's work-around for routed paths: permissive LIDs.
		m.Primary.LocalLID, m.Primary.RemoteLID = 0xffff, 0xffff
	}
	copy(m.PrivateData[:], p.PrivateData)
	id.state = REQSent
	c.queueWait(now, id, id.tid, m)
	return nil
}

// REPParam are the parameters of a connection reply (ib_cm_rep_param).
type REPParam struct {
	QPN                uint32
	StartingPSN        uint32 // the PSN our QP receives from
	ResponderResources uint8
	InitiatorDepth     uint8
	FailoverAccepted   uint8
	FlowControl        bool
	RNRRetryCount      uint8
	SRQ                bool
	PrivateData        []byte
}

// SendREP accepts a connection request (ib_send_cm_rep): the REP is sent
// again after the active side's CM response timeout, up to its CM retries;
// then REPError.
func (c *CM) SendREP(now time.Time, id *ID, p REPParam) error {
	if id.state != REQRcvd && id.state != MRAREQSent {
		return stateErr("send REP", id)
	}
	if err := privateData("send REP", p.PrivateData, mad.REPPrivateDataSize); err != nil {
		return err
	}
	if p.QPN > 0xffffff || p.StartingPSN > 0xffffff || p.RNRRetryCount > 7 || p.FailoverAccepted > 3 {
		return fmt.Errorf("send REP: a parameter is out of range (%+v): %w", p, unix.EINVAL)
	}
	m := &mad.REP{LocalCommID: id.localID, RemoteCommID: id.remoteID, StartingPSN: p.StartingPSN,
		ResponderResources: p.ResponderResources, TargetACKDelay: c.cfg.ACKDelay & 0x1f,
		FailoverAccepted: p.FailoverAccepted, RNRRetryCount: p.RNRRetryCount, LocalCAGUID: c.cfg.CAGUID,
		InitiatorDepth: p.InitiatorDepth, EndToEndFlowControl: p.FlowControl, SRQ: p.SRQ, LocalQPN: p.QPN}
	copy(m.PrivateData[:], p.PrivateData)
	id.state = REPSent
	id.initDepth = p.InitiatorDepth
	id.respRes = p.ResponderResources
	id.rqPSN = p.StartingPSN
	id.localQPN = p.QPN
	c.queueWait(now, id, id.tid, m)
	return nil
}

// SendRTU completes a connection on the active side (ib_send_cm_rtu).
func (c *CM) SendRTU(now time.Time, id *ID, pd []byte) error {
	if id.state != REPRcvd && id.state != MRAREPSent {
		return stateErr("send RTU", id)
	}
	if err := privateData("send RTU", pd, mad.RTUPrivateDataSize); err != nil {
		return err
	}
	m := &mad.RTU{LocalCommID: id.localID, RemoteCommID: id.remoteID}
	copy(m.PrivateData[:], pd)
	c.queue(now, id.local, id.av, id.tid, m)
	id.state = Established
	id.privateData = append([]byte(nil), pd...)
	return nil
}

// rej formats a REJ from id's state (cm_format_rej).
func (c *CM) rej(id *ID, reason mad.RejectReason, ari, pd []byte) *mad.REJ {
	m := &mad.REJ{LocalCommID: id.localID, RemoteCommID: id.remoteID, Reason: reason, MessageRejected: mad.MsgOther}
	switch id.state {
	case REQRcvd:
		m.LocalCommID = 0
		m.MessageRejected = mad.MsgREQ
	case MRAREQSent:
		m.MessageRejected = mad.MsgREQ
	case REPRcvd, MRAREPSent:
		m.MessageRejected = mad.MsgREP
	}
	if len(ari) > 0 {
		m.RejectedInfoLength = uint8(copy(m.ARI[:], ari))
	}
	copy(m.PrivateData[:], pd)
	return m
}

// SendREJ rejects a connection in its handshake (ib_send_cm_rej). A
// rejected REP enters TIMEWAIT; any other rejected connection goes idle.
func (c *CM) SendREJ(now time.Time, id *ID, reason mad.RejectReason, ari, pd []byte) error {
	if err := privateData("send REJ", pd, mad.REJPrivateDataSize); err != nil {
		return err
	}
	if len(ari) > mad.ARILength {
		return fmt.Errorf("send REJ: %d bytes of rejection information, at most %d: %w", len(ari), mad.ARILength, unix.EINVAL)
	}
	switch id.state {
	case REQSent, MRAREQRcvd, REQRcvd, MRAREQSent, REPRcvd, MRAREPSent:
		m := c.rej(id, reason, ari, pd)
		c.cancel(id)
		c.resetToIdle(id)
		c.queue(now, id.local, id.av, id.tid, m)
	case REPSent, MRAREPRcvd:
		m := c.rej(id, reason, ari, pd)
		c.cancel(id)
		c.enterTimewait(now, id)
		c.queue(now, id.local, id.av, id.tid, m)
	default:
		return stateErr("send REJ", id)
	}
	return nil
}

// SendMRA says a REQ or REP was received and its answer will take up to
// serviceTimeout (ib_send_cm_mra). With delay the MRA is not sent now,
// only to answer the message's repeats, as rdma_cm does.
func (c *CM) SendMRA(now time.Time, id *ID, serviceTimeout uint8, delay bool, pd []byte) error {
	if err := privateData("send MRA", pd, mad.MRAPrivateDataSize); err != nil {
		return err
	}
	var next State
	var which uint8
	switch id.state {
	case REQRcvd:
		next, which = MRAREQSent, mad.MsgREQ
	case REPRcvd:
		next, which = MRAREPSent, mad.MsgREP
	default:
		return stateErr("send MRA", id)
	}
	id.serviceTimeout = serviceTimeout & 0x1f
	id.privateData = append([]byte(nil), pd...)
	if !delay {
		c.queue(now, id.local, id.av, id.tid, c.mra(id, which))
	}
	id.state = next
	return nil
}

// SendDREQ starts a disconnect (ib_send_cm_dreq): the DREQ is sent again
// like a REQ; without an answer the connection enters TIMEWAIT (DREQError).
func (c *CM) SendDREQ(now time.Time, id *ID, pd []byte) error {
	if id.state != Established {
		return stateErr("send DREQ", id)
	}
	if err := privateData("send DREQ", pd, mad.DREQPrivateDataSize); err != nil {
		return err
	}
	m := &mad.DREQ{LocalCommID: id.localID, RemoteCommID: id.remoteID, RemoteQPN: id.remoteQPN}
	copy(m.PrivateData[:], pd)
	id.state = DREQSent
	c.queueWait(now, id, c.formTID(id), m)
	return nil
}

// SendDREP answers a DREQ (ib_send_cm_drep); the connection enters TIMEWAIT.
func (c *CM) SendDREP(now time.Time, id *ID, pd []byte) error {
	if id.state != DREQRcvd {
		return stateErr("send DREP", id)
	}
	if err := privateData("send DREP", pd, mad.DREPPrivateDataSize); err != nil {
		return err
	}
	id.privateData = append([]byte(nil), pd...)
	c.enterTimewait(now, id)
	m := &mad.DREP{LocalCommID: id.localID, RemoteCommID: id.remoteID}
	copy(m.PrivateData[:], pd)
	c.queue(now, id.local, id.av, id.tid, m)
	return nil
}

// Establish moves a passive connection waiting for its RTU to ESTABLISHED
// because its QP received the peer's first packet (ib_cm_notify with
// IB_EVENT_COMM_EST): the REP is not sent again, and UserEstablished
// follows.
func (c *CM) Establish(now time.Time, id *ID) error {
	switch id.state {
	case REPSent, MRAREPRcvd:
		id.state = Established
		c.cancel(id)
		c.emit(UserEstablished, id, nil)
		return nil
	case Established:
		return fmt.Errorf("establish: communication ID %#x is already established: %w", id.localID, unix.EISCONN)
	}
	return stateErr("establish", id)
}

// SIDRREQParam are the parameters of a service ID resolution request.
type SIDRREQParam struct {
	Local        verbsio.GID
	Peer         verbsio.MADAddr
	AH           verbsio.AHAttr
	ServiceID    uint64
	PKey         uint16
	Timeout      time.Duration // rdma_cm: 2^(20-8) ms
	MaxCMRetries uint8
	PrivateData  []byte
}

// SendSIDRREQ asks the peer which UD QP serves a service (ib_send_cm_sidr_req).
func (c *CM) SendSIDRREQ(now time.Time, id *ID, p SIDRREQParam) error {
	if id.state != Idle || id.destroyed {
		return stateErr("send SIDR_REQ", id)
	}
	if err := privateData("send SIDR_REQ", p.PrivateData, mad.SIDRREQPrivateDataSize); err != nil {
		return err
	}
	if p.Timeout <= 0 {
		return fmt.Errorf("send SIDR_REQ: timeout %v: %w", p.Timeout, unix.EINVAL)
	}
	id.serviceID = p.ServiceID
	id.local, id.av, id.ah = p.Local, p.Peer, p.AH
	id.timeout = p.Timeout
	id.maxCMRetries = p.MaxCMRetries
	id.tid = c.formTID(id)
	m := &mad.SIDRREQ{RequestID: id.localID, PKey: p.PKey, ServiceID: p.ServiceID}
	copy(m.PrivateData[:], p.PrivateData)
	id.state = SIDRREQSent
	c.queueWait(now, id, id.tid, m)
	return nil
}

// SIDRREPParam are the parameters of a SIDR reply.
type SIDRREPParam struct {
	Status      mad.SIDRStatus
	QPN         uint32
	QKey        uint32
	Info        []byte
	PrivateData []byte
}

// SendSIDRREP answers a SIDR_REQ (ib_send_cm_sidr_rep); the ID goes idle.
func (c *CM) SendSIDRREP(now time.Time, id *ID, p SIDRREPParam) error {
	if id.state != SIDRREQRcvd {
		return stateErr("send SIDR_REP", id)
	}
	if err := privateData("send SIDR_REP", p.PrivateData, mad.SIDRREPPrivateDataSize); err != nil {
		return err
	}
	if len(p.Info) > mad.SIDRInfoLength || p.QPN > 0xffffff {
		return fmt.Errorf("send SIDR_REP: info of %d bytes or QPN %#x out of range: %w", len(p.Info), p.QPN, unix.EINVAL)
	}
	m := &mad.SIDRREP{RequestID: id.remoteID, Status: p.Status, QPN: p.QPN, ServiceID: id.serviceID, QKey: p.QKey,
		AdditionalInfoLength: uint8(len(p.Info))}
	copy(m.AdditionalInfo[:], p.Info)
	copy(m.PrivateData[:], p.PrivateData)
	c.queue(now, id.local, id.av, id.tid, m)
	id.state = Idle
	c.dropSIDR(id)
	return nil
}

func (c *CM) dropSIDR(id *ID) {
	if id.sidr != nil {
		delete(c.sidrs, *id.sidr)
		id.sidr = nil
	}
}

// Destroy ends a communication ID the way Linux's cm_destroy_id does: a
// pending REQ is withdrawn with REJ (timeout), a connection in its
// handshake is rejected (consumer defined), an established one is sent a
// DREQ (once) and a received DREQ is answered; then the ID is forgotten:
// MADs for it are unmatched from now on.
func (c *CM) Destroy(now time.Time, id *ID) {
	if id.destroyed {
		return
	}
	switch id.state {
	case Listen:
		delete(c.listeners, id.serviceID)
	case SIDRREQSent:
		c.cancel(id)
		id.state = Idle
	case SIDRREQRcvd:
		_ = c.SendSIDRREP(now, id, SIDRREPParam{Status: mad.SIDRReject})
	case REQSent, MRAREQRcvd:
		var ari [8]byte
		putBE64(ari[:], c.cfg.CAGUID)
		_ = c.SendREJ(now, id, mad.RejTimeout, ari[:], nil)
	case REQRcvd, REPSent, MRAREPRcvd, MRAREQSent, REPRcvd, MRAREPSent:
		_ = c.SendREJ(now, id, mad.RejConsumerDefined, nil, nil)
	case Established:
		_ = c.SendDREQ(now, id, nil)
		// The DREQ went out once; without waiting for its DREP the ID
		// enters TIMEWAIT and is freed (cm_destroy_id retests the state).
		c.cancel(id)
		c.enterTimewait(now, id)
	case DREQSent:
		c.cancel(id)
		c.enterTimewait(now, id)
	case DREQRcvd:
		_ = c.SendDREP(now, id, nil)
	}
	c.cancel(id)
	c.removeRemote(id)
	c.dropSIDR(id)
	delete(c.ids, id.localID)
	id.destroyed = true
}

// InitQPAttr returns the attributes that move a connected QP to state
// (INIT, RTR or RTS), from what the handshake negotiated
// (ib_cm_init_qp_attr). rdma_cm's overrides (RTR's receive PSN, the ACK
// timeout option) are its caller's.
func (c *CM) InitQPAttr(id *ID, state verbsio.QPState) (verbsio.QPAttr, verbsio.QPAttrMask, error) {
	var a verbsio.QPAttr
	var mask verbsio.QPAttrMask
	ok := false
	switch state {
	case verbsio.QPStateInit:
		switch id.state {
		case REQSent, MRAREQRcvd, REQRcvd, MRAREQSent, REPRcvd, MRAREPSent, REPSent, MRAREPRcvd, Established:
			ok = true
			a.State = state
			mask = verbsio.QPAttrState | verbsio.QPAttrAccessFlags | verbsio.QPAttrPkeyIndex | verbsio.QPAttrPort
			a.AccessFlags = verbsio.AccessRemoteWrite
			if id.respRes > 0 {
				a.AccessFlags |= verbsio.AccessRemoteRead | verbsio.AccessRemoteAtomic
			}
			a.PortNum = c.cfg.Port
		}
	case verbsio.QPStateRTR:
		switch id.state {
		case REQRcvd, MRAREQSent, REPRcvd, MRAREPSent, REPSent, MRAREPRcvd, Established:
			ok = true
			a.State = state
			mask = verbsio.QPAttrState | verbsio.QPAttrAV | verbsio.QPAttrPathMTU | verbsio.QPAttrDestQPN | verbsio.QPAttrRQPSN
			a.AH = id.ah
			a.PathMTU = verbsio.MTU(id.pathMTU)
			a.DestQPN = id.remoteQPN
			a.RQPSN = id.rqPSN
			if id.qpType == verbsio.QPTypeRC {
				mask |= verbsio.QPAttrMaxDestRdAtomic | verbsio.QPAttrMinRNRTimer
				a.MaxDestRdAtomic = id.respRes
				a.MinRNRTimer = 0
			}
		}
	case verbsio.QPStateRTS:
		switch id.state {
		case REQRcvd, MRAREQSent, REPRcvd, MRAREPSent, REPSent, MRAREPRcvd, Established:
			ok = true
			a.State = state
			mask = verbsio.QPAttrState | verbsio.QPAttrSQPSN
			a.SQPSN = id.sqPSN
			if id.qpType == verbsio.QPTypeRC {
				mask |= verbsio.QPAttrRetryCnt | verbsio.QPAttrRNRRetry | verbsio.QPAttrMaxQPRdAtomic | verbsio.QPAttrTimeout
				a.RetryCnt = id.retryCount
				a.RNRRetry = id.rnrRetryCount
				a.MaxRdAtomic = id.initDepth
				a.Timeout = id.avTimeout
			}
		}
	default:
		return a, 0, fmt.Errorf("init QP attributes: the CM gives attributes for INIT, RTR and RTS, not %s: %w", state, unix.EINVAL)
	}
	if !ok {
		return a, 0, fmt.Errorf("init QP attributes for %s: communication ID %#x is %s: %w", state, id.localID, id.state, unix.EINVAL)
	}
	return a, mask, nil
}
