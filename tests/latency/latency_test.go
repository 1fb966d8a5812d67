package latency_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

func TestEveryTestAndTransport(t *testing.T) {
	for _, test := range latency.Tests {
		for _, conn := range test.Connections() {
			t.Run(test.Name()+"/"+conn.String(), func(t *testing.T) {
				cfg := latency.Default(test)
				cfg.Connection = conn
				cfg.Iterations = 50
				cfg.Inline = test.DefaultInline(conn)
				if test != latency.Atomic {
					cfg.Sizes = []int{2, 64, 4096}
				}
				cfg.Params = oob.Params{Test: test.Command()}
				srv, cli := pairtest.MustShm0(t, latency.Run, cfg)
				check := func(side string, rs []reports.Result) {
					if len(rs) != len(cfg.Sizes) {
						t.Fatalf("%s: %d results, want %d", side, len(rs), len(cfg.Sizes))
					}
					for i, r := range rs {
						if r.Test != test.Name() || r.Bytes != int64(cfg.Sizes[i]) || r.Iterations != 50 || r.Latency == nil {
							t.Errorf("%s: result %d: %+v", side, i, r)
							continue
						}
						if r.Samples != 49 || r.RTTFactor != test.RTTFactor() || r.Perftest == nil || !r.AllSamples {
							t.Errorf("%s: %d B: samples %d, rtt %d, perftest %v", side, r.Bytes, r.Samples, r.RTTFactor, r.Perftest)
						}
						if !(r.TrueMinUs > 0 && r.TrueMinUs <= r.MeanUs && r.MeanUs <= r.TrueMaxUs) {
							t.Errorf("%s: %d B: min %v mean %v max %v", side, r.Bytes, r.TrueMinUs, r.MeanUs, r.TrueMaxUs)
						}
					}
				}
				check("client", cli)
				if test.Passive() {
					if len(srv) != 0 {
						t.Errorf("passive server returned %d results", len(srv))
					}
				} else {
					check("server", srv)
				}
			})
		}
	}
}

// TestDurationMode checks what duration mode promises whatever else the
// machine runs: the client posts until the duration has passed, the sample
// window lies between the margins, and every iteration inside it is
// recorded. How many iterations fit, and how soon after the warm-up
// margin the first one starts, depend on the CPU time the two sides get.
func TestDurationMode(t *testing.T) {
	for _, test := range []session.Test{latency.Write, latency.Send, latency.Read} {
		t.Run(test.Name(), func(t *testing.T) {
			cfg := latency.Default(test)
			cfg.Duration = 600 * time.Millisecond
			cfg.Margin = 100 * time.Millisecond
			cfg.Params = oob.Params{Test: test.Command()}
			begin := time.Now()
			srv, cli := pairtest.MustShm0(t, latency.Run, cfg)
			if took := time.Since(begin); took < cfg.Duration {
				t.Errorf("the run took %v, less than the duration %v", took, cfg.Duration)
			}
			if len(cli) != 1 {
				t.Fatalf("client: %d results", len(cli))
			}
			r := cli[0]
			if r.Mode != reports.ModeDuration || r.Iterations < 2 || r.Samples != r.Iterations-1 || r.TPSAverage <= 0 {
				t.Errorf("client: mode %s, iterations %d, samples %d, tps %v", r.Mode, r.Iterations, r.Samples, r.TPSAverage)
			}
			// The window starts where the warm-up margin ends and ends
			// where the cool-down margin begins: it is at most
			// Duration-2×Margin long, and it holds every sample, each the
			// time between two posts inside it.
			window := cfg.Duration - 2*cfg.Margin
			elapsed := time.Duration(r.ElapsedNs)
			sampled := time.Duration(r.MeanUs * float64(r.Samples) * float64(r.RTTFactor) * float64(time.Microsecond))
			if elapsed > window || sampled <= 0 || sampled > elapsed+time.Microsecond {
				t.Errorf("client: sample window %v holding %v of samples, want a window of at most %v that holds them", elapsed, sampled, window)
			}
			h, err := reports.DecodeHDR(r.HDR)
			if err != nil || h.TotalCount() != r.Samples || r.Percentiles["99.99"] <= 0 {
				t.Errorf("client: no full statistics in duration mode: histogram %v, percentiles %v", err, r.Percentiles)
			}
			if !test.Passive() && len(srv) != 1 {
				t.Errorf("server: %d results", len(srv))
			}
		})
	}
}

func TestWarmupIsNotRecorded(t *testing.T) {
	cfg := latency.Default(latency.Write)
	cfg.Iterations = 20
	cfg.Warmup = 30
	_, cli := pairtest.MustShm0(t, latency.Run, cfg)
	if cli[0].Samples != 19 || cli[0].Iterations != 20 {
		t.Errorf("samples %d iterations %d, want 19 and 20", cli[0].Samples, cli[0].Iterations)
	}
}

func TestMismatchedSizeRefused(t *testing.T) {
	srvCfg := latency.Default(latency.Write)
	srvCfg.Params = oob.Params{Test: "write-lat", Fields: []oob.Field{{Flag: "-s", Value: "64", Symmetric: true}}}
	cliCfg := srvCfg
	cliCfg.Params = oob.Params{Test: "write-lat", Fields: []oob.Field{{Flag: "-s", Value: "128", Symmetric: true}}}
	_, _, srvErr, cliErr := pairtest.Results(t, pairtest.Shm0, latency.Run, srvCfg, cliCfg)
	for _, err := range []error{srvErr, cliErr} {
		if err == nil || !strings.Contains(err.Error(), "peers disagree") {
			t.Errorf("err = %v, want peers disagree", err)
		}
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*latency.Config)
		want string
	}{
		{"ok", func(*latency.Config) {}, ""},
		{"read over UC", func(c *latency.Config) { c.Test = latency.Read; c.Connection = verbsio.QPTypeUC }, "does not run over UC"},
		{"size 0", func(c *latency.Config) { c.Sizes = []int{0} }, "below 1"},
		{"atomic size", func(c *latency.Config) { c.Test = latency.Atomic; c.Sizes = []int{64} }, "move 8 bytes"},
		{"few iterations", func(c *latency.Config) { c.Iterations = 4 }, "at least 5"},
		{"margin", func(c *latency.Config) { c.Duration = time.Second; c.Margin = time.Second }, "twice the margin"},
		{"warmup in duration", func(c *latency.Config) { c.Duration = 5 * time.Second; c.Warmup = 3 }, "iterations mode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := latency.Default(latency.Write)
			c.mod(&cfg)
			err := cfg.Check()
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("Check() = %v, want %q", err, c.want)
			}
		})
	}
}
