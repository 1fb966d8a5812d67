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
package latency

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/internal/datacheck"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// Test is one of the latency tests.
type Test uint8

// The latency tests.
const (
	Send Test = iota
	Write
	Read
	Atomic
)

var testInfo = [...]struct {
	name, command, title string
	verb                 session.Verb
	rtt                  int
}{
	Send:   {"send_lat", "send-lat", "Send Latency Test", session.Send, reports.RTTFactorRoundTrip},
	Write:  {"write_lat", "write-lat", "RDMA_Write Latency Test", session.Write, reports.RTTFactorRoundTrip},
	Read:   {"read_lat", "read-lat", "RDMA_Read Latency Test", session.Read, reports.RTTFactorOneSided},
	Atomic: {"atomic_lat", "atomic-lat", "Atomic Latency Test", session.Atomic, reports.RTTFactorOneSided},
}

// Tests lists every latency test.
var Tests = []Test{Send, Write, Read, Atomic}

// Name is perftest's program name without "ib_", e.g. "write_lat"; the
// test field of its results.
func (t Test) Name() string { return testInfo[t].name }

// Command is the rperf command, e.g. "write-lat".
func (t Test) Command() string { return testInfo[t].command }

// Title is the banner line perftest prints for the test.
func (t Test) Title() string { return testInfo[t].title }

// RTTFactor is what each sample is divided by: 2 for SEND and WRITE, 1 for
// READ and ATOMIC.
func (t Test) RTTFactor() int { return testInfo[t].rtt }

// Passive reports whether the server side only serves the client's
// one-sided operations (read_lat, atomic_lat) and measures nothing.
func (t Test) Passive() bool { return t == Read || t == Atomic }

// Connections lists the transports the test runs over.
func (t Test) Connections() []verbsio.QPType { return testInfo[t].verb.Connections() }

// Info describes an established session.
type Info = session.Info

// Progress announces each run.
type Progress = session.Progress

// Defaults, as perftest's for latency tests.
const (
	DefaultSize       = 2    // DEF_SIZE_LAT
	DefaultIterations = 1000 // DEF_ITERS
	DefaultRxDepth    = 512
	// Default inline sizes (perftest's generic choices).
	DefaultInlineWrite = 220
	DefaultInlineSend  = 236
	DefaultInlineUD    = 188
	// AtomicSize is the size of every atomic operation.
	AtomicSize = session.AtomicSize
)

// Config describes a latency test. Default gives perftest's defaults.
type Config struct {
	Test       Test
	Connection verbsio.QPType // RC, UC or UD, as the test allows
	// Sizes are the message sizes, one run each (perftest -s, or -a).
	Sizes []int
	// Iterations per size (perftest -n), at least 5. Ignored in duration
	// mode.
	Iterations int
	// Duration selects duration mode (perftest -D); Margin is the warm-up
	// and cool-down margin (perftest -f). Duration must exceed 2×Margin.
	Duration, Margin time.Duration
	// Warmup iterations run before the measured ones and are not recorded
	// (iterations mode only).
	Warmup int
	// TxDepth is the send queue depth (perftest -t; 1).
	TxDepth int
	// RxDepth is the receives kept posted in send_lat (perftest -r).
	RxDepth int
	// Inline is the largest message sent inline (perftest -I). Default
	// sets perftest's choice for the test; read and atomic never inline.
	Inline int
	// OutReads is the READ/atomic depth (perftest -o); 0 means the
	// device's maximum.
	OutReads int
	// AtomicOp is OpAtomicFetchAdd (default) or OpAtomicCmpSwp (perftest -A).
	AtomicOp verbsio.Opcode
	// Percentiles are the true-statistics percentiles; nil means
	// reports.DefaultPercentiles.
	Percentiles []float64
	// Link is how the test reaches its peer: port, GID, MTU, ACK
	// timeout (perftest -i, -x, -m, -u), the stall timeout and the
	// parameters both sides check.
	Link
	// PassiveWait bounds how long a passive server waits for the client's
	// run of one size to end; 0 means 10×StallTimeout (plus the duration).
	PassiveWait time.Duration
	// Validate makes every message carry a pattern its receiver checks
	// byte by byte (see package datacheck): each side checks every SEND or
	// RDMA WRITE it receives before answering, the read_lat client every
	// READ's data against the server's pattern, the atomic_lat client
	// every returned value against the sequence of operations. Both sides
	// must agree. The checks add their cost to the measured times.
	Validate bool
	// Path is the send path (see package sendpath): how both sides post
	// and where their buffers live. Inline sends every message inline
	// (the inline size is raised to the largest message); DM puts the
	// buffers in device memory and never inlines.
	Path sendpath.Path
	// Segmenter says who cuts messages into packets on a packet fabric;
	// 0 leaves it to the path (Path.Segmenter).
	Segmenter verbsio.Segmenter

	// OnConnected, if set, is called once the QPs are connected.
	OnConnected func(Info)
	// OnProgress, if set, is called before each size's run.
	OnProgress func(Progress)
	// OnResult, if set, is called with each size's result as it is ready.
	OnResult func(reports.Result)
}

// AutoGID as Config.GIDIndex picks the GID perftest would (the default).
const AutoGID = session.AutoGID

// Link is how a test reaches its peer (Config embeds it).
type Link = session.Link

// Default returns perftest's defaults for t.
func Default(t Test) Config {
	c := Config{
		Test: t, Connection: verbsio.QPTypeRC, Sizes: []int{DefaultSize}, Iterations: DefaultIterations,
		TxDepth: 1, RxDepth: DefaultRxDepth, AtomicOp: verbsio.OpAtomicFetchAdd,
		Link: Link{GIDIndex: AutoGID},
	}
	switch t {
	case Write:
		c.Inline = DefaultInlineWrite
	case Send:
		c.Inline = DefaultInlineSend
	case Atomic:
		c.Sizes = []int{AtomicSize}
	}
	return c
}

// DefaultInline returns perftest's default inline size for test t over
// transport typ.
func DefaultInline(t Test, typ verbsio.QPType) int {
	switch {
	case t == Write:
		return DefaultInlineWrite
	case t == Send && typ == verbsio.QPTypeUD:
		return DefaultInlineUD
	case t == Send:
		return DefaultInlineSend
	}
	return 0
}

// Check reports the first problem with c that would stop Run, in terms of
// the configuration (callers translate it into their flags).
func (c *Config) Check() error {
	if int(c.Test) >= len(testInfo) {
		return fmt.Errorf("unknown latency test %d", c.Test)
	}
	if !slices.Contains(c.Test.Connections(), c.Connection) {
		return fmt.Errorf("%s does not run over %s", c.Test.Name(), c.Connection)
	}
	if err := session.CheckSizes(testInfo[c.Test].verb, c.Sizes); err != nil {
		return err
	}
	if err := session.CheckLength(c.Iterations, c.Warmup, c.Duration, c.Margin, "iterations"); err != nil {
		return err
	}
	switch {
	case c.TxDepth < 1:
		return fmt.Errorf("tx depth %d is below 1", c.TxDepth)
	case c.Test == Send && c.RxDepth < 1:
		return fmt.Errorf("rx depth %d is below 1", c.RxDepth)
	case c.Inline < 0:
		return fmt.Errorf("negative inline size")
	case c.Test == Atomic && c.AtomicOp != verbsio.OpAtomicFetchAdd && c.AtomicOp != verbsio.OpAtomicCmpSwp:
		return fmt.Errorf("atomic operation %s is not FETCH_AND_ADD or CMP_AND_SWAP", c.AtomicOp)
	}
	if err := sendpath.Applies(c.Path, c.pathTest()); err != nil {
		return fmt.Errorf("the %s send path does not apply to %s: %w", c.Path, c.Test.Name(), err)
	}
	if c.Path == sendpath.DM && c.Validate {
		return fmt.Errorf("data validation reads the buffers as host memory; the dm path keeps them in device memory")
	}
	return nil
}

func (c *Config) pathTest() sendpath.Test { return c.Test.PathTest(c.Connection) }

// PathTest describes the test over transport typ for sendpath.Applies.
func (t Test) PathTest(typ verbsio.QPType) sendpath.Test {
	return sendpath.Test{Verb: testInfo[t].verb, Type: typ}
}

// inline is the inline size the QPs ask for: none for READ and atomics,
// else as the path has it (sendpath.Path.InlineSize).
func (c *Config) inline(maxSize int) int {
	if c.Test.Passive() {
		return 0
	}
	return c.Path.InlineSize(c.Inline, maxSize)
}

// Run runs the test over conn on dev: the session setup, one run per size,
// and the closing handshake. It returns this side's results: one per size,
// or none on the passive server of read_lat and atomic_lat. It never
// closes dev; conn is closed when it returns.
func Run(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, cfg Config) ([]reports.Result, error) {
	if err := cfg.Check(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("latency test: %w", err)
	}
	maxSize := slices.Max(cfg.Sizes)
	inline := cfg.inline(maxSize)
	if err := sendpath.CheckOn(dev, cfg.Path, inline); err != nil {
		conn.Close()
		return nil, fmt.Errorf("latency test: %w", err)
	}
	s, err := session.Open(ctx, dev, conn, session.Spec{
		Verb: testInfo[cfg.Test].verb, Type: cfg.Connection, QPs: 1, MaxSize: maxSize,
		TxDepth: cfg.TxDepth, RxDepth: cfg.RxDepth, Inline: inline, OutReads: cfg.OutReads,
		Link:         cfg.Link,
		DeviceMemory: cfg.Path == sendpath.DM, Segmenter: cfg.Path.QPSegmenter(cfg.Segmenter),
	})
	if err != nil {
		return nil, err
	}
	if cfg.OnConnected != nil {
		cfg.OnConnected(s.Info())
	}
	r := &runner{cfg: &cfg, s: s}
	err = r.openPath()
	var results []reports.Result
	if err == nil {
		results, err = r.run(ctx)
	}
	r.closePath()
	if cerr := s.Close(ctx, err == nil); err == nil && cerr != nil {
		err = cerr
	}
	return results, err
}

type runner struct {
	cfg    *Config
	s      *session.Session
	tx     *sendpath.Sender      // posts by the path
	comp   *sendpath.Completions // the send CQ's completions
	rcomp  *sendpath.Completions // the receive CQ's (send_lat)
	rx     *sendpath.Receiver    // reposts receives (send_lat)
	rec    *reports.Recorder
	wr     [1]verbsio.SendWR
	sge    [1]verbsio.SGE
	runIdx int // the size's index, for datacheck ids
}

// openPath prepares posting by the configured path on the session's QP.
func (r *runner) openPath() error {
	s, p := r.s, r.cfg.Path
	q := s.QPs[0]
	var err error
	if r.tx, err = sendpath.NewSender(p, s, q); err != nil {
		return err
	}
	if r.comp, err = sendpath.NewCompletions(p, s, s.SendCQ, r.tx); err != nil {
		return err
	}
	if r.rcomp, err = sendpath.NewCompletions(p, s, s.RecvCQ, nil); err != nil {
		return err
	}
	r.rx, err = sendpath.NewReceiver(p, s, q)
	return err
}

func (r *runner) closePath() {
	if r.tx != nil {
		r.tx.Release()
	}
	if r.comp != nil {
		r.comp.Release()
	}
	if r.rx != nil {
		r.rx.Release()
	}
}

// stats is what one run measured besides the samples.
type stats struct {
	iterations int64 // perftest's #iterations
	elapsed    int64 // duration mode: the sample window
}

func (r *runner) run(ctx context.Context) ([]reports.Result, error) {
	cfg := r.cfg
	passiveServer := cfg.Test.Passive() && r.s.Server
	if !passiveServer {
		opts := reports.RecorderOptions{}
		if cfg.Duration == 0 {
			opts.Expected = cfg.Iterations - 1
		}
		rec, err := reports.NewRecorder(opts)
		if err != nil {
			return nil, err
		}
		r.rec = rec
	}
	stall := cfg.Stall()
	passiveWait := cfg.PassiveWait
	if passiveWait <= 0 {
		passiveWait = 10 * stall
	}
	passiveWait += cfg.Duration

	var results []reports.Result
	for i, size := range cfg.Sizes {
		if cfg.OnProgress != nil {
			cfg.OnProgress(Progress{Index: i, Count: len(cfg.Sizes), Bytes: size, Duration: cfg.Duration})
		}
		if !passiveServer {
			// Clear the marker byte the peer will write, before the barrier
			// lets it start.
			q := r.s.QPs[0]
			if err := r.s.StoreByte(r.s.RecvPayload(q)+size-1, 0); err != nil {
				return results, err
			}
		}
		r.runIdx = i
		if cfg.Validate {
			r.prepareTarget(size)
		}
		if err := r.s.Barrier(ctx, 0); err != nil {
			return results, err
		}
		if passiveServer {
			if err := r.s.Barrier(ctx, passiveWait); err != nil {
				return results, err
			}
			continue
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
			return results, err
		}
		if err := r.s.Barrier(ctx, 0); err != nil {
			return results, err
		}
		res, err := r.result(size, st)
		if err != nil {
			return results, err
		}
		results = append(results, res)
		if cfg.OnResult != nil {
			cfg.OnResult(res)
		}
	}
	return results, nil
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
	res.Path = cfg.Path.String()
	return res, nil
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
			sm.winBeg = now
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

// pingPong is perftest's run_iter_lat_write / run_iter_lat_send: the
// server waits first; each side then alternates wait and post.
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
	if size <= q.Cap().MaxInlineData && cfg.Path != sendpath.DM { // device memory is never inlined
		r.wr[0].Flags |= verbsio.SendInline
	}
	waitPeer := s.NewWaiter(ctx, what, true)
	waitOwn := s.NewWaiter(ctx, "the completion of "+sendWhat, false)
	sm := r.newSampler(clock.Now())
	buf := s.Buf
	dmem := s.DM != nil // the buffers are in device memory: reached by copies
	drive, validate := s.PollDriven, cfg.Validate
	recvOff := s.RecvPayload(q)

	var scnt, rcnt int64
	for scnt < total || rcnt < total {
		if rcnt < total && !(scnt == 0 && s.Server) {
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
			sm.stamp(now)
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
			waitOwn.Index = scnt
			if _, err := r.comp.Wait(waitOwn, sendWhat); err != nil {
				return stats{}, err
			}
		}
	}
	return sm.stats(cfg.Iterations), nil
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
	op := testInfo[cfg.Test].verb.Opcode(cfg.AtomicOp)
	r.sge[0] = s.MR.SGE(q.SendOff, size)
	r.wr[0] = verbsio.SendWR{ID: 1, Opcode: op, Flags: verbsio.SendSignaled, SGL: r.sge[:], Remote: q.Remote}
	if op == verbsio.OpAtomicFetchAdd {
		r.wr[0].Atomic.CompareAdd = 1
	}
	what := op.String()
	wait := s.NewWaiter(ctx, "the completion of our "+what, false)
	sm := r.newSampler(clock.Now())
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
		sm.stamp(now)
		if err := r.tx.Post(r.wr[:]); err != nil {
			return stats{}, fmt.Errorf("post %s #%d: %w", what, p, err)
		}
		wait.Index = p
		if _, err := r.comp.Wait(wait, what); err != nil {
			return stats{}, err
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
		clear(r.s.Buf[q.RecvOff : q.RecvOff+AtomicSize])
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
