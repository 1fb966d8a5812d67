package rperfcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/paths"
)

// Waits that are not about a silent peer mid-run.
const (
	// acceptWaitFactor times --timeout is how long a server waits for its
	// client to connect.
	acceptWaitFactor = 10
	// loopbackAcceptWait is how long the --loopback server waits for the
	// client, its own parent.
	loopbackAcceptWait = 30 * time.Second
	// maxDialTimeout caps how long a client retries a server that refuses
	// connections (not listening yet).
	maxDialTimeout = 10 * time.Second
)

// connect listens and accepts one client (no host) or dials the server.
func connect(ctx context.Context, o *options, out io.Writer, listening func(int)) (*oob.Conn, error) {
	opts := oob.Options{IOTimeout: o.timeout, DialTimeout: min(o.timeout, maxDialTimeout)}
	if o.host != "" {
		return oob.Dial(ctx, net.JoinHostPort(o.host, strconv.Itoa(o.port)), opts)
	}
	ln, wait, err := listen(ctx, o, opts, out, listening)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return ln.Accept(actx)
}

// connector returns how each run of a comparison connects: a client dials
// the server again for every run, a server listens again after each one.
func connector(ctx context.Context, o *options, out io.Writer, listening func(int)) (paths.Connector, func(), error) {
	opts := oob.Options{IOTimeout: o.timeout, DialTimeout: min(o.timeout, maxDialTimeout), RetryInterval: time.Millisecond}
	if o.host != "" {
		addr := net.JoinHostPort(o.host, strconv.Itoa(o.port))
		return func(ctx context.Context) (*oob.Conn, error) { return oob.Dial(ctx, addr, opts) }, func() {}, nil
	}
	ln, wait, err := listen(ctx, o, opts, out, listening)
	if err != nil {
		return nil, nil, err
	}
	// The first client may take long to come; later runs reconnect at once.
	return paths.Relisten(ln, opts, wait, o.timeout), func() { ln.Close() }, nil
}

// listen listens for the client, says where, and returns how long to wait
// for it: --timeout times acceptWaitFactor, or for --loopback's server
// (on 127.0.0.1) loopbackAcceptWait.
func listen(ctx context.Context, o *options, opts oob.Options, out io.Writer, listening func(int)) (*oob.Listener, time.Duration, error) {
	host, wait := "", time.Duration(acceptWaitFactor)*o.timeout
	if o.loopbackServer {
		host, wait = "127.0.0.1", loopbackAcceptWait
	}
	ln, err := oob.Listen(ctx, net.JoinHostPort(host, strconv.Itoa(o.port)), opts)
	if err != nil {
		return nil, 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	fmt.Fprintf(out, "\n Waiting for a client on TCP port %d (for up to %v) ...\n", port, wait)
	if listening != nil {
		listening(port)
	}
	return ln, wait, nil
}

// runError classifies a failed run for the exit code.
func runError(err error) error {
	if errors.Is(err, oob.ErrIncompatible) {
		return &cli.ExitError{Code: cli.ExitUsage, Msg: err.Error()}
	}
	return err
}
