// Package comparetest runs both sides of a comparison (tests/paths,
// tests/dm) in one process, for their unit tests: a server and a client
// goroutine, each with its own context on the built-in shm0 device, each
// run on a connection of its own, as rperf paths and rperf dm-lat
// connect: the client dials again for every run, the server listens
// again (paths.Relisten).
package comparetest

import (
	"context"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/paths"
	"github.com/rperf/rperf/verbsio"
	_ "github.com/rperf/rperf/verbsio/soft" // registers shm0
)

// Side runs one side of a comparison on dev, connecting for each run
// with connect: paths.Run or dm.Run with its configuration.
type Side func(ctx context.Context, dev *verbsio.Context, connect paths.Connector) ([]reports.Result, error)

// Run runs server and client against each other within a minute and
// returns each side's records; the test ends if either side fails.
func Run(tb testing.TB, server, client Side) (srv, cli []reports.Result) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := oob.Options{IOTimeout: 30 * time.Second, DialTimeout: 5 * time.Second, RetryInterval: time.Millisecond}
	ln, err := oob.Listen(ctx, "127.0.0.1:0", opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	side := func(run Side, connect paths.Connector) ([]reports.Result, error) {
		dev, err := verbsio.Open("shm0")
		if err != nil {
			return nil, err
		}
		defer dev.Close()
		return run(ctx, dev, connect)
	}
	done := make(chan error, 1)
	go func() {
		var err error
		srv, err = side(server, paths.Relisten(ln, opts, 10*time.Second, 10*time.Second))
		done <- err
	}()
	addr := ln.Addr().String()
	cli, err = side(client, func(ctx context.Context) (*oob.Conn, error) { return oob.Dial(ctx, addr, opts) })
	if serr := <-done; err != nil || serr != nil {
		tb.Fatalf("client: %v; server: %v", err, serr)
	}
	return srv, cli
}
