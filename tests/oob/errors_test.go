package oob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freeAddr returns a 127.0.0.1 address whose ephemeral port was free a
// moment ago and has nothing listening now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func wantErr(t *testing.T, err error, kind error, substrs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one matching %v", kind)
	}
	if kind != nil && !errors.Is(err, kind) {
		t.Errorf("error %q does not match %v", err, kind)
	}
	for _, s := range substrs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

func TestDialRefused(t *testing.T) {
	ctx := testCtx(t)
	addr := freeAddr(t)
	start := time.Now()
	_, err := Dial(ctx, addr, Options{DialTimeout: 300 * time.Millisecond, RetryInterval: 20 * time.Millisecond})
	elapsed := time.Since(start)
	want := fmt.Sprintf("cannot reach rperf/perftest server at %s: connection refused (is the server running? start it first, or check -p)", addr)
	if err == nil || err.Error() != want {
		t.Fatalf("error:\n got %v\nwant %s", err, want)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error does not match ECONNREFUSED")
	}
	if elapsed < 250*time.Millisecond || elapsed > 3*time.Second {
		t.Errorf("Dial gave up after %v, want about 300ms", elapsed)
	}
}

func TestDialWaitsForServer(t *testing.T) {
	ctx := testCtx(t)
	addr := freeAddr(t)
	accepted := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		ln, err := Listen(ctx, addr, Options{})
		if err != nil {
			accepted <- err
			return
		}
		c, err := ln.Accept(ctx)
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	start := time.Now()
	c, err := Dial(ctx, addr, Options{DialTimeout: 5 * time.Second, RetryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c.Close()
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("Dial returned after %v, before the server listened", d)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("server: %v", err)
	}
}

func TestDialSourceAddr(t *testing.T) {
	ctx := testCtx(t)
	srv, cli := pair(t, ctx, Options{}, Options{SourceAddr: "127.0.0.1"})
	if got := cli.LocalAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.1" {
		t.Errorf("client bound to %s", got)
	}
	if srv.RemoteAddr().String() != cli.LocalAddr().String() {
		t.Errorf("server sees %v, client is %v", srv.RemoteAddr(), cli.LocalAddr())
	}
	if _, err := Dial(ctx, "127.0.0.1:1", Options{SourceAddr: "not an address"}); err == nil {
		t.Error("Dial with a bad source address succeeded")
	}
}

func TestDialRefusedWithinContextDeadline(t *testing.T) {
	// The caller's deadline is shorter than DialTimeout: the refusal is
	// still what gets reported.
	ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
	defer cancel()
	_, err := Dial(ctx, freeAddr(t), Options{DialTimeout: 5 * time.Second, RetryInterval: 20 * time.Millisecond})
	wantErr(t, err, syscall.ECONNREFUSED, "connection refused (is the server running?")
}

func TestDialCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	_, err := Dial(ctx, freeAddr(t), Options{})
	wantErr(t, err, context.Canceled, "dial 127.0.0.1:")
}

func TestDialBadAddress(t *testing.T) {
	_, err := Dial(testCtx(t), "127.0.0.1:99999", Options{DialTimeout: time.Second})
	wantErr(t, err, nil, "cannot reach rperf/perftest server at 127.0.0.1:99999", "check the server address and -p")
}

func TestDefaultPort(t *testing.T) {
	for in, want := range map[string]string{
		"":               ":18515",
		"host":           "host:18515",
		"10.77.0.1":      "10.77.0.1:18515",
		"10.77.0.1:1234": "10.77.0.1:1234",
		":0":             ":0",
		"fe80::1":        "[fe80::1]:18515",
		"[fe80::1]:7":    "[fe80::1]:7",
	} {
		if got := withPort(in); got != want {
			t.Errorf("withPort(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestListenPortInUse(t *testing.T) {
	ctx := testCtx(t)
	ln, err := Listen(ctx, "127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().(*net.TCPAddr)
	_, err = Listen(ctx, addr.String(), Options{})
	wantErr(t, err, syscall.EADDRINUSE,
		fmt.Sprintf("cannot listen on %s: TCP port %d is already in use", addr, addr.Port),
		"choose another port with -p")
}

func TestAcceptOnlyOnce(t *testing.T) {
	ctx := testCtx(t)
	ln, err := Listen(ctx, "127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go func() {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
		}
	}()
	c, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// The listening socket is gone: a second client is refused and a
	// second Accept fails at once.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("a second client could connect")
	}
	if _, err := ln.Accept(ctx); err == nil {
		t.Error("second Accept succeeded")
	}
	if err := ln.Close(); err != nil {
		t.Errorf("Close after Accept: %v", err)
	}
}

func TestAcceptWaitEnds(t *testing.T) {
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		kind error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			ln, err := Listen(ctx, "127.0.0.1:0", Options{})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = ln.Accept(ctx)
			wantErr(t, err, tt.kind, "no client connected", "start the client")
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Accept returned after %v", d)
			}
		})
	}
}

// perftestPeer returns a script for a raw peer that speaks perftest's
// handshake as version v (as the client when isClient), then runs rest.
func perftestPeer(isClient bool, v string, gid bool, rest func(f *fakePerftest, nc net.Conn) error) func(net.Conn) error {
	return func(nc net.Conn) error {
		f := &fakePerftest{isClient: isClient, version: v, pageSize: 4096, cacheLine: 64, mtu: 3,
			dest: Dest{QPN: 0x42, HasGID: gid}}
		if err := f.handshake(nc); err != nil {
			return err
		}
		if rest == nil {
			return nil
		}
		return rest(f, nc)
	}
}

// drain waits until the other side closes.
func drain(nc net.Conn) error {
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, nc)
	return err
}

func TestPeerClosesMidSession(t *testing.T) {
	hello := Hello{MTU: MTU1024}
	tests := []struct {
		name        string
		rawIsClient bool
		script      func(net.Conn) error
		keys        bool // our side goes on to a key exchange
		want        []string
	}{
		{
			name:        "client connects and leaves",
			rawIsClient: true,
			script:      func(net.Conn) error { return nil },
			want:        []string{"version exchange: the peer closed the connection while we were waiting for the peer's 16-byte version (got 0 of 16 bytes)", "check its output"},
		},
		{
			name:        "server leaves after the version",
			rawIsClient: false,
			script: func(nc net.Conn) error {
				f := &fakePerftest{version: "6.06"}
				_, err := f.xchg(nc, versionMessage("6.06"), 16)
				return err
			},
			want: []string{"sys-data exchange: the peer closed the connection", "page size"},
		},
		{
			name:        "client leaves after the MTU",
			rawIsClient: true,
			script:      perftestPeer(true, "6.06", true, nil),
			keys:        true,
			want:        []string{"key exchange: the peer closed the connection", "108-byte key message (got 0 of 108 bytes)"},
		},
		{
			name:        "server leaves inside a key message",
			rawIsClient: false,
			script: perftestPeer(false, "6.06", true, func(f *fakePerftest, nc net.Conn) error {
				in := make([]byte, KeySizeGID)
				if _, err := io.ReadFull(nc, in); err != nil {
					return err
				}
				_, err := nc.Write(f.key(f.dest)[:50])
				return err
			}),
			keys: true,
			want: []string{"key exchange: the peer closed the connection", "(got 50 of 108 bytes)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			conn, peerErr := rawPair(t, ctx, tt.rawIsClient, Options{IOTimeout: 5 * time.Second}, tt.script)
			_, err := conn.Handshake(ctx, hello)
			if tt.keys {
				if err != nil {
					t.Fatalf("Handshake: %v", err)
				}
				_, err = conn.ExchangeKeys(ctx, Dest{HasGID: true})
			}
			wantErr(t, err, ErrPeerClosed, tt.want...)
			if err := <-peerErr; err != nil {
				t.Logf("peer: %v", err)
			}
		})
	}
}

func TestPeerSilent(t *testing.T) {
	t.Run("during the handshake", func(t *testing.T) {
		ctx := testCtx(t)
		conn, peerErr := rawPair(t, ctx, true, Options{IOTimeout: 150 * time.Millisecond}, drain)
		start := time.Now()
		_, err := conn.Handshake(ctx, Hello{MTU: MTU1024})
		wantErr(t, err, ErrTimeout, "version exchange: the peer stayed silent for 150ms", "(got 0 of 16 bytes)", "check its output")
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("error does not match os.ErrDeadlineExceeded")
		}
		if d := time.Since(start); d < 140*time.Millisecond || d > 3*time.Second {
			t.Errorf("gave up after %v, want about 150ms", d)
		}
		conn.Close()
		<-peerErr
	})
	t.Run("barrier wait", func(t *testing.T) {
		ctx := testCtx(t)
		conn, peerErr := rawPair(t, ctx, false, Options{IOTimeout: 5 * time.Second},
			perftestPeer(false, "6.06", false, func(f *fakePerftest, nc net.Conn) error {
				if err := f.handShake(nc); err != nil {
					return err
				}
				return drain(nc) // then never answers the barrier
			}))
		if _, err := conn.Handshake(ctx, Hello{MTU: MTU1024}); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExchangeKeys(ctx, Dest{QPN: 1}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := conn.Barrier(ctx, 300*time.Millisecond)
		wantErr(t, err, ErrTimeout, "barrier: the peer stayed silent for 300ms", "59-byte key message")
		if d := time.Since(start); d < 290*time.Millisecond || d > 3*time.Second {
			t.Errorf("gave up after %v, want about 300ms", d)
		}
		conn.Close()
		<-peerErr
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		ctx := testCtx(t)
		conn, peerErr := rawPair(t, ctx, true, Options{IOTimeout: 10 * time.Second}, drain)
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err := conn.Handshake(cctx, Hello{MTU: MTU1024})
		wantErr(t, err, context.Canceled, "version exchange")
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("cancellation took %v", d)
		}
		conn.Close()
		<-peerErr
	})
	t.Run("context deadline shorter than the I/O timeout", func(t *testing.T) {
		ctx := testCtx(t)
		conn, peerErr := rawPair(t, ctx, true, Options{IOTimeout: 10 * time.Second}, drain)
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := conn.Handshake(cctx, Hello{MTU: MTU1024})
		wantErr(t, err, context.DeadlineExceeded, "version exchange")
		conn.Close()
		<-peerErr
	})
}

func TestGarbageKey(t *testing.T) {
	ctx := testCtx(t)
	garbage := []byte(strings.Repeat("z", KeySizeGID-1) + "\x00")
	conn, peerErr := rawPair(t, ctx, false, Options{IOTimeout: 5 * time.Second},
		perftestPeer(false, "6.06", true, func(f *fakePerftest, nc net.Conn) error {
			_, err := f.xchg(nc, garbage, KeySizeGID)
			return err
		}))
	if _, err := conn.Handshake(ctx, Hello{MTU: MTU1024}); err != nil {
		t.Fatal(err)
	}
	_, err := conn.ExchangeKeys(ctx, Dest{HasGID: true})
	wantErr(t, err, ErrProtocol, "key exchange: the peer's key message is malformed", "LID must be 4 hex digits")
	<-peerErr
}

func TestGIDMismatch(t *testing.T) {
	tests := []struct {
		name        string
		rawIsClient bool
		oursGID     bool
		want        string
	}{
		{"ours client with GID, peer without", false, true, "the peer sends key messages without a GID (59 bytes) but this side sends them with a GID (108 bytes)"},
		{"ours server without GID, peer with", true, false, "the peer sends key messages with a GID (108 bytes) but this side sends them without a GID (59 bytes)"},
		{"ours server with GID, peer without", true, true, "the peer sends key messages without a GID (59 bytes) but this side sends them with a GID (108 bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			conn, peerErr := rawPair(t, ctx, tt.rawIsClient, Options{IOTimeout: 300 * time.Millisecond},
				perftestPeer(tt.rawIsClient, "6.06", !tt.oursGID, func(f *fakePerftest, nc net.Conn) error {
					f.handShake(nc)
					return drain(nc)
				}))
			if _, err := conn.Handshake(ctx, Hello{MTU: MTU1024}); err != nil {
				t.Fatal(err)
			}
			_, err := conn.ExchangeKeys(ctx, Dest{QPN: 1, HasGID: tt.oursGID})
			wantErr(t, err, ErrIncompatible, "key exchange: "+tt.want, "give -x (GID index) to both sides or to neither")
			conn.Close()
			<-peerErr
		})
	}
}

func TestVersionTooOld(t *testing.T) {
	for _, v := range []string{"5.60", "5.69", "4.5", "", "GET / HTTP/1.1"} {
		t.Run(v, func(t *testing.T) {
			ctx := testCtx(t)
			conn, peerErr := rawPair(t, ctx, false, Options{IOTimeout: 5 * time.Second}, func(nc net.Conn) error {
				f := &fakePerftest{version: v}
				if _, err := f.xchg(nc, versionMessage(v), 16); err != nil {
					return err
				}
				return drain(nc)
			})
			_, err := conn.Handshake(ctx, Hello{MTU: MTU1024})
			wantErr(t, err, ErrIncompatible, fmt.Sprintf("version exchange: the peer's version %q is older than perftest 5.70", v), "upgrade perftest on the peer")
			conn.Close()
			<-peerErr
		})
	}
}

func TestVersionOldestAccepted(t *testing.T) {
	ctx := testCtx(t)
	conn, peerErr := rawPair(t, ctx, true, Options{IOTimeout: 5 * time.Second}, perftestPeer(true, "5.70", false, nil))
	p, err := conn.Handshake(ctx, Hello{MTU: MTU1024})
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != "5.70" || p.Rperf {
		t.Errorf("peer %+v", p)
	}
	if err := <-peerErr; err != nil {
		t.Errorf("peer: %v", err)
	}
}

func TestParamsMismatch(t *testing.T) {
	sym := func(flag, value string) Field { return Field{Flag: flag, Value: value, Symmetric: true} }
	tests := []struct {
		name     string
		cli, srv Params
		want     string // "" for no error
	}{
		{
			name: "size",
			cli:  Params{Test: "write-lat", Fields: []Field{sym("-c", "RC"), sym("-s", "64")}},
			srv:  Params{Test: "write-lat", Fields: []Field{sym("-c", "RC"), sym("-s", "4096")}},
			want: "peers disagree: client runs write-lat -s 64, server runs write-lat -s 4096; start both with the same flags",
		},
		{
			name: "test",
			cli:  Params{Test: "write-lat", Fields: []Field{sym("-s", "64")}},
			srv:  Params{Test: "read-lat", Fields: []Field{sym("-s", "64")}},
			want: "peers disagree: client runs write-lat, server runs read-lat; start both with the same flags",
		},
		{
			name: "several fields, in the client's order",
			cli:  Params{Test: "write-bw", Fields: []Field{sym("-c", "RC"), sym("-s", "64"), sym("-n", "1000"), sym("-q", "1")}},
			srv:  Params{Test: "write-bw", Fields: []Field{sym("-q", "4"), sym("-n", "5000"), sym("-c", "RC"), sym("-s", "4096")}},
			want: "peers disagree: client runs write-bw -s 64 -n 1000 -q 1, server runs write-bw -s 4096 -n 5000 -q 4; start both with the same flags",
		},
		{
			name: "missing on the server",
			cli:  Params{Test: "write-bw", Fields: []Field{sym("-D", "5"), sym("-b", "")}},
			srv:  Params{Test: "write-bw"},
			want: "peers disagree: client runs write-bw -D 5 -b, server runs write-bw without -D without -b; start both with the same flags",
		},
		{
			name: "symmetric on one side only",
			cli:  Params{Test: "send-lat", Fields: []Field{{Flag: "-I", Value: "0"}}},
			srv:  Params{Test: "send-lat", Fields: []Field{sym("-I", "236")}},
			want: "peers disagree: client runs send-lat -I 0, server runs send-lat -I 236; start both with the same flags",
		},
		{
			name: "asymmetric fields may differ",
			cli:  Params{Test: "write-lat", Fields: []Field{sym("-s", "64"), {Flag: "--cpu", Value: "1"}}},
			srv:  Params{Test: "write-lat", Fields: []Field{sym("-s", "64"), {Flag: "--cpu", Value: "7"}, {Flag: "--out_json"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			srv, cli := pair(t, ctx, Options{}, Options{})
			var sp, cp Peer
			serr, cerr := both(
				func() (err error) { sp, err = srv.Handshake(ctx, Hello{MTU: MTU1024, Params: tt.srv}); return err },
				func() (err error) { cp, err = cli.Handshake(ctx, Hello{MTU: MTU1024, Params: tt.cli}); return err })
			if tt.want == "" {
				if serr != nil || cerr != nil {
					t.Fatalf("server: %v\nclient: %v", serr, cerr)
				}
			} else {
				for side, err := range map[string]error{"server": serr, "client": cerr} {
					if err == nil || err.Error() != tt.want {
						t.Errorf("%s error:\n got %v\nwant %s", side, err, tt.want)
					}
					if !errors.Is(err, ErrIncompatible) {
						t.Errorf("%s error does not match ErrIncompatible", side)
					}
				}
			}
			// Either way each side learned the other's parameters.
			if !sp.Rperf || !cp.Rperf || sp.Hello.Params.Test != tt.cli.Test || cp.Hello.Params.Test != tt.srv.Test {
				t.Errorf("server learned %+v, client learned %+v", sp, cp)
			}
		})
	}
}

func TestParamsSkippedForPerftest(t *testing.T) {
	// A perftest peer gets no parameter document even if we have one; the
	// fake would otherwise read JSON where it expects the first key.
	ctx := testCtx(t)
	conn, peerErr := rawPair(t, ctx, true, Options{IOTimeout: 5 * time.Second},
		perftestPeer(true, "6.29", false, func(f *fakePerftest, nc net.Conn) error { return f.handShake(nc) }))
	p, err := conn.Handshake(ctx, Hello{MTU: MTU1024, Params: Params{Test: "write-lat", Fields: []Field{{Flag: "-s", Value: "2", Symmetric: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Rperf || p.Version != "6.29" {
		t.Errorf("peer %+v", p)
	}
	if _, err := conn.ExchangeKeys(ctx, Dest{QPN: 9}); err != nil {
		t.Fatal(err)
	}
	if err := <-peerErr; err != nil {
		t.Errorf("peer: %v", err)
	}
}

func TestParamsMalformed(t *testing.T) {
	tests := []struct {
		name string
		msg  []byte
		want string
	}{
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff}, "announced 4294967295 bytes of parameters"},
		{"not JSON", append([]byte{0, 0, 0, 3}, "{{{"...), "parameter document is not valid"},
		{"duplicate flag", func() []byte {
			body := `{"rperf":1,"test":"x","fields":[{"flag":"-s"},{"flag":"-s"}]}`
			return append([]byte{0, 0, 0, byte(len(body))}, body...)
		}(), "flag -s appears twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			conn, peerErr := rawPair(t, ctx, true, Options{IOTimeout: 5 * time.Second},
				perftestPeer(true, Version, false, func(f *fakePerftest, nc net.Conn) error {
					if _, err := nc.Write(tt.msg); err != nil {
						return err
					}
					return drain(nc)
				}))
			_, err := conn.Handshake(ctx, Hello{MTU: MTU1024})
			wantErr(t, err, ErrProtocol, "test-parameter exchange: ", tt.want)
			conn.Close()
			<-peerErr
		})
	}
}
