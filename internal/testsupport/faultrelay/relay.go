package faultrelay

import (
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Config configures a Relay.
type Config struct {
	// ListenA and ListenB are the local addresses of the sockets facing A
	// and B; empty means "127.0.0.1:0". Use a concrete address (not
	// 0.0.0.0 or ::), since it is what the endpoints are told to send to.
	// The relay gives its sockets (ConnA and ConnB too) 4 MiB buffers (beyond
	// net.core.rmem_max when it runs as root), so bursts are not lost
	// while its goroutines wait for a CPU.
	ListenA, ListenB string
	// ConnA and ConnB, when set, are sockets to use instead of listening on
	// ListenA and ListenB: for example sockets opened in two network
	// namespaces with netns.ListenUDP. The relay closes them.
	ConnA, ConnB *net.UDPConn
	// PeerA and PeerB are the endpoints' addresses. A zero value is
	// learned: the source of the latest datagram on that side's socket.
	// Datagrams with nowhere to go yet are counted as Discarded.
	PeerA, PeerB netip.AddrPort

	// AtoB and BtoA are the faults of each direction.
	AtoB, BtoA Faults
	// Seed fixes the random decisions of both directions.
	Seed uint64
	// MaxDatagrams, when positive, caps the datagrams accepted, both
	// directions together; later ones are read and counted as Discarded.
	MaxDatagrams uint64
	// MaxDuration bounds the relay's life: it closes itself when it
	// elapses. Zero means DefaultMaxDuration.
	MaxDuration time.Duration
}

// Relay is a fault-injecting UDP relay between endpoints A and B: A sends to
// AddrA as if it were B, and B sends to AddrB as if it were A.
type Relay struct {
	runner
	conns [2]*net.UDPConn                   // [AtoB]: faces A, [BtoA]: faces B
	peers [2]atomic.Pointer[netip.AddrPort] // [AtoB]: A's address, [BtoA]: B's
}

// New starts a relay.
func New(cfg Config) (*Relay, error) {
	if err := validateFaults("new", &cfg.AtoB, &cfg.BtoA, cfg.MaxDuration); err != nil {
		closeConns(cfg.ConnA, cfg.ConnB)
		return nil, err
	}
	r := &Relay{}
	r.max = cfg.MaxDatagrams
	var err error
	if r.conns[AtoB], err = listen(cfg.ConnA, cfg.ListenA); err != nil {
		closeConns(cfg.ConnB)
		return nil, fmt.Errorf("faultrelay: new: socket facing A: %w", err)
	}
	if r.conns[BtoA], err = listen(cfg.ConnB, cfg.ListenB); err != nil {
		closeConns(r.conns[AtoB])
		return nil, fmt.Errorf("faultrelay: new: socket facing B: %w", err)
	}
	r.closers = append(r.closers, r.conns[AtoB], r.conns[BtoA])
	for d, peer := range []netip.AddrPort{cfg.PeerA, cfg.PeerB} {
		if peer.IsValid() {
			r.peers[d].Store(&peer)
		}
	}
	// Direction A->B reads from the socket facing A and sends from the one
	// facing B to B, and the other way round.
	for d, f := range []Faults{cfg.AtoB, cfg.BtoA} {
		d := Direction(d)
		out, to := r.conns[1-d], &r.peers[1-d]
		r.pipes[d] = newPipe(cfg.Seed, d, f, func(b []byte) error {
			peer := to.Load()
			if peer == nil {
				return errNoPeer
			}
			_, err := out.WriteToUDPAddrPort(b, *peer)
			return err
		})
	}
	r.start(cfg.MaxDuration, r.serve)
	return r, nil
}

func listen(conn *net.UDPConn, addr string) (*net.UDPConn, error) {
	if conn != nil {
		growBuffers(conn)
		return conn, nil
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	c, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	growBuffers(c)
	return c, nil
}

// socketBuffer is the receive and send buffer size the relay asks for, so
// that it adds no loss of its own when its goroutines are descheduled.
const socketBuffer = 4 << 20

// growBuffers enlarges c's buffers to socketBuffer: beyond the
// net.core.[rw]mem_max limits when the process may (CAP_NET_ADMIN), within
// them otherwise.
func growBuffers(c *net.UDPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	var rerr, werr error
	rc.Control(func(fd uintptr) {
		rerr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, socketBuffer)
		werr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, socketBuffer)
	})
	if rerr != nil {
		c.SetReadBuffer(socketBuffer)
	}
	if werr != nil {
		c.SetWriteBuffer(socketBuffer)
	}
}

func closeConns(cs ...*net.UDPConn) {
	for _, c := range cs {
		if c != nil {
			c.Close()
		}
	}
}

// serve runs direction d until the relay closes.
func (r *Relay) serve(d Direction) {
	in, p, from := r.conns[d], r.pipes[d], &r.peers[d]
	learn := from.Load() == nil
	buf := make([]byte, 1<<16)
	r.loop(p, in.SetReadDeadline, func() error {
		n, src, err := in.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		now := time.Now()
		if learn {
			if cur := from.Load(); cur == nil || *cur != src {
				from.Store(&src)
			}
		}
		if r.admit(p) {
			p.ingest(now, buf[:n], 0, n, classFault)
		}
		p.flush(now)
		return nil
	})
}

// AddrA returns the address of the socket facing A: where A sends
// datagrams meant for B.
func (r *Relay) AddrA() netip.AddrPort { return r.conns[AtoB].LocalAddr().(*net.UDPAddr).AddrPort() }

// AddrB returns the address of the socket facing B: where B sends
// datagrams meant for A.
func (r *Relay) AddrB() netip.AddrPort { return r.conns[BtoA].LocalAddr().(*net.UDPAddr).AddrPort() }

// SetFaults replaces the faults of direction d from the next datagram on;
// the MaxFaults budget starts afresh and the random stream continues.
func (r *Relay) SetFaults(d Direction, f Faults) error { return r.setFaults("set faults", d, f) }

// Stats returns a snapshot of both directions' counters.
func (r *Relay) Stats() Stats { return r.stats() }

// Done is closed when the relay has stopped, by Close or by MaxDuration.
func (r *Relay) Done() <-chan struct{} { return r.done }

// Close stops the relay, closes its sockets and waits for its goroutines.
// Datagrams still delayed or held are dropped. It is safe to call more than
// once.
func (r *Relay) Close() error { return r.close() }
