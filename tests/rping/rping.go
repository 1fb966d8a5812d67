// Package rping is librdmacm's rping over verbsio/cm: a client and a
// server that speak rping's protocol, so that either can face the real
// rping (rdma-core's librdmacm/examples/rping.c) or each other.
//
// The protocol, on one RC connection made by rdma_cm (responder resources
// and initiator depth 1, retry and RNR retry 7), for each ping:
//
//  1. The client fills its start buffer with "rdma-ping-N: " and a run of
//     letters ending in NUL, and SENDs its address, rkey and size (16
//     bytes: a big-endian uint64 and two uint32s).
//  2. The server RDMA READs that many bytes into its buffer, then SENDs a
//     16-byte "go ahead".
//  3. The client SENDs the same for its sink buffer.
//  4. The server RDMA WRITEs the string (up to its NUL) there and SENDs
//     "go ahead" again; the client compares the sink with what it sent.
//
// The client disconnects after the last ping; the server then ends.
package rping

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm"
)

// Protocol constants (rping.c).
const (
	// DefaultPort is rping's port.
	DefaultPort = 7174
	// DefaultSize is rping's message size (-S).
	DefaultSize = 64
	// MinSize and MaxSize bound the size: room for "rdma-ping-2147483647: "
	// and NUL, and rping's 64 KiB buffer less one byte.
	MinSize = 26
	MaxSize = 64*1024 - 1
	// infoSize is struct rping_rdma_info.
	infoSize = 16
	// resources is rping's responder resources and initiator depth.
	resources = 1
)

// Options configure a side.
type Options struct {
	// Count is how many pings the client sends (rping -C; 0: forever,
	// which this package refuses: give a count).
	Count int
	// Size is the message size (rping -S).
	Size int
	// Validate compares each echo with what was sent (rping -V); the
	// client always checks the size of what it receives.
	Validate bool
	// Verbose prints each ping's data as rping -v does: "ping data: ..."
	// on the client, "server ping data: ..." on the server.
	Verbose bool
	Out     io.Writer
	// Timeout bounds every wait for the peer.
	Timeout time.Duration
	// SelfQP creates the QP with verbs instead of through the CM and
	// moves it through INIT, RTR and RTS itself with InitQPAttr (rping
	// -q): the CM knows only its number. The client then gets
	// CONNECT_RESPONSE instead of ESTABLISHED and completes the
	// connection with Establish (rdma_establish); the server moves its QP
	// to RTS before it accepts. Either side may be rping with or
	// without -q.
	SelfQP bool
	// CM opens the connection manager; Device, if set, is used instead.
	CM     cm.Options
	Device *cm.Device

	// events, if set, is what the side reads its CM events through
	// instead of its event channel (the tests reorder events with it).
	events func(*cm.EventChannel) eventSource
}

// eventSource delivers a side's CM events: its event channel, or what a
// test put in between.
type eventSource interface {
	GetEvent(timeout time.Duration) (*cm.Event, error)
}

func (o *Options) check() error {
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if o.Size < MinSize || o.Size > MaxSize {
		return fmt.Errorf("rping: size %d is outside %d..%d (rping's limits)", o.Size, MinSize, MaxSize)
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return nil
}

// side is one end's resources.
type side struct {
	o     Options
	dev   *verbsio.Context
	cmdev *cm.Device
	owns  bool
	ch    *cm.EventChannel
	ev    eventSource // ch, or Options.events of it
	id    *cm.ID
	pd    *verbsio.PD
	cq    *verbsio.CQ
	qp    *verbsio.QP
	buf   []byte
	mr    *verbsio.MR
	wcs   [4]verbsio.WC
	recvs int  // receive completions not yet taken
	sends int  // send completions not yet taken
	gone  bool // the connection's DISCONNECTED came
}

// Buffer layout: recv info, send info, then two message buffers (the
// client's start and sink; the server's one rdma buffer).
const (
	recvOff  = 0
	sendOff  = 64
	startOff = 128
)

func (s *side) rdmaOff() int { return startOff + s.o.Size + 64 }

func newSide(dev *verbsio.Context, o Options) (*side, error) {
	s := &side{o: o, dev: dev, cmdev: o.Device, ch: cm.NewEventChannel()}
	s.ev = s.ch
	if o.events != nil {
		s.ev = o.events(s.ch)
	}
	var err error
	if s.cmdev == nil {
		if s.cmdev, err = cm.Open(dev, o.CM); err != nil {
			return nil, fmt.Errorf("rping: start the connection manager of %s: %w", dev.Device.Name, err)
		}
		s.owns = true
	}
	if s.pd, err = dev.AllocPD(); err == nil {
		s.cq, err = dev.CreateCQ(2 * 16)
	}
	if err == nil {
		s.buf, err = dev.Alloc(s.rdmaOff() + MaxSize + 1)
	}
	if err == nil {
		s.mr, err = s.pd.RegMR(s.buf, verbsio.AccessLocalWrite|verbsio.AccessRemoteRead|verbsio.AccessRemoteWrite)
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *side) qpAttr() verbsio.QPInitAttr {
	return verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: verbsio.QPCap{MaxSendWR: 16, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}
}

func (s *side) connParam() *cm.ConnParam {
	p := &cm.ConnParam{ResponderResources: resources, InitiatorDepth: resources, RetryCount: 7, RNRRetryCount: 7}
	if s.o.SelfQP {
		p.QPNum = s.qp.QPN()
	}
	return p
}

// createQP creates the side's QP: through the CM on s.id, or with -q
// (SelfQP) with verbs, moved to INIT with the CM's attributes (the port,
// so that receives can be posted).
func (s *side) createQP() error {
	var err error
	if !s.o.SelfQP {
		s.qp, err = s.id.CreateQP(s.pd, s.qpAttr())
		return err
	}
	if s.qp, err = s.pd.CreateQP(s.qpAttr()); err != nil {
		return fmt.Errorf("rping: create the QP (-q): %w", err)
	}
	a, m, err := s.id.InitQPAttr(verbsio.QPStateInit)
	if err == nil {
		err = s.qp.Modify(&a, m)
	}
	if err != nil {
		return fmt.Errorf("rping: move the QP to INIT (-q): %w", err)
	}
	return nil
}

// selfModify moves a -q QP through INIT, RTR and RTS with the attributes
// the CM gives for each (rdma_init_qp_attr).
func (s *side) selfModify() error {
	for _, st := range []verbsio.QPState{verbsio.QPStateInit, verbsio.QPStateRTR, verbsio.QPStateRTS} {
		a, m, err := s.id.InitQPAttr(st)
		if err == nil {
			err = s.qp.Modify(&a, m)
		}
		if err != nil {
			return fmt.Errorf("rping: move the QP to %s with the CM's attributes (-q): %w", st, err)
		}
	}
	return nil
}

// disconnect sends the DREQ; a -q QP is moved to ERR first, as the CM
// does with its own.
func (s *side) disconnect() {
	if s.o.SelfQP && s.qp != nil {
		_ = s.qp.Modify(&verbsio.QPAttr{State: verbsio.QPStateErr}, verbsio.QPAttrState)
	}
	_ = s.id.Disconnect()
}

func (s *side) postRecv() error {
	sge := [1]verbsio.SGE{s.mr.SGE(recvOff, infoSize)}
	_, err := s.qp.PostRecv([]verbsio.RecvWR{{ID: 1, SGL: sge[:]}})
	return err
}

func (s *side) post(wr verbsio.SendWR) error {
	wr.Flags |= verbsio.SendSignaled
	_, err := s.qp.PostSend([]verbsio.SendWR{wr})
	if err == nil {
		s.sends++
	}
	return err
}

// sendInfo SENDs the address, rkey and size of the buffer at off.
func (s *side) sendInfo(off, size int) error {
	b := s.buf[sendOff : sendOff+infoSize]
	if off < 0 {
		clear(b) // the server's "go ahead" is its send buffer, never filled
	} else {
		binary.BigEndian.PutUint64(b[0:], s.mr.Addr()+uint64(off))
		binary.BigEndian.PutUint32(b[8:], s.mr.RKey())
		binary.BigEndian.PutUint32(b[12:], uint32(size))
	}
	return s.post(verbsio.SendWR{ID: 2, Opcode: verbsio.OpSend, SGL: []verbsio.SGE{s.mr.SGE(sendOff, infoSize)}})
}

// errDisconnected: the peer disconnected (its DREQ, or the QP flushed
// after it).
var errDisconnected = errors.New("the peer disconnected")

// await polls until every send posted so far completed and, with recv,
// one receive came; it returns the receive's 16 bytes (reposting the
// receive).
func (s *side) await(recv bool) (addr uint64, rkey, size uint32, err error) {
	deadline := time.Now().Add(s.o.Timeout)
	for s.sends > 0 || recv && s.recvs == 0 {
		n, err := s.cq.Poll(s.wcs[:])
		if err != nil {
			return 0, 0, 0, err
		}
		for _, wc := range s.wcs[:n] {
			if wc.Status != verbsio.StatusSuccess {
				if s.disconnected() || wc.Status == verbsio.StatusWRFlushErr && s.disconnectedWithin(flushGrace) {
					return 0, 0, 0, errDisconnected
				}
				if wc.Status == verbsio.StatusWRFlushErr {
					return 0, 0, 0, fmt.Errorf("rping: a work request was flushed (%s) and the connection's DISCONNECTED did not come within %v: the QP went to the error state while the peer had not disconnected", wc.Status, flushGrace)
				}
				return 0, 0, 0, fmt.Errorf("rping: a work request completed with %s", wc.Status)
			}
			if wc.Opcode.IsRecv() {
				if wc.ByteLen != infoSize {
					return 0, 0, 0, fmt.Errorf("rping: received %d bytes, want %d (rping's struct rping_rdma_info): is the peer rping?", wc.ByteLen, infoSize)
				}
				s.recvs++
			} else {
				s.sends--
			}
		}
		if n > 0 {
			deadline = time.Now().Add(s.o.Timeout)
			continue
		}
		if s.disconnected() {
			return 0, 0, 0, errDisconnected
		}
		if time.Now().After(deadline) {
			return 0, 0, 0, fmt.Errorf("rping: no progress from the peer for %v", s.o.Timeout)
		}
		time.Sleep(20 * time.Microsecond)
	}
	if !recv {
		return 0, 0, 0, nil
	}
	s.recvs--
	b := s.buf[recvOff : recvOff+infoSize]
	addr, rkey, size = binary.BigEndian.Uint64(b), binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])
	return addr, rkey, size, s.postRecv()
}

// disconnected reports whether the connection's DISCONNECTED came.
func (s *side) disconnected() bool {
	for !s.gone {
		ev, err := s.ev.GetEvent(0)
		if err != nil {
			return false
		}
		s.gone = ev.Type == cm.EventDisconnected && ev.ID == s.id
	}
	return true
}

// flushGrace is how long a flushed work request waits for the
// connection's DISCONNECTED: the peer's DREQ moves the QP to the error
// state, which flushes the posted receive, and the CM event can come
// after the flushed completion (seen against rdma-core's rping client on
// rxe0: the client's three pings done, its disconnect, then the server's
// posted receive flushed before the event).
const flushGrace = 2 * time.Second

// disconnectedWithin waits up to d for the connection's DISCONNECTED.
func (s *side) disconnectedWithin(d time.Duration) bool {
	end := time.Now().Add(d)
	for !s.gone {
		left := time.Until(end)
		if left <= 0 {
			return false
		}
		ev, err := s.ev.GetEvent(left)
		if err != nil {
			return false
		}
		s.gone = ev.Type == cm.EventDisconnected && ev.ID == s.id
	}
	return true
}

func (s *side) close() error {
	var errs []error
	if s.id != nil {
		errs = append(errs, s.id.Destroy(), s.id.DestroyQP())
	}
	if s.o.SelfQP && s.qp != nil {
		errs = append(errs, s.qp.Destroy())
	}
	if s.mr != nil {
		errs = append(errs, s.mr.Dereg())
	}
	if s.buf != nil {
		errs = append(errs, s.dev.Free(s.buf))
	}
	if s.cq != nil {
		errs = append(errs, s.cq.Destroy())
	}
	if s.pd != nil {
		errs = append(errs, s.pd.Dealloc())
	}
	s.ch.Close()
	if s.owns {
		errs = append(errs, s.cmdev.Close())
	}
	return errors.Join(errs...)
}

// cString is b up to its first NUL.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// Fill writes ping number n's message into b, as rping's client does:
// "rdma-ping-N: " then letters from 'A'+n%58 cycling through 'A'..'z',
// and a NUL in the last byte.
func Fill(b []byte, n int) {
	m := copy(b, fmt.Sprintf("rdma-ping-%d: ", n))
	c := byte(65 + n%58)
	for i := m; i < len(b); i++ {
		b[i] = c
		if c++; c > 122 {
			c = 65
		}
	}
	b[len(b)-1] = 0
}

// Server accepts one rping client on addr and serves it until it
// disconnects (rping -s). It returns how many pings it served.
func Server(dev *verbsio.Context, addr netip.AddrPort, o Options, listening func(netip.AddrPort)) (int, error) {
	if err := o.check(); err != nil {
		return 0, err
	}
	s, err := newSide(dev, o)
	if err != nil {
		return 0, err
	}
	defer s.close()
	l, err := s.ch.CreateID(nil, cm.PortSpaceTCP, verbsio.QPTypeRC)
	if err != nil {
		return 0, err
	}
	defer l.Destroy()
	if err := l.BindAddr(addr); err != nil {
		return 0, fmt.Errorf("rping: bind %s: %w", addr, err)
	}
	if err := l.Listen(3); err != nil {
		return 0, fmt.Errorf("rping: listen on %s: %w", addr, err)
	}
	if listening != nil {
		listening(l.LocalAddr())
	}
	var ev *cm.Event
	for ev == nil || ev.Type != cm.EventConnectRequest {
		if ev, err = s.ev.GetEvent(o.Timeout); err != nil {
			return 0, fmt.Errorf("rping: no client within %v: %w", o.Timeout, err)
		}
	}
	s.id = ev.ID
	if err := s.createQP(); err != nil {
		return 0, err
	}
	if err := s.postRecv(); err != nil {
		return 0, err
	}
	if o.SelfQP {
		if err := s.selfModify(); err != nil {
			_ = s.id.Reject(nil)
			return 0, err
		}
	}
	if err := s.id.Accept(s.connParam()); err != nil {
		return 0, fmt.Errorf("rping: accept: %w", err)
	}
	served := 0
	for ; ; served++ {
		raddr, rkey, size, err := s.await(true)
		if errors.Is(err, errDisconnected) {
			break
		}
		if err != nil {
			return served, err
		}
		if size == 0 || size > MaxSize {
			return served, fmt.Errorf("rping: the client announced a %d-byte buffer; rping's are at most %d", size, MaxSize)
		}
		off := s.rdmaOff()
		if err := s.post(verbsio.SendWR{ID: 3, Opcode: verbsio.OpRDMARead, SGL: []verbsio.SGE{s.mr.SGE(off, int(size))},
			Remote: verbsio.RemoteAddr{Addr: raddr, RKey: rkey}}); err != nil {
			return served, err
		}
		if _, _, _, err := s.await(false); err != nil {
			return served, err
		}
		msg := cString(s.buf[off : off+int(size)])
		if o.Verbose {
			fmt.Fprintf(o.Out, "server ping data: %s\n", msg)
		}
		if err := s.sendInfo(-1, 0); err != nil {
			return served, err
		}
		raddr, rkey, _, err = s.await(true)
		if err != nil {
			return served, err
		}
		if err := s.post(verbsio.SendWR{ID: 4, Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{s.mr.SGE(off, len(msg)+1)},
			Remote: verbsio.RemoteAddr{Addr: raddr, RKey: rkey}}); err != nil {
			return served, err
		}
		if err := s.sendInfo(-1, 0); err != nil {
			return served, err
		}
		if _, _, _, err := s.await(false); err != nil && !errors.Is(err, errDisconnected) {
			return served, err
		}
	}
	s.disconnect() // the DREP
	return served, nil
}

// Client connects to an rping server at dst (from src, if valid) and
// pings it o.Count times (rping -c). It returns how many pings came back.
func Client(dev *verbsio.Context, src netip.Addr, dst netip.AddrPort, o Options) (int, error) {
	if err := o.check(); err != nil {
		return 0, err
	}
	if o.Count <= 0 {
		return 0, errors.New("rping: give a count of pings (-C)")
	}
	s, err := newSide(dev, o)
	if err != nil {
		return 0, err
	}
	defer s.close()
	if s.id, err = s.ch.CreateID(nil, cm.PortSpaceTCP, verbsio.QPTypeRC); err != nil {
		return 0, err
	}
	if err := s.connect(src, dst); err != nil {
		return 0, err
	}
	start, sink := startOff, s.rdmaOff()
	done := 0
	for ; done < o.Count; done++ {
		Fill(s.buf[start:start+o.Size], done)
		clear(s.buf[sink : sink+o.Size])
		if err := s.sendInfo(start, o.Size); err != nil {
			return done, err
		}
		if _, _, _, err := s.await(true); err != nil {
			return done, err
		}
		if err := s.sendInfo(sink, o.Size); err != nil {
			return done, err
		}
		if _, _, _, err := s.await(true); err != nil {
			return done, err
		}
		if o.Validate && !bytes.Equal(s.buf[start:start+o.Size], s.buf[sink:sink+o.Size]) {
			return done, fmt.Errorf("rping: data mismatch in ping %d: sent %q, got back %q", done, cString(s.buf[start:start+o.Size]), cString(s.buf[sink:sink+o.Size]))
		}
		if o.Verbose {
			fmt.Fprintf(o.Out, "ping data: %s\n", cString(s.buf[sink:sink+o.Size]))
		}
	}
	s.disconnect()
	deadline := time.Now().Add(o.Timeout)
	for time.Now().Before(deadline) && !s.disconnected() {
		time.Sleep(time.Millisecond)
	}
	return done, nil
}

func (s *side) connect(src netip.Addr, dst netip.AddrPort) error {
	wait := func(want cm.EventType) error {
		ev, err := s.ev.GetEvent(s.o.Timeout)
		if err != nil {
			return fmt.Errorf("rping: waiting for %s: %w", want, err)
		}
		if ev.Type != want {
			if ev.Type == cm.EventRejected && ev.Status == 8 {
				return fmt.Errorf("rping: %s refused the connection (REJ reason 8): no rping server listens on port %d there", dst.Addr(), dst.Port())
			}
			return fmt.Errorf("rping: connect to %s: %s, want %s", dst, ev, want)
		}
		return nil
	}
	if err := s.id.ResolveAddr(src, dst, 2*time.Second); err != nil {
		return err
	}
	if err := wait(cm.EventAddrResolved); err != nil {
		return err
	}
	if err := s.id.ResolveRoute(2 * time.Second); err != nil {
		return err
	}
	if err := wait(cm.EventRouteResolved); err != nil {
		return err
	}
	if err := s.createQP(); err != nil {
		return err
	}
	if err := s.postRecv(); err != nil {
		return err
	}
	if err := s.id.Connect(s.connParam()); err != nil {
		return err
	}
	if !s.o.SelfQP {
		return wait(cm.EventEstablished)
	}
	// -q: the CM has no QP to move; this side does, then sends the RTU.
	if err := wait(cm.EventConnectResponse); err != nil {
		return err
	}
	if err := s.selfModify(); err != nil {
		_ = s.id.Reject(nil)
		return err
	}
	if err := s.id.Establish(); err != nil {
		return fmt.Errorf("rping: establish (-q): %w", err)
	}
	return nil
}
