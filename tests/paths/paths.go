// Package paths runs one latency or bandwidth test across several send
// paths in one run and compares each with the generic path.
//
// # How a comparison runs
//
// Every path is measured Repetitions times. The runs are interleaved:
// repetition r runs every path once, starting with path r mod n, so that
// each path sees the same machine (its load, its frequency, its caches)
// as the others, and none is always first or last. Each run is a whole
// test of package latency or bw on a connection of its own (the client
// dials again, the server accepts again): its QPs, CQs and buffers are
// set up for its path (device memory, the inline size, the segmenter, the
// rings that dv takes), which are fixed at creation. Every path but tso
// has the engine cut packets (one datagram per packet), tso the kernel,
// so that tso's row shows what kernel segmentation buys; a test run by
// itself leaves that to the provider, which picks the kernel where it can. Both sides follow
// the same schedule, and every run's parameters name its path and
// repetition, so that two sides out of step refuse to run rather than
// compare different paths.
//
// For each path and message size the report is the repetition whose
// figure of merit is the median (reports.MedianRepetition): the message
// rate of a bandwidth test, the median latency of a latency test. Its
// ratio to generic divides that figure by generic's, and its verdict
// says whether a rank test over the repetitions tells the path from
// generic (reports.VerdictOf).
package paths

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// DefaultRepetitions is the number of runs per path when none is given:
// with five a side, two ranges that do not overlap happen by chance with
// probability 2/252.
const DefaultRepetitions = 5

// Connector returns the connection for the next run: a client dials the
// server again, a server accepts its client's next connection.
type Connector func(ctx context.Context) (*oob.Conn, error)

// Config describes a comparison. Exactly one of Latency and Bandwidth is
// set: the test, with its sizes and parameters; its Path is ignored.
type Config struct {
	Latency   *latency.Config
	Bandwidth *bw.Config
	// Paths are the paths to compare, generic among them.
	Paths []sendpath.Path
	// Repetitions per path; 0 means DefaultRepetitions.
	Repetitions int
	// OnStep, if set, is called before each run.
	OnStep func(Step)
	// OnConnected, if set, is called once, when the first run's QPs are
	// connected.
	OnConnected func(session.Info)
}

// Step is one run of a comparison.
type Step struct {
	Path        sendpath.Path
	Repetition  int // from 0
	Repetitions int
	Index       int // the run's position in the schedule, from 0
	Count       int // runs in all
}

// Schedule returns the order of the runs: repetition r runs every path
// once, starting with path r mod len(paths).
func Schedule(paths []sendpath.Path, reps int) []Step {
	var runs []Step
	n := len(paths)
	for r := 0; r < reps; r++ {
		for i := 0; i < n; i++ {
			runs = append(runs, Step{Path: paths[(i+r)%n], Repetition: r, Repetitions: reps, Index: len(runs), Count: reps * n})
		}
	}
	return runs
}

// Check reports the first problem with c that would stop Run: the test's
// own, or a path that does not apply to it.
func (c *Config) Check() error {
	if (c.Latency == nil) == (c.Bandwidth == nil) {
		return errors.New("paths: give exactly one test, latency or bandwidth")
	}
	if !slices.Contains(c.Paths, sendpath.Generic) {
		return errors.New("paths: the paths must include generic, the reference of the ratios")
	}
	if c.Repetitions < 0 {
		return fmt.Errorf("paths: %d repetitions", c.Repetitions)
	}
	seen := map[sendpath.Path]bool{}
	for _, p := range c.Paths {
		if seen[p] {
			return fmt.Errorf("paths: %s appears twice", p)
		}
		seen[p] = true
		if err := c.check(p); err != nil {
			return err
		}
	}
	return nil
}

// check checks the test's configuration on path p.
func (c *Config) check(p sendpath.Path) error {
	if c.Latency != nil {
		l := *c.Latency
		l.Path = p
		return l.Check()
	}
	b := *c.Bandwidth
	b.Path = p
	return b.Check()
}

func (c *Config) reps() int {
	if c.Repetitions == 0 {
		return DefaultRepetitions
	}
	return c.Repetitions
}

// Run runs the comparison: every run of Schedule over a connection from
// connect. It returns, for each message size and then each path in the
// order of Config.Paths, the median repetition with its ratio to generic
// and its verdict; nothing on a side that measures nothing (the passive
// server of read_lat and atomic_lat). It never closes dev.
func Run(ctx context.Context, dev *verbsio.Context, connect Connector, cfg Config) ([]reports.Result, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	reps := cfg.reps()
	// got[path][rep] are one run's results, one per size.
	got := make(map[sendpath.Path][][]reports.Result, len(cfg.Paths))
	connected := false
	for _, run := range Schedule(cfg.Paths, reps) {
		if cfg.OnStep != nil {
			cfg.OnStep(run)
		}
		conn, err := connect(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s, repetition %d of %d: %w", run.Path, run.Repetition+1, reps, err)
		}
		var onConnected func(session.Info)
		if !connected && cfg.OnConnected != nil {
			onConnected, connected = cfg.OnConnected, true
		}
		rs, err := cfg.runOne(ctx, dev, conn, run, onConnected)
		if err != nil {
			return nil, fmt.Errorf("%s path, repetition %d of %d: %w", run.Path, run.Repetition+1, reps, err)
		}
		got[run.Path] = append(got[run.Path], rs)
	}
	return Summarise(cfg.Paths, got)
}

// runOne runs the test once on run's path over conn.
func (c *Config) runOne(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, run Step, onConnected func(session.Info)) ([]reports.Result, error) {
	tag := func(p oob.Params) oob.Params {
		p.Fields = append(slices.Clone(p.Fields),
			oob.Field{Flag: "--path", Value: run.Path.String(), Symmetric: true},
			oob.Field{Flag: "--repetition", Value: strconv.Itoa(run.Repetition+1) + "/" + strconv.Itoa(run.Repetitions), Symmetric: true})
		return p
	}
	if c.Latency != nil {
		l := *c.Latency
		l.Path, l.Params, l.OnConnected = run.Path, tag(l.Params), onConnected
		l.Segmenter = Segmenter(run.Path)
		l.OnProgress, l.OnResult = nil, nil
		return latency.Run(ctx, dev, conn, l)
	}
	b := *c.Bandwidth
	b.Path, b.Params, b.OnConnected = run.Path, tag(b.Params), onConnected
	b.Segmenter = Segmenter(run.Path)
	b.OnProgress, b.OnResult = nil, nil
	return bw.Run(ctx, dev, conn, b)
}

// Segmenter is who cuts packets for path p in a comparison: the kernel
// for tso, the engine for every other path.
func Segmenter(p sendpath.Path) verbsio.Segmenter {
	if p == sendpath.TSO {
		return verbsio.SegmentKernel
	}
	return verbsio.SegmentEngine
}

// Summarise turns the runs' results into the comparison: got[path][rep]
// holds one run's results, one per size, in the same order for every run.
// For each size, and each path in the order of paths, it returns the
// median repetition (reports.MedianRepetition) with its ratio to generic
// and verdict (reports.SetRatios). Runs that returned no results (a
// passive side) give none.
func Summarise(paths []sendpath.Path, got map[sendpath.Path][][]reports.Result) ([]reports.Result, error) {
	gen := got[sendpath.Generic]
	if len(gen) == 0 || len(gen[0]) == 0 {
		return nil, nil
	}
	sizes := len(gen[0])
	var out []reports.Result
	for si := 0; si < sizes; si++ {
		var row []reports.Result
		for _, p := range paths {
			var reps []reports.Result
			for _, rs := range got[p] {
				if len(rs) != sizes {
					return nil, fmt.Errorf("the %s path returned %d results, generic %d", p, len(rs), sizes)
				}
				reps = append(reps, rs[si])
			}
			m, err := reports.MedianRepetition(reps)
			if err != nil {
				return nil, fmt.Errorf("%s path: %w", p, err)
			}
			if m.Bytes != gen[0][si].Bytes {
				return nil, fmt.Errorf("the %s path measured %d B where generic measured %d B", p, m.Bytes, gen[0][si].Bytes)
			}
			row = append(row, m)
		}
		ref := row[slices.Index(paths, sendpath.Generic)]
		if err := reports.SetRatios(ref, row); err != nil {
			return nil, err
		}
		out = append(out, row...)
	}
	return out, nil
}

// Relisten returns a server's Connector: the first call accepts on ln,
// each later one listens again on ln's address and accepts there (a
// oob.Listener serves one client, as perftest's does). first bounds the
// first accept, then each later one (the client reconnects at once). A
// client meanwhile retries a refused connection (oob.Dial); a short
// Options.RetryInterval keeps that gap small.
func Relisten(ln *oob.Listener, opts oob.Options, first, then time.Duration) Connector {
	addr := ln.Addr().String()
	next := ln
	wait := first
	return func(ctx context.Context) (*oob.Conn, error) {
		defer func() { wait = then }()
		if next == nil {
			l, err := oob.Listen(ctx, addr, opts)
			if err != nil {
				return nil, err
			}
			next = l
		}
		l := next
		next = nil
		defer l.Close()
		actx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		return l.Accept(actx)
	}
}
