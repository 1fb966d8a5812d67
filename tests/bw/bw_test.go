package bw_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

func TestEveryTestAndTransport(t *testing.T) {
	for _, test := range bw.Tests {
		for _, conn := range test.Connections() {
			for _, bidir := range []bool{false, true} {
				name := test.Name() + "/" + conn.String()
				if bidir {
					name += "/bidirectional"
				}
				t.Run(name, func(t *testing.T) {
					cfg := bw.Default(test)
					cfg.Connection = conn
					cfg.Iterations = 200
					cfg.Bidirectional = bidir
					if test != bw.Atomic {
						cfg.Sizes = []int{2, 4096}
					}
					srv, cli := pairtest.MustShm0(t, bw.Run, cfg)
					for side, rs := range map[string][]reports.Result{"client": cli, "server": srv} {
						if len(rs) != len(cfg.Sizes) {
							t.Fatalf("%s: %d results, want %d", side, len(rs), len(cfg.Sizes))
						}
						for i, r := range rs {
							if r.Test != test.Name() || r.Bytes != int64(cfg.Sizes[i]) || r.Bandwidth == nil || r.BWAvgMiBps <= 0 || r.MsgRateMpps <= 0 {
								t.Errorf("%s: result %d: %+v %+v", side, i, r, r.Bandwidth)
							}
						}
					}
					c := cli[0]
					if c.Iterations != 200 || c.PeakStatus != reports.PeakMeasured || c.BWPeakMiBps < c.BWAvgMiBps*0.999 {
						t.Errorf("client: iterations %d, peak %s %v < avg %v", c.Iterations, c.PeakStatus, c.BWPeakMiBps, c.BWAvgMiBps)
					}
					s := srv[0]
					switch {
					case bidir:
						// Both print the sum of both directions.
						if s.BWAvgMiBps != c.BWAvgMiBps {
							t.Errorf("bidirectional sums differ: server %v, client %v", s.BWAvgMiBps, c.BWAvgMiBps)
						}
					case test == bw.Send:
						if s.PeakStatus != reports.PeakReceiver || s.Iterations+s.LostMessages != 200 {
							t.Errorf("receiver: %+v %+v", s, s.Bandwidth)
						}
						if conn == verbsio.QPTypeRC && s.LostMessages != 0 {
							t.Errorf("RC lost %d messages", s.LostMessages)
						}
					default:
						// The passive server prints the client's report.
						if diff := s.BWAvgMiBps - c.BWAvgMiBps; diff > 1e-6*c.BWAvgMiBps || diff < -1e-6*c.BWAvgMiBps || s.Iterations != c.Iterations {
							t.Errorf("passive server %v / %d, client %v / %d", s.BWAvgMiBps, s.Iterations, c.BWAvgMiBps, c.Iterations)
						}
					}
				})
			}
		}
	}
}

// TestQueueing runs the perftest knobs that shape the send loop: several
// QPs, a post list, CQ moderation, a tx depth that does not divide the
// iterations.
func TestQueueing(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*bw.Config)
	}{
		{"4 QPs", func(c *bw.Config) { c.QPs = 4 }},
		{"post list 8", func(c *bw.Config) { c.PostList = 8; c.TxDepth = 32 }},
		{"post list not dividing", func(c *bw.Config) { c.PostList = 7; c.Iterations = 100 }},
		{"cq mod 1", func(c *bw.Config) { c.CQMod = 1 }},
		{"cq mod 13, tx 20", func(c *bw.Config) { c.CQMod = 13; c.TxDepth = 20; c.Iterations = 101 }},
		{"send 3 QPs rx 4", func(c *bw.Config) { c.Test = bw.Send; c.QPs = 3; c.RxDepth = 4 }},
		{"read 2 QPs", func(c *bw.Config) { c.Test = bw.Read; c.QPs = 2; c.OutReads = 4 }},
		{"warmup", func(c *bw.Config) { c.Warmup = 50 }},
		{"no peak", func(c *bw.Config) { c.NoPeak = true }},
		{"gbits", func(c *bw.Config) { c.ReportGbits = true }},
		{"inline", func(c *bw.Config) { c.Inline = 64; c.Sizes = []int{64} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := bw.Default(bw.Write)
			cfg.Iterations = 300
			cfg.Sizes = []int{1024}
			c.mod(&cfg)
			srv, cli := pairtest.MustShm0(t, bw.Run, cfg)
			want := int64(cfg.Iterations * cfg.QPs)
			if cli[0].Iterations != want || srv[0].Iterations != want {
				t.Errorf("iterations: client %d, server %d, want %d", cli[0].Iterations, srv[0].Iterations, want)
			}
			wantPeak := reports.PeakMeasured
			if cfg.NoPeak {
				wantPeak = reports.PeakDisabled
			}
			if cli[0].PeakStatus != wantPeak {
				t.Errorf("peak status %s, want %s", cli[0].PeakStatus, wantPeak)
			}
			if cfg.ReportGbits && cfg.Test != bw.Send {
				// The server converted the client's Gb/s report back.
				if r := srv[0].BWAvgMiBps / cli[0].BWAvgMiBps; r < 0.999999 || r > 1.000001 {
					t.Errorf("server MiB/s %v from the Gb/s report, client %v", srv[0].BWAvgMiBps, cli[0].BWAvgMiBps)
				}
			}
		})
	}
}

func TestDurationMode(t *testing.T) {
	for _, test := range []session.Test{bw.Write, bw.Send} {
		for _, bidir := range []bool{false, true} {
			t.Run(test.Name()+map[bool]string{true: "/bidirectional"}[bidir], func(t *testing.T) {
				cfg := bw.Default(test)
				cfg.Duration = pairtest.StallWindow + 200*time.Millisecond
				cfg.Margin = 100 * time.Millisecond
				cfg.Sizes = []int{4096}
				cfg.QPs = 2
				cfg.Bidirectional = bidir
				srv, cli := pairtest.MustShm0(t, bw.Run, cfg)
				for side, r := range map[string]reports.Result{"client": cli[0], "server": srv[0]} {
					if r.Mode != reports.ModeDuration || r.Iterations < 100 || r.PeakStatus == reports.PeakMeasured || r.BWAvgMiBps <= 0 {
						t.Errorf("%s: %+v %+v", side, r, r.Bandwidth)
					}
				}
				// The sender's window runs from the warm-up's end to the
				// cool-down's start, however late its loop read the clock
				// around them (as perftest's alarm stamps it).
				if d := time.Duration(cli[0].ElapsedNs); d != pairtest.StallWindow {
					t.Errorf("client: sample window %v, want %v", d, pairtest.StallWindow)
				}
			})
		}
	}
}

func TestCQModRule(t *testing.T) {
	cases := []struct {
		mod       func(*bw.Config)
		size, cqm int
	}{
		{func(*bw.Config) {}, 65536, 1},
		{func(*bw.Config) {}, 8192, 100},
		{func(c *bw.Config) { c.TxDepth = 16 }, 64, 16},
		{func(c *bw.Config) { c.CQMod = 7 }, 65536, 7},
		{func(c *bw.Config) { c.PostList = 4; c.CQMod = 7 }, 64, 4},
		{func(c *bw.Config) { c.Iterations = 50 }, 64, 50},
	}
	for i, c := range cases {
		cfg := bw.Default(bw.Write)
		c.mod(&cfg)
		if got := cfg.CQModFor(c.size); got != c.cqm {
			t.Errorf("case %d: CQModFor(%d) = %d, want %d", i, c.size, got, c.cqm)
		}
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*bw.Config)
		want string
	}{
		{"ok", func(*bw.Config) {}, ""},
		{"atomic over UC", func(c *bw.Config) { c.Test = bw.Atomic; c.Connection = verbsio.QPTypeUC; c.Sizes = []int{8} }, "does not run over UC"},
		{"post list > tx", func(c *bw.Config) { c.PostList = 200 }, "longer than the tx depth"},
		{"qps", func(c *bw.Config) { c.QPs = 0 }, "at least 1"},
		{"rx depth", func(c *bw.Config) { c.Test = bw.Send; c.RxDepth = 0 }, "rx depth"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := bw.Default(bw.Write)
			c.mod(&cfg)
			err := cfg.Check()
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("Check() = %v, want %q", err, c.want)
			}
		})
	}
}

// TestUnreliableLoss starves a UD receiver (one receive posted) so that
// messages are dropped: the receiver stops after the quiet period and
// reports what was lost; the sender's figures are unaffected.
func TestUnreliableLoss(t *testing.T) {
	cfg := bw.Default(bw.Send)
	cfg.Connection = verbsio.QPTypeUD
	cfg.Sizes = []int{1024}
	cfg.Iterations = 2000
	cfg.RxDepth = 1
	srv, cli := pairtest.MustShm0(t, bw.Run, cfg)
	s, c := srv[0], cli[0]
	if s.LostMessages == 0 || s.Iterations+s.LostMessages != 2000 || s.PeakStatus != reports.PeakReceiver {
		t.Errorf("receiver: %d received, %d lost, peak %s", s.Iterations, s.LostMessages, s.PeakStatus)
	}
	if c.Iterations != 2000 || c.LostMessages != 0 {
		t.Errorf("sender: %d messages, %d lost", c.Iterations, c.LostMessages)
	}
}

// TestRateLimit checks that RateLimitKbps paces the sender (perftest
// --rate_limit, PP): 40 messages of 64 KiB at 40 Mb/s take about half a
// second, where the unpaced engine needs milliseconds; every message
// still arrives (UC: nothing is resent).
func TestRateLimit(t *testing.T) {
	for _, conn := range []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC} {
		t.Run(conn.String(), func(t *testing.T) {
			cfg := bw.Default(bw.Send)
			cfg.Connection = conn
			cfg.Sizes = []int{64 << 10}
			cfg.Iterations = 40
			cfg.RateLimitKbps = 40_000
			srv, cli := pairtest.MustShm0(t, bw.Run, cfg)
			if srv[0].Iterations != 40 || srv[0].LostMessages != 0 {
				t.Errorf("receiver: %d received, %d lost; want 40, 0", srv[0].Iterations, srv[0].LostMessages)
			}
			// 40 Mb/s is 4.77 MiB/s; the bucket's first burst may
			// leave at once, so allow a quarter more, never 10 times.
			if limit := 40e6 / 8 / (1 << 20) * 1.25; cli[0].BWAvgMiBps > limit {
				t.Errorf("sender at %.2f MiB/s, want at most %.2f (40 Mb/s)", cli[0].BWAvgMiBps, limit)
			}
		})
	}
}
