package oob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// DefaultPort is perftest's out-of-band TCP port (DEF_PORT, -p).
const DefaultPort = 18515

// Defaults applied to zero Options fields.
const (
	// DefaultIOTimeout bounds each message read or write. perftest itself
	// waits forever; the peer may legitimately spend a while between
	// messages (memory registration, creating many QPs), hence the margin.
	DefaultIOTimeout = 60 * time.Second
	// DefaultDialTimeout bounds Dial, retries included.
	DefaultDialTimeout = 10 * time.Second
	// DefaultRetryInterval is the pause between connection attempts while
	// the server is not listening yet.
	DefaultRetryInterval = 100 * time.Millisecond
)

// Options tunes Listen and Dial and the Conn they return. The zero value
// gives perftest-compatible behaviour with the defaults above.
type Options struct {
	// IOTimeout bounds every single message send and receive. A silent or
	// vanished peer turns into an ErrTimeout or ErrPeerClosed error naming
	// the step in progress. Barrier can wait longer on request.
	IOTimeout time.Duration
	// DialTimeout bounds Dial as a whole, including the retries made while
	// the server refuses connections because it is not listening yet.
	DialTimeout time.Duration
	// RetryInterval is the pause between Dial attempts.
	RetryInterval time.Duration
	// Version overrides the advertised version string (default Version).
	// At most 15 bytes. Tests use it to play an unmodified perftest.
	Version string
	// NoVersionExchange skips the version, sys-data and MTU steps, like
	// perftest's --dont_xchg_versions; both sides must set it. The peer
	// version is then treated as 0, which, as in perftest, makes BW
	// reports carry a 4-byte iteration count.
	NoVersionExchange bool
	// SourceAddr, if set, is the local IP address Dial binds to
	// (perftest's --bind_source_ip).
	SourceAddr string
	// RDMACM says that the connection is perftest's rdma_cm channel (-R):
	// an RC QP connected through rdma_cm whose SENDs carry the messages
	// (NewConn over such a transport). The key message is then perftest's
	// binary struct pingpong_dest (BinaryKeySize bytes, or
	// BinaryKeySizeTail for peers of 6.29 and newer) instead of the text
	// form, and Finish writes no "done".
	RDMACM bool
}

func (o Options) withDefaults() Options {
	if o.IOTimeout <= 0 {
		o.IOTimeout = DefaultIOTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.Version == "" {
		o.Version = Version
	}
	return o
}

func (o Options) validate() error {
	if len(o.Version) >= VersionSize {
		return fmt.Errorf("oob: version string %q is %d bytes, at most %d fit perftest's version field", o.Version, len(o.Version), VersionSize-1)
	}
	return nil
}

// withPort returns addr with DefaultPort added when it has no port. An
// empty addr means all local addresses.
func withPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(DefaultPort))
}

// Listener waits for the one client of a server-side test.
type Listener struct {
	ln   *net.TCPListener
	addr string
	opts Options
	used bool
}

// Listen opens the server side on addr ("host:port", ":port", or "" for
// every address on DefaultPort), with SO_REUSEADDR as perftest sets it.
// ctx bounds only the listen call itself.
func Listen(ctx context.Context, addr string, opts Options) (*Listener, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	addr = withPort(addr)
	lc := net.ListenConfig{Control: setReuseAddr}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		_, port, _ := net.SplitHostPort(addr)
		switch {
		case errors.Is(err, syscall.EADDRINUSE):
			return nil, newError(fmt.Sprintf("cannot listen on %s: TCP port %s is already in use (an earlier rperf or perftest server may still be running; stop it, or choose another port with -p on both sides)", addr, port), err)
		case errors.Is(err, syscall.EACCES):
			return nil, newError(fmt.Sprintf("cannot listen on %s: permission denied (ports below 1024 need privileges; choose another port with -p on both sides)", addr), err)
		case errors.Is(err, syscall.EADDRNOTAVAIL):
			return nil, newError(fmt.Sprintf("cannot listen on %s: the address is not assigned to this host (check the bind address)", addr), err)
		}
		return nil, newError(fmt.Sprintf("cannot listen on %s: %v", addr, err), err)
	}
	return &Listener{ln: ln.(*net.TCPListener), addr: addr, opts: opts}, nil
}

// Addr returns the address the listener is bound to; with port 0 it tells
// which port the kernel chose.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Accept waits for one client, then closes the listening socket, as
// perftest does: a Listener serves exactly one connection. It waits until a
// client connects or ctx is done.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	if l.used {
		return nil, fmt.Errorf("accept on %s: this listener already served its one client", l.addr)
	}
	l.used = true
	defer l.ln.Close()
	if dl, ok := ctx.Deadline(); ok {
		l.ln.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { l.ln.SetDeadline(aLongTimeAgo) })
	defer stop()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("accept on %s: %w", l.addr, err)
	}
	nc, err := l.ln.Accept()
	if err != nil {
		cerr := ctx.Err()
		if _, ok := ctx.Deadline(); ok && cerr == nil && errors.Is(err, os.ErrDeadlineExceeded) {
			cerr = context.DeadlineExceeded // the socket deadline fired just before ctx's timer
		}
		addr := l.ln.Addr().String()
		if cerr != nil {
			_, port, _ := net.SplitHostPort(addr)
			return nil, newError(fmt.Sprintf("accept on %s: no client connected before the wait ended (%v); start the client against this host with port %s", addr, cerr, port), cerr, err)
		}
		return nil, fmt.Errorf("accept on %s: %w", addr, err)
	}
	return newConn(nc, true, l.opts), nil
}

// Close closes the listening socket if Accept has not already done so.
func (l *Listener) Close() error {
	err := l.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Dial connects to the server at addr ("host:port", or "host" for
// DefaultPort). While the server refuses the connection, because it is not
// listening yet, Dial retries every Options.RetryInterval until
// Options.DialTimeout has passed or ctx is done.
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	addr = withPort(addr)
	var d net.Dialer
	if opts.SourceAddr != "" {
		src, err := net.ResolveTCPAddr("tcp", net.JoinHostPort(opts.SourceAddr, "0"))
		if err != nil {
			return nil, fmt.Errorf("dial %s: source address %q: %w", addr, opts.SourceAddr, err)
		}
		d.LocalAddr = src
	}
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	refused := false
	var lastErr error
	for {
		nc, err := d.DialContext(dctx, "tcp", addr)
		if err == nil {
			return newConn(nc, false, opts), nil
		}
		lastErr = err
		if !errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		refused = true
		t := time.NewTimer(opts.RetryInterval)
		select {
		case <-dctx.Done():
			t.Stop()
		case <-t.C:
			continue
		}
		break
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil, fmt.Errorf("dial %s: %w", addr, ctx.Err())
	}
	if refused {
		return nil, newError(fmt.Sprintf("cannot reach rperf/perftest server at %s: connection refused (is the server running? start it first, or check -p)", addr), syscall.ECONNREFUSED, lastErr)
	}
	if dctx.Err() != nil || errors.Is(lastErr, os.ErrDeadlineExceeded) {
		return nil, newError(fmt.Sprintf("cannot reach rperf/perftest server at %s: no answer within %v (check the address, the route and any firewall between the hosts, and -p)", addr, time.Since(start).Round(time.Millisecond)), ErrTimeout, lastErr)
	}
	return nil, newError(fmt.Sprintf("cannot reach rperf/perftest server at %s: %v (check the server address and -p)", addr, lastErr), lastErr)
}

// aLongTimeAgo is a deadline in the past, used to interrupt blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// Conn is one side of an established out-of-band connection. Its methods
// must be called in the same order on both sides (see the package
// documentation). A Conn is not safe for concurrent use.
type Conn struct {
	nc     net.Conn
	server bool
	opts   Options

	handshook   bool
	peer        Peer
	peerVersion float64 // atof of the peer's version; 0 if not exchanged

	// barrier is the local Dest that barriers and the closing handshake
	// send: the first one given to ExchangeKeys, like perftest's my_dest[0].
	barrier     Dest
	haveBarrier bool
	finished    bool
}

func newConn(nc net.Conn, server bool, opts Options) *Conn {
	return &Conn{nc: nc, server: server, opts: opts}
}

// NewConn returns a Conn over a transport of the caller's: each Write of
// nc must carry one message as perftest sends it (one SEND on the rdma_cm
// channel; Options.RDMACM) and Read must return the peer's bytes in order.
// server says which side reads first in every exchange. Dial and Listen
// give Conns over TCP.
func NewConn(nc net.Conn, server bool, opts Options) (*Conn, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return newConn(nc, server, opts), nil
}

// NetConn returns the transport the Conn runs over.
func (c *Conn) NetConn() net.Conn { return c.nc }

// IsServer reports whether c is the accepting side. The client writes first
// in every exchange, the server reads first.
func (c *Conn) IsServer() bool { return c.server }

// Peer returns what Handshake learned about the peer.
func (c *Conn) Peer() Peer { return c.peer }

// LocalAddr returns the local TCP address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// RemoteAddr returns the peer's TCP address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Close closes the connection without the closing handshake; use it on
// error paths. It is safe to call more than once and after Finish.
func (c *Conn) Close() error {
	err := c.nc.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// swap runs one symmetric exchange in perftest's order: the client sends
// then receives, the server receives then sends.
func (c *Conn) swap(send, recv func() error) error {
	first, second := send, recv
	if c.server {
		first, second = recv, send
	}
	if err := first(); err != nil {
		return err
	}
	return second()
}

// swapBytes exchanges out for exactly len(in) bytes. wait bounds the
// receive; the send is bounded by Options.IOTimeout.
func (c *Conn) swapBytes(ctx context.Context, step, what string, out, in []byte, wait time.Duration) error {
	return c.swap(
		func() error { return c.send(ctx, step, what, out) },
		func() error {
			_, err := c.recv(ctx, step, what, in, wait)
			return err
		})
}

// arm sets the deadline for one message: wait from now, or ctx's deadline
// if that comes first (capped reports which), and makes ctx cancellation
// interrupt the I/O. The returned stop function must be called when the
// I/O is done.
func (c *Conn) arm(ctx context.Context, set func(time.Time) error, wait time.Duration) (stop func() bool, capped bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	dl := time.Now().Add(wait)
	if cdl, ok := ctx.Deadline(); ok && cdl.Before(dl) {
		dl, capped = cdl, true
	}
	set(dl)
	stop = context.AfterFunc(ctx, func() { set(aLongTimeAgo) })
	// A cancellation that landed before AfterFunc was registered would be
	// undone by set(dl); check again now that the hook is in place.
	if err := ctx.Err(); err != nil {
		stop()
		return nil, false, err
	}
	return stop, capped, nil
}

// send writes one message with a single Write, as perftest does.
func (c *Conn) send(ctx context.Context, step, what string, b []byte) error {
	stop, capped, err := c.arm(ctx, c.nc.SetWriteDeadline, c.opts.IOTimeout)
	if err != nil {
		return newError(fmt.Sprintf("%s: sending our %s: %v", step, what, err), err)
	}
	defer stop()
	n, err := c.nc.Write(b)
	if err != nil {
		return c.ioError(ctx, capped, step, what, true, n, len(b), c.opts.IOTimeout, err)
	}
	return nil
}

// recv reads exactly len(b) bytes, across short reads, within wait.
func (c *Conn) recv(ctx context.Context, step, what string, b []byte, wait time.Duration) (int, error) {
	stop, capped, err := c.arm(ctx, c.nc.SetReadDeadline, wait)
	if err != nil {
		return 0, newError(fmt.Sprintf("%s: waiting for the peer's %s: %v", step, what, err), err)
	}
	defer stop()
	n, err := io.ReadFull(c.nc, b)
	if err != nil {
		return n, c.ioError(ctx, capped, step, what, false, n, len(b), wait, err)
	}
	return n, nil
}

// ioError turns a failed send or receive into an error that names the step,
// says what happened to the peer and what to do about it.
// capped says the deadline was ctx's rather than wait.
func (c *Conn) ioError(ctx context.Context, capped bool, step, what string, sending bool, n, want int, wait time.Duration, err error) error {
	doing := fmt.Sprintf("waiting for the peer's %s (got %d of %d bytes)", what, n, want)
	if sending {
		doing = fmt.Sprintf("sending our %s", what)
	}
	cerr := ctx.Err()
	if cerr == nil && capped && errors.Is(err, os.ErrDeadlineExceeded) {
		cerr = context.DeadlineExceeded // the socket deadline fired just before ctx's timer
	}
	if cerr != nil {
		return newError(fmt.Sprintf("%s: %s: %v", step, doing, cerr), cerr, err)
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return newError(fmt.Sprintf("%s: the peer stayed silent for %v while we were %s; it is stalled or stopped, or runs a different test or options (check its output, or allow more time)", step, wait, doing), ErrTimeout, err)
	case peerGone(err):
		return newError(fmt.Sprintf("%s: the peer closed the connection while we were %s; it exited or failed (check its output)", step, doing), ErrPeerClosed, err)
	case errors.Is(err, net.ErrClosed):
		return newError(fmt.Sprintf("%s: %s: connection already closed", step, doing), err)
	}
	return newError(fmt.Sprintf("%s: %s: %v", step, doing, err), err)
}

// peerGone reports whether err means the peer closed or reset the socket.
func peerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED)
}
