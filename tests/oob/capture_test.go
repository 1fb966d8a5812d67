package oob

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// capturePath is perftest 4.5's (version "6.06") TCP 18515 traffic for four
// runs between two Soft-RoCE hosts, 10.77.0.2 (client) and 10.77.0.1
// (server); a copy of /work/shared/reference/captures/perftest-oob.pcap.
const capturePath = "testdata/perftest-oob.pcap"

// captureRun is the message sequence of one captured run: Handshake, the
// key exchanges before the end of the test (the per-QP exchange plus the
// program's barriers), an optional BW report, then the closing key exchange
// and "done\0".
type captureRun struct {
	keys   int
	report bool
}

// captureRuns lists the runs in capture order: three latency-style runs
// and one BW run (4 key exchanges, report, close).
var captureRuns = []captureRun{{keys: 4}, {keys: 4, report: true}, {keys: 4}, {keys: 4}}

// sizes returns the size of every symmetric exchange of the run.
func (r captureRun) sizes() []int {
	s := []int{VersionSize, 4, 4, 2}
	for range r.keys {
		s = append(s, KeySizeGID)
	}
	if r.report {
		s = append(s, 8, 8, 8, 8, 8)
	}
	return append(s, KeySizeGID, len(doneMessage))
}

// split cuts a stream into messages of the given sizes.
func split(t *testing.T, stream []byte, sizes []int) [][]byte {
	t.Helper()
	var msgs [][]byte
	off := 0
	for _, n := range sizes {
		if off+n > len(stream) {
			t.Fatalf("stream of %d bytes ends inside a %d-byte message at offset %d", len(stream), n, off)
		}
		msgs = append(msgs, stream[off:off+n])
		off += n
	}
	if off != len(stream) {
		t.Fatalf("stream has %d bytes after the expected messages", len(stream)-off)
	}
	return msgs
}

// captureSide is what one side of one captured run sent, decoded.
type captureSide struct {
	raw    []byte // the whole stream
	msgs   [][]byte
	dest   Dest
	report BWReport
}

func decodeSide(t *testing.T, run captureRun, stream []byte) captureSide {
	t.Helper()
	s := captureSide{raw: stream, msgs: split(t, stream, run.sizes())}
	d, err := ParseKey(s.msgs[4])
	if err != nil {
		t.Fatalf("first key message: %v", err)
	}
	s.dest = d
	if run.report {
		r := s.msgs[4+run.keys:]
		s.report = BWReport{
			Size:    binary.BigEndian.Uint64(r[0]),
			Iters:   binary.BigEndian.Uint64(r[1]),
			BWPeak:  math.Float64frombits(binary.BigEndian.Uint64(r[2])),
			BWAvg:   math.Float64frombits(binary.BigEndian.Uint64(r[3])),
			MsgRate: math.Float64frombits(binary.BigEndian.Uint64(r[4])),
		}
	}
	return s
}

type captureCase struct {
	name           string
	run            captureRun
	client, server captureSide
}

func loadCapture(t *testing.T) []captureCase {
	t.Helper()
	streams := readTCPStreams(t, capturePath)
	if len(streams) != len(captureRuns) {
		t.Fatalf("capture has %d connections with data, want %d", len(streams), len(captureRuns))
	}
	var cases []captureCase
	for i, s := range streams {
		if s.server.Port() != DefaultPort {
			t.Fatalf("connection %d goes to port %d, want %d", i, s.server.Port(), DefaultPort)
		}
		run := captureRuns[i]
		cases = append(cases, captureCase{
			name:   fmt.Sprintf("run%d-port%d", i+1, s.client.Port()),
			run:    run,
			client: decodeSide(t, run, s.toServer),
			server: decodeSide(t, run, s.toClient),
		})
	}
	return cases
}

// TestCaptureMessages checks each captured message against this package's
// encoders and parser.
func TestCaptureMessages(t *testing.T) {
	for _, c := range loadCapture(t) {
		for _, side := range []struct {
			name string
			s    captureSide
		}{{"client", c.client}, {"server", c.server}} {
			t.Run(c.name+"/"+side.name, func(t *testing.T) {
				m := side.s.msgs
				if !bytes.Equal(m[0], versionMessage("6.06")) {
					t.Errorf("version message %q != versionMessage(\"6.06\")", m[0])
				}
				if v := versionString(m[0]); v != "6.06" || atof(v) != 6.06 {
					t.Errorf("version %q, atof %v", v, atof(v))
				}
				if got := binary.BigEndian.Uint32(m[1]); got != 4096 {
					t.Errorf("page size %d, want 4096", got)
				}
				if got := binary.BigEndian.Uint32(m[2]); got != 64 {
					t.Errorf("cache line size %d, want 64", got)
				}
				if want := mtuMessage(MTU1024, mtuMessageSize(6.06)); !bytes.Equal(m[3], want) {
					t.Errorf("MTU message %q, want %q", m[3], want)
				}
				if mtu, err := parseMTU(m[3]); err != nil || mtu != MTU1024 {
					t.Errorf("parseMTU(%q) = %v, %v", m[3], mtu, err)
				}
				keys := append(m[4:4+c.run.keys:4+c.run.keys], m[len(m)-2])
				for i, k := range keys {
					d, err := ParseKey(k)
					if err != nil {
						t.Fatalf("key %d: %v", i, err)
					}
					if !d.HasGID {
						t.Errorf("key %d: parsed without GID", i)
					}
					if got := FormatKey(d); !bytes.Equal(got, k) {
						t.Errorf("key %d: FormatKey(ParseKey(m)) = %q, want %q", i, got, k)
					}
					if d != side.s.dest {
						t.Errorf("key %d: %+v differs from the first key %+v", i, d, side.s.dest)
					}
				}
				if !bytes.Equal(m[len(m)-1], doneMessage) {
					t.Errorf("last message %q, want %q", m[len(m)-1], doneMessage)
				}
			})
		}
	}
}

// TestCaptureFirstRunValues pins the decoded values of the first run.
func TestCaptureFirstRunValues(t *testing.T) {
	c := loadCapture(t)[0]
	gid := func(ip4 byte) [16]byte { return [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 14: 0, 15: ip4} }
	want := Dest{OutReads: 1, QPN: 0x11, PSN: 0x480aa1, VAddr: 0x5564d7603000, GID: gid(2), HasGID: true}
	if diff := cmp.Diff(want, c.client.dest); diff != "" {
		t.Errorf("client key (-want +got):\n%s", diff)
	}
	want = Dest{OutReads: 1, QPN: 0x11, PSN: 0x50150e, VAddr: 0x55b4e93f5000, GID: gid(1), HasGID: true}
	if diff := cmp.Diff(want, c.server.dest); diff != "" {
		t.Errorf("server key (-want +got):\n%s", diff)
	}
}

// TestCaptureReplay runs this package against a peer that replays one side
// of each captured run, and requires the bytes this package sends to equal
// the other side of the capture exactly: same messages, same order, same
// sizes, nothing extra.
func TestCaptureReplay(t *testing.T) {
	for _, c := range loadCapture(t) {
		for _, oursIsServer := range []bool{false, true} {
			role := "client"
			if oursIsServer {
				role = "server"
			}
			t.Run(c.name+"/ours-"+role, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				ours, theirs := c.client, c.server
				if oursIsServer {
					ours, theirs = c.server, c.client
				}
				opts := Options{Version: "6.06", IOTimeout: 5 * time.Second}
				conn, fakeErr := replayPair(t, ctx, oursIsServer, opts, c.run.sizes(), theirs.raw, ours.raw)
				defer conn.Close()

				peer, err := conn.Handshake(ctx, Hello{PageSize: 4096, CacheLineSize: 64, MTU: MTU1024})
				if err != nil {
					t.Fatalf("Handshake: %v", err)
				}
				wantPeer := Peer{
					Version:       "6.06",
					Hello:         Hello{PageSize: 4096, CacheLineSize: 64, MTU: MTU1024},
					PageSize:      4096,
					CacheLineSize: 64,
					MTU:           MTU1024,
				}
				if diff := cmp.Diff(wantPeer, peer); diff != "" {
					t.Errorf("Peer (-want +got):\n%s", diff)
				}
				remote, err := conn.ExchangeKeys(ctx, ours.dest)
				if err != nil {
					t.Fatalf("ExchangeKeys: %v", err)
				}
				if remote != theirs.dest {
					t.Errorf("remote Dest %+v, want %+v", remote, theirs.dest)
				}
				for i := 1; i < c.run.keys; i++ {
					if err := conn.Barrier(ctx, 0); err != nil {
						t.Fatalf("Barrier %d: %v", i, err)
					}
				}
				if c.run.report {
					got, err := conn.ExchangeBWReport(ctx, ours.report)
					if err != nil {
						t.Fatalf("ExchangeBWReport: %v", err)
					}
					if diff := cmp.Diff(theirs.report, got); diff != "" {
						t.Errorf("remote report (-want +got):\n%s", diff)
					}
				}
				if err := conn.Finish(ctx); err != nil {
					t.Fatalf("Finish: %v", err)
				}
				if err := <-fakeErr; err != nil {
					t.Errorf("replaying peer: %v", err)
				}
			})
		}
	}
}

// replayPair connects a Conn of this package to a replaying peer over
// 127.0.0.1. The peer sends its recorded stream message by message in
// perftest's order and checks that what it receives equals want. Its
// verdict arrives on the returned channel once the Conn has closed.
func replayPair(t *testing.T, ctx context.Context, oursIsServer bool, opts Options, sizes []int, send, want []byte) (*Conn, <-chan error) {
	t.Helper()
	return rawPair(t, ctx, oursIsServer, opts, func(nc net.Conn) error {
		return replay(nc, oursIsServer, sizes, send, want)
	})
}

// replay plays one side of a recorded session on nc.
func replay(nc net.Conn, isClient bool, sizes []int, send, want []byte) error {
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	off := 0
	for i, n := range sizes {
		got := make([]byte, n)
		write := func() error {
			_, err := nc.Write(send[off : off+n])
			return err
		}
		read := func() error {
			if _, err := io.ReadFull(nc, got); err != nil {
				return err
			}
			if !bytes.Equal(got, want[off:off+n]) {
				return fmt.Errorf("offset %d: got %q, want %q", off, got, want[off:off+n])
			}
			return nil
		}
		first, second := read, write
		if isClient {
			first, second = write, read
		}
		if err := first(); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if err := second(); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		off += n
	}
	// Nothing may follow: the other side must close now.
	var b [1]byte
	if n, err := nc.Read(b[:]); n != 0 || !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the last message: read %d bytes (%q), err %v; want EOF", n, b[:n], err)
	}
	return nil
}
