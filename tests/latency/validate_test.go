package latency_test

import (
	"strings"
	"testing"

	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// TestValidate runs every test with data validation on shm0 and on the
// udp fabric over loopback (where the passive sides run the engine in the
// background and write_lat's memory spin polls it).
func TestValidate(t *testing.T) {
	for dev, open := range pairtest.Devices() {
		for _, test := range latency.Tests {
			for _, conn := range test.Connections() {
				for _, op := range []verbsio.Opcode{verbsio.OpAtomicFetchAdd, verbsio.OpAtomicCmpSwp} {
					name := dev + "/" + test.Name() + "/" + conn.String()
					if test == latency.Atomic {
						name += "/" + op.String()
					} else if op != verbsio.OpAtomicFetchAdd {
						continue
					}
					t.Run(name, func(t *testing.T) {
						cfg := latency.Default(test)
						cfg.Connection = conn
						cfg.Iterations = 40
						cfg.Warmup = 5
						cfg.AtomicOp = op
						cfg.Inline = test.DefaultInline(conn)
						cfg.Validate = true
						cfg.QPTimeout = pairtest.QPTimeout
						if test != latency.Atomic {
							cfg.Sizes = []int{1, 2, 13, 300, 4096, 9000}
							if conn == verbsio.QPTypeUD {
								cfg.Sizes = []int{1, 2, 13, 300, 1024}
							}
						}
						cfg.Params = oob.Params{Test: test.Command()}
						_, cli := pairtest.MustResults(t, open, latency.Run, cfg, cfg)
						if len(cli) != len(cfg.Sizes) {
							t.Fatalf("%d results, want %d", len(cli), len(cfg.Sizes))
						}
					})
				}
			}
		}
	}
}

// TestValidateCatches runs a validating client against a server that does
// not prepare its data: the client must fail on the first message it
// checks, naming it.
func TestValidateCatches(t *testing.T) {
	cases := []struct {
		test session.Test
		want string
	}{
		{latency.Send, "data validation failed: the peer's SEND #1 on QP 0: byte 0 of 63"},
		{latency.Write, "data validation failed: the peer's RDMA WRITE #1 on QP 0: byte 0 of 63"},
		{latency.Read, "data validation failed: our RDMA_READ #1 on QP 0: byte 7 of 64 is 0x00, want 0x80"},
		// The unvalidating server does not reset its counter between
		// sizes, so the second run starts at 30, not 0.
		{latency.Atomic, "data validation failed: our ATOMIC_FETCH_AND_ADD #1 on QP 0: it returned 30, want 0"},
	}
	for _, c := range cases {
		t.Run(c.test.Name(), func(t *testing.T) {
			cfg := latency.Default(c.test)
			cfg.Iterations = 30
			cfg.Sizes = []int{64}
			if c.test == latency.Atomic {
				cfg.Sizes = []int{8, 8}
			}
			cfg.Params = oob.Params{Test: c.test.Command()}
			srvCfg, cliCfg := cfg, cfg
			cliCfg.Validate = true
			var errText string
			_, _, _, cliErr := pairtest.Results(t, pairtest.Shm0, latency.Run, srvCfg, cliCfg)
			if cliErr != nil {
				errText = cliErr.Error()
			}
			if !strings.Contains(errText, c.want) {
				t.Errorf("client error %q, want %q", errText, c.want)
			}
		})
	}
}
