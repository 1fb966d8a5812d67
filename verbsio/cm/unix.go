package cm

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// UnixMADPort carries MADs between the CMs of processes on one host, for
// fabrics without a wire of their own (shm0), over Unix datagram sockets in
// the abstract namespace (per network namespace, gone with the process):
//
//   - each GID of the port has a socket "@rperf-cm/gid/<32 hex digits>";
//     MADs to a GID go there, and a MAD's sender is the socket it came from;
//   - a port that listens on a service ID also binds
//     "@rperf-cm/svc/<16 hex digits>": a REQ or SIDR_REQ sent to a loopback
//     address (127.0.0.0/8, ::1) goes to the process listening on its
//     service, as a TCP connection to localhost goes to the process bound to
//     its port. A second listener on the same service gets EADDRINUSE.
//
// The active side learns the passive side's GID from where the REP comes
// from. Use it with Options.Addrs set to the loopback addresses, so that
// rdma_cm identifiers resolve 127.0.0.1 to the device.
type UnixMADPort struct {
	hmu      sync.Mutex // the handler: held while it runs
	mu       sync.Mutex
	gids     []verbsio.GID
	conns    map[verbsio.GID]*net.UnixConn
	services map[uint64]*net.UnixConn
	handler  func(to verbsio.GID, from verbsio.MADAddr, mad []byte)
	wg       sync.WaitGroup
	closed   bool
	dropped  uint64
}

const (
	unixGIDPrefix = "@rperf-cm/gid/"
	unixSvcPrefix = "@rperf-cm/svc/"
)

func unixGIDName(g verbsio.GID) string { return unixGIDPrefix + hex.EncodeToString(g[:]) }

// NewUnixMADPort binds the sockets of gids (one port: a context's GID
// table). A GID another process's port owns is EADDRINUSE.
func NewUnixMADPort(gids ...verbsio.GID) (*UnixMADPort, error) {
	if len(gids) == 0 {
		return nil, fmt.Errorf("cm unix MAD port: no GID: %w", unix.EINVAL)
	}
	p := &UnixMADPort{gids: gids, conns: map[verbsio.GID]*net.UnixConn{}, services: map[uint64]*net.UnixConn{}}
	for _, g := range gids {
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: unixGIDName(g), Net: "unixgram"})
		if err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("cm unix MAD port for GID %v: %w", g, err)
		}
		p.conns[g] = c
		p.wg.Add(1)
		go p.read(c, g)
	}
	return p, nil
}

func (p *UnixMADPort) read(c *net.UnixConn, to verbsio.GID) {
	defer p.wg.Done()
	buf := make([]byte, verbsio.MADSize+1)
	for {
		n, from, err := c.ReadFromUnix(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		var src verbsio.MADAddr
		if from == nil || !strings.HasPrefix(from.Name, unixGIDPrefix) {
			p.drop()
			continue
		}
		b, err := hex.DecodeString(from.Name[len(unixGIDPrefix):])
		if err != nil || len(b) != len(src.GID) {
			p.drop()
			continue
		}
		copy(src.GID[:], b)
		p.hmu.Lock()
		if h := p.handler; h != nil {
			h(to, src, buf[:n])
		}
		p.hmu.Unlock()
	}
}

func (p *UnixMADPort) drop() {
	p.mu.Lock()
	p.dropped++
	p.mu.Unlock()
}

// Dropped returns how many MADs were dropped: from senders that are not
// CM ports, to nobody, or to a loopback address with no service listener.
func (p *UnixMADPort) Dropped() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// ListenService binds the service socket of sid: loopback REQs and
// SIDR_REQs for it come here. EADDRINUSE if another port listens on it.
func (p *UnixMADPort) ListenService(sid uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.services[sid] != nil {
		return nil
	}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: fmt.Sprintf("%s%016x", unixSvcPrefix, sid), Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("cm: service ID %#016x has a listener in another process: %w", sid, err)
	}
	p.services[sid] = c
	p.wg.Add(1)
	go p.read(c, p.gids[0])
	return nil
}

// UnlistenService releases the service socket of sid.
func (p *UnixMADPort) UnlistenService(sid uint64) {
	p.mu.Lock()
	c := p.services[sid]
	delete(p.services, sid)
	p.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

func isLoopbackGID(g verbsio.GID) bool {
	return g.Addr().IsLoopback()
}

// SendMAD sends mad from the socket of from to the socket of to.GID, or,
// for a request to a loopback address, to its service's socket.
func (p *UnixMADPort) SendMAD(from verbsio.GID, to verbsio.MADAddr, b []byte) error {
	if len(b) != verbsio.MADSize {
		return fmt.Errorf("cm unix MAD port: a MAD is %d bytes, not %d: %w", verbsio.MADSize, len(b), unix.EINVAL)
	}
	p.mu.Lock()
	c := p.conns[from]
	if c == nil {
		c = p.conns[p.gids[0]]
	}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return fmt.Errorf("cm unix MAD port: closed: %w", unix.EBADF)
	}
	name := unixGIDName(to.GID)
	if isLoopbackGID(to.GID) {
		switch mad.AttrID(binary.BigEndian.Uint16(b[16:])) {
		case mad.AttrREQ, mad.AttrSIDRREQ:
			// both carry the service ID at byte 8 of their data
			name = fmt.Sprintf("%s%016x", unixSvcPrefix, binary.BigEndian.Uint64(b[mad.HeaderSize+8:]))
		default:
			p.drop()
			return nil
		}
	}
	if _, err := c.WriteToUnix(b, &net.UnixAddr{Name: name, Net: "unixgram"}); err != nil {
		// Nobody there, or its queue is full: lost, as on a wire. A
		// request to a loopback service nobody listens on is refused, as
		// the kernel refuses it (REJ 8, SIDR_REP "unsupported").
		p.drop()
		if isLoopbackGID(to.GID) && (errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.ENOENT)) {
			if refusal := refuse(b); refusal != nil {
				go p.deliver(from, verbsio.MADAddr{GID: to.GID}, refusal)
			}
		}
	}
	return nil
}

// refuse returns the answer of a CM with no listener to req, a REQ or
// SIDR_REQ: Linux's REJ reason 8 from communication ID 0, or its SIDR_REP
// "service ID not supported"; nil if req does not decode.
func refuse(req []byte) []byte {
	m, err := mad.Decode(req)
	if err != nil {
		return nil
	}
	out := mad.MAD{Header: mad.CMHeader(mad.AttrREJ, m.TID)}
	switch r := m.Msg.(type) {
	case *mad.REQ:
		out.Msg = &mad.REJ{RemoteCommID: r.LocalCommID, MessageRejected: mad.MsgREQ, Reason: mad.RejInvalidServiceID}
	case *mad.SIDRREQ:
		out.Header.AttrID = mad.AttrSIDRREP
		out.Msg = &mad.SIDRREP{RequestID: r.RequestID, Status: mad.SIDRUnsupported, ServiceID: r.ServiceID}
	default:
		return nil
	}
	b, err := mad.Append(nil, &out)
	if err != nil {
		return nil
	}
	return b
}

// deliver hands b to the handler as a MAD from from to to.
func (p *UnixMADPort) deliver(to verbsio.GID, from verbsio.MADAddr, b []byte) {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	if p.handler != nil {
		p.handler(to, from, b)
	}
}

// SetMADHandler installs the receive handler.
func (p *UnixMADPort) SetMADHandler(h func(to verbsio.GID, from verbsio.MADAddr, mad []byte)) {
	p.hmu.Lock()
	p.handler = h
	p.hmu.Unlock()
}

// Close closes every socket and waits for the readers.
func (p *UnixMADPort) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var cs []*net.UnixConn
	for _, c := range p.conns {
		cs = append(cs, c)
	}
	for _, c := range p.services {
		cs = append(cs, c)
	}
	p.services = map[uint64]*net.UnixConn{}
	p.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
	p.wg.Wait()
	return nil
}

// serviceListener is implemented by MAD ports that route requests by
// service ID (UnixMADPort).
type serviceListener interface {
	ListenService(sid uint64) error
	UnlistenService(sid uint64)
}
