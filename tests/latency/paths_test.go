package latency_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// Every send path that applies to a test runs it on shm0, both sides
// measuring, and the records name the path.
func TestSendPaths(t *testing.T) {
	for _, test := range latency.Tests {
		for _, path := range sendpath.All {
			if path == sendpath.TSO || sendpath.Applies(path, test.PathTest(verbsio.QPTypeRC)) != nil {
				continue
			}
			t.Run(test.Name()+"/"+path.String(), func(t *testing.T) {
				cfg := latency.Default(test)
				cfg.Iterations = 40
				cfg.Path = path
				if test != latency.Atomic {
					cfg.Sizes = []int{2, 1000}
				}
				cfg.Params = oob.Params{Test: test.Command()}
				srv, cli := pairtest.MustShm0(t, latency.Run, cfg)
				check := func(side string, rs []reports.Result) {
					if len(rs) != len(cfg.Sizes) {
						t.Fatalf("%s: %d results, want %d", side, len(rs), len(cfg.Sizes))
					}
					for _, r := range rs {
						if r.Path != path.String() || r.Latency == nil || r.Samples != 39 || !(r.TrueMinUs > 0) {
							t.Errorf("%s: %d B: path %q, %+v", side, r.Bytes, r.Path, r.Latency)
						}
					}
				}
				check("client", cli)
				if !test.Passive() {
					check("server", srv)
				}
			})
		}
	}
}

// Duration mode ends each ping-pong with a stop message, which the burst
// and dv paths must carry too.
func TestSendPathsDuration(t *testing.T) {
	for _, c := range []struct {
		test session.Test
		path sendpath.Path
	}{{latency.Send, sendpath.Burst}, {latency.Send, sendpath.DV}, {latency.Write, sendpath.DV}, {latency.Write, sendpath.DM}} {
		t.Run(c.test.Name()+"/"+c.path.String(), func(t *testing.T) {
			cfg := latency.Default(c.test)
			cfg.Duration, cfg.Margin = pairtest.StallWindow+200*time.Millisecond, 100*time.Millisecond
			cfg.Path = c.path
			cfg.Params = oob.Params{Test: c.test.Command()}
			_, cli := pairtest.MustShm0(t, latency.Run, cfg)
			// How many ping-pongs fit depends on the CPU time both sides
			// get (10 in 800 ms at load 20); every one in the window is
			// a sample, and at least two make a measurement.
			if len(cli) != 1 || cli[0].Mode != reports.ModeDuration || cli[0].Iterations < 2 || cli[0].Samples != cli[0].Iterations-1 {
				t.Fatalf("client: %+v", cli)
			}
		})
	}
}

func TestSendPathRefusals(t *testing.T) {
	cases := []struct {
		test session.Test
		path sendpath.Path
		mod  func(*latency.Config)
		want string
	}{
		{latency.Write, sendpath.Burst, nil, "posts SENDs only"},
		{latency.Read, sendpath.Inline, nil, "inline data"},
		{latency.Atomic, sendpath.DV, nil, "SEND and RDMA WRITE"},
		{latency.Send, sendpath.TSO, nil, "send-bw or write-bw"},
		{latency.Send, sendpath.DV, func(c *latency.Config) { c.Connection = verbsio.QPTypeUD }, "address handle"},
		{latency.Write, sendpath.DM, func(c *latency.Config) { c.Validate = true }, "device memory"},
	}
	for _, c := range cases {
		cfg := latency.Default(c.test)
		cfg.Path = c.path
		if c.mod != nil {
			c.mod(&cfg)
		}
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s --path %s: %v, want an error saying %q", c.test.Name(), c.path, err, c.want)
		}
	}
}

// What the device does not offer, or cannot hold, fails before any
// measurement with the reason.
func TestSendPathDeviceLimits(t *testing.T) {
	cases := []struct {
		path  sendpath.Path
		sizes []int
		want  string
	}{
		{sendpath.Inline, []int{2, 2048}, "max_inline_data 1024"},
		{sendpath.DM, []int{200 << 10}, "max_dm_size"},
	}
	for _, c := range cases {
		cfg := latency.Default(latency.Write)
		cfg.Iterations = 10
		cfg.Path, cfg.Sizes = c.path, c.sizes
		cfg.Params = oob.Params{Test: "write-lat"}
		_, _, srvErr, cliErr := pairtest.Results(t, pairtest.Shm0, latency.Run, cfg, cfg)
		if cliErr == nil || !strings.Contains(cliErr.Error(), c.want) {
			t.Errorf("--path %s -s %v: client %v, want an error saying %q (server: %v)", c.path, c.sizes, cliErr, c.want, srvErr)
		}
	}
}

// The paths run on the udp fabric too (udp_lo, both engines in this
// process on their own UDP ports).
func TestSendPathsOnUDP(t *testing.T) {
	attr := pairtest.UDPLoopbackAttr(t)
	for _, test := range []session.Test{latency.Send, latency.Write} {
		for _, path := range sendpath.Supported(attr) {
			if sendpath.Applies(path, test.PathTest(verbsio.QPTypeRC)) != nil {
				continue
			}
			t.Run(test.Name()+"/"+path.String(), func(t *testing.T) {
				cfg := latency.Default(test)
				cfg.Path, cfg.Iterations, cfg.Sizes = path, 40, []int{64}
				cfg.Params = oob.Params{Test: test.Command()}
				cfg.QPTimeout = pairtest.QPTimeout
				_, cli := pairtest.MustResults(t, pairtest.UDPLoopback, latency.Run, cfg, cfg)
				if len(cli) != 1 || cli[0].Path != path.String() || cli[0].Samples != 39 {
					t.Fatalf("client: %+v", cli)
				}
			})
		}
	}
}
