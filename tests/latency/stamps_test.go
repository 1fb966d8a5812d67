package latency_test

import (
	"errors"
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

// TestCompletionTimestamps runs every latency test with completion
// timestamps on shm0 and on the udp fabric: each measuring side reports,
// after every size's software-clock result, the same run's result from
// the completion stamps, with as many samples, and figures of the same
// order (both time the same cycles of the test).
func TestCompletionTimestamps(t *testing.T) {
	const iters = 300
	for dev, open := range pairtest.Devices() {
		for _, test := range latency.Tests {
			t.Run(dev+"/"+test.Name(), func(t *testing.T) {
				cfg := latency.Default(test)
				cfg.Iterations = iters
				cfg.Warmup = 10
				cfg.CompletionTimestamps = true
				cfg.QPTimeout = pairtest.QPTimeout
				if test != latency.Atomic {
					cfg.Sizes = []int{2, 1024}
				}
				cfg.Params = oob.Params{Test: test.Command()}
				srv, cli := pairtest.MustResults(t, open, latency.Run, cfg, cfg)
				checkStamped(t, "client", cfg, cli)
				if test.Passive() {
					if len(srv) != 0 {
						t.Errorf("passive server: %d results", len(srv))
					}
					return
				}
				checkStamped(t, "server", cfg, srv)
			})
		}
	}
}

// TestCompletionTimestampsDuration runs send_lat and read_lat in duration
// mode with completion timestamps: the completion result's perftest line
// counts the cycles it timed, over their time on the device's clock.
func TestCompletionTimestampsDuration(t *testing.T) {
	for _, test := range []session.Test{latency.Send, latency.Read} {
		t.Run(test.Name(), func(t *testing.T) {
			cfg := latency.Default(test)
			cfg.Duration, cfg.Margin = time.Second, 250*time.Millisecond
			cfg.CompletionTimestamps = true
			cfg.Params = oob.Params{Test: test.Command()}
			_, cli := pairtest.MustShm0(t, latency.Run, cfg)
			if len(cli) != 2 {
				t.Fatalf("%d results, want the software clock's and the completion stamps'", len(cli))
			}
			sw, ts := cli[0], cli[1]
			// How many cycles fit the 500 ms window is the machine's
			// load's affair (5 under -race at load 12); the accounting
			// holds for any number.
			if ts.Clock != reports.ClockCompletion || ts.Mode != reports.ModeDuration || ts.Samples < 1 || ts.Iterations != ts.Samples {
				t.Fatalf("completion result: clock %q mode %q, %d samples, %d iterations", ts.Clock, ts.Mode, ts.Samples, ts.Iterations)
			}
			// t_avg is the samples' one-way mean, within
			// the rounding of the samples' sum.
			if d := ts.TAvgUs - ts.MeanUs; d > 0.01 || d < -0.01 {
				t.Errorf("t_avg %.4f us, mean of the stamps' samples %.4f us", ts.TAvgUs, ts.MeanUs)
			}
			if sw.Samples-ts.Samples > 2 || ts.Samples-sw.Samples > 2 {
				t.Errorf("%d software samples, %d from completion stamps: the same window should count the same cycles, give or take one at each end", sw.Samples, ts.Samples)
			}
		})
	}
}

// checkStamped checks a side's results of a run with completion
// timestamps: a software-clock result and a completion-timestamp result
// per size, in that order.
func checkStamped(t *testing.T, side string, cfg latency.Config, rs []reports.Result) {
	t.Helper()
	if len(rs) != 2*len(cfg.Sizes) {
		t.Fatalf("%s: %d results, want 2 for each of %v", side, len(rs), cfg.Sizes)
	}
	for i, size := range cfg.Sizes {
		sw, ts := rs[2*i], rs[2*i+1]
		if sw.Clock != "" || ts.Clock != reports.ClockCompletion || sw.Bytes != int64(size) || ts.Bytes != int64(size) ||
			sw.Latency == nil || ts.Latency == nil {
			t.Fatalf("%s: %d B: results %+v / %+v", side, size, sw, ts)
		}
		if want := int64(cfg.Iterations - 1); sw.Samples != want || ts.Samples != want {
			t.Errorf("%s: %d B: %d software samples and %d from completion stamps, want %d each", side, size, sw.Samples, ts.Samples, want)
		}
		if ts.RTTFactor != sw.RTTFactor || ts.Iterations != sw.Iterations {
			t.Errorf("%s: %d B: completion result rtt %d iterations %d, software's %d, %d", side, size, ts.RTTFactor, ts.Iterations, sw.RTTFactor, sw.Iterations)
		}
		// Both clocks time the same cycles: their medians are of one
		// order (a stamp read in the wrong unit, from the wrong
		// completions, or zero, is not).
		p50sw, p50ts := p50(t, sw), p50(t, ts)
		if !(ts.TrueMinUs > 0 && p50ts > 0 && p50ts <= 3*p50sw+20 && p50sw <= 3*p50ts+20) {
			t.Errorf("%s: %d B: completion stamps min %.3f us p50 %.3f us; software clock p50 %.3f us", side, size, ts.TrueMinUs, p50ts, p50sw)
		}
	}
}

func p50(t *testing.T, r reports.Result) float64 {
	t.Helper()
	v, ok := r.Percentiles["50"]
	if !ok {
		t.Fatalf("%d B: no p50 in %v", r.Bytes, r.Percentiles)
	}
	return v
}

// TestCompletionTimestampsRefused checks the configurations that cannot
// take completion timestamps: the burst path, whose cq_poll family reads
// no completion.
func TestCompletionTimestampsRefused(t *testing.T) {
	cfg := latency.Default(latency.Send)
	cfg.CompletionTimestamps = true
	cfg.Path = sendpath.Burst
	err := cfg.Check()
	var fe *session.FieldError
	if err == nil || !errors.As(err, &fe) || fe.Field != "Path" || !strings.Contains(err.Error(), "reads none of their timestamps") {
		t.Errorf("Check() = %v, want the burst path refused", err)
	}
	cfg.Path = sendpath.Generic
	if err := cfg.Check(); err != nil {
		t.Errorf("generic path: %v", err)
	}
}

// TestCheckTimestamps checks the refusal of a device that does not stamp
// completions: it names the field at fault and where to see it.
func TestCheckTimestamps(t *testing.T) {
	cases := []struct {
		name string
		ext  *verbsio.DeviceAttrEx
		want string // "" for no error
	}{
		{"no extended attributes", nil, "mlx0 does not stamp completions (completion_timestamp_mask 0; rdiag info -v mlx0 shows it)"},
		{"no mask", &verbsio.DeviceAttrEx{HCACoreClock: 156250}, "completion_timestamp_mask 0"},
		{"no clock", &verbsio.DeviceAttrEx{CompletionTimestampMask: 1<<48 - 1}, "hca_core_clock 0, completion_timestamp_mask 0xffffffffffff"},
		{"both", &verbsio.DeviceAttrEx{CompletionTimestampMask: 1<<48 - 1, HCACoreClock: 156250}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := session.CheckTimestamps(verbsio.DeviceAttr{Ext: c.ext}, "mlx0")
			switch {
			case c.want == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}
