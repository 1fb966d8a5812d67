package session_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// recorder relays one connection between a client and a server and keeps
// what each direction carried.
type recorder struct {
	ln       net.Listener
	target   string
	mu       sync.Mutex
	toServer bytes.Buffer
	toClient bytes.Buffer
	done     chan struct{}
}

func newRecorder(t *testing.T, target string) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln, target: target, done: make(chan struct{})}
	go r.relay()
	t.Cleanup(func() { ln.Close() })
	return r
}

func (r *recorder) relay() {
	defer close(r.done)
	c, err := r.ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	s, err := net.Dial("tcp", r.target)
	if err != nil {
		return
	}
	defer s.Close()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn, keep *bytes.Buffer) {
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				r.mu.Lock()
				keep.Write(buf[:n])
				r.mu.Unlock()
				dst.Write(buf[:n])
			}
			if err != nil {
				// Pass the end on, so the other side's reads end too.
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
				return
			}
		}
	}
	wg.Add(2)
	go pipe(s, c, &r.toServer)
	go pipe(c, s, &r.toClient)
	wg.Wait()
}

// scriptCase is one program with flags, run between two sides that both
// announce a perftest release, so each follows the other's sequence.
type scriptCase struct {
	name    string
	opts    oob.SequenceOptions // QPs, All, Duplex, Conn as the test runs
	sizes   []int
	srvWant int // results the server returns (the client: one per size)
	run     func(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, sizes []int, o oob.SequenceOptions) ([]reports.Result, error)
}

func latRun(t session.Test) func(context.Context, *verbsio.Context, *oob.Conn, []int, oob.SequenceOptions) ([]reports.Result, error) {
	return func(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, sizes []int, o oob.SequenceOptions) ([]reports.Result, error) {
		cfg := latency.Default(t)
		cfg.Iterations = 20
		cfg.Sizes, cfg.All = sizes, o.All
		if o.Conn == oob.UD {
			cfg.Connection = verbsio.QPTypeUD
		}
		return latency.Run(ctx, dev, conn, cfg)
	}
}

func bwRun(t session.Test) func(context.Context, *verbsio.Context, *oob.Conn, []int, oob.SequenceOptions) ([]reports.Result, error) {
	return func(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, sizes []int, o oob.SequenceOptions) ([]reports.Result, error) {
		cfg := bw.Default(t)
		// Enough messages that a receiver's first and last completions
		// are apart (it measures between them).
		cfg.Iterations = 500
		cfg.Sizes, cfg.All = sizes, o.All
		cfg.QPs = max(o.QPs, 1)
		cfg.Bidirectional = o.Duplex
		if o.Conn == oob.UD {
			cfg.Connection = verbsio.QPTypeUD
		}
		return bw.Run(ctx, dev, conn, cfg)
	}
}

// TestPerftestSequences runs every program's driver against itself with
// both sides announcing a perftest release: each side then follows the
// sequence of the release its peer announced (session.Scripted), and both
// TCP streams must be exactly that sequence's messages, sized as
// oob.Release.Sequence says, with the results each side owes.
func TestPerftestSequences(t *testing.T) {
	all := []int{2, 4, 8}
	cases := []scriptCase{
		{name: "send_lat", sizes: []int{2}, srvWant: 1, run: latRun(latency.Send)},
		{name: "send_lat/a", opts: oob.SequenceOptions{All: true}, sizes: all, srvWant: 3, run: latRun(latency.Send)},
		{name: "send_lat/UD", opts: oob.SequenceOptions{Conn: oob.UD}, sizes: []int{2}, srvWant: 1, run: latRun(latency.Send)},
		{name: "write_lat", sizes: []int{2}, srvWant: 1, run: latRun(latency.Write)},
		{name: "write_lat/a", opts: oob.SequenceOptions{All: true}, sizes: all, srvWant: 3, run: latRun(latency.Write)},
		{name: "read_lat", sizes: []int{2}, srvWant: 0, run: latRun(latency.Read)},
		{name: "read_lat/a", opts: oob.SequenceOptions{All: true}, sizes: all, srvWant: 0, run: latRun(latency.Read)},
		{name: "atomic_lat", sizes: []int{8}, srvWant: 0, run: latRun(latency.Atomic)},
		{name: "send_bw", sizes: []int{65536}, srvWant: 1, run: bwRun(bw.Send)},
		{name: "send_bw/a", opts: oob.SequenceOptions{All: true}, sizes: all, srvWant: 3, run: bwRun(bw.Send)},
		{name: "send_bw/b", opts: oob.SequenceOptions{Duplex: true}, sizes: []int{4096}, srvWant: 1, run: bwRun(bw.Send)},
		{name: "send_bw/q2", opts: oob.SequenceOptions{QPs: 2}, sizes: []int{4096}, srvWant: 1, run: bwRun(bw.Send)},
		{name: "send_bw/UD", opts: oob.SequenceOptions{Conn: oob.UD}, sizes: []int{1024}, srvWant: 1, run: bwRun(bw.Send)},
		{name: "write_bw", sizes: []int{65536}, srvWant: 1, run: bwRun(bw.Write)},
		{name: "write_bw/a", opts: oob.SequenceOptions{All: true}, sizes: all, srvWant: 1, run: bwRun(bw.Write)},
		{name: "write_bw/q2b", opts: oob.SequenceOptions{QPs: 2, Duplex: true}, sizes: []int{4096}, srvWant: 1, run: bwRun(bw.Write)},
		{name: "write_bw/ab", opts: oob.SequenceOptions{All: true, Duplex: true}, sizes: all, srvWant: 3, run: bwRun(bw.Write)},
		{name: "read_bw", sizes: []int{65536}, srvWant: 1, run: bwRun(bw.Read)},
		{name: "atomic_bw", sizes: []int{8}, srvWant: 1, run: bwRun(bw.Atomic)},
	}
	for _, rel := range oob.Releases {
		for _, tc := range cases {
			t.Run(rel.Version+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				prog, _ := oob.ProgramFor(tc.name[:len(tc.name)-len(trimVariant(tc.name))])
				runScripted(t, rel, prog, tc)
			})
		}
	}
}

// trimVariant returns the "/variant" suffix of a case name, "" without one.
func trimVariant(name string) string {
	for i := range name {
		if name[i] == '/' {
			return name[i:]
		}
	}
	return ""
}

func runScripted(t *testing.T, rel oob.Release, prog oob.Program, tc scriptCase) {
	ctx, cancel := context.WithTimeout(context.Background(), pairtest.Timeout)
	defer cancel()
	opts := oob.Options{IOTimeout: 20 * time.Second, DialTimeout: 5 * time.Second, Version: rel.Version}
	ln, err := oob.Listen(ctx, "127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t, ln.Addr().String())
	side := func(conn func() (*oob.Conn, error), out *[]reports.Result) error {
		dev, err := pairtest.Shm0()
		if err != nil {
			return err
		}
		defer dev.Close()
		c, err := conn()
		if err != nil {
			return err
		}
		defer c.Close()
		*out, err = tc.run(ctx, dev, c, tc.sizes, tc.opts)
		return err
	}
	var srv, cli []reports.Result
	srvErr := make(chan error, 1)
	go func() {
		srvErr <- side(func() (*oob.Conn, error) { defer ln.Close(); return ln.Accept(ctx) }, &srv)
	}()
	cliErr := side(func() (*oob.Conn, error) { return oob.Dial(ctx, rec.ln.Addr().String(), opts) }, &cli)
	if err := <-srvErr; err != nil || cliErr != nil {
		t.Fatalf("server: %v; client: %v", err, cliErr)
	}
	select {
	case <-rec.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not see both sides close")
	}
	if len(cli) != len(tc.sizes) {
		t.Errorf("client: %d results, want %d", len(cli), len(tc.sizes))
	}
	if len(srv) != tc.srvWant {
		t.Errorf("server: %d results, want %d", len(srv), tc.srvWant)
	}

	o := tc.opts
	o.PeerVersion = oob.Version
	o.MTU = oob.MTU1024
	o.Sizes = nil
	for _, n := range tc.sizes {
		o.Sizes = append(o.Sizes, uint64(n))
	}
	for _, dir := range []struct {
		name   string
		server bool
		got    []byte
	}{{"client to server", false, rec.toServer.Bytes()}, {"server to client", true, rec.toClient.Bytes()}} {
		o.Server = dir.server
		seq, err := rel.Sequence(prog, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := splits(dir.got, seq); err != nil {
			t.Errorf("%s: %v\nsequence: %v", dir.name, err, seq)
		}
	}
}

// splits checks that stream is exactly the sequence's messages: the
// version, then every message of the right size in order (a key message
// ends in a NUL), "done\0" where the release writes it.
func splits(stream []byte, seq oob.Sequence) error {
	off := 0
	for _, st := range seq.Steps {
		for _, n := range st.Wire {
			if off+n > len(stream) {
				return fmt.Errorf("the stream ends at byte %d inside %v (a %d-byte message)", len(stream), st, n)
			}
			msg := stream[off : off+n]
			switch st.Kind {
			case oob.StepKey, oob.StepBarrier, oob.StepClose:
				if _, err := oob.ParseKey(msg); err != nil {
					return fmt.Errorf("byte %d, %v: %v", off, st, err)
				}
			case oob.StepDone:
				if string(msg) != "done\x00" {
					return fmt.Errorf("byte %d, %v: %q, want done", off, st, msg)
				}
			}
			off += n
		}
	}
	if off != len(stream) {
		return fmt.Errorf("%d bytes after the sequence's end at byte %d: %q", len(stream)-off, off, stream[off:min(len(stream), off+120)])
	}
	return nil
}
