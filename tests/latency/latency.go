// Package latency runs perftest's latency tests over verbsio: send_lat,
// write_lat, read_lat and atomic_lat, with perftest's data-path
// conventions, and returns one reports.Result per message size.
//
// # What is measured
//
// Every test stamps the clock just before each post (perftest's
// tposted[i]) and records the difference between consecutive stamps: one
// sample per iteration after the first, so n iterations give n-1 samples.
//
//   - write_lat: a ping-pong of RDMA WRITEs. Each side writes an iteration
//     marker into the last byte of the message and spins on the last byte of
//     its own receive region for the peer's; the server answers, the client
//     starts. A sample is a round trip (rtt_factor 2).
//   - send_lat: the same ping-pong with SENDs into pre-posted receives; a
//     side waits on its receive CQ (rtt_factor 2).
//   - read_lat, atomic_lat: the client posts one RDMA READ (or atomic) and
//     waits for its completion, against a passive server (rtt_factor 1).
//
// In duration mode (Config.Duration) the loop runs until the duration has
// passed; only iterations inside the sample window, between the warm-up and
// cool-down margins, count, and every one of them is recorded, so the true
// statistics and the histogram are complete in duration mode too. The
// client ends a ping-pong: its last message carries a stop marker (byte 255
// in write_lat, whose iteration markers then cycle 1..254; immediate data
// session.StopImm in send_lat).
//
// Between sizes, and before and after each run, both sides meet at a
// barrier on the out-of-band connection.
//
// # Data validation
//
// With Config.Validate every message carries a pattern its receiver
// checks byte by byte (see package datacheck): each side checks every
// SEND or RDMA WRITE it receives before answering, the read_lat client
// every READ's data against the server's pattern, the atomic_lat client
// every returned value against the sequence of operations. The checks add
// their cost to the measured times.
//
// The test's identity, the configuration every family shares, the session
// and the run's skeleton are package session's; this package is the
// measurement (session.Measurer).
package latency

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/internal/datacheck"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// The latency tests.
const (
	Send   = session.SendLat
	Write  = session.WriteLat
	Read   = session.ReadLat
	Atomic = session.AtomicLat
)

// Tests lists every latency test.
var Tests = []session.Test{Send, Write, Read, Atomic}

// Config describes a latency test: the shared configuration (the test,
// its sizes, iterations or duration, queues, path and link; see
// session.Config) and the statistics to report. Default gives perftest's
// defaults.
type Config struct {
	session.Config
	// Percentiles are the true-statistics percentiles; nil means
	// reports.DefaultPercentiles.
	Percentiles []float64
	// CompletionTimestamps creates the CQs with the timestamp flag and
	// also times every cycle by the device's completion stamps: each
	// size then has a second result, with Clock reports.ClockCompletion,
	// after the software clock's (see stamps.go for what it measures).
	// The device must stamp completions (session.CheckTimestamps).
	CompletionTimestamps bool
}

// Default returns perftest's defaults for test t.
func Default(t session.Test) Config { return Config{Config: session.Default(t)} }

// Check reports every problem with c that would stop Run (session.Problems
// of FieldErrors), nil if there is none.
func (c *Config) Check() error {
	if c.Test.Valid() && c.Test.Family() != session.Latency {
		return session.Problems{{Field: "Test", Value: c.Test.Name(), Reason: "not a latency test"}}
	}
	var ps session.Problems
	ps.Add(c.Config.Check())
	ps.AddField(c.checkStamps())
	return ps.Err()
}

// Run runs the test over conn on dev (session.Run): the session setup,
// one run per size, and the closing handshake. It returns this side's
// results: one per size, or none on the passive server of read_lat and
// atomic_lat. It never closes dev; conn is closed when it returns.
func Run(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, cfg Config) ([]reports.Result, error) {
	return session.Run(ctx, dev, conn, &cfg.Config, &runner{cfg: &cfg})
}

// runner is the latency family's session.Measurer.
type runner struct {
	cfg   *Config
	s     *session.Session
	tx    *session.Sender      // posts by the path
	comp  *session.Completions // the send CQ's completions
	rcomp *session.Completions // the receive CQ's (send_lat)
	rx    *session.Receiver    // reposts receives (send_lat)
	rec   *reports.Recorder
	// The completion-timestamp samples (Config.CompletionTimestamps) and
	// the size's result from them, reported as the Companion.
	tsRec  *reports.Recorder
	tsm    *stampSampler // the run's
	tsRes  reports.Result
	tsOK   bool
	wr     [1]verbsio.SendWR
	sge    [1]verbsio.SGE
	stamps [turnBatch]int64 // the clock reads of write-turn calls
	runIdx int              // the size's index, for datacheck ids

	passiveServer bool          // this side only serves (read_lat, atomic_lat)
	passiveWait   time.Duration // how long the passive server waits for a run
}

func (r *runner) Check() error { return r.cfg.Check() }

// Shape leaves the session's shape as Config.Spec has it (one QP); both
// sides send.
func (r *runner) Shape(spec *session.Spec) {
	spec.PeerSends = true
	spec.CompletionTimestamps = r.cfg.CompletionTimestamps
}

// Roles: every side posts and receives (a SEND ping-pong receives; the
// others leave the receive side idle).
func (r *runner) Roles(server bool) (send, recv bool) { return true, true }

// Start takes the path's ends of the one QP and, on a side that measures,
// a recorder.
func (r *runner) Start(s *session.Session, ends *session.Ends) error {
	cfg := r.cfg
	r.s = s
	r.tx, r.comp, r.rcomp, r.rx = ends.Senders[0], ends.Send, ends.Recv, ends.Receivers[0]
	r.passiveServer = cfg.Test.Passive() && s.Server
	if !r.passiveServer {
		opts := reports.RecorderOptions{}
		if cfg.Duration == 0 {
			opts.Expected = cfg.Iterations - 1
		}
		rec, err := reports.NewRecorder(opts)
		if err != nil {
			return err
		}
		r.rec = rec
		if err := r.startStamps(opts); err != nil {
			return err
		}
	}
	r.passiveWait = cfg.PassiveWait
	if r.passiveWait <= 0 {
		r.passiveWait = 10 * cfg.Stall()
	}
	r.passiveWait += cfg.Duration
	return nil
}

// stats is what one run measured besides the samples.
type stats struct {
	iterations int64 // perftest's #iterations
	elapsed    int64 // duration mode: the sample window
}

// Measure runs size number i between two barriers: the ping-pong or the
// one-sided operations, or on the passive server a wait for the client's
// run. Against a perftest peer the session runs the exchanges around the
// runs (session.Scripted) and Prepare readies them.
func (r *runner) Measure(ctx context.Context, i, size int) (reports.Result, bool, error) {
	cfg := r.cfg
	scripted := r.s.Scripted()
	if !scripted {
		if err := r.Prepare(i, size); err != nil {
			return reports.Result{}, false, err
		}
		if err := r.s.Barrier(ctx, 0); err != nil {
			return reports.Result{}, false, err
		}
		if r.passiveServer {
			return reports.Result{}, false, r.s.Barrier(ctx, r.passiveWait)
		}
	}
	r.rec.Reset()
	var st stats
	var err error
	switch cfg.Test {
	case Write, Send:
		st, err = r.pingPong(ctx, size)
	default:
		st, err = r.oneSided(ctx, size)
	}
	if err != nil {
		return reports.Result{}, false, err
	}
	// The acknowledgements this side owes for the peer's last messages
	// leave now: a poll-driven engine sends them with the next post or
	// the next poll that finds no completion, and the loop has ended.
	if err := r.s.Drive(); err != nil {
		return reports.Result{}, false, err
	}
	if !scripted {
		if err := r.s.Barrier(ctx, 0); err != nil {
			return reports.Result{}, false, err
		}
	}
	res, err := r.result(size, st)
	return res, err == nil, err
}

// Prepare readies size number i before the peer may start it: the marker
// byte the peer writes last is cleared (session.Preparer). Against
// perftest, whose write_lat runs its sizes back to back, every size's
// marker is cleared before the first: the peer may write the next size's
// as soon as this side's last write of a size has landed.
func (r *runner) Prepare(i, size int) error {
	r.runIdx = i
	if r.cfg.Validate {
		r.prepareTarget(size)
	}
	if r.passiveServer {
		return nil
	}
	sizes := []int{size}
	if r.s.Scripted() {
		if i > 0 {
			return nil
		}
		sizes = r.cfg.Sizes
	}
	q := r.s.QPs[0]
	for _, n := range sizes {
		if err := r.s.StoreByte(r.s.RecvPayload(q)+n-1, 0); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) result(size int, st stats) (reports.Result, error) {
	cfg := r.cfg
	spec := reports.LatencySpec{
		Test: cfg.Test.Name(), Bytes: int64(size), Iterations: int64(cfg.Iterations), Mode: reports.ModeIterations,
		RTTFactor: cfg.Test.RTTFactor(), Percentiles: cfg.Percentiles,
	}
	if cfg.Duration > 0 {
		spec.Mode = reports.ModeDuration
		spec.Iterations = st.iterations
		spec.ElapsedNs = st.elapsed
		if st.iterations < 2 || st.elapsed <= 0 || r.rec.Count() == 0 {
			return reports.Result{}, fmt.Errorf("%d B: fewer than 2 iterations completed inside the %v sample window; run longer (-D) or with a smaller margin (-f)",
				size, cfg.Duration-2*cfg.Margin)
		}
	}
	res, err := reports.NewLatencyResult(spec, r.rec)
	if err != nil {
		return reports.Result{}, fmt.Errorf("%d B: %w", size, err)
	}
	return res, r.stampResult(spec, size)
}

// sampler records perftest's samples from post stamps: the difference of
// consecutive stamps, from stamp number first on (iterations mode), or
// within the sample window (duration mode).
type sampler struct {
	rec    *reports.Recorder
	dur    bool
	ph     session.Phases
	first  int64 // iterations mode: record the delta ending at post index >= first
	prev   int64
	posts  int64 // posts so far
	inWin  int64 // duration: posts stamped inside the window
	winBeg int64
	last   int64 // last stamp inside the window
}

// stamp takes post stamp now.
func (sm *sampler) stamp(now int64) {
	p := sm.posts
	sm.posts++
	if !sm.dur {
		if p >= sm.first {
			sm.rec.Record(now - sm.prev)
		}
		sm.prev = now
		return
	}
	if sm.ph.Sampling(now) {
		if sm.inWin == 0 {
			sm.winBeg = sm.ph.WindowStart()
		} else {
			sm.rec.Record(now - sm.prev)
		}
		sm.inWin++
		sm.last = now
	}
	sm.prev = now
}

func (sm *sampler) stats(iters int) stats {
	if !sm.dur {
		return stats{iterations: int64(iters)}
	}
	if sm.inWin == 0 {
		return stats{}
	}
	end := sm.ph.WindowEnd(clock.Now(), sm.last)
	return stats{iterations: sm.inWin, elapsed: end - sm.winBeg}
}

// Markers of write_lat's last byte.
const stopMarker = 255

// marker is the byte that announces iteration i (from 1): perftest's
// (char)i in iterations mode; in duration mode 1..254 cyclically, so that
// stopMarker and the cleared 0 never stand for an iteration.
func marker(i int64, dur bool) byte {
	if !dur {
		return byte(i)
	}
	return byte(1 + (i-1)%254)
}

func (r *runner) newSampler(start int64) *sampler {
	cfg := r.cfg
	sm := &sampler{rec: r.rec, dur: cfg.Duration > 0, first: int64(cfg.Warmup) + 1}
	if sm.dur {
		sm.ph = session.NewPhases(start, cfg.Duration, cfg.Margin)
	}
	return sm
}

// pingPong is perftest's run_iter_lat_write / run_iter_lat_send: one side
// posts first (the server in write_lat, the client in send_lat, as
// perftest), the other waits first; each then alternates wait and post.
func (r *runner) pingPong(ctx context.Context, size int) (stats, error) {
	s, cfg := r.s, r.cfg
	q := s.QPs[0]
	write := cfg.Test == Write
	dur := cfg.Duration > 0
	total := int64(cfg.Warmup + cfg.Iterations)
	if dur {
		total = math.MaxInt64
	}
	postOff := q.SendOff + size - 1
	pollOff := s.RecvPayload(q) + size - 1
	starts := s.Server == write // this side posts first

	r.sge[0] = s.MR.SGE(q.SendOff, size)
	r.wr[0] = verbsio.SendWR{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: r.sge[:]}
	what, sendWhat := "the peer's SEND", "our SEND"
	if write {
		r.wr[0].Opcode = verbsio.OpRDMAWrite
		r.wr[0].Remote = q.Remote
		what, sendWhat = "the peer's RDMA WRITE", "our RDMA WRITE"
	}
	if cfg.Connection == verbsio.QPTypeUD {
		r.wr[0].UD = q.UD
	}
	if cfg.SendsInline(size) {
		r.wr[0].Flags |= verbsio.SendInline
	}
	waitPeer := s.NewWaiter(ctx, what, true)
	waitOwn := s.NewWaiter(ctx, "the completion of "+sendWhat, false)
	if turn := r.writeTurn(q); turn != nil {
		defer turn.Release()
		return r.turns(turn, total, starts, postOff, pollOff, waitPeer, waitOwn, sendWhat)
	}
	sm := r.newSampler(clock.Now())
	tsm := r.stampsOf(sm)
	if dur && s.Scripted() {
		// perftest ends at its own end of -D and sends no stop: so
		// does this side.
		waitPeer.Until = sm.ph.EndAt
	}
	buf := s.Buf
	dmem := s.DM != nil // the buffers are in device memory: reached by copies
	drive, validate := s.PollDriven, cfg.Validate
	recvOff := s.RecvPayload(q)

	var scnt, rcnt int64
	for scnt < total || rcnt < total {
		if rcnt < total && !(scnt == 0 && starts) {
			rcnt++
			waitPeer.Index = rcnt
			if write {
				want := marker(rcnt, dur)
				waitPeer.Begin()
				for {
					var b byte
					if dmem {
						var err error
						if b, err = s.PeekByte(pollOff); err != nil {
							return stats{}, err
						}
					} else {
						b = session.LoadByte(buf, pollOff)
					}
					if b == want {
						break
					}
					if dur && b == stopMarker {
						return sm.stats(0), nil
					}
					if drive {
						if err := s.Drive(); err != nil {
							return stats{}, err
						}
					}
					if err := waitPeer.Spin(); err != nil {
						if errors.Is(err, session.ErrOwnEnd) {
							return sm.stats(0), nil
						}
						return stats{}, err
					}
				}
				if validate {
					if err := r.checkPing(buf[recvOff:recvOff+size], size, rcnt, what); err != nil {
						return stats{}, err
					}
				}
			} else {
				wc, err := r.rcomp.Wait(waitPeer, what)
				if errors.Is(err, session.ErrOwnEnd) {
					return sm.stats(0), nil
				}
				if err != nil {
					return stats{}, err
				}
				if dur && wc.Flags&verbsio.WCWithImm != 0 && wc.Imm == session.StopImm {
					return sm.stats(0), nil
				}
				if validate {
					want := uint32(size)
					if cfg.Connection == verbsio.QPTypeUD {
						want += session.GRHSize
					}
					if wc.ByteLen != want {
						return stats{}, datacheck.Errorf(what, rcnt, 0, fmt.Errorf("%d bytes arrived, want %d", wc.ByteLen, want))
					}
					if err := r.checkPing(buf[recvOff:recvOff+size], size, rcnt, what); err != nil {
						return stats{}, err
					}
					if got, want := buf[pollOff], marker(rcnt, dur); got != want {
						return stats{}, datacheck.Errorf(what, rcnt, 0, fmt.Errorf("its last byte is %d, want the iteration marker %d", got, want))
					}
				}
				if tsm != nil {
					tsm.take(wc.Timestamp, sm.inWindow())
				}
				if err := r.rx.Repost(); err != nil {
					return stats{}, fmt.Errorf("repost a receive: %w", err)
				}
			}
		}
		if scnt < total {
			if err := waitOwn.Tick(); err != nil {
				return stats{}, err
			}
			if validate {
				datacheck.Fill(buf[q.SendOff:q.SendOff+size-1], r.id(r.side(), scnt+1))
			}
			now := clock.Now()
			if dur && !s.Server && sm.ph.Ended(now) {
				if err := r.sendStop(q, write, postOff, waitOwn); err != nil {
					return stats{}, err
				}
				return sm.stats(0), nil
			}
			scnt++
			if dmem {
				if err := s.StoreByte(postOff, marker(scnt, dur)); err != nil {
					return stats{}, err
				}
			} else {
				buf[postOff] = marker(scnt, dur)
			}
			if err := r.tx.Post(r.wr[:]); err != nil {
				return stats{}, fmt.Errorf("post %s #%d: %w", sendWhat, scnt, err)
			}
			// The stamp was read before the post; it is recorded after
			// it, so that the bookkeeping is not between the peer's
			// message and the answer.
			sm.stamp(now)
			waitOwn.Index = scnt
			wc, err := r.comp.Wait(waitOwn, sendWhat)
			if err != nil {
				return stats{}, err
			}
			if tsm != nil && write {
				tsm.take(wc.Timestamp, sm.inWindow())
			}
		}
	}
	return sm.stats(cfg.Iterations), nil
}

// writeTurn returns the device's write-turn family (verbsio.WriteTurn) on
// q when this run can use it: write_lat in iterations mode, with buffers
// in host memory, no data validation, no completion timestamps (the
// family takes the completions inside the device's call and returns no
// stamps), and a send path that posts with PostSend (generic or inline).
// Otherwise, or when the device has none,
// it returns nil and pingPong runs its own loop.
func (r *runner) writeTurn(q *session.QP) verbsio.WriteTurn {
	cfg := r.cfg
	if cfg.Test != Write || cfg.Duration > 0 || r.s.DM != nil || cfg.Validate || cfg.CompletionTimestamps ||
		(cfg.Path != sendpath.Generic && cfg.Path != sendpath.Inline) {
		return nil
	}
	return writeTurnOf(r.s, q)
}

// writeTurnOf asks the device for the write-turn family bound to q; nil
// when it has none. Tests replace it to run the loop on the engine.
var writeTurnOf = func(s *session.Session, q *session.QP) verbsio.WriteTurn {
	return session.QPFamily[verbsio.WriteTurn](s, verbsio.FamilyWriteTurn, q)
}

// turnBatch bounds the turns of one WriteTurn.Turns call: the loop's own
// checks (the interrupt tick, the yield) run between calls, at least once
// per turnBatch iterations. The ibverbs provider runs a call on a thread
// of its own while the goroutine sleeps (see verbsio/hw's Turns), so a
// call costs a thread's start and a wake-up, and the Go runtime has
// nothing to do until it ends: few and long calls. 4,096 turns are about
// 80 ms on rxe under TCG, a few ms on hardware.
const turnBatch = 4096

// turnCall is how many turns the loop asks of one call, at most
// turnBatch; tests lower it to see whole batches in short runs.
var turnCall = turnBatch

// turnSpins is how many times a turn reads the peer's byte (or polls for
// its completion) before Turns gives up and the loop checks its wait
// (context, stall, probe, back-off): CheckEvery×1024 reads, milliseconds
// (tens under TCG), since every return costs a thread's start and a
// wake-up, and the Go runtime's threads run until the next call sleeps.
// In the interop bench (host load ~10), inside the 2,000 iterations,
// rperf's Go threads ran 26-127 ms and switched 13-81 times voluntarily
// per process with CheckEvery×1024, against 36-5,864 ms and 68-5,677
// with CheckEvery×64; spinning only CheckEvery reads after a late turn
// (tried) made thousands of calls a run and t_typical 3.4 ms. A late
// peer's wait is therefore checked, and backs off, once per turnSpins
// reads rather than per CheckEvery.
const turnSpins = session.CheckEvery << 10

// turns is pingPong's write_lat loop (iterations mode) through the
// device's write-turn family: each Turns call runs up to turnBatch
// iterations, each waiting for the peer's marker, reading the clock,
// storing this side's marker, posting and taking the completion, so that,
// as in perftest's loop, only the spin lies between the peer's WRITE
// landing and the answer's post; with the ibverbs provider that is one cgo
// crossing per turnBatch iterations instead of one per iteration. The
// samples are the differences of the turns' clock reads, taken just
// before each post as pingPong's are. The peer's wait is checked
// (context, stall, probe, back-off) every turnSpins spins; a completion
// a call left owed is waited for as pingPong waits for it.
func (r *runner) turns(turn verbsio.WriteTurn, total int64, starts bool, postOff, pollOff int, waitPeer, waitOwn *session.Waiter, sendWhat string) (stats, error) {
	s := r.s
	buf := s.Buf
	sm := r.newSampler(clock.Now())
	markAt := &buf[postOff]
	var scnt, rcnt int64 // posted, and peer's WRITEs seen
	waitPeer.Begin()
	for scnt < total {
		wait, want := &buf[pollOff], marker(rcnt+1, false)
		n := min(total-scnt, int64(turnCall))
		if scnt == 0 && starts {
			wait, n = nil, 1 // the first WRITE goes at once
		}
		waitPeer.Index = rcnt + 1
		posted, owed, err := turn.Turns(wait, want, turnSpins, markAt, marker(scnt+1, false), r.wr[:], r.stamps[:n])
		for _, st := range r.stamps[:posted] {
			sm.stamp(st)
		}
		if posted > 0 {
			scnt += int64(posted)
			if wait != nil {
				rcnt += int64(posted)
			}
			waitPeer.Begin()
		}
		if err != nil {
			return stats{}, fmt.Errorf("post %s #%d: %w", sendWhat, scnt+1, err)
		}
		if owed {
			waitOwn.Index = scnt
			if _, err := r.comp.Wait(waitOwn, sendWhat); err != nil {
				return stats{}, err
			}
		} else if posted < int(n) {
			if err := s.Drive(); err != nil {
				return stats{}, err
			}
			if err := waitPeer.Check(); err != nil {
				return stats{}, err
			}
		}
		if err := waitOwn.Tick(); err != nil {
			return stats{}, err
		}
	}
	// The side that started waits for the peer's last WRITE, which it
	// does not answer.
	if rcnt < total {
		rcnt++
		waitPeer.Index = rcnt
		want := marker(rcnt, false)
		waitPeer.Begin()
		for session.LoadByte(buf, pollOff) != want {
			if err := s.Drive(); err != nil {
				return stats{}, err
			}
			if err := waitPeer.Spin(); err != nil {
				return stats{}, err
			}
		}
	}
	return sm.stats(r.cfg.Iterations), nil
}

// sendStop ends a duration-mode ping-pong: the stop marker (write_lat) or
// a SEND_WITH_IMM carrying session.StopImm (send_lat).
func (r *runner) sendStop(q *session.QP, write bool, postOff int, w *session.Waiter) error {
	wr := r.wr
	if write {
		if err := r.s.StoreByte(postOff, stopMarker); err != nil {
			return err
		}
	} else {
		wr[0].Opcode = verbsio.OpSendImm
		wr[0].Imm = session.StopImm
	}
	if err := r.tx.Post(wr[:]); err != nil {
		return fmt.Errorf("post the end-of-run message: %w", err)
	}
	_, err := r.comp.Wait(w, "the end-of-run message")
	return err
}

// oneSided is perftest's run_iter_lat for READ and atomics: post, wait for
// the completion, repeat.
func (r *runner) oneSided(ctx context.Context, size int) (stats, error) {
	s, cfg := r.s, r.cfg
	q := s.QPs[0]
	dur := cfg.Duration > 0
	total := int64(cfg.Warmup + cfg.Iterations)
	op := cfg.Test.Verb().Opcode(cfg.AtomicOp)
	r.sge[0] = s.MR.SGE(q.SendOff, size)
	r.wr[0] = verbsio.SendWR{ID: 1, Opcode: op, Flags: verbsio.SendSignaled, SGL: r.sge[:], Remote: q.Remote}
	if op == verbsio.OpAtomicFetchAdd {
		r.wr[0].Atomic.CompareAdd = 1
	}
	what := op.String()
	wait := s.NewWaiter(ctx, "the completion of our "+what, false)
	sm := r.newSampler(clock.Now())
	tsm := r.stampsOf(sm)
	validate := cfg.Validate
	var local []byte
	if validate {
		local = s.Buf[q.SendOff : q.SendOff+size]
	}
	for p := int64(1); ; p++ {
		now := clock.Now()
		if dur {
			if sm.ph.Ended(now) {
				return sm.stats(0), nil
			}
		} else if p > total {
			return sm.stats(cfg.Iterations), nil
		}
		if err := wait.Tick(); err != nil {
			return stats{}, err
		}
		if validate {
			r.prepareOneSided(local, p)
		}
		if err := r.tx.Post(r.wr[:]); err != nil {
			return stats{}, fmt.Errorf("post %s #%d: %w", what, p, err)
		}
		sm.stamp(now)
		wait.Index = p
		wc, err := r.comp.Wait(wait, what)
		if err != nil {
			return stats{}, err
		}
		if tsm != nil {
			tsm.take(wc.Timestamp, sm.inWindow())
		}
		if validate {
			if err := r.checkOneSided(local, p, what); err != nil {
				return stats{}, err
			}
		}
	}
}

// side is this side's datacheck side.
func (r *runner) side() int {
	if r.s.Server {
		return datacheck.Server
	}
	return datacheck.Client
}

// id names message k of this run sent by side.
func (r *runner) id(side int, k int64) uint64 { return datacheck.ID(side, 0, r.runIdx, k) }

// prepareTarget readies, before a run, the memory the peer's one-sided
// operations target: read_lat reads a known pattern, atomic_lat counts
// from 0.
func (r *runner) prepareTarget(size int) {
	q := r.s.QPs[0]
	switch r.cfg.Test {
	case Read:
		datacheck.Fill(r.s.Buf[q.RecvOff:q.RecvOff+size], r.id(r.side(), 0))
	case Atomic:
		clear(r.s.Buf[q.RecvOff : q.RecvOff+session.AtomicSize])
	}
}

// checkPing checks the peer's message k of a ping-pong, b: the pattern up
// to the marker byte.
func (r *runner) checkPing(b []byte, size int, k int64, what string) error {
	if m := datacheck.Check(b[:size-1], r.id(1-r.side(), k)); m != nil {
		return datacheck.Errorf(what, k, 0, m)
	}
	return nil
}

// prepareOneSided readies operation p (from 1) of a run: a READ's
// destination is cleared, an atomic's poisoned, and a CMP_AND_SWAP
// compares with p-1 and swaps in p, so that every operation changes the
// target as FETCH_AND_ADD 1 does.
func (r *runner) prepareOneSided(local []byte, p int64) {
	if r.cfg.Test == Read {
		clear(local)
		return
	}
	binary.LittleEndian.PutUint64(local, ^uint64(0))
	if r.wr[0].Opcode == verbsio.OpAtomicCmpSwp {
		r.wr[0].Atomic.CompareAdd, r.wr[0].Atomic.Swap = uint64(p-1), uint64(p)
	}
}

// checkOneSided checks operation p's result in local: a READ must have
// brought the server's pattern, an atomic the count of the operations
// before it.
func (r *runner) checkOneSided(local []byte, p int64, what string) error {
	if r.cfg.Test == Read {
		if m := datacheck.Check(local, r.id(1-r.side(), 0)); m != nil {
			return datacheck.Errorf("our "+what, p, 0, m)
		}
		return nil
	}
	if got := binary.LittleEndian.Uint64(local); got != uint64(p-1) {
		return datacheck.Errorf("our "+what, p, 0, fmt.Errorf("it returned %d, want %d: the target must have counted every operation before it exactly once", got, p-1))
	}
	return nil
}
