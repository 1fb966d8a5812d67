package bw

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// goStream is verbsio.SendStream done in Go over PostSend and the send
// CQ's Poll, for the engine, which has no such family: it lets the tests
// run the sender's stream path. It stops after every budget messages
// posted, so that the loop's resumption between calls is exercised.
type goStream struct {
	s               *session.Session
	qp              *verbsio.QP
	wcs             [16]verbsio.WC
	budget          int64
	calls, released *atomic.Int64
}

func (g *goStream) Stream(s *verbsio.Stream) error {
	g.calls.Add(1)
	wr := []verbsio.SendWR{s.WR}
	idle := time.Time{}
	for posts := int64(0); s.Completed < s.Target; {
		progressed := false
		for s.Posted < s.Target && s.Posted-s.Completed < int64(s.Depth) && posts < g.budget {
			k := s.Posted
			if (k+1)%int64(s.CQMod) == 0 || k == s.Target-1 {
				wr[0].Flags |= verbsio.SendSignaled
				wr[0].ID = uint64(s.Tag)<<32 | uint64(k+1-s.LastSig)
				s.LastSig = k + 1
			} else {
				wr[0].Flags &^= verbsio.SendSignaled
			}
			t := clock.Now()
			if s.PostStamps != nil {
				s.PostStamps[k] = t
			} else if k == 0 {
				s.First = t
			}
			if _, err := g.qp.PostSend(wr); err != nil {
				return err
			}
			s.Posted++
			posts++
			progressed = true
		}
		if err := g.s.Drive(); err != nil {
			return err
		}
		n, err := g.s.SendCQ.Poll(g.wcs[:])
		if err != nil {
			return err
		}
		t := clock.Now()
		for i := range n {
			wc := &g.wcs[i]
			if wc.Status != verbsio.StatusSuccess || uint32(wc.ID>>32) != s.Tag {
				panic("goStream: a completion not of the stream") // the engine's CQ cannot take it back
			}
			cnt := int64(uint32(wc.ID))
			for c := int64(0); s.CompStamps != nil && c < cnt && s.Completed+c < s.Target; c++ {
				s.CompStamps[s.Completed+c] = t
			}
			s.Completed += cnt
			if s.Completed >= s.Target {
				s.Last = t
			}
			progressed = true
		}
		switch {
		case posts >= g.budget && s.Posted < s.Target:
			return nil
		case progressed:
			idle = time.Time{}
		case idle.IsZero():
			idle = time.Now()
		case time.Since(idle) > s.Idle:
			return nil
		}
	}
	return nil
}

func (g *goStream) Release() error {
	g.released.Add(1)
	return nil
}

// TestSendStreamLoop runs the sender's stream path on the engine (through
// goStream) where it applies, and checks that the other loops do not ask
// for it; the results are the loop's: every message, the peak from the
// stamps.
func TestSendStreamLoop(t *testing.T) {
	var calls, released, asked atomic.Int64
	saved := sendStreamOf
	defer func() { sendStreamOf = saved }()
	sendStreamOf = func(s *session.Session, q *session.QP) verbsio.SendStream {
		asked.Add(1)
		return &goStream{s: s, qp: q.QP, budget: 37, calls: &calls, released: &released}
	}
	tests := []struct {
		name   string
		test   session.Test
		edit   func(*Config)
		stream bool
	}{
		{"write_bw", Write, nil, true},
		{"write_bw cq_mod 7", Write, func(c *Config) { c.CQMod = 7 }, true},
		{"write_bw no peak", Write, func(c *Config) { c.NoPeak = true }, true},
		{"read_bw", Read, nil, true},
		{"write_bw two QPs", Write, func(c *Config) { c.QPs = 2 }, false},
		{"write_bw post list", Write, func(c *Config) { c.PostList = 4 }, false},
		{"write_bw validated", Write, func(c *Config) { c.Validate = true }, false},
		{"write_bw bidirectional (two senders)", Write, func(c *Config) { c.Bidirectional = true }, true},
		{"send_bw bidirectional", Send, func(c *Config) { c.Bidirectional = true }, false},
		{"write_bw duration", Write, func(c *Config) { c.Duration, c.Margin = 300*time.Millisecond, 50*time.Millisecond }, false},
		{"send_bw", Send, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls.Store(0)
			released.Store(0)
			asked.Store(0)
			cfg := Default(tt.test)
			cfg.Iterations = 200
			cfg.Sizes = []int{64, 4096}
			cfg.Params = oob.Params{Test: tt.test.Command()}
			if tt.edit != nil {
				tt.edit(&cfg)
			}
			srv, cli := pairtest.MustShm0(t, Run, cfg)
			if !tt.stream {
				if asked.Load() != 0 {
					t.Errorf("the family was asked for %d times, want never", asked.Load())
				}
				return
			}
			// One run per size and sender (no warm-up by default): each
			// asks once and releases what it asked for; 200 messages in
			// calls of at most 37 posts.
			runs := int64(len(cfg.Sizes))
			if cfg.Bidirectional {
				runs *= 2
			}
			if asked.Load() != runs || released.Load() != runs || calls.Load() < runs*6 {
				t.Errorf("asked %d, released %d, %d calls; want %d, %d, at least %d", asked.Load(), released.Load(), calls.Load(), runs, runs, runs*6)
			}
			for i, r := range cli {
				if r.Iterations != 200 || r.Bytes != int64(cfg.Sizes[i]) || r.BWAvgMiBps <= 0 {
					t.Errorf("client result %d: %+v %+v", i, r, r.Bandwidth)
				}
				if !cfg.NoPeak && (r.PeakStatus != reports.PeakMeasured || r.BWPeakMiBps < r.BWAvgMiBps*0.999) {
					t.Errorf("client result %d: peak %s %v, average %v", i, r.PeakStatus, r.BWPeakMiBps, r.BWAvgMiBps)
				}
			}
			if len(srv) != len(cfg.Sizes) {
				t.Errorf("server: %d results", len(srv))
			}
		})
	}
}
