package raw_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/internal/testsupport/tshark"
	"github.com/rperf/rperf/tests/raw"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// TestRawPaths runs raw-bw and raw-lat on each send path over a veth
// pair and checks what each moved: the server's count of frames (on the
// tso path, of segments: every send cut into size/MSS of them), the
// results' path, and the engine's counters of the TSO sends and who cut
// them.
func TestRawPaths(t *testing.T) {
	const n, warm = 400, 8
	for _, tc := range []struct {
		name string
		test session.Test
		path sendpath.Path
		size int
		mss  int
		tcp  bool
		seg  verbsio.Segmenter
	}{
		{"bw generic", session.RawBW, sendpath.Generic, 64, 0, false, 0},
		{"bw burst", session.RawBW, sendpath.Burst, 64, 0, false, 0},
		{"bw inline", session.RawBW, sendpath.Inline, 128, 0, false, 0},
		{"lat inline", session.RawLat, sendpath.Inline, 64, 0, false, 0},
		{"lat generic", session.RawLat, sendpath.Generic, 64, 0, false, 0},
		{"bw tso tcp", session.RawBW, sendpath.TSO, 54 + 4*1000, 1000, true, 0},
		{"bw tso udp engine", session.RawBW, sendpath.TSO, 42 + 3*1200, 1200, false, verbsio.SegmentEngine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server, a, b := pairEnds(t, netns.Options{}, tc.test, func(c *raw.Config) {
				c.Sizes, c.Iterations, c.Warmup, c.RxDepth = []int{tc.size}, n, warm, 4096
				c.Path, c.MSS, c.Frame.TCP, c.Segmenter = tc.path, tc.mss, tc.tcp, tc.seg
			}, nil)
			if len(client) != 1 || client[0].Path != tc.path.String() {
				t.Fatalf("client results %+v: want one on the %s path", client, tc.path)
			}
			if tc.test == session.RawLat {
				if client[0].Samples != n {
					t.Fatalf("%d round trips measured, want %d", client[0].Samples, n)
				}
				return
			}
			per, frame := 1, tc.size
			if tc.path == sendpath.TSO {
				per, frame = (tc.size-headers(tc.tcp))/tc.mss, headers(tc.tcp)+tc.mss
			}
			sr := server[0]
			if sr.Bytes != int64(frame) || sr.Iterations+sr.Bandwidth.LostMessages != int64(n*per) || sr.Iterations < int64(n*per/2) || sr.Path != tc.path.String() {
				t.Fatalf("server: %d frames of %d bytes, %d lost, path %s; want %d of %d bytes on %s", sr.Iterations, sr.Bytes, sr.Bandwidth.LostMessages, sr.Path, n*per, frame, tc.path)
			}
			ca, cb := a.dev.Counters(), b.dev.Counters()
			if cb["rx_delivered"] < uint64(sr.Iterations) {
				t.Errorf("the server's engine delivered %d frames, fewer than the %d it counted", cb["rx_delivered"], sr.Iterations)
			}
			if tc.path != sendpath.TSO {
				if ca["tx_tso_sends"] != 0 {
					t.Errorf("%d TSO sends on the %s path", ca["tx_tso_sends"], tc.path)
				}
				return
			}
			if ca["tx_tso_sends"] != n+warm {
				t.Errorf("the client's engine made %d TSO sends, want %d", ca["tx_tso_sends"], n+warm)
			}
			// On veth (offloads on) the provider has the engine cut:
			// the kernel would hand the peer a whole GSO frame.
			if ca["tx_tso_kernel"] != 0 || ca["tx_frames"] != uint64((n+warm)*per) {
				t.Errorf("the client's engine sent %d frames, %d TSO sends by the kernel; want %d frames cut by the engine", ca["tx_frames"], ca["tx_tso_kernel"], (n+warm)*per)
			}
		})
	}
}

// headers is the header length of the tests' IPv4 frames.
func headers(tcp bool) int {
	if tcp {
		return 14 + 20 + 20
	}
	return 14 + 20 + 8
}

// TestRawTSOWire checks the segments of raw-bw's tso path as a sniffer
// on the server's link saw them, with tshark: every segment MSS bytes of
// TCP payload, the sequence numbers of one send's segments MSS apart and
// in order, IPv4 and TCP checksums valid.
func TestRawTSOWire(t *testing.T) {
	tshark.Skip(t)
	const n, mss, segs = 6, 1000, 4
	size := headers(true) + segs*mss
	var s *sniffer
	_, server := pairOver(t, netns.Options{}, session.RawBW, func(c *raw.Config) {
		c.Sizes, c.Iterations, c.Warmup, c.RxDepth = []int{size}, n, 0, 512
		c.Path, c.MSS, c.Frame.TCP = sendpath.TSO, mss, true
	}, func(p *netns.Pair) { s = sniff(t, p.B, 4*n*segs) })
	if server[0].Iterations != n*segs {
		t.Fatalf("the server counted %d segments, want %d", server[0].Iterations, n*segs)
	}
	wire := s.frames(n*segs, headers(true)+mss, 10*time.Second)
	if len(wire) != n*segs {
		t.Fatalf("the sniffer saw %d of %d segments", len(wire), n*segs)
	}
	rows := tshark.Fields(t, wire, "tcp.seq_raw", "tcp.len", "ip.checksum.status", "tcp.checksum.status", "ip.len")
	for i, r := range rows {
		if r[1] != strconv.Itoa(mss) || r[2] != tshark.Good || r[3] != tshark.Good || r[4] != strconv.Itoa(20+20+mss) {
			t.Errorf("segment %d: tcp.len %s, checksums %s %s, ip.len %s; want %d bytes, good checksums", i, r[1], r[2], r[3], r[4], mss)
		}
		if i%segs == 0 {
			continue
		}
		prev, err1 := strconv.ParseUint(rows[i-1][0], 10, 32)
		seq, err2 := strconv.ParseUint(r[0], 10, 32)
		if err1 != nil || err2 != nil || uint32(seq-prev) != mss {
			t.Errorf("segment %d: sequence %s after %s; want %d more", i, r[0], rows[i-1][0], mss)
		}
	}
}

// TestRawPathCheck checks the refusals of the paths and the MSS.
func TestRawPathCheck(t *testing.T) {
	good := goodConfig()
	tso := func(c *raw.Config) { c.Path, c.MSS, c.Sizes = sendpath.TSO, 1000, []int{42 + 2000} }
	cfg := good
	tso(&cfg)
	if err := cfg.Check(); err != nil {
		t.Fatalf("tso: %v", err)
	}
	cfg = good
	cfg.Test, cfg.Path = session.RawBurstLat, sendpath.Burst
	if err := cfg.Check(); err != nil {
		t.Fatalf("raw-burst-lat on the burst path: %v", err)
	}
	for _, c := range []struct {
		name string
		mod  func(c *raw.Config)
		want string
	}{
		{"burst on lat", func(c *raw.Config) { c.Test, c.TxDepth, c.Path = session.RawLat, 1, sendpath.Burst }, "raw-lat sends one frame at a time; use raw-bw or raw-burst-lat"},
		{"tso on burst-lat", func(c *raw.Config) { tso(c); c.Test = session.RawBurstLat }, "raw-burst-lat sends single frames; use raw-bw"},
		{"tso on lat", func(c *raw.Config) { tso(c); c.Test, c.TxDepth = session.RawLat, 1 }, "raw-lat sends single frames; use raw-bw"},
		{"dm", func(c *raw.Config) { c.Path = sendpath.DM }, "the raw tests send on the generic, burst, inline and tso paths"},
		{"no mss", func(c *raw.Config) { tso(c); c.MSS = 0 }, "MSS 0: a segment's payload is 1 to"},
		{"mss off tso", func(c *raw.Config) { c.MSS = 1000 }, "an MSS belongs to the tso path"},
		{"not whole segments", func(c *raw.Config) { tso(c); c.Sizes = []int{2100} }, "use 2042 (2 segments)"},
		{"too large", func(c *raw.Config) { tso(c); c.Sizes = []int{42 + 66000} }, "at most 65549 bytes"},
		{"sizes", func(c *raw.Config) { tso(c); c.Sizes = []int{1042, 2042} }, "give one size"},
		{"ethertype", func(c *raw.Config) { tso(c); c.Frame.EtherType = 0x88b5 }, "TSO cuts IP frames"},
	} {
		cfg := good
		c.mod(&cfg)
		err := cfg.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
