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

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/verbsio"
	_ "github.com/rperf/rperf/verbsio/soft" // registers shm0
)

// Side runs one side of a test over an open device and connection.
type Side func(ctx context.Context, dev *verbsio.Context, conn *oob.Conn) error

// Shm0 opens the built-in shm0 device, on which Run runs both sides.
func Shm0() (*verbsio.Context, error) { return verbsio.Open("shm0") }

// UDPLoopback opens udp_lo on a free UDP port, so that both sides share
// the host.
func UDPLoopback() (*verbsio.Context, error) {
	return verbsio.OpenWith("udp_lo", verbsio.OpenOptions{UDPPort: -1})
}

// Devices are the devices the tests run both sides on, by name.
func Devices() map[string]func() (*verbsio.Context, error) {
	return map[string]func() (*verbsio.Context, error){"shm0": Shm0, "udp_lo": UDPLoopback}
}

// UDPLoopbackAttr returns udp_lo's device attributes. The built-in
// engine's udp fabric runs wherever rperf does (Linux, the loopback device
// up with 127.0.0.1), so a udp_lo that does not open fails the test.
func UDPLoopbackAttr(tb testing.TB) verbsio.DeviceAttr {
	tb.Helper()
	dev, err := UDPLoopback()
	if err != nil {
		tb.Fatalf("open udp_lo (the udp fabric over the loopback device): %v", err)
	}
	defer dev.Close()
	attr, err := dev.QueryDevice()
	if err != nil {
		tb.Fatal(err)
	}
	return attr
}

// Run runs server and client against each other within timeout and
// returns their errors.
func Run(tb testing.TB, timeout time.Duration, server, client Side) (serverErr, clientErr error) {
	tb.Helper()
	return RunOn(tb, timeout, Shm0, server, client)
}

// RunOn is Run with each side's device opened by open, e.g. UDPLoopback.
func RunOn(tb testing.TB, timeout time.Duration, open func() (*verbsio.Context, error), server, client Side) (serverErr, clientErr error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	opts := oob.Options{IOTimeout: timeout, DialTimeout: 5 * time.Second}
	ln, err := oob.Listen(ctx, "127.0.0.1:0", opts)
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	srvDone := make(chan error, 1)
	go func() {
		srvDone <- side(ctx, open, func(ctx context.Context) (*oob.Conn, error) { return ln.Accept(ctx) }, server)
	}()
	clientErr = side(ctx, open, func(ctx context.Context) (*oob.Conn, error) { return oob.Dial(ctx, addr, opts) }, client)
	select {
	case serverErr = <-srvDone:
	case <-time.After(timeout):
		serverErr = errors.New("pairtest: server did not return")
	}
	return serverErr, clientErr
}

func side(ctx context.Context, open func() (*verbsio.Context, error), connect func(context.Context) (*oob.Conn, error), run Side) error {
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

// Timeout bounds each test run by Results.
const Timeout = 60 * time.Second

// Runner is a test family's Run: latency.Run, bw.Run, pacing.Run.
type Runner[C any] func(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, cfg C) ([]reports.Result, error)

// Results runs run on both sides, on devices opened by open, with srvCfg
// on the server and cliCfg on the client, and returns what each side
// returned.
func Results[C any](tb testing.TB, open func() (*verbsio.Context, error), run Runner[C], srvCfg, cliCfg C) (srv, cli []reports.Result, srvErr, cliErr error) {
	tb.Helper()
	srvErr, cliErr = RunOn(tb, Timeout, open,
		func(ctx context.Context, dev *verbsio.Context, conn *oob.Conn) error {
			var err error
			srv, err = run(ctx, dev, conn, srvCfg)
			return err
		},
		func(ctx context.Context, dev *verbsio.Context, conn *oob.Conn) error {
			var err error
			cli, err = run(ctx, dev, conn, cliCfg)
			return err
		})
	return srv, cli, srvErr, cliErr
}

// MustShm0 is MustResults with cfg on both sides over shm0.
func MustShm0[C any](tb testing.TB, run Runner[C], cfg C) (srv, cli []reports.Result) {
	tb.Helper()
	return MustResults(tb, Shm0, run, cfg, cfg)
}

// QPTimeout is the ACK timeout exponent the tests that run both sides on
// udp_lo use: 16, 268 ms a try and 2.1 s for the eight tries. Both sides
// are one process whose engines progress only when their loops poll, and
// a loaded machine keeps a thread off the CPUs for 0.3-0.4 s at a time;
// with the default 14 (537 ms in all) both sides of a bidirectional
// write_bw ran out of retries under -race at load 18.
const QPTimeout = 16

// StallWindow is the sample window of the duration-mode tests that check
// what a run carries (its stop message, its validation), not how much:
// longer than the CPU stalls of a loaded machine (a spinning probe lost
// its CPU for 292 and 407 ms within 8 s at load 10 on the two-CPU
// development host), because a window in which nothing completed is an
// error, rightly.
const StallWindow = 800 * time.Millisecond

// MustResults is Results that ends the test if either side fails.
func MustResults[C any](tb testing.TB, open func() (*verbsio.Context, error), run Runner[C], srvCfg, cliCfg C) (srv, cli []reports.Result) {
	tb.Helper()
	srv, cli, srvErr, cliErr := Results(tb, open, run, srvCfg, cliCfg)
	if srvErr != nil || cliErr != nil {
		tb.Fatalf("server: %v; client: %v", srvErr, cliErr)
	}
	return srv, cli
}
