// Package pairtest runs both sides of a test in one process, for the unit
// tests of the test families: a server and a client goroutine, each with
// its own context on the built-in shm0 device (or another, see RunOn),
// connected over a TCP loopback connection on an ephemeral port.
package pairtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm"
	_ "github.com/rperf/rperf/verbsio/soft" // registers shm0
)

// Side runs one side of a test over an open device and connection.
type Side func(ctx context.Context, dev *verbsio.Context, conn *cm.Conn) error

// Run runs server and client against each other within timeout and
// returns their errors.
func Run(tb testing.TB, timeout time.Duration, server, client Side) (serverErr, clientErr error) {
	tb.Helper()
	return RunOn(tb, timeout, func() (*verbsio.Context, error) { return verbsio.Open("shm0") }, server, client)
}

// RunOn is Run with each side's device opened by open, e.g. udp_lo on a
// free UDP port:
//
//	func() (*verbsio.Context, error) { return verbsio.OpenWith("udp_lo", verbsio.OpenOptions{UDPPort: -1}) }
func RunOn(tb testing.TB, timeout time.Duration, open func() (*verbsio.Context, error), server, client Side) (serverErr, clientErr error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	opts := cm.Options{IOTimeout: timeout, DialTimeout: 5 * time.Second}
	ln, err := cm.Listen(ctx, "127.0.0.1:0", opts)
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	srvDone := make(chan error, 1)
	go func() {
		srvDone <- side(ctx, open, func(ctx context.Context) (*cm.Conn, error) { return ln.Accept(ctx) }, server)
	}()
	clientErr = side(ctx, open, func(ctx context.Context) (*cm.Conn, error) { return cm.Dial(ctx, addr, opts) }, client)
	select {
	case serverErr = <-srvDone:
	case <-time.After(timeout):
		serverErr = errors.New("pairtest: server did not return")
	}
	return serverErr, clientErr
}

func side(ctx context.Context, open func() (*verbsio.Context, error), connect func(context.Context) (*cm.Conn, error), run Side) error {
	dev, err := open()
	if err != nil {
		return err
	}
	defer dev.Close()
	conn, err := connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := run(ctx, dev, conn); err != nil {
		return fmt.Errorf("%w", err)
	}
	return nil
}
