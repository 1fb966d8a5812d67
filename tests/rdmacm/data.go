package rdmacm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm"
)

// QPSpec describes the test's QPs for ConnectQPs.
type QPSpec struct {
	// N is how many QPs; Type their type (RC or UD: rdma_cm has no UC
	// in perftest).
	N    int
	Type verbsio.QPType
	// PD and Attr create QP i (its CQs and capabilities).
	PD   *verbsio.PD
	Attr func(i int) verbsio.QPInitAttr
	// Reads is the responder resources and initiator depth both sides
	// ask for: out_reads in READ and atomic tests, 0 otherwise.
	Reads uint8
	// ACKTimeout is the RC QPs' ACK timeout exponent (perftest -u): set
	// on each RC identifier with OptionACKTimeout before it connects or
	// accepts, as upstream perftest does, so the CM puts it in the QP's
	// RTS attributes instead of the one it computes from the path. 0
	// leaves the CM's.
	ACKTimeout uint8
	// PathMTU lowers the RC QPs' path MTU below the route's (perftest -m,
	// which perftest itself does not apply with -R): the client limits
	// its routes (cm.ID.LimitPathMTU) and its requests carry the MTU, so
	// both sides' QPs get it. The QPs' attributes say what they got.
	PathMTU verbsio.MTU
	// UDQPNMessage: the client sends its UD QP's number to the server in
	// a SEND_WITH_IMM, which the server waits for (perftest does it when
	// the server sends too: latency and bidirectional tests). Scratch is
	// a buffer of at least UDQPNMessageSize bytes of PD's for it, QP i's
	// at Scratch(i).
	UDQPNMessage bool
	Scratch      func(i int) verbsio.SGE
}

// UDQPNMessageSize is the receive perftest posts for the UD QP-number
// message: room for the GRH and the 4-byte QPN.
const UDQPNMessageSize = 40 + 4

// udQPNID is the work request ID of the UD QP-number message.
const udQPNID = 0x5344 // "SD"

// DataQP is one test QP connected through rdma_cm.
type DataQP struct {
	ID *cm.ID
	QP *verbsio.QP
	// UD is, on the client of a UD test, the server's QP as SIDR
	// returned it: its number, Q_Key and address vector.
	UD cm.UDParam
}

// ConnectQPs creates and connects the test's QPs through rdma_cm
// (perftest's rdma_cm_client_connection and rdma_cm_server_connection):
// the server listens on the channel's port again and accepts spec.N
// requests, the client connects spec.N identifiers to it. Both sides then
// have their QPs in RTS (UD: their peers' QP numbers and Q_Keys in hand).
// The caller exchanges keys around it (oob.Conn.Sync).
func (c *Channel) ConnectQPs(ctx context.Context, spec QPSpec) ([]*DataQP, error) {
	if spec.Type != verbsio.QPTypeRC && spec.Type != verbsio.QPTypeUD {
		return nil, fmt.Errorf("rdma_cm connects RC and UD QPs in perftest, not %s (-c %s cannot run with -R)", spec.Type, spec.Type)
	}
	if spec.UDQPNMessage && spec.Scratch == nil {
		return nil, errors.New("rdma_cm: the UD QP-number message needs a scratch buffer")
	}
	var err error
	if c.server {
		err = c.acceptQPs(ctx, spec)
	} else {
		err = c.connectQPs(ctx, spec)
	}
	if err != nil {
		c.CloseQPs(false)
		return nil, err
	}
	return c.data, nil
}

func portSpace(t verbsio.QPType) cm.PortSpace {
	if t == verbsio.QPTypeUD {
		return cm.PortSpaceUDP
	}
	return cm.PortSpaceTCP
}

func (c *Channel) connParam(spec QPSpec) *cm.ConnParam {
	return &cm.ConnParam{ResponderResources: spec.Reads, InitiatorDepth: spec.Reads, RetryCount: 7, RNRRetryCount: 7}
}

// connectQPs is the client's side.
func (c *Channel) connectQPs(ctx context.Context, spec QPSpec) error {
	dst := c.remote // the server's address and port, the channel's
	for i := 0; i < spec.N; i++ {
		for attempt := 0; ; attempt++ {
			d, err := c.connectQP(spec, i, dst)
			if err == nil {
				c.data = append(c.data, d)
				break
			}
			if !errors.Is(err, errRefused) || attempt >= c.opts.Retries {
				return fmt.Errorf("connect test QP %d of %d: %w", i+1, spec.N, err)
			}
			t := time.NewTimer(RetryInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	return nil
}

func (c *Channel) connectQP(spec QPSpec, i int, dst netip.AddrPort) (*DataQP, error) {
	id, err := c.dch.CreateID(nil, portSpace(spec.Type), spec.Type)
	if err != nil {
		return nil, err
	}
	d := &DataQP{ID: id}
	err = setACKTimeout(spec, id)
	if err == nil && spec.Type == verbsio.QPTypeRC && spec.PathMTU.Valid() {
		err = id.LimitPathMTU(spec.PathMTU)
	}
	if err == nil {
		d.QP, err = c.resolveAndCreate(c.dch, id, c.local.Addr(), dst, spec.PD, spec.Attr(i))
	}
	if err == nil {
		err = id.Connect(c.connParam(spec))
	}
	if err == nil {
		var ev *cm.Event
		ev, err = c.wait(c.dch, id, c.opts.Timeout, cm.EventEstablished)
		if err = eventError(ev, err, dst); err == nil {
			d.UD = ev.UD
		}
	}
	if err == nil && spec.Type == verbsio.QPTypeUD && spec.UDQPNMessage {
		err = sendQPN(spec, i, d)
	}
	if err != nil {
		_ = id.Destroy()
		_ = id.DestroyQP()
		return nil, err
	}
	return d, nil
}

// sendQPN sends the client's UD QP number to the server (perftest's
// rdma_cm_send_ud_connection_parameters): 4 bytes, the number also in
// the immediate data, which is what the server reads.
func sendQPN(spec QPSpec, i int, d *DataQP) error {
	ah, err := spec.PD.CreateAH(d.UD.AH)
	if err != nil {
		return fmt.Errorf("create an address handle to the server's UD QP: %w", err)
	}
	defer ah.Destroy()
	sge := spec.Scratch(i)
	sge.Length = 4
	sgl := [1]verbsio.SGE{sge}
	qpn := d.QP.QPN()
	imm := binary.NativeEndian.Uint32(binary.BigEndian.AppendUint32(nil, qpn)) // htonl(qpn): Imm is a __be32 as in verbs
	if _, err := d.QP.PostSend([]verbsio.SendWR{{ID: udQPNID, Opcode: verbsio.OpSendImm, Flags: verbsio.SendSignaled, SGL: sgl[:], Imm: imm,
		UD: verbsio.UDAddr{AH: ah, RemoteQPN: d.UD.QPNum, RemoteQKey: d.UD.QKey}}}); err != nil {
		return fmt.Errorf("send our UD QP number to the server: %w", err)
	}
	wc, err := pollOne(d.QP.SendCQ(), resolveTimeout)
	if err == nil && (wc.Status != verbsio.StatusSuccess || wc.ID != udQPNID) {
		err = fmt.Errorf("completed with %s (wr %#x)", wc.Status, wc.ID)
	}
	if err != nil {
		return fmt.Errorf("send our UD QP number to the server: %w", err)
	}
	return nil
}

// pollOne waits up to wait for one completion on cq.
func pollOne(cq *verbsio.CQ, wait time.Duration) (verbsio.WC, error) {
	var wcs [1]verbsio.WC
	deadline := time.Now().Add(wait)
	for {
		n, err := cq.Poll(wcs[:])
		if err != nil || n > 0 {
			return wcs[0], err
		}
		if time.Now().After(deadline) {
			return verbsio.WC{}, fmt.Errorf("no completion within %v: %w", wait, verbsio.ErrTimeout)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// ListenQPs makes the server listen for the test QPs' requests now (the
// channel's address and port again), before the synchronising exchange
// that precedes ConnectQPs: a client that connects as soon as that
// exchange is over is not refused by a server still getting to listen
// (perftest 4.5's client does not try again: ib_write_bw -R -q 4 against
// rperf on rxe0 under TCG failed with REJ 8). It does nothing on the
// client; ConnectQPs listens itself when it was not called.
func (c *Channel) ListenQPs(spec QPSpec) error {
	if !c.server || c.qpListen != nil {
		return nil
	}
	l, err := c.dch.CreateID(nil, portSpace(spec.Type), spec.Type)
	if err != nil {
		return err
	}
	// perftest binds the unspecified address (or --bind_source_ip); the
	// address the channel came in on is where its client is connecting
	// again, and keeps other devices of this process out of it.
	laddr := netip.AddrPortFrom(c.local.Addr(), c.local.Port())
	if err := l.BindAddr(laddr); err != nil {
		_ = l.Destroy()
		return fmt.Errorf("rdma_cm: bind %s for the test QPs: %w", laddr, err)
	}
	if err := l.Listen(spec.N); err != nil {
		_ = l.Destroy()
		return fmt.Errorf("rdma_cm: listen on %s for the test QPs: %w", laddr, err)
	}
	c.qpListen = l
	return nil
}

// stopListenQPs destroys the test QPs' listener, if any.
func (c *Channel) stopListenQPs() {
	if c.qpListen != nil {
		_ = c.qpListen.Destroy()
		c.qpListen = nil
	}
}

// acceptQPs is the server's side: listen on the channel's port again
// (unless ListenQPs did), accept spec.N requests, stop listening.
func (c *Channel) acceptQPs(ctx context.Context, spec QPSpec) error {
	if err := c.ListenQPs(spec); err != nil {
		return err
	}
	defer c.stopListenQPs()
	deadline := time.Now().Add(c.opts.Timeout)
	for len(c.data) < spec.N {
		if err := ctx.Err(); err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("rdma_cm: the client connected %d of %d test QPs within %v", len(c.data), spec.N, c.opts.Timeout)
		}
		ev, err := c.dch.GetEvent(min(left, 100*time.Millisecond))
		if errors.Is(err, verbsio.ErrTimeout) {
			continue
		}
		if err != nil {
			return err
		}
		switch ev.Type {
		case cm.EventConnectRequest:
			if err := c.acceptQP(spec, ev.ID); err != nil {
				return fmt.Errorf("accept test QP %d of %d: %w", len(c.data)+1, spec.N, err)
			}
		case cm.EventDisconnected:
			c.disc[ev.ID] = true
		}
	}
	return nil
}

// setACKTimeout gives an RC identifier the spec's ACK timeout.
func setACKTimeout(spec QPSpec, id *cm.ID) error {
	if spec.Type != verbsio.QPTypeRC || spec.ACKTimeout == 0 {
		return nil
	}
	if err := id.SetOption(cm.OptionACKTimeout, int(spec.ACKTimeout)); err != nil {
		return fmt.Errorf("rdma_cm: set the ACK timeout %d (-u): %w", spec.ACKTimeout, err)
	}
	return nil
}

func (c *Channel) acceptQP(spec QPSpec, id *cm.ID) error {
	i := len(c.data)
	err := setACKTimeout(spec, id)
	var qp *verbsio.QP
	if err == nil {
		qp, err = id.CreateQP(spec.PD, spec.Attr(i))
	}
	if err != nil {
		_ = id.Reject(nil)
		_ = id.Destroy()
		return err
	}
	d := &DataQP{ID: id, QP: qp}
	wantQPN := spec.Type == verbsio.QPTypeUD && spec.UDQPNMessage
	if wantQPN {
		sge := spec.Scratch(i)
		sge.Length = UDQPNMessageSize
		sgl := [1]verbsio.SGE{sge}
		_, err = qp.PostRecv([]verbsio.RecvWR{{ID: udQPNID, SGL: sgl[:]}})
	}
	if err == nil {
		err = id.Accept(c.connParam(spec))
	}
	if err == nil && wantQPN {
		var wc verbsio.WC
		wc, err = pollOne(qp.RecvCQ(), c.opts.Timeout)
		if err == nil && (wc.Status != verbsio.StatusSuccess || wc.ID != udQPNID || wc.Flags&verbsio.WCWithImm == 0) {
			err = fmt.Errorf("the client's UD QP-number message completed with %s (wr %#x, flags %v)", wc.Status, wc.ID, wc.Flags)
		}
		if err != nil {
			err = fmt.Errorf("wait for the client's UD QP number: %w", err)
		}
	}
	if err != nil {
		_ = id.Destroy()
		_ = id.DestroyQP()
		return err
	}
	c.data = append(c.data, d)
	return nil
}

// DisconnectQPs sends the DREQ of every connected test QP now, on the
// server, as upstream perftest's server does at the end of a run: its
// client waits for them before it closes the channel (see
// oob.ServerDisconnectsFirst). CloseQPs then waits for the DREPs.
func (c *Channel) DisconnectQPs() {
	if !c.server {
		return
	}
	for _, d := range c.data {
		if d.ID.QPType() != verbsio.QPTypeUD && !c.answered[d.ID] {
			c.answered[d.ID] = true
			_ = d.ID.Disconnect()
		}
	}
}

// SetDisconnectFirst makes CloseQPs on the server send the DREQs itself
// at once (DisconnectQPs) instead of waiting for the client's.
func (c *Channel) SetDisconnectFirst() { c.dreqFirst = true }

// CloseQPs ends the test QPs' connections and destroys them and their
// identifiers. With graceful, perftest's order: the client disconnects
// each and waits for the server's answer; the server waits (bounded) for
// the client's DREQs, answers them, then destroys (after SetDisconnectFirst
// it sends its own first). Without, they are
// destroyed at once (the CM still tells the peer).
func (c *Channel) CloseQPs(graceful bool) error {
	ids := make([]*cm.ID, 0, len(c.data))
	for _, d := range c.data {
		if d.ID.QPType() != verbsio.QPTypeUD {
			ids = append(ids, d.ID)
		}
	}
	if graceful && len(ids) > 0 {
		if c.dreqFirst {
			c.DisconnectQPs()
		}
		if !c.server {
			for _, id := range ids {
				_ = id.Disconnect()
			}
		}
		c.waitDisconnected(c.dch, ids, closeWait)
		for _, id := range ids {
			if c.server && !c.answered[id] {
				_ = id.Disconnect() // the DREP to the client's DREQ
			}
		}
	}
	var errs []error
	for _, d := range c.data {
		errs = append(errs, d.ID.Destroy(), d.ID.DestroyQP())
	}
	c.data = nil
	return errors.Join(errs...)
}
