package oob

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testCtx returns a context that bounds a whole test.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pair returns the two ends of a fresh connection over 127.0.0.1.
func pair(t *testing.T, ctx context.Context, srvOpts, cliOpts Options) (srv, cli *Conn) {
	t.Helper()
	ln, err := Listen(ctx, "127.0.0.1:0", srvOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	var aerr error
	wg.Go(func() { srv, aerr = ln.Accept(ctx) })
	cli, err = Dial(ctx, ln.Addr().String(), cliOpts)
	wg.Wait()
	if err != nil || aerr != nil {
		t.Fatalf("dial: %v; accept: %v", err, aerr)
	}
	t.Cleanup(func() { srv.Close(); cli.Close() })
	return srv, cli
}

// rawPair connects a Conn of this package to a raw TCP peer over
// 127.0.0.1; the peer runs script on its end, as the client when
// rawIsClient, else as the server. The script's result arrives on the
// returned channel; the raw connection is closed after the script.
func rawPair(t *testing.T, ctx context.Context, rawIsClient bool, opts Options, script func(net.Conn) error) (*Conn, <-chan error) {
	t.Helper()
	errc := make(chan error, 1)
	if rawIsClient {
		ln, err := Listen(ctx, "127.0.0.1:0", opts)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			var d net.Dialer
			nc, err := d.DialContext(ctx, "tcp", ln.Addr().String())
			if err != nil {
				errc <- err
				return
			}
			defer nc.Close()
			errc <- script(nc)
		}()
		conn, err := ln.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn, errc
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer ln.Close()
		nc, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer nc.Close()
		errc <- script(nc)
	}()
	conn, err := Dial(ctx, ln.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, errc
}

// both runs the server's and the client's part of a session concurrently
// and returns their errors.
func both(srv, cli func() error) (srvErr, cliErr error) {
	var wg sync.WaitGroup
	wg.Go(func() { srvErr = srv() })
	cliErr = cli()
	wg.Wait()
	return srvErr, cliErr
}

// sessionSide is one side's input and output of a full session.
type sessionSide struct {
	hello  Hello
	dests  []Dest
	report BWReport

	peer    Peer
	remotes []Dest
	remRep  BWReport
}

// runSession walks every step: Handshake, one key exchange per Dest, a
// barrier, a BW report exchange and the closing handshake.
func runSession(ctx context.Context, c *Conn, s *sessionSide) error {
	var err error
	if s.peer, err = c.Handshake(ctx, s.hello); err != nil {
		return err
	}
	for _, d := range s.dests {
		r, err := c.ExchangeKeys(ctx, d)
		if err != nil {
			return err
		}
		s.remotes = append(s.remotes, r)
	}
	if err := c.Barrier(ctx, 0); err != nil {
		return err
	}
	if s.remRep, err = c.ExchangeBWReport(ctx, s.report); err != nil {
		return err
	}
	return c.Finish(ctx)
}

func TestSessionRperfToRperf(t *testing.T) {
	params := Params{Test: "write-bw", Fields: []Field{
		{Flag: "-c", Value: "RC", Symmetric: true},
		{Flag: "-s", Value: "65536", Symmetric: true},
		{Flag: "-q", Value: "2", Symmetric: true},
		{Flag: "-b", Symmetric: true},
	}}
	srvParams := params
	srvParams.Fields = append(append([]Field(nil), params.Fields...), Field{Flag: "--cpu", Value: "3"}) // not symmetric
	tests := []struct {
		name     string
		srv, cli sessionSide
	}{
		{
			name: "RoCE, two QPs",
			srv: sessionSide{
				hello: Hello{PageSize: 4096, CacheLineSize: 64, MTU: MTU4096, Params: srvParams},
				dests: []Dest{
					{QPN: 0x11, PSN: 0x50150e, RKey: 0x3bd, VAddr: 0x557200337000, GID: roceGID, HasGID: true, OutReads: 16},
					{QPN: 0x12, PSN: 0x123456, RKey: 0x3be, VAddr: 0x557200347000, GID: roceGID, HasGID: true, OutReads: 16},
				},
				report: BWReport{Size: 65536, Iters: 5000, BWPeak: 1, BWAvg: 2, MsgRate: 3},
			},
			cli: sessionSide{
				hello: Hello{PageSize: 65536, CacheLineSize: 128, MTU: MTU1024, Params: params},
				dests: []Dest{
					{QPN: 0x21, PSN: 0xabcdef, RKey: 0x373, VAddr: 0x563692f11000, GID: roceGID, HasGID: true, OutReads: 16},
					{QPN: 0x22, PSN: 0x000001, RKey: 0x374, VAddr: 0x563692f21000, GID: roceGID, HasGID: true, OutReads: 16},
				},
				report: BWReport{Size: 65536, Iters: 1 << 40, BWPeak: 11020.5, BWAvg: 10990.25, MsgRate: 0.175844},
			},
		},
		{
			name: "InfiniBand, no GID, per-port report",
			srv: sessionSide{
				hello:  Hello{MTU: MTU2048},
				dests:  []Dest{{LID: 3, QPN: 0xffffff, PSN: 7, SRQN: 9}},
				report: BWReport{PerPort: true, BWAvgPort: [2]float64{1, 2}, MsgRatePort: [2]float64{3, 4}},
			},
			cli: sessionSide{
				hello:  Hello{MTU: MTU2048},
				dests:  []Dest{{LID: 4, QPN: 1, PSN: 0xffffff, RKey: 0xffffffff, VAddr: ^uint64(0)}},
				report: BWReport{Size: 2, Iters: 1000, PerPort: true, BWAvgPort: [2]float64{5, 6}, MsgRatePort: [2]float64{7, 8}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			srv, cli := pair(t, ctx, Options{}, Options{})
			if !srv.IsServer() || cli.IsServer() {
				t.Fatalf("IsServer: server %v, client %v", srv.IsServer(), cli.IsServer())
			}
			s, c := tt.srv, tt.cli
			serr, cerr := both(
				func() error { return runSession(ctx, srv, &s) },
				func() error { return runSession(ctx, cli, &c) })
			if serr != nil || cerr != nil {
				t.Fatalf("server: %v\nclient: %v", serr, cerr)
			}
			check := func(side string, local, remote sessionSide) {
				want := Peer{
					Version:       Version,
					Rperf:         true,
					Hello:         withDefaults(remote.hello),
					PageSize:      max(withDefaults(local.hello).PageSize, withDefaults(remote.hello).PageSize),
					CacheLineSize: max(withDefaults(local.hello).CacheLineSize, withDefaults(remote.hello).CacheLineSize),
					MTU:           min(local.hello.MTU, remote.hello.MTU),
				}
				if diff := cmp.Diff(want, local.peer); diff != "" {
					t.Errorf("%s: Peer (-want +got):\n%s", side, diff)
				}
				if diff := cmp.Diff(remote.dests, local.remotes); diff != "" {
					t.Errorf("%s: remote Dests (-want +got):\n%s", side, diff)
				}
				if diff := cmp.Diff(remote.report, local.remRep); diff != "" {
					t.Errorf("%s: remote report (-want +got):\n%s", side, diff)
				}
			}
			check("server", s, c)
			check("client", c, s)
		})
	}
}

// withDefaults fills a Hello's zero fields the way Handshake does, and
// normalises empty Params to what arrives over JSON.
func withDefaults(h Hello) Hello {
	if h.PageSize == 0 {
		h.PageSize = uint32(os.Getpagesize())
	}
	if h.CacheLineSize == 0 {
		h.CacheLineSize = DefaultCacheLineSize
	}
	return h
}

func TestNoVersionExchange(t *testing.T) {
	ctx := testCtx(t)
	opts := Options{NoVersionExchange: true}
	srv, cli := pair(t, ctx, opts, opts)
	var sp, cp Peer
	var srep, crep BWReport
	serr, cerr := both(
		func() (err error) {
			if sp, err = srv.Handshake(ctx, Hello{MTU: MTU4096}); err != nil {
				return err
			}
			if _, err = srv.ExchangeKeys(ctx, Dest{QPN: 1}); err != nil {
				return err
			}
			srep, err = srv.ExchangeBWReport(ctx, BWReport{Iters: 7})
			return err
		},
		func() (err error) {
			if cp, err = cli.Handshake(ctx, Hello{MTU: MTU256}); err != nil {
				return err
			}
			if _, err = cli.ExchangeKeys(ctx, Dest{QPN: 2}); err != nil {
				return err
			}
			crep, err = cli.ExchangeBWReport(ctx, BWReport{Iters: 1<<33 | 5})
			return err
		})
	if serr != nil || cerr != nil {
		t.Fatalf("server: %v\nclient: %v", serr, cerr)
	}
	// Nothing was exchanged: each side keeps its own MTU.
	if sp.MTU != MTU4096 || cp.MTU != MTU256 || sp.Version != "" || sp.Rperf {
		t.Errorf("server peer %+v, client peer %+v", sp, cp)
	}
	// Without versions the iteration count travels in 4 bytes, as in perftest.
	if srep.Iters != 5 || crep.Iters != 7 {
		t.Errorf("iters: server got %d, client got %d; want 5 and 7", srep.Iters, crep.Iters)
	}
}

func TestMisuse(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := pair(t, ctx, Options{}, Options{})
	if _, err := cli.ExchangeKeys(ctx, Dest{}); err == nil {
		t.Error("ExchangeKeys before Handshake succeeded")
	}
	if _, err := cli.ExchangeBWReport(ctx, BWReport{}); err == nil {
		t.Error("ExchangeBWReport before Handshake succeeded")
	}
	if _, err := cli.Handshake(ctx, Hello{MTU: 0}); err == nil {
		t.Error("Handshake with MTU 0 succeeded")
	}
	dup := Params{Fields: []Field{{Flag: "-s"}, {Flag: "-s"}}}
	if _, err := srv.Handshake(ctx, Hello{MTU: MTU1024, Params: dup}); err == nil {
		t.Error("Handshake with a duplicate flag succeeded")
	}
	if _, err := Dial(ctx, "127.0.0.1:1", Options{Version: "0123456789abcdef"}); err == nil {
		t.Error("Dial with a 16-byte version succeeded")
	}
}

func TestHandshakeTwice(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := pair(t, ctx, Options{}, Options{})
	serr, cerr := both(
		func() error { _, err := srv.Handshake(ctx, Hello{MTU: MTU1024}); return err },
		func() error { _, err := cli.Handshake(ctx, Hello{MTU: MTU1024}); return err })
	if serr != nil || cerr != nil {
		t.Fatalf("server: %v\nclient: %v", serr, cerr)
	}
	if _, err := cli.Handshake(ctx, Hello{MTU: MTU1024}); err == nil {
		t.Error("second Handshake succeeded")
	}
	if err := cli.Barrier(ctx, 0); err == nil {
		t.Error("Barrier before any key exchange succeeded")
	}
	// Finish without keys just closes; Close after Finish is harmless.
	if err := cli.Finish(ctx); err != nil {
		t.Errorf("Finish: %v", err)
	}
	if err := cli.Close(); err != nil {
		t.Errorf("Close after Finish: %v", err)
	}
	if _, err := cli.ExchangeKeys(ctx, Dest{}); err == nil {
		t.Error("ExchangeKeys after Finish succeeded")
	}
}
