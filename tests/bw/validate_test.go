package bw_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// TestValidate runs every test, transport and direction with data
// validation on shm0 and on the udp fabric over loopback.
func TestValidate(t *testing.T) {
	for dev, open := range pairtest.Devices() {
		for _, test := range bw.Tests {
			for _, conn := range test.Connections() {
				for _, bidir := range []bool{false, true} {
					ops := []verbsio.Opcode{verbsio.OpAtomicFetchAdd}
					if test == bw.Atomic {
						ops = append(ops, verbsio.OpAtomicCmpSwp)
					}
					for _, op := range ops {
						name := dev + "/" + test.Name() + "/" + conn.String()
						if bidir {
							name += "/bidirectional"
						}
						if test == bw.Atomic {
							name += "/" + op.String()
						}
						t.Run(name, func(t *testing.T) {
							cfg := bw.Default(test)
							cfg.Connection = conn
							cfg.Iterations = 300
							cfg.Warmup = 20
							cfg.Bidirectional = bidir
							cfg.AtomicOp = op
							cfg.QPs = 2
							cfg.TxDepth = 32
							cfg.RxDepth = 64
							cfg.Validate = true
							cfg.QPTimeout = pairtest.QPTimeout
							if test != bw.Atomic {
								cfg.Sizes = []int{1, 3, 64, 4097, 20000}
								if conn != verbsio.QPTypeRC {
									// A receiver that falls behind loses
									// messages here, and each run with a
									// loss ends after bw.UnreliableQuiet.
									cfg.Sizes = []int{700}
								}
							}
							pairtest.MustResults(t, open, bw.Run, cfg, cfg)
						})
					}
				}
			}
		}
	}
}

// TestValidateDuration: the message that ends a duration-mode run is
// validated too.
func TestValidateDuration(t *testing.T) {
	for _, test := range bw.Tests {
		t.Run(test.Name(), func(t *testing.T) {
			cfg := bw.Default(test)
			cfg.Duration, cfg.Margin = pairtest.StallWindow+200*time.Millisecond, 100*time.Millisecond
			cfg.TxDepth = 16
			cfg.Validate = true
			if test != bw.Atomic {
				cfg.Sizes = []int{512}
			}
			pairtest.MustResults(t, pairtest.Shm0, bw.Run, cfg, cfg)
		})
	}
}

// TestValidateCatches runs a validating side against one that does not
// prepare its data: the checking side must fail, naming the message.
func TestValidateCatches(t *testing.T) {
	cases := []struct {
		test session.Test
		// server checks (send, write) or client checks (read, atomic)
		serverChecks bool
		sizes        []int
		want         string
	}{
		{bw.Send, true, []int{64}, "data validation failed: the peer's SEND #1 on QP 0: byte 4 of 64 is 0x00, want 0x01"},
		{bw.Write, true, []int{64}, "data validation failed: the peer's last RDMA WRITE #100 on QP 0: byte 0 of 64"},
		{bw.Read, false, []int{64}, "data validation failed: our RDMA_READ #1 on QP 0: byte 4 of 64 is 0x00, want 0x01"},
		// The unvalidating server does not reset its counter between runs.
		{bw.Atomic, false, []int{8, 8}, "data validation failed: our ATOMIC_FETCH_AND_ADD #1 on QP 0: it returned 100, want 0"},
	}
	for _, c := range cases {
		t.Run(c.test.Name(), func(t *testing.T) {
			cfg := bw.Default(c.test)
			cfg.Iterations = 100
			cfg.Sizes = c.sizes
			srvCfg, cliCfg := cfg, cfg
			if c.serverChecks {
				srvCfg.Validate = true
			} else {
				cliCfg.Validate = true
			}
			_, _, srvErr, cliErr := pairtest.Results(t, pairtest.Shm0, bw.Run, srvCfg, cliCfg)
			err := cliErr
			if c.serverChecks {
				err = srvErr
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestValidationBudget: a validated run whose buffers would exceed the
// budget is refused before it starts.
func TestValidationBudget(t *testing.T) {
	cfg := bw.Default(bw.Write)
	cfg.Sizes = []int{8 << 20}
	cfg.Validate = true
	if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), "validation keeps a buffer for every outstanding message") {
		t.Errorf("Check: %v", err)
	}
	cfg.TxDepth = 16
	if err := cfg.Check(); err != nil {
		t.Errorf("Check with -t 16: %v", err)
	}
}
