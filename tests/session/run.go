package session

import (
	"context"
	"fmt"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/verbsio"
)

// Measurer is what a test family brings to Run: its checks, its part of
// the session's shape, and the measurement of one message size.
type Measurer interface {
	// Check reports every problem with the whole configuration: the
	// shared Config.Check and the family's own rules.
	Check() error
	// Shape completes the session's spec from Config.Spec: the number of
	// QPs, the depths, the message slots.
	Shape(spec *Spec)
	// Roles says what this side (the server or the client) posts by the
	// send path: sends, receives, or both (Session.OpenPath).
	Roles(server bool) (send, recv bool)
	// Start prepares the measurement once the session is set up and the
	// path's ends are open.
	Start(s *Session, ends *Ends) error
	// Measure runs message size number i, size bytes, between the peers
	// and returns its result; ok is false on a side that has none (a
	// passive latency server).
	Measure(ctx context.Context, i, size int) (res reports.Result, ok bool, err error)
}

// Companion is implemented by a Measurer that may have a second result
// for a size: the same run's samples from another clock (latency's
// completion timestamps). After each result Measure returns, Run reports
// the companion, if there is one, as the size's next result.
type Companion interface {
	Companion() (res reports.Result, ok bool)
}

// emitter reports a run's results: it names their path, keeps them and
// hands each to Config.OnResult, the Measurer's companion after the
// result it comes with.
type emitter struct {
	c       *Config
	m       Companion // nil: no companions
	results []reports.Result
}

func newEmitter(c *Config, m Measurer) *emitter {
	cm, _ := m.(Companion)
	return &emitter{c: c, m: cm}
}

// emit reports res and its companion.
func (e *emitter) emit(res reports.Result) {
	e.one(res)
	if e.m == nil {
		return
	}
	if co, ok := e.m.Companion(); ok {
		e.one(co)
	}
}

func (e *emitter) one(res reports.Result) {
	res.Path = e.c.Path.String()
	e.results = append(e.results, res)
	if e.c.OnResult != nil {
		e.c.OnResult(res)
	}
}

// Run runs a test of a family over conn on dev: it checks the
// configuration (Measurer.Check), checks that the device offers the send
// path, sets up the session (Open), announces it (Config.OnConnected),
// opens the path's ends (Session.OpenPath), measures each message size in
// turn (Config.OnProgress before, Config.OnResult after each), and closes
// everything, with the closing handshake after a successful run. It
// returns this side's results, each naming the path. It never closes dev;
// conn is closed when it returns.
func Run(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, c *Config, m Measurer) ([]reports.Result, error) {
	what := "test"
	if c.Test.Valid() {
		what = c.Test.Family().String() + " test"
	}
	if err := m.Check(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	spec := c.Spec()
	m.Shape(&spec)
	if err := sendpath.CheckOn(dev, c.Path, spec.Inline); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	s, err := Open(ctx, dev, conn, spec)
	if err != nil {
		return nil, err
	}
	if c.OnConnected != nil {
		c.OnConnected(s.Info())
	}
	var results []reports.Result
	ends, err := s.OpenPath(m.Roles(s.Server))
	if err == nil {
		err = m.Start(s, ends)
	}
	if err == nil {
		if s.script != nil {
			results, err = walk(ctx, s, c, m)
		} else {
			results, err = measure(ctx, c, m)
		}
	}
	ends.Close()
	if cerr := s.Close(ctx, err == nil); err == nil && cerr != nil {
		err = cerr
	}
	return results, err
}

// measure runs every size.
func measure(ctx context.Context, c *Config, m Measurer) ([]reports.Result, error) {
	e := newEmitter(c, m)
	for i, size := range c.Sizes {
		if c.OnProgress != nil {
			c.OnProgress(Progress{Index: i, Count: len(c.Sizes), Bytes: size, Duration: c.Duration})
		}
		res, ok, err := m.Measure(ctx, i, size)
		if err != nil {
			return e.results, err
		}
		if ok {
			e.emit(res)
		}
	}
	return e.results, nil
}
