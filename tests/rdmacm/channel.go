package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm"
)

// Sizes of the channel's buffers. perftest posts one receive of
// sizeof(struct pingpong_dest) (56 or 64 bytes) and never sends more in
// one message; an rperf peer's parameter document is longer, and is cut
// into SENDs of at most SlotSize bytes.
const (
	// SlotSize is the largest SEND the channel sends and receives.
	SlotSize = 4096
	// RecvSlots is how many receives the channel keeps posted.
	RecvSlots = 8
)

// Defaults of Options.
const (
	// DefaultTimeout bounds each wait for the peer's CM.
	DefaultTimeout = 10 * time.Second
	// DefaultRetries is how many times a client connects again when the
	// server refuses (not listening yet), RetryInterval apart: perftest's
	// 10 and 100 ms.
	DefaultRetries = 10
	// RetryInterval is the pause between two connection attempts.
	RetryInterval = 100 * time.Millisecond
	// resolveTimeout is what perftest gives rdma_resolve_addr and
	// rdma_resolve_route (2000 ms).
	resolveTimeout = 2 * time.Second
	// closeWait bounds the wait for the peer's side of a disconnect;
	// serverCloseWait the server's wait for the DREP of the channel's
	// DREQ, which a peer that is done with it may send only at its exit.
	closeWait       = 3 * time.Second
	serverCloseWait = 200 * time.Millisecond
)

// Options configure a Channel.
type Options struct {
	// Device is the CM agent to use; nil opens one on the verbs context
	// with CM (and closes it with the channel).
	Device *cm.Device
	CM     cm.Options
	// Timeout bounds each wait for the peer's CM (address and route
	// resolution, an answer to a request); 0 means DefaultTimeout.
	Timeout time.Duration
	// Retries is how many times a client connects a test QP again when
	// refused (REJ reason 8: nobody listens on the port yet); 0 means
	// DefaultRetries, negative none. Dial retries the channel itself until
	// its context ends.
	Retries int
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	return o
}

// Channel is perftest's rdma_cm message channel: an RC QP connected
// through rdma_cm whose SENDs carry the out-of-band messages. It is a
// net.Conn: each Write goes as one SEND (cut into SlotSize pieces if
// longer), Read returns the bytes received in order. Read and Write may
// not be called concurrently with themselves; deadlines may be set from
// any goroutine.
type Channel struct {
	dev    *verbsio.Context
	cmdev  *cm.Device
	ownsCM bool
	opts   Options
	server bool

	ch  *cm.EventChannel // the channel identifier's events
	id  *cm.ID
	dch *cm.EventChannel // the test QPs' identifiers' events

	pd       *verbsio.PD
	scq, rcq *verbsio.CQ
	mr       *verbsio.MR
	buf      []byte
	qp       *verbsio.QP

	local, remote netip.AddrPort
	pending       []byte // received and not yet read
	pendBuf       [SlotSize]byte
	rwc, swc      [1]verbsio.WC
	sge           [1]verbsio.SGE
	rdl, wdl      atomic.Int64 // deadlines, Unix nanoseconds; 0: none

	data []*DataQP
	// qpListen is the server's listener for the test QPs (ListenQPs).
	qpListen *cm.ID
	// broken: a Read or Write failed; Close does not wait for the peer.
	broken bool
	// disc are identifiers whose DISCONNECTED came while waiting for
	// other events.
	disc map[*cm.ID]bool
	// answered are test QPs' identifiers whose peer's DREQ got its DREP.
	answered map[*cm.ID]bool
	// dreqFirst: the server sends the test QPs' DREQs at the close
	// without waiting for the client's (SetDisconnectFirst).
	dreqFirst bool

	closeOnce sync.Once
	closeErr  error
}

// sendOff is the offset of the send slot in buf.
const sendOff = RecvSlots * SlotSize

// Dial connects a channel to the server at dst (perftest's
// rdma_client_connect) from src (the unspecified address: the one that
// routes to dst). It retries while the server refuses, as oob.Dial does
// for TCP, within ctx.
func Dial(ctx context.Context, dev *verbsio.Context, src netip.Addr, dst netip.AddrPort, o Options) (*Channel, error) {
	o = o.withDefaults()
	c, err := newChannel(dev, o, false)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for {
		err = c.dial(src, dst)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errRefused) {
			break
		}
		t := time.NewTimer(RetryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			c.Close()
			return nil, fmt.Errorf("%v (tried for %v)", err, time.Since(start).Round(100*time.Millisecond))
		case <-t.C:
		}
	}
	c.Close()
	return nil, err
}

// errRefused marks a REJ of reason 8: nothing listens on the port.
var errRefused = errors.New("REJ reason 8")

// dial makes one connection attempt; a refused one leaves the channel as
// newChannel made it.
func (c *Channel) dial(src netip.Addr, dst netip.AddrPort) error {
	id, err := c.ch.CreateID(nil, cm.PortSpaceTCP, verbsio.QPTypeRC)
	if err != nil {
		return err
	}
	qp, err := c.resolveAndCreate(c.ch, id, src, dst, c.pd, c.qpAttr())
	if err == nil {
		err = c.postRecvs(qp, RecvSlots)
		if err == nil {
			err = id.Connect(&cm.ConnParam{RetryCount: 7, RNRRetryCount: 7})
		}
		if err == nil {
			var ev *cm.Event
			ev, err = c.wait(c.ch, id, c.opts.Timeout, cm.EventEstablished)
			err = eventError(ev, err, dst)
		}
	}
	if err != nil {
		_ = id.Destroy()
		_ = id.DestroyQP()
		if qp != nil {
			// The CM moved the refused QP to the error state, which
			// flushed its posted receives into the channel's CQs: the
			// next attempt gets new CQs, or its first read would take
			// that flush for its own connection's end.
			if cerr := c.newCQs(); cerr != nil {
				return fmt.Errorf("rdma_cm: new CQs for the channel after %v: %w", err, cerr)
			}
		}
		return err
	}
	c.id, c.qp = id, qp
	c.local, c.remote = id.LocalAddr(), id.RemoteAddr()
	return nil
}

// eventError turns a connection's last event into an error: nil for
// ESTABLISHED, errRefused for REJ 8, otherwise what happened.
func eventError(ev *cm.Event, err error, dst netip.AddrPort) error {
	switch {
	case err != nil:
		return fmt.Errorf("rdma_cm: connect to %s: %w", dst, err)
	case ev.Type == cm.EventEstablished:
		return nil
	case ev.Type == cm.EventRejected && ev.Status == 8:
		return fmt.Errorf("rdma_cm: connect to %s: nothing listens on port %d there (%w); start the server first, with -R too", dst, dst.Port(), errRefused)
	case ev.Type == cm.EventRejected:
		return fmt.Errorf("rdma_cm: connect to %s: rejected with reason %d", dst, ev.Status)
	case ev.Type == cm.EventUnreachable && ev.Status == 1:
		return fmt.Errorf("rdma_cm: resolve the UD QP at %s: nothing listens on UDP port space port %d there (SIDR status 1, %w); start the server first, with -R too", dst, dst.Port(), errRefused)
	case ev.Type == cm.EventUnreachable:
		return fmt.Errorf("rdma_cm: connect to %s: unreachable (status %d): no answer from its CM; is the address right and, for rperf's engine, --peer-udp-port the server's --udp-port?", dst, ev.Status)
	default:
		return fmt.Errorf("rdma_cm: connect to %s: %s", dst, ev)
	}
}

// resolveAndCreate resolves dst on id and creates its QP on pd.
func (c *Channel) resolveAndCreate(ch *cm.EventChannel, id *cm.ID, src netip.Addr, dst netip.AddrPort, pd *verbsio.PD, attr verbsio.QPInitAttr) (*verbsio.QP, error) {
	if err := id.ResolveAddr(src, dst, resolveTimeout); err != nil {
		return nil, err
	}
	ev, err := c.wait(ch, id, c.opts.Timeout, cm.EventAddrResolved)
	if err != nil {
		return nil, fmt.Errorf("rdma_cm: resolve %s: %w", dst.Addr(), err)
	}
	if ev.Type != cm.EventAddrResolved {
		return nil, fmt.Errorf("rdma_cm: resolve %s: %s: no device of this host reaches it; check the address and -d", dst.Addr(), ev)
	}
	if err := id.ResolveRoute(resolveTimeout); err != nil {
		return nil, err
	}
	if ev, err = c.wait(ch, id, c.opts.Timeout, cm.EventRouteResolved); err != nil || ev.Type != cm.EventRouteResolved {
		return nil, fmt.Errorf("rdma_cm: route to %s: %v%v", dst.Addr(), ev, err)
	}
	if id.Device().Context() != c.dev {
		return nil, fmt.Errorf("rdma_cm: %s is reached through device %s, not %s; choose the device with -d or the source with --bind_source_ip",
			dst.Addr(), id.Device().Context().Device.Name, c.dev.Device.Name)
	}
	return id.CreateQP(pd, attr)
}

// Listener waits for a channel's client.
type Listener struct {
	c  *Channel
	id *cm.ID
}

// Listen listens for a channel's client on addr (perftest's
// rdma_server_connect; the unspecified address listens on every device).
func Listen(dev *verbsio.Context, addr netip.AddrPort, o Options) (*Listener, error) {
	o = o.withDefaults()
	c, err := newChannel(dev, o, true)
	if err != nil {
		return nil, err
	}
	id, err := c.ch.CreateID(nil, cm.PortSpaceTCP, verbsio.QPTypeRC)
	if err == nil {
		err = id.BindAddr(addr)
		if err == nil {
			err = id.Listen(1)
		}
		if err != nil {
			_ = id.Destroy()
		}
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("rdma_cm: listen on %s: %w", addr, err)
	}
	return &Listener{c: c, id: id}, nil
}

// Addr is where the listener listens.
func (l *Listener) Addr() netip.AddrPort { return l.id.LocalAddr() }

// Accept waits up to wait for the client's request and accepts it. The
// listener is then done: perftest's server listens again on the same
// port for the test's QPs.
func (l *Listener) Accept(ctx context.Context, wait time.Duration) (*Channel, error) {
	c := l.c
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		if d, ok := ctx.Deadline(); ok && time.Until(d) < left {
			left = time.Until(d)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if left <= 0 {
			return nil, fmt.Errorf("rdma_cm: no client connected to %s within %v", l.Addr(), wait)
		}
		ev, err := c.ch.GetEvent(min(left, 100*time.Millisecond))
		if errors.Is(err, verbsio.ErrTimeout) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if ev.Type != cm.EventConnectRequest {
			continue
		}
		id := ev.ID
		qp, err := id.CreateQP(c.pd, c.qpAttr())
		if err == nil {
			if err = c.postRecvs(qp, RecvSlots); err == nil {
				err = id.Accept(&cm.ConnParam{RetryCount: 7, RNRRetryCount: 7})
			}
		}
		if err != nil {
			_ = id.Destroy()
			_ = id.DestroyQP()
			return nil, fmt.Errorf("rdma_cm: accept the client's channel: %w", err)
		}
		c.id, c.qp = id, qp
		c.local, c.remote = id.LocalAddr(), id.RemoteAddr()
		_ = l.id.Destroy()
		l.c = nil
		return c, nil
	}
}

// Close stops listening; a channel Accept returned stays open.
func (l *Listener) Close() error {
	if l.c == nil {
		return nil
	}
	_ = l.id.Destroy()
	return l.c.Close()
}

func newChannel(dev *verbsio.Context, o Options, server bool) (c *Channel, err error) {
	c = &Channel{dev: dev, cmdev: o.Device, opts: o, server: server, ch: cm.NewEventChannel(), dch: cm.NewEventChannel(),
		disc: map[*cm.ID]bool{}, answered: map[*cm.ID]bool{}}
	defer func() {
		if err != nil {
			c.Close()
			c = nil
		}
	}()
	if c.cmdev == nil {
		if c.cmdev, err = cm.Open(dev, o.CM); err != nil {
			return c, fmt.Errorf("rdma_cm: start the connection manager of %s: %w", dev.Device.Name, err)
		}
		c.ownsCM = true
	}
	if c.pd, err = dev.AllocPD(); err != nil {
		return c, err
	}
	if err = c.newCQs(); err != nil {
		return c, err
	}
	if c.buf, err = dev.Alloc(sendOff + SlotSize); err != nil {
		return c, err
	}
	if c.mr, err = c.pd.RegMR(c.buf, verbsio.AccessLocalWrite); err != nil {
		return c, err
	}
	return c, nil
}

// newCQs gives the channel new send and receive CQs, destroying those it
// had.
func (c *Channel) newCQs() error {
	for _, cq := range []**verbsio.CQ{&c.scq, &c.rcq} {
		if *cq != nil {
			if err := (*cq).Destroy(); err != nil {
				return err
			}
			*cq = nil
		}
	}
	var err error
	if c.scq, err = c.dev.CreateCQ(4); err == nil {
		c.rcq, err = c.dev.CreateCQ(RecvSlots + 4)
	}
	return err
}

func (c *Channel) qpAttr() verbsio.QPInitAttr {
	return verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: c.scq, RecvCQ: c.rcq,
		Cap: verbsio.QPCap{MaxSendWR: 2, MaxRecvWR: RecvSlots, MaxSendSGE: 1, MaxRecvSGE: 1}}
}

// postRecvs posts receives into slots 0..n-1.
func (c *Channel) postRecvs(qp *verbsio.QP, n int) error {
	for i := 0; i < n; i++ {
		if err := c.postRecv(qp, i); err != nil {
			return err
		}
	}
	return nil
}

func (c *Channel) postRecv(qp *verbsio.QP, slot int) error {
	sge := [1]verbsio.SGE{c.mr.SGE(slot*SlotSize, SlotSize)}
	_, err := qp.PostRecv([]verbsio.RecvWR{{ID: uint64(slot), SGL: sge[:]}})
	return err
}

// wait returns the next event of id on ch that is one of want or ends a
// connection attempt (errors, REJECTED, UNREACHABLE), within timeout.
// Other identifiers' DISCONNECTED events are remembered.
func (c *Channel) wait(ch *cm.EventChannel, id *cm.ID, timeout time.Duration, want ...cm.EventType) (*cm.Event, error) {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("no %v event within %v: %w", want, timeout, verbsio.ErrTimeout)
		}
		ev, err := ch.GetEvent(left)
		if err != nil {
			return nil, err
		}
		if ev.ID != id {
			if ev.Type == cm.EventDisconnected {
				c.disc[ev.ID] = true
			}
			continue
		}
		for _, w := range want {
			if ev.Type == w {
				return ev, nil
			}
		}
		switch ev.Type {
		case cm.EventAddrError, cm.EventRouteError, cm.EventConnectError, cm.EventUnreachable, cm.EventRejected, cm.EventDisconnected, cm.EventDeviceRemoval:
			return ev, nil
		}
	}
}

// Read implements net.Conn: it returns the bytes of the peer's SENDs in
// order.
func (c *Channel) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(c.pending) == 0 {
		if c.qp == nil {
			return 0, net.ErrClosed
		}
		wc, err := c.await(c.rcq, c.rwc[:], &c.rdl)
		if err != nil {
			c.broken = true
			return 0, err
		}
		if wc.Status != verbsio.StatusSuccess {
			c.broken = true
			return 0, fmt.Errorf("the rdma_cm channel's receive completed with %s: the peer closed or the connection broke: %w", wc.Status, io.EOF)
		}
		slot := int(wc.ID)
		n := copy(c.pendBuf[:], c.buf[slot*SlotSize:slot*SlotSize+int(wc.ByteLen)])
		c.pending = c.pendBuf[:n]
		if err := c.postRecv(c.qp, slot); err != nil {
			return 0, fmt.Errorf("repost a receive on the rdma_cm channel: %w", err)
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// Write implements net.Conn: b goes as one SEND, or as SlotSize pieces.
// It returns when the peer acknowledged it.
func (c *Channel) Write(b []byte) (int, error) {
	if c.qp == nil {
		return 0, net.ErrClosed
	}
	done := 0
	for done < len(b) {
		n := copy(c.buf[sendOff:sendOff+SlotSize], b[done:])
		c.sge[0] = c.mr.SGE(sendOff, n)
		if _, err := c.qp.PostSend([]verbsio.SendWR{{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: c.sge[:]}}); err != nil {
			return done, fmt.Errorf("post a SEND on the rdma_cm channel: %w", err)
		}
		wc, err := c.await(c.scq, c.swc[:], &c.wdl)
		if err != nil {
			c.broken = true
			return done, err
		}
		if wc.Status != verbsio.StatusSuccess {
			c.broken = true
			return done, fmt.Errorf("a SEND on the rdma_cm channel completed with %s: the peer is gone: %w", wc.Status, io.ErrClosedPipe)
		}
		done += n
	}
	return done, nil
}

// await polls cq for one completion until the deadline in dl. Polling
// drives a poll-driven engine; between empty polls it yields, then naps.
func (c *Channel) await(cq *verbsio.CQ, wcs []verbsio.WC, dl *atomic.Int64) (verbsio.WC, error) {
	for spins := 0; ; spins++ {
		n, err := cq.Poll(wcs)
		if err != nil {
			return verbsio.WC{}, fmt.Errorf("poll the rdma_cm channel's CQ: %w", err)
		}
		if n > 0 {
			return wcs[0], nil
		}
		if d := dl.Load(); d != 0 && time.Now().UnixNano() >= d {
			return verbsio.WC{}, os.ErrDeadlineExceeded
		}
		if spins%64 == 63 && c.peerGone() {
			// The peer disconnected: the CM does not flush our QP (Linux's
			// does not either until we disconnect), so say it here.
			return verbsio.WC{}, fmt.Errorf("the peer disconnected the rdma_cm channel: %w", io.EOF)
		}
		if spins < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(time.Duration(min(spins, 1000)) * time.Microsecond)
		}
	}
}

// peerGone reports whether the channel's DISCONNECTED came, without
// waiting. On the way it answers the peer's DREQs for the test QPs at
// once (a DREP): perftest's client disconnects them and waits for that
// before it closes the channel.
func (c *Channel) peerGone() bool {
	for {
		ev, err := c.dch.GetEvent(0)
		if err != nil {
			break
		}
		if ev.Type == cm.EventDisconnected {
			c.disc[ev.ID] = true
			if !c.answered[ev.ID] {
				c.answered[ev.ID] = true
				_ = ev.ID.Disconnect()
			}
		}
	}
	for !c.disc[c.id] {
		ev, err := c.ch.GetEvent(0)
		if err != nil {
			return false
		}
		if ev.Type == cm.EventDisconnected {
			c.disc[ev.ID] = true
		}
	}
	return true
}

// LocalAddr implements net.Conn.
func (c *Channel) LocalAddr() net.Addr { return addr(c.local) }

// RemoteAddr implements net.Conn.
func (c *Channel) RemoteAddr() net.Addr { return addr(c.remote) }

// addr is a channel end's address: the IP address and the port.
type addr netip.AddrPort

func (a addr) Network() string { return "rdma_cm" }
func (a addr) String() string  { return netip.AddrPort(a).String() }

// SetDeadline implements net.Conn.
func (c *Channel) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline implements net.Conn.
func (c *Channel) SetReadDeadline(t time.Time) error {
	c.rdl.Store(unixNano(t))
	return nil
}

// SetWriteDeadline implements net.Conn.
func (c *Channel) SetWriteDeadline(t time.Time) error {
	c.wdl.Store(unixNano(t))
	return nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(t.UnixNano(), 1)
}

// Server reports whether c is the accepting side.
func (c *Channel) Server() bool { return c.server }

// Close ends the channel as perftest does: the server disconnects it, the
// client waits (bounded) for that; then the QP, its resources and, if the
// channel opened it, the CM agent are released. Test QPs still open are
// closed first (CloseQPs, gracefully unless the channel failed); their
// CQs and PD are the caller's, to release after Close.
func (c *Channel) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Channel) close() error {
	var errs []error
	c.stopListenQPs()
	if len(c.data) > 0 {
		errs = append(errs, c.CloseQPs(!c.broken))
	}
	if c.id != nil {
		if c.server {
			_ = c.id.Disconnect() // the client's DREP may come after we left
			c.waitDisconnected(c.ch, []*cm.ID{c.id}, serverCloseWait)
		} else {
			c.waitDisconnected(c.ch, []*cm.ID{c.id}, closeWait)
			_ = c.id.Disconnect()
		}
		errs = append(errs, c.id.Destroy(), c.id.DestroyQP())
		c.id, c.qp = nil, nil
	}
	if c.mr != nil {
		errs = append(errs, c.mr.Dereg())
	}
	if c.buf != nil {
		errs = append(errs, c.dev.Free(c.buf))
	}
	for _, cq := range []*verbsio.CQ{c.scq, c.rcq} {
		if cq != nil {
			errs = append(errs, cq.Destroy())
		}
	}
	if c.pd != nil {
		errs = append(errs, c.pd.Dealloc())
	}
	c.ch.Close()
	c.dch.Close()
	if c.ownsCM && c.cmdev != nil {
		errs = append(errs, c.cmdev.Close())
	}
	return errors.Join(errs...)
}

// waitDisconnected waits up to wait until every identifier of ids on ch
// has had its DISCONNECTED.
func (c *Channel) waitDisconnected(ch *cm.EventChannel, ids []*cm.ID, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		all := true
		for _, id := range ids {
			all = all && c.disc[id]
		}
		if all {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		ev, err := ch.GetEvent(left)
		if err != nil {
			return false
		}
		if ev.Type == cm.EventDisconnected {
			c.disc[ev.ID] = true
		}
	}
}
