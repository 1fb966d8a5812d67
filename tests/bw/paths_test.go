package bw_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// Every send path that applies to a test runs it on shm0, in iterations
// mode with a post list (burst and dv batch it), in duration mode (the
// stop message), and bidirectionally for SEND; the records name the path.
func TestSendPaths(t *testing.T) {
	for _, test := range bw.Tests {
		for _, path := range sendpath.All {
			if path == sendpath.TSO || sendpath.Applies(path, test.PathTest(verbsio.QPTypeRC)) != nil {
				continue
			}
			for _, mode := range []string{"iterations", "duration", "bidirectional"} {
				// Duration mode ends with a stop message that burst and dv post
				// their own way; dm's buffers are checked once.
				if mode == "bidirectional" && test != bw.Send ||
					mode == "duration" && !(test == bw.Send && (path == sendpath.Burst || path == sendpath.DV || path == sendpath.DM) || test == bw.Write && path == sendpath.DV) {
					continue
				}
				t.Run(test.Name()+"/"+path.String()+"/"+mode, func(t *testing.T) {
					cfg := bw.Default(test)
					cfg.Path = path
					cfg.Iterations = 300
					cfg.PostList = 4
					if test != bw.Atomic {
						cfg.Sizes = []int{64, 1000}
					}
					switch mode {
					case "duration":
						cfg.Duration, cfg.Margin = pairtest.StallWindow+200*time.Millisecond, 100*time.Millisecond
					case "bidirectional":
						cfg.Bidirectional = true
					}
					cfg.Params = oob.Params{Test: test.Command()}
					srv, cli := pairtest.MustShm0(t, bw.Run, cfg)
					for side, rs := range map[string][]reports.Result{"client": cli, "server": srv} {
						if len(rs) != len(cfg.Sizes) {
							t.Fatalf("%s: %d results, want %d", side, len(rs), len(cfg.Sizes))
						}
						for _, r := range rs {
							if r.Path != path.String() || r.Bandwidth == nil || r.MsgRateMpps <= 0 {
								t.Errorf("%s: %d B: path %q, %+v", side, r.Bytes, r.Path, r.Bandwidth)
							}
							if mode == "iterations" && r.Iterations != 300 {
								t.Errorf("%s: %d B: %d messages, want 300", side, r.Bytes, r.Iterations)
							}
						}
					}
				})
			}
		}
	}
}

func TestSendPathRefusals(t *testing.T) {
	cases := []struct {
		test session.Test
		path sendpath.Path
		mod  func(*bw.Config)
		want string
	}{
		{bw.Write, sendpath.Burst, nil, "posts SENDs only"},
		{bw.Send, sendpath.Burst, func(c *bw.Config) { c.QPs = 2 }, "runs one QP"},
		{bw.Send, sendpath.Burst, func(c *bw.Config) { c.Validate = true }, "RecvBurst"},
		{bw.Read, sendpath.TSO, nil, "send-bw or write-bw"},
		{bw.Atomic, sendpath.Inline, nil, "inline data"},
		{bw.Write, sendpath.DM, func(c *bw.Config) { c.Validate = true }, "device memory"},
	}
	for _, c := range cases {
		cfg := bw.Default(c.test)
		cfg.Path = c.path
		if c.mod != nil {
			c.mod(&cfg)
		}
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s --path %s: %v, want an error saying %q", c.test.Name(), c.path, err, c.want)
		}
	}
	// shm0 moves no packets: no tso.
	cfg := bw.Default(bw.Send)
	cfg.Path, cfg.Iterations = sendpath.TSO, 10
	_, _, _, cliErr := pairtest.Results(t, pairtest.Shm0, bw.Run, cfg, cfg)
	if cliErr == nil || !strings.Contains(cliErr.Error(), "shm0 does not support the tso send path; it supports generic, burst, inline, dm, dv") {
		t.Errorf("tso on shm0: %v", cliErr)
	}
}

// Every path runs on the udp fabric too (udp_lo, both engines in this
// process on their own UDP ports): the tso path has the kernel cut the
// packets (UDP GSO) where generic has the engine cut them.
func TestSendPathsOnUDP(t *testing.T) {
	attr := pairtest.UDPLoopbackAttr(t)
	for _, path := range sendpath.Supported(attr) {
		t.Run(path.String(), func(t *testing.T) {
			cfg := bw.Default(bw.Send)
			cfg.Path, cfg.Iterations, cfg.Sizes, cfg.PostList = path, 200, []int{64 << 10}, 4
			if path == sendpath.Inline {
				cfg.Sizes = []int{1000}
			}
			cfg.Params = oob.Params{Test: "send-bw"}
			cfg.QPTimeout = pairtest.QPTimeout
			_, cli := pairtest.MustResults(t, pairtest.UDPLoopback, bw.Run, cfg, cfg)
			if len(cli) != 1 || cli[0].Path != path.String() || cli[0].Iterations != 200 || cli[0].BWAvgGbps <= 0 {
				t.Fatalf("client: %+v", cli)
			}
		})
	}
}
