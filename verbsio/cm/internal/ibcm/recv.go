package ibcm

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// Receive processes a MAD that arrived at QP1 on the local GID to from
// from. Malformed MADs are dropped and counted.
func (c *CM) Receive(now time.Time, to verbsio.GID, from verbsio.MADAddr, b []byte) {
	m, err := mad.Decode(b)
	if err != nil {
		switch {
		case errors.Is(err, mad.ErrTruncated), errors.Is(err, mad.ErrLength):
			c.counters.RxTruncated++
		case errors.Is(err, mad.ErrHeader):
			c.counters.RxBadHeader++
		default:
			c.counters.RxUnknownAttr++
		}
		return
	}
	if i := attrIndex(m.AttrID); i >= 0 {
		c.counters.Rx[i]++
	}
	r := rx{now: now, to: to, from: from, tid: m.TID}
	switch msg := m.Msg.(type) {
	case *mad.REQ:
		c.onREQ(r, msg)
	case *mad.MRA:
		c.onMRA(r, msg)
	case *mad.REJ:
		c.onREJ(r, msg)
	case *mad.REP:
		c.onREP(r, msg)
	case *mad.RTU:
		c.onRTU(r, msg)
	case *mad.DREQ:
		c.onDREQ(r, msg)
	case *mad.DREP:
		c.onDREP(r, msg)
	case *mad.SIDRREQ:
		c.onSIDRREQ(r, msg)
	case *mad.SIDRREP:
		c.onSIDRREP(r, msg)
	}
}

// rx is where and when a message arrived.
type rx struct {
	now  time.Time
	to   verbsio.GID
	from verbsio.MADAddr
	tid  uint64
}

func (c *CM) unmatched() { c.counters.RxUnmatched++ }

func (c *CM) dup(a mad.AttrID) { c.counters.RxDuplicates[attrIndex(a)]++ }

// issueREJ answers a message that has no communication ID of its own
// (cm_issue_rej): the REJ swaps the message's communication IDs and keeps
// its TID.
func (c *CM) issueREJ(r rx, local, remote uint32, reason mad.RejectReason, rejected uint8) {
	c.queue(r.now, r.to, r.from, r.tid, &mad.REJ{LocalCommID: local, RemoteCommID: remote,
		MessageRejected: rejected, Reason: reason})
}

func (c *CM) onREQ(r rx, m *mad.REQ) {
	if cur := c.remoteIDs[remoteKey{m.LocalCommID, m.LocalCAGUID}]; cur != nil {
		c.dupREQ(r, cur)
		return
	}
	if cur := c.remoteQPNs[remoteKey{m.LocalQPN, m.LocalCAGUID}]; cur != nil {
		// The peer's QP has a live connection here: it forgot it.
		c.counters.Stale++
		c.issueREJ(r, 0, m.LocalCommID, mad.RejStaleConn, mad.MsgREQ)
		if cur.state == Established {
			_ = c.SendDREQ(r.now, cur, nil)
		}
		return
	}
	listener := c.listeners[m.ServiceID]
	if listener == nil {
		c.counters.Rejected++
		c.issueREJ(r, 0, m.LocalCommID, mad.RejInvalidServiceID, mad.MsgREQ)
		return
	}
	id := c.CreateID(nil)
	id.remoteID = m.LocalCommID
	id.serviceID = m.ServiceID
	id.tid = r.tid
	id.local, id.av = r.to, r.from
	id.timeout = mad.LinuxTimeout(m.LocalCMResponseTimeout)
	id.maxCMRetries = m.MaxCMRetries
	id.remoteQPN = m.LocalQPN
	id.initDepth = m.ResponderResources
	id.respRes = m.InitiatorDepth
	id.pathMTU = m.PathMTU
	id.pkey = m.PKey
	id.sqPSN = m.StartingPSN
	id.retryCount = m.RetryCount
	id.rnrRetryCount = m.RNRRetryCount
	id.qpType = reqQPType(m)
	id.remoteCAGUID = m.LocalCAGUID
	// The path's packet life time is the REQ's ACK timeout less one; the
	// QP's timeout is the life time plus one (cm_format_paths_from_req,
	// cm_init_av_by_path).
	life := m.Primary.LocalACKTimeout
	if life > 0 {
		life--
	}
	id.avTimeout = life + 1
	id.ah = c.ahFor(r.to, r.from, m.Primary.LocalGID, m.Primary.FlowLabel, m.Primary.TrafficClass, m.Primary.HopLimit, m.Primary.SL)
	id.state = REQRcvd
	c.remoteIDs[remoteKey{id.remoteID, id.remoteCAGUID}] = id
	id.inRemoteID = true
	c.remoteQPNs[remoteKey{id.remoteQPN, id.remoteCAGUID}] = id
	id.inRemoteQPN = true
	c.events = append(c.events, Event{Type: REQReceived, ID: id, Listen: listener, Msg: m})
}

// reqQPType maps the REQ's transport to the QP type; 0 for one Linux does
// not connect (RD, XRC).
func reqQPType(m *mad.REQ) verbsio.QPType {
	switch m.TransportServiceType {
	case mad.TransportRC:
		return verbsio.QPTypeRC
	case mad.TransportUC:
		return verbsio.QPTypeUC
	}
	return 0
}

// ahFor is the address vector towards a peer whose MADs come from from.
func (c *CM) ahFor(local verbsio.GID, from verbsio.MADAddr, dgid verbsio.GID, flow uint32, tclass, hop, sl uint8) verbsio.AHAttr {
	ah := verbsio.AHAttr{PortNum: c.cfg.Port, IsGlobal: true, DGID: dgid, FlowLabel: flow,
		TrafficClass: tclass, HopLimit: hop, SL: sl}
	if dgid.IsZero() {
		ah.DGID = from.GID
	}
	if from.Port != 0 && from.Port != verbsio.RoCEv2Port {
		// rperf's udp fabric: a context on another UDP port is
		// addressed by that port as its LID.
		ah.DLID = from.Port
	}
	if c.cfg.GIDIndex != nil {
		if i, ok := c.cfg.GIDIndex(local); ok {
			ah.SGIDIndex = i
		}
	}
	return ah
}

// dupREQ handles a REQ for a connection already being served (cm_dup_req_handler).
func (c *CM) dupREQ(r rx, id *ID) {
	c.dup(mad.AttrREQ)
	switch id.state {
	case MRAREQSent:
		c.queue(r.now, r.to, r.from, id.tid, c.mra(id, mad.MsgREQ))
	case Timewait:
		c.queue(r.now, r.to, r.from, id.tid, c.rej(id, mad.RejStaleConn, nil, nil))
	}
}

func (c *CM) mra(id *ID, which uint8) *mad.MRA {
	m := &mad.MRA{LocalCommID: id.localID, RemoteCommID: id.remoteID, MessageMRAed: which,
		ServiceTimeout: id.serviceTimeout & 0x1f}
	copy(m.PrivateData[:], id.privateData)
	return m
}

func (c *CM) onREP(r rx, m *mad.REP) {
	id := c.acquire(m.RemoteCommID, 0)
	if id == nil {
		c.dupREP(r, m)
		return
	}
	if id.state != REQSent && id.state != MRAREQRcvd {
		c.unmatched()
		return
	}
	rk := remoteKey{m.LocalCommID, m.LocalCAGUID}
	if c.remoteIDs[rk] != nil {
		c.dup(mad.AttrREP)
		return
	}
	if cur := c.remoteQPNs[remoteKey{m.LocalQPN, m.LocalCAGUID}]; cur != nil {
		c.counters.Stale++
		c.issueREJ(r, m.RemoteCommID, m.LocalCommID, mad.RejStaleConn, mad.MsgREP)
		if cur.state == Established {
			_ = c.SendDREQ(r.now, cur, nil)
		}
		return
	}
	id.remoteID = m.LocalCommID
	id.remoteCAGUID = m.LocalCAGUID
	id.remoteQPN = m.LocalQPN
	c.remoteIDs[rk] = id
	id.inRemoteID = true
	c.remoteQPNs[remoteKey{id.remoteQPN, id.remoteCAGUID}] = id
	id.inRemoteQPN = true
	id.state = REPRcvd
	id.initDepth = m.ResponderResources
	id.respRes = m.InitiatorDepth
	id.sqPSN = m.StartingPSN
	id.rnrRetryCount = m.RNRRetryCount
	id.avTimeout = mad.ACKTimeout(m.TargetACKDelay, id.avTimeout-1)
	id.learnPeer(r.from)
	if id.ah.DLID == 0 && r.from.Port != 0 && r.from.Port != verbsio.RoCEv2Port {
		id.ah.DLID = r.from.Port
	}
	c.cancel(id)
	c.emit(REPReceived, id, m)
}

// dupREP answers a REP for a connection past REQ_SENT (cm_dup_rep_handler);
// a REP for no connection is ignored, as Linux does.
func (c *CM) dupREP(r rx, m *mad.REP) {
	id := c.acquire(m.RemoteCommID, m.LocalCommID)
	if id == nil {
		c.unmatched()
		return
	}
	c.dup(mad.AttrREP)
	switch id.state {
	case Established:
		rtu := &mad.RTU{LocalCommID: id.localID, RemoteCommID: id.remoteID}
		copy(rtu.PrivateData[:], id.privateData)
		c.queue(r.now, r.to, r.from, id.tid, rtu)
	case MRAREPSent:
		c.queue(r.now, r.to, r.from, id.tid, c.mra(id, mad.MsgREP))
	}
}

func (c *CM) onRTU(r rx, m *mad.RTU) {
	id := c.acquire(m.RemoteCommID, m.LocalCommID)
	if id == nil {
		c.unmatched()
		return
	}
	if id.state != REPSent && id.state != MRAREPRcvd {
		c.dup(mad.AttrRTU)
		return
	}
	id.state = Established
	c.cancel(id)
	c.emit(RTUReceived, id, m)
}

func (c *CM) onDREQ(r rx, m *mad.DREQ) {
	id := c.acquire(m.RemoteCommID, m.LocalCommID)
	if id == nil {
		// The connection is gone here: tell the peer it is (cm_issue_drep).
		c.dup(mad.AttrDREQ)
		c.queue(r.now, r.to, r.from, r.tid, &mad.DREP{LocalCommID: m.RemoteCommID, RemoteCommID: m.LocalCommID})
		return
	}
	if id.localQPN != m.RemoteQPN {
		c.unmatched()
		return
	}
	switch id.state {
	case REPSent, DREQSent:
		c.cancel(id)
	case Established, MRAREPRcvd:
	case Timewait:
		c.dup(mad.AttrDREQ)
		drep := &mad.DREP{LocalCommID: id.localID, RemoteCommID: id.remoteID}
		copy(drep.PrivateData[:], id.privateData)
		c.queue(r.now, r.to, r.from, id.tid, drep)
		return
	case DREQRcvd:
		c.dup(mad.AttrDREQ)
		return
	default:
		c.unmatched()
		return
	}
	id.state = DREQRcvd
	id.tid = r.tid
	c.emit(DREQReceived, id, m)
}

func (c *CM) onDREP(r rx, m *mad.DREP) {
	id := c.acquire(m.RemoteCommID, m.LocalCommID)
	if id == nil {
		c.unmatched()
		return
	}
	if id.state != DREQSent && id.state != DREQRcvd {
		c.unmatched()
		return
	}
	c.enterTimewait(r.now, id)
	c.cancel(id)
	c.emit(DREPReceived, id, m)
}

// rejected finds the communication ID a REJ is for (cm_acquire_rejected_id).
func (c *CM) rejected(m *mad.REJ) *ID {
	switch {
	case m.Reason == mad.RejTimeout:
		// The rejecter gave up waiting: its ARI is its CA GUID, which with
		// its communication ID finds our connection.
		guid := binary.BigEndian.Uint64(m.ARI[:8])
		cur := c.remoteIDs[remoteKey{m.LocalCommID, guid}]
		if cur == nil {
			return nil
		}
		return c.acquire(cur.localID, m.LocalCommID)
	case m.MessageRejected == mad.MsgREQ:
		return c.acquire(m.RemoteCommID, 0)
	default:
		return c.acquire(m.RemoteCommID, m.LocalCommID)
	}
}

func (c *CM) onREJ(r rx, m *mad.REJ) {
	id := c.rejected(m)
	if id == nil {
		c.unmatched()
		return
	}
	switch id.state {
	case REQSent, MRAREQRcvd, REPSent, MRAREPRcvd, REQRcvd, MRAREQSent:
		c.cancel(id)
		if m.Reason == mad.RejStaleConn {
			c.enterTimewait(r.now, id)
		} else {
			c.resetToIdle(id)
		}
	case DREQSent, REPRcvd, MRAREPSent, Established:
		c.cancel(id)
		c.enterTimewait(r.now, id)
	default:
		c.unmatched()
		return
	}
	c.emit(REJReceived, id, m)
}

func (c *CM) onMRA(r rx, m *mad.MRA) {
	var id *ID
	switch m.MessageMRAed {
	case mad.MsgREQ:
		id = c.acquire(m.RemoteCommID, 0)
	case mad.MsgREP, mad.MsgOther:
		id = c.acquire(m.RemoteCommID, m.LocalCommID)
	}
	if id == nil {
		c.unmatched()
		return
	}
	timeout := mad.LinuxTimeout(m.ServiceTimeout) + mad.LinuxTimeout(id.avTimeout)
	var next State
	switch {
	case id.state == REQSent && m.MessageMRAed == mad.MsgREQ && id.pending != nil:
		next = MRAREQRcvd
	case id.state == REPSent && m.MessageMRAed == mad.MsgREP && id.pending != nil:
		next = MRAREPRcvd
	case id.state == MRAREQRcvd || id.state == MRAREPRcvd:
		c.dup(mad.AttrMRA)
		return
	default:
		c.unmatched()
		return
	}
	// ib_modify_mad: wait the new timeout; the retries left stay.
	id.pending.timeout = timeout
	id.pending.deadline = r.now.Add(timeout)
	id.pending.state = next
	id.state = next
	c.emit(MRAReceived, id, m)
}

func (c *CM) onSIDRREQ(r rx, m *mad.SIDRREQ) {
	key := sidrKey{m.RequestID, r.from.GID}
	if c.sidrs[key] != nil {
		c.dup(mad.AttrSIDRREQ)
		return
	}
	id := c.CreateID(nil)
	id.remoteID = m.RequestID
	id.serviceID = m.ServiceID
	id.tid = r.tid
	id.local, id.av = r.to, r.from
	id.pkey = m.PKey
	id.ah = c.ahFor(r.to, r.from, r.from.GID, 0, 0, 64, 0)
	id.state = SIDRREQRcvd
	c.sidrs[key] = id
	id.sidr = &key
	listener := c.listeners[m.ServiceID]
	if listener == nil {
		c.counters.Rejected++
		_ = c.SendSIDRREP(r.now, id, SIDRREPParam{Status: mad.SIDRUnsupported})
		c.Destroy(r.now, id)
		return
	}
	c.events = append(c.events, Event{Type: SIDRREQReceived, ID: id, Listen: listener, Msg: m})
}

func (c *CM) onSIDRREP(r rx, m *mad.SIDRREP) {
	id := c.acquire(m.RequestID, 0)
	if id == nil || id.state != SIDRREQSent {
		c.unmatched()
		return
	}
	id.state = Idle
	c.cancel(id)
	id.learnPeer(r.from)
	c.emit(SIDRREPReceived, id, m)
}

// learnPeer takes the peer's QP1 and GID from where its answer came. On
// RoCE it is where the request went; a transport that routes requests by
// service (UnixMADPort) tells the peer's GID only here.
func (id *ID) learnPeer(from verbsio.MADAddr) {
	if from.GID != id.av.GID {
		id.av = from
		id.ah.DGID = from.GID
	}
}
