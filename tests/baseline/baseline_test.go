package baseline

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rperf/rperf/reports"
)

// peerEnv makes the test binary a Peer (see launch).
const peerEnv = "RPERF_BASELINE_TEST_PEER"

func TestMain(m *testing.M) {
	if role := os.Getenv(peerEnv); role != "" {
		if err := Peer(role, os.NewFile(3, "peer"), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// launch starts the test binary again as a peer.
func launch(role string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"="+role)
	return cmd
}

// checkLatency checks what every ping-pong or cost record must be.
func checkLatency(t *testing.T, r reports.Result, test string, bytes, samples int64, factor int) {
	t.Helper()
	if r.Test != test || r.Bytes != bytes || r.Latency == nil || r.Samples != samples || r.RTTFactor != factor {
		t.Fatalf("record %s %d B, %+v; want %s %d B, %d samples, rtt factor %d", r.Test, r.Bytes, r.Latency, test, bytes, samples, factor)
	}
	p50, p99 := r.Percentiles["50"], r.Percentiles["99"]
	if !(r.TrueMinUs > 0 && r.TrueMinUs <= p50 && p50 <= p99 && p99 <= r.TrueMaxUs) {
		t.Errorf("%s: min %v, p50 %v, p99 %v, max %v: not positive and ordered", test, r.TrueMinUs, p50, p99, r.TrueMaxUs)
	}
}

func TestPingPongs(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(Launcher, int, int) (reports.Result, error)
		test string
		size int
	}{
		{"udp", UDPPingPong, NameUDPPingPong, 64},
		{"udp-1B", UDPPingPong, NameUDPPingPong, 1},
		{"shm", SHMPingPong, NameSHMPingPong, 8},
		{"shm-max", SHMPingPong, NameSHMPingPong, MaxSHMSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.run(launch, tc.size, 500)
			if err != nil {
				t.Fatal(err)
			}
			checkLatency(t, r, tc.test, int64(tc.size), 500, reports.RTTFactorRoundTrip)
			if r.Iterations != 500 || r.Perftest == nil {
				t.Errorf("iterations %d, perftest fields %v; want 500 and set", r.Iterations, r.Perftest)
			}
		})
	}
}

func TestPingPongBadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		run   func(Launcher, int, int) (reports.Result, error)
		size  int
		iters int
		want  string
	}{
		{"udp size 0", UDPPingPong, 0, 10, "size 0: must be 1 to 65507"},
		{"udp too big", UDPPingPong, MaxDatagram + 1, 10, "size 65508"},
		{"udp no iterations", UDPPingPong, 64, 0, "iterations 0: must be at least 1"},
		{"shm too big", SHMPingPong, MaxSHMSize + 1, 10, "must be 1 to 2040 bytes"},
		{"shm no iterations", SHMPingPong, 8, -1, "iterations -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.run(launch, tc.size, tc.iters)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one saying %q", err, tc.want)
			}
		})
	}
}

// TestPeerFails: a peer that cannot run says why, and the measuring side
// reports it.
func TestPeerFails(t *testing.T) {
	if err := Peer("nonsense", os.Stdin, strings.NewReader(""), os.Stdout); err == nil || !strings.Contains(err.Error(), `unknown role "nonsense"`) {
		t.Errorf("Peer(nonsense): %v", err)
	}
	if err := Peer(RoleUDPPong, nil, strings.NewReader(""), os.Stdout); err == nil || !strings.Contains(err.Error(), "no file descriptor 3") {
		t.Errorf("Peer without fd 3: %v", err)
	}
	wrong := func(string) *exec.Cmd { return launch("nonsense") }
	_, err := UDPPingPong(wrong, 64, 10)
	if err == nil || !strings.Contains(err.Error(), `unknown role "nonsense"`) {
		t.Errorf("UDPPingPong with a failing peer: %v; want the peer's own message", err)
	}
}

func TestUDPStream(t *testing.T) {
	s := Stream{MessageBytes: 64 << 10, Messages: 300, SegmentPayload: 4096, SegmentOverhead: StreamSegmentOverhead}
	// A machine busy with other UDP traffic can drop a whole stream in
	// its loopback backlog; such a run is repeated, up to three times.
	var r reports.Result
	var err error
	for try := 0; try < 3; try++ {
		if r, err = UDPStream(launch, s); !errors.Is(err, ErrDropped) {
			break
		}
		t.Logf("run %d: %v", try, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Test != NameUDPStream || r.Bytes != 64<<10 || r.Bandwidth == nil || r.PeakStatus != reports.PeakReceiver {
		t.Fatalf("record %+v", r)
	}
	// Every message arrived whole or is counted lost; the first is the
	// window's start.
	if r.Iterations+1+r.LostMessages != 300 || r.Iterations < 1 {
		t.Errorf("%d timed + 1 + %d lost messages; want 300", r.Iterations, r.LostMessages)
	}
	want, err := reports.BWAverage(r.Bytes, r.Iterations, r.ElapsedNs)
	if err != nil || r.BWAvgMiBps != want.MiBps || !(r.BWAvgMiBps > 0) {
		t.Errorf("bw %v MiB/s; want %v (%v)", r.BWAvgMiBps, want.MiBps, err)
	}
}

func TestStreamCheck(t *testing.T) {
	ok := Stream{MessageBytes: 64 << 10, Messages: 10, SegmentPayload: 4096, SegmentOverhead: 16}
	for _, tc := range []struct {
		name string
		edit func(*Stream)
		want string
	}{
		{"ok", func(*Stream) {}, ""},
		{"not whole packets", func(s *Stream) { s.MessageBytes = 5000 }, "must be a multiple of the 4096-byte packet payload"},
		{"one message", func(s *Stream) { s.Messages = 1 }, "at least 2 are needed"},
		{"packet too big", func(s *Stream) { s.SegmentPayload = MaxDatagram }, "the packet at most 65507"},
		{"no payload", func(s *Stream) { s.SegmentPayload = 0 }, "at least 1 byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.edit(&s)
			err := s.check()
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("check: %v; want %q", err, tc.want)
			}
		})
	}
	if got := ok.perSend(); got != 15 {
		t.Errorf("perSend of 4112-byte packets: %d; want 15 (61680 bytes, the most under 65507)", got)
	}
}

// TestStreamCount checks the receiver's accounting against cases worked
// out by hand: packets of 20 bytes carrying 16 of payload, messages of 32.
func TestStreamCount(t *testing.T) {
	type read struct {
		n  int
		at int64
	}
	for _, tc := range []struct {
		name        string
		reads       []read
		sent        int
		whole       int64
		first, last int64
		iters, lost int64
		mibps       float64 // 32 B × iters over last − first
		err         string
	}{
		// Two packets a read: one message each, at 10, 20, 30, 40.
		{name: "one message a read", reads: []read{{40, 10}, {40, 20}, {40, 30}, {40, 40}}, sent: 4,
			whole: 4, first: 10, last: 40, iters: 3, lost: 0, mibps: 32 * 3 * 1e9 / (30 * (1 << 20))},
		// One packet, then three (message 1 completes at 7, message 2 at 7
		// too: 4 packets = 64 bytes), then one and one (message 3 at 12).
		{name: "uneven reads", reads: []read{{20, 5}, {60, 7}, {20, 9}, {20, 12}}, sent: 3,
			whole: 3, first: 7, last: 12, iters: 2, lost: 0, mibps: 32 * 2 * 1e9 / (5 * (1 << 20))},
		// Five messages sent, two and a half arrived (packets lost).
		{name: "losses", reads: []read{{40, 100}, {60, 300}}, sent: 5,
			whole: 2, first: 100, last: 300, iters: 1, lost: 3, mibps: 32 * 1e9 / (200 * (1 << 20))},
		{name: "one message", reads: []read{{40, 100}}, sent: 5, whole: 1, first: 100, last: 100, err: "1 of 5 messages arrived, the last 0 ns after the first: too few to time (the kernel dropped the rest: dropped)"},
		{name: "torn read", reads: []read{{30, 1}}, sent: 2, err: "a read of 30 bytes is not whole 20-byte packets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := streamCount{seg: 20, payload: 16, msg: 32}
			var err error
			for _, r := range tc.reads {
				if err = c.add(r.n, r.at); err != nil {
					break
				}
			}
			var res reports.Result
			if err == nil {
				if c.whole != tc.whole || c.first != tc.first || c.last != tc.last {
					t.Errorf("whole %d first %d last %d; want %d %d %d", c.whole, c.first, c.last, tc.whole, tc.first, tc.last)
				}
				res, err = c.result(tc.sent)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v; want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Iterations != tc.iters || res.LostMessages != tc.lost || res.ElapsedNs != tc.last-tc.first {
				t.Errorf("iterations %d lost %d elapsed %d; want %d %d %d", res.Iterations, res.LostMessages, res.ElapsedNs, tc.iters, tc.lost, tc.last-tc.first)
			}
			if math.Abs(res.BWAvgMiBps-tc.mibps) > 1e-9*tc.mibps {
				t.Errorf("bw %v MiB/s; want %v", res.BWAvgMiBps, tc.mibps)
			}
		})
	}
}

func TestMemmove(t *testing.T) {
	for _, tc := range []struct {
		name         string
		size, region int
		test         string
	}{
		{"warm", 64 << 10, 0, NameMemmoveWarm},
		{"cold", 64 << 10, 8 << 20, NameMemmoveCold},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Memmove(tc.size, 200, tc.region)
			if err != nil {
				t.Fatal(err)
			}
			if r.Test != tc.test || r.Bytes != int64(tc.size) || r.Iterations != 200 || r.PeakStatus != reports.PeakMeasured {
				t.Fatalf("record %+v", r)
			}
			// The peak is the best window of copies: never below the average.
			if !(r.BWAvgMiBps > 0 && r.BWPeakMiBps >= r.BWAvgMiBps) {
				t.Errorf("average %v, peak %v MiB/s", r.BWAvgMiBps, r.BWPeakMiBps)
			}
		})
	}
	for _, tc := range []struct {
		size, copies, region int
		want                 string
	}{
		{0, 10, 0, "size 0"},
		{64, 0, 0, "copies 0"},
		{64 << 10, 10, 100 << 10, "holds fewer than two"},
	} {
		if _, err := Memmove(tc.size, tc.copies, tc.region); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Memmove(%d, %d, %d): %v; want %q", tc.size, tc.copies, tc.region, err, tc.want)
		}
	}
}

func TestCaches(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{{"48K", 48 << 10}, {"2048K", 2 << 20}, {"32M", 32 << 20}, {"1G", 1 << 30}, {"512", 512}, {"", 0}, {"x", 0}, {"-4K", 0}} {
		if got := parseSize(tc.in); got != tc.want {
			t.Errorf("parseSize(%q) = %d; want %d", tc.in, got, tc.want)
		}
	}
	files := map[string]string{
		"/sys/devices/system/cpu/cpu0/cache/index0/size": "48K",
		"/sys/devices/system/cpu/cpu0/cache/index1/size": "32M",
		"/sys/devices/system/cpu/cpu0/cache/index2/size": "2048K",
	}
	read := func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s + "\n"), nil
		}
		return nil, os.ErrNotExist
	}
	if got := largestCache(read); got != 32<<20 {
		t.Errorf("largestCache = %d; want 32 MiB", got)
	}
	region, cache := ColdRegion()
	if region < 64<<20 || region > MaxColdRegion || cache > 0 && region < min(2*cache, MaxColdRegion) {
		t.Errorf("ColdRegion = %d for a %d-byte cache", region, cache)
	}
}

func TestCosts(t *testing.T) {
	for _, tc := range []struct {
		test string
		run  func(int) (reports.Result, error)
	}{
		{NameSyscall, func(n int) (reports.Result, error) { return Syscall(n, false) }},
		{NameSyscallRaw, func(n int) (reports.Result, error) { return Syscall(n, true) }},
		{NameClockRead, ClockRead},
	} {
		t.Run(tc.test, func(t *testing.T) {
			r, err := tc.run(50)
			if err != nil {
				t.Fatal(err)
			}
			checkLatency(t, r, tc.test, 0, 50, CostBatch)
			t.Logf("%s: %.1f ns", tc.test, r.Percentiles["50"]*1000)
		})
	}
	if _, err := ClockRead(0); err == nil || !strings.Contains(err.Error(), "samples 0") {
		t.Errorf("ClockRead(0): %v", err)
	}
}
