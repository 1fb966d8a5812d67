package latency

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// goTurn is verbsio.WriteTurn done in Go over PostSend, for the engine,
// which has no such family: it lets the tests run pingPong's turn loop.
type goTurn struct {
	s        *session.Session
	qp       *verbsio.QP
	posted   *atomic.Int64
	released *atomic.Int64
	calls    *[turnBatch]atomic.Int64 // turns finished in C's place, by position in a call
	asked    *atomic.Int64            // the most turns a call asked for
}

func loadByte(p *byte) byte {
	off := int(uintptr(unsafe.Pointer(p)) & 3)
	w := (*uint32)(unsafe.Add(unsafe.Pointer(p), -off))
	return byte(atomic.LoadUint32(w) >> (8 * off))
}

func (t *goTurn) Turns(wait *byte, want byte, spins int, markAt *byte, mark byte, wrs []verbsio.SendWR, stamps []int64) (int, bool, error) {
	for n := int64(len(stamps)); ; {
		if m := t.asked.Load(); n <= m || t.asked.CompareAndSwap(m, n) {
			break
		}
	}
	for k := range stamps {
		if wait == nil && k > 0 {
			return k, false, nil
		}
		if wait != nil {
			// Unlike a provider, it waits past spins (up to 10 s), so that
			// every call runs its whole batch whatever the machine's load
			// and the loop's batch accounting is always exercised.
			for begin := time.Now(); loadByte(wait) != want+byte(k); {
				if time.Since(begin) > 10*time.Second {
					return k, false, nil
				}
				if err := t.s.Drive(); err != nil {
					return k, false, err
				}
			}
		}
		stamps[k] = clock.Now()
		*markAt = mark + byte(k)
		if _, err := t.qp.PostSend(wrs); err != nil {
			return k, false, err
		}
		t.posted.Add(1)
		var wc [1]verbsio.WC
		for i := 0; ; i++ {
			n, err := t.qp.SendCQ().Poll(wc[:])
			if err != nil {
				return k + 1, false, err
			}
			if n == 1 {
				break
			}
			if i >= spins {
				return k + 1, true, nil
			}
		}
		if wc[0].Status != verbsio.StatusSuccess || wc[0].ID != wrs[0].ID {
			return k + 1, false, fmt.Errorf("completion %+v is not the turn's; this test's family cannot hand it back", wc[0])
		}
		t.calls[k].Add(1)
	}
	return len(stamps), false, nil
}

func (t *goTurn) Release() error {
	t.released.Add(1)
	return nil
}

// TestWriteTurnLoop runs write_lat through the turn loop where it
// applies and checks that each side posts every iteration through the
// family and reports what the Go loop reports; where it does not apply
// (duration mode, validation, send_lat) the family is not asked for.
func TestWriteTurnLoop(t *testing.T) {
	var posted, released, asked atomic.Int64
	var finished [turnBatch]atomic.Int64
	var most atomic.Int64
	saved, savedCall := writeTurnOf, turnCall
	defer func() { writeTurnOf, turnCall = saved, savedCall }()
	turnCall = 64 // calls of a whole batch within 200 iterations
	writeTurnOf = func(s *session.Session, q *session.QP) verbsio.WriteTurn {
		asked.Add(1)
		return &goTurn{s: s, qp: q.QP, posted: &posted, released: &released, calls: &finished, asked: &most}
	}
	tests := []struct {
		name  string
		test  session.Test
		edit  func(*Config)
		turns bool
	}{
		{"write_lat", Write, nil, true},
		{"write_lat warm-up", Write, func(c *Config) { c.Warmup = 3 }, true},
		{"write_lat sizes", Write, func(c *Config) { c.Sizes = []int{2, 64, 4096} }, true},
		{"write_lat duration", Write, func(c *Config) { c.Duration, c.Margin = 300*time.Millisecond, 50*time.Millisecond }, false},
		{"write_lat validated", Write, func(c *Config) { c.Validate = true }, false},
		{"write_lat completion timestamps", Write, func(c *Config) { c.CompletionTimestamps = true }, false},
		{"send_lat", Send, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			posted.Store(0)
			released.Store(0)
			asked.Store(0)
			cfg := Default(tt.test)
			cfg.Iterations = 200
			cfg.Params = oob.Params{Test: tt.test.Command()}
			if tt.edit != nil {
				tt.edit(&cfg)
			}
			for i := range finished {
				finished[i].Store(0)
			}
			most.Store(0)
			srv, cli := pairtest.MustShm0(t, Run, cfg)
			runs := int64(len(cfg.Sizes))
			if !tt.turns {
				if asked.Load() != 0 {
					t.Errorf("the family was asked for %d times, want never", asked.Load())
				}
				return
			}
			if want := 2 * runs * int64(cfg.Warmup+cfg.Iterations); posted.Load() != want {
				t.Errorf("%d turns posted, want %d (every iteration of both sides)", posted.Load(), want)
			}
			if most.Load() != int64(turnCall) || finished[turnCall-1].Load() == 0 {
				t.Errorf("the calls asked for at most %d turns and %d ran all %d; want %d and some", most.Load(), finished[turnCall-1].Load(), turnCall, turnCall)
			}
			if released.Load() != 2*runs {
				t.Errorf("%d families released, want %d", released.Load(), 2*runs)
			}
			for side, rs := range map[string][]reports.Result{"server": srv, "client": cli} {
				if int64(len(rs)) != runs {
					t.Fatalf("%s: %d results, want %d", side, len(rs), runs)
				}
				for _, r := range rs {
					if r.Iterations != int64(cfg.Iterations) || r.Samples != int64(cfg.Iterations-1) || !(r.TrueMinUs > 0 && r.TrueMinUs <= r.MeanUs) {
						t.Errorf("%s: %d B: iterations %d, samples %d, min %v, mean %v", side, r.Bytes, r.Iterations, r.Samples, r.TrueMinUs, r.MeanUs)
					}
				}
			}
		})
	}
}
