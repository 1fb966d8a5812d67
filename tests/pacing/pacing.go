// Package pacing measures packet pacing: how closely a QP's rate limit
// (QP.Modify with RateLimit, MaxBurstSize and TypicalPktSize at RTS) is
// followed, over a sweep of requested rates.
//
// # What is measured
//
// The server sends: for each requested rate it sets the limit on its QP
// and streams SENDs of one size, keeping up to TxDepth outstanding, so
// that the pacer, not the posting loop, sets the pace; the last message
// of a rate is a SEND_WITH_IMM carrying session.StopImm. The client
// receives and measures: it stamps every message when it polls its
// completion (one completion per poll) and reports, per rate, the
// achieved rate, its error against the request, and the distribution of
// the gaps between consecutive arrivals as an HdrHistogram.
//
// The rate is measured at the receiver, not from the sender's
// completions: pacing promises when data reaches the wire and the peer,
// and on the udp fabric a sender's completions follow the receiver's
// coalesced ACKs, so their spacing is the ACK schedule's. On the shm
// fabric, where the sender's engine places each message in the receiver's
// memory itself, the two coincide.
//
// The token bucket starts full: its first ceil(B/S) messages (B the
// bucket depth, S the message size) leave back to back. They are not
// measured (Result.ExcludedMessages); the measurement runs from the
// arrival of the next message to the last, when every message has waited
// for its tokens: achieved = S × (messages − 1) × 8 / (last − first).
//
// Each rate sends for about Config.RateDuration (or Config.RateBytes),
// and never longer than twice that plus a second: a rate the fabric
// cannot sustain is cut there, and its achieved rate says so. The default
// sweep runs 1, 10, 100 and 1000 Mb/s, then 2, 5 and 10 Gb/s and so on up
// to the device's maximum, and stops after the first rate whose achieved
// rate falls more than Config.Tolerance below the request.
package pacing

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// TestName is the test field of pacing records.
const TestName = "pacing"

// Defaults.
const (
	DefaultSize         = 4096
	DefaultRateDuration = time.Second
	DefaultTxDepth      = 128
	DefaultRxDepth      = 512
	// DefaultTolerance is how far below the request, in percent, an
	// achieved rate may fall and still count as followed.
	DefaultTolerance = 5.0
	// MinBurst is the least bucket depth rperf assumes: the built-in
	// engine's bucket holds at least 4 KiB whatever MaxBurstSize asks.
	MinBurst = 4096
	// MinMeasured is the fewest messages measured per rate.
	MinMeasured = 10
	// cqMod asks for a send completion every this many messages.
	cqMod = 16
)

// DefaultRates is the default sweep, in Mb/s: decades up to 1 Gb/s, then
// a 1-2-5 series up to 100 Gb/s. Rates above the device's maximum are
// dropped; the sweep stops after the first rate not followed.
var DefaultRates = []float64{1, 10, 100, 1000, 2000, 5000, 10000, 20000, 50000, 100000}

// Config describes a pacing sweep. Default gives the defaults.
type Config struct {
	// Size is the message size in bytes, and the typical packet size
	// given to the pacer.
	Size int
	// Rates are the requested rates in Mb/s (10^6 bit/s), in order; nil
	// means DefaultRates with the stop rule (an explicit list runs every
	// rate).
	Rates []float64
	// RateDuration is about how long each rate is measured; RateBytes, if
	// set, is how many bytes each rate measures instead.
	RateDuration time.Duration
	RateBytes    int64
	// Burst is the bucket depth asked for (MaxBurstSize); the depth used
	// is at least one message and MinBurst.
	Burst int
	// Tolerance is the stop rule's margin, in percent.
	Tolerance float64
	// TxDepth is the sender's outstanding messages; RxDepth the
	// receiver's posted receives.
	TxDepth, RxDepth int
	// Percentiles of the gap distribution; nil means
	// reports.DefaultPercentiles.
	Percentiles []float64
	// Link is how the test reaches its peer: port, GID, MTU, ACK
	// timeout, the stall timeout and the parameters both sides check.
	session.Link

	// OnConnected, if set, is called once the QPs are connected.
	OnConnected func(session.Info)
	// OnRate, if set, is called before each rate runs.
	OnRate func(index int, mbps float64)
	// OnResult, if set, is called with each rate's record.
	OnResult func(reports.Result)
}

// Default returns the defaults.
func Default() Config {
	return Config{Size: DefaultSize, RateDuration: DefaultRateDuration, Tolerance: DefaultTolerance,
		TxDepth: DefaultTxDepth, RxDepth: DefaultRxDepth, Link: session.Link{GIDIndex: session.AutoGID}}
}

// Check reports every problem with c that would stop Run
// (session.Problems of FieldErrors), nil if there is none.
func (c *Config) Check() error {
	var ps session.Problems
	if c.Size < 1 {
		ps.AddField(session.NewFieldError("Size", c.Size, "give a message size of at least 1 byte"))
	}
	switch {
	case c.RateBytes < 0:
		ps.AddField(session.NewFieldError("RateBytes", c.RateBytes, "the bytes measured per rate cannot be negative"))
	case c.RateDuration <= 0 && c.RateBytes == 0:
		ps.AddField(session.NewFieldError("RateDuration", c.RateDuration, "must be positive, e.g. 1s").
			WithFix("or measure each rate by bytes ({RateBytes})"))
	}
	if c.Burst < 0 {
		ps.AddField(session.NewFieldError("Burst", c.Burst, "the bucket depth cannot be negative"))
	}
	if c.Tolerance < 0 || c.Tolerance >= 100 {
		ps.AddField(session.NewFieldError("Tolerance", c.Tolerance, "give a percentage in [0, 100)"))
	}
	ps.Add(session.CheckTxDepth(c.TxDepth))
	ps.Add(session.CheckRxDepth(c.RxDepth))
	for _, r := range c.Rates {
		if !(r > 0) || math.IsInf(r, 0) {
			ps.AddField(session.NewFieldError("Rates", c.Rates, "rate %v Mb/s is not a positive rate", r))
			break
		}
	}
	return ps.Err()
}

// CheckDevice checks the rates against the device's pacing range.
func (c *Config) CheckDevice(pc verbsio.PacingCaps, dev string) error {
	if pc.RateLimitMaxKbps == 0 {
		return fmt.Errorf("%s has no packet pacing (packet_pacing max rate 0)", dev)
	}
	lo, hi := float64(pc.RateLimitMinKbps)/1000, float64(pc.RateLimitMaxKbps)/1000
	for _, r := range c.Rates {
		if kbps(r) < pc.RateLimitMinKbps || kbps(r) > pc.RateLimitMaxKbps {
			return fmt.Errorf("%v Mb/s is outside %s's pacing range, %v to %v Mb/s", r, dev, lo, hi)
		}
	}
	return nil
}

// Sweep returns the rates a run will try on a device with pacing caps pc:
// c.Rates, or DefaultRates within pc's range.
func (c *Config) Sweep(pc verbsio.PacingCaps) []float64 {
	if c.Rates != nil {
		return c.Rates
	}
	var rs []float64
	for _, r := range DefaultRates {
		if k := kbps(r); k >= pc.RateLimitMinKbps && k <= pc.RateLimitMaxKbps {
			rs = append(rs, r)
		}
	}
	return rs
}

func kbps(mbps float64) uint32 { return uint32(math.Round(mbps * 1000)) }

// EffectiveBurst is the bucket depth a run uses: the burst asked for, at
// least one message and MinBurst.
func EffectiveBurst(burst, size int) int { return max(burst, size, MinBurst) }

// Plan is how many messages one rate sends and how.
type Plan struct {
	Excluded int64   // the initial burst, not measured: ceil(burst / size)
	Measured int64   // messages measured
	GapNs    float64 // the gap the rate implies, size × 8000 / mbps ns
	// Cap is the longest the rate may send: twice its expected time plus
	// a second.
	Cap time.Duration
}

// Total is the messages the sender sends, unless Cap cuts the rate short.
func (p Plan) Total() int64 { return p.Excluded + p.Measured }

// PlanRate plans rate mbps: the measured messages span about
// c.RateDuration (or c.RateBytes), at least MinMeasured.
func (c *Config) PlanRate(mbps float64) Plan {
	size := int64(c.Size)
	b := int64(EffectiveBurst(c.Burst, c.Size))
	p := Plan{Excluded: (b + size - 1) / size, GapNs: float64(size) * 8000 / mbps}
	if c.RateBytes > 0 {
		p.Measured = (c.RateBytes + size - 1) / size
	} else {
		p.Measured = int64(math.Ceil(c.RateDuration.Seconds() * mbps * 1e6 / 8 / float64(size)))
	}
	p.Measured = max(p.Measured, MinMeasured)
	expected := time.Duration(float64(p.Measured) * p.GapNs)
	p.Cap = 2*expected + time.Second
	return p
}

// Follows reports whether an achieved rate follows the requested one:
// not more than tolerance percent below it.
func Follows(requested, achieved, tolerance float64) bool {
	return achieved >= requested*(1-tolerance/100)
}

// Run runs the sweep over conn on dev: the server sends, the client
// measures. Both return one record per rate (the server's without the
// gap distribution, which only the receiver has). It never closes dev;
// conn is closed when it returns.
func Run(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, cfg Config) ([]reports.Result, error) {
	if err := cfg.Check(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("pacing test: %w", err)
	}
	attr, err := dev.QueryDevice()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("query device %s: %w", dev.Device.Name, err)
	}
	if err := cfg.CheckDevice(attr.PacketPacing, dev.Device.Name); err != nil {
		conn.Close()
		return nil, fmt.Errorf("pacing test: %w", err)
	}
	s, err := session.Open(ctx, dev, conn, session.Spec{
		Verb: session.Send, Type: verbsio.QPTypeRC, QPs: 1, MaxSize: cfg.Size,
		TxDepth: cfg.TxDepth, RxDepth: cfg.RxDepth, Link: cfg.Link,
		Segmenter: verbsio.SegmentEngine,
	})
	if err != nil {
		return nil, err
	}
	if cfg.OnConnected != nil {
		cfg.OnConnected(s.Info())
	}
	r := &runner{cfg: &cfg, s: s, rates: cfg.Sweep(attr.PacketPacing)}
	results, err := r.run(ctx)
	if cerr := s.Close(ctx, err == nil); err == nil && cerr != nil {
		err = cerr
	}
	return results, err
}

type runner struct {
	cfg   *Config
	s     *session.Session
	rates []float64
	rec   *reports.Recorder
	wr    [1]verbsio.SendWR
	sge   [1]verbsio.SGE
	wcs   [16]verbsio.WC
}

func (r *runner) run(ctx context.Context) ([]reports.Result, error) {
	cfg := r.cfg
	var results []reports.Result
	for i, mbps := range r.rates {
		if cfg.OnRate != nil {
			cfg.OnRate(i, mbps)
		}
		plan := cfg.PlanRate(mbps)
		if err := r.s.Barrier(ctx, 0); err != nil {
			return results, err
		}
		var res reports.Result
		var err error
		if r.s.Server {
			err = r.send(ctx, mbps, plan)
		} else {
			res, err = r.receive(ctx, mbps, plan)
		}
		if err != nil {
			return results, fmt.Errorf("%v Mb/s: %w", mbps, err)
		}
		// Both sides learn the receiver's figures and apply the same
		// stop rule to them.
		var rep oob.BWReport
		if !r.s.Server {
			rep = oob.BWReport{Size: uint64(cfg.Size), Iters: uint64(res.Iterations), BWAvg: *res.AchievedMbps}
		}
		// The engine serves the peer meanwhile: on a poll-driven fabric
		// the acknowledgement of the last message is still owed.
		var peer oob.BWReport
		err = r.s.Serve(func() (err error) {
			peer, err = r.s.Conn.ExchangeBWReport(ctx, rep)
			return err
		})
		if err != nil {
			return results, err
		}
		if r.s.Server {
			if err := peer.Check(); err != nil {
				return results, err
			}
			res = senderRecord(cfg.Size, mbps, plan, peer)
		}
		results = append(results, res)
		if cfg.OnResult != nil {
			cfg.OnResult(res)
		}
		if cfg.Rates == nil && !Follows(mbps, *res.AchievedMbps, cfg.Tolerance) {
			break
		}
	}
	return results, nil
}

// senderRecord is the sender's record of a rate: the receiver's figures.
func senderRecord(size int, mbps float64, plan Plan, peer oob.BWReport) reports.Result {
	achieved := peer.BWAvg
	e := reports.ErrorPct(mbps, achieved)
	return reports.Result{
		Test: TestName, Bytes: int64(size), Iterations: int64(peer.Iters), Mode: reports.ModeIterations, Path: "generic",
		RequestedMbps: &mbps, AchievedMbps: &achieved, ErrorPct: &e, ExcludedMessages: plan.Excluded,
	}
}

// limit sets the sender's rate limit.
func (r *runner) limit(mbps float64) error {
	cfg := r.cfg
	attr := verbsio.QPAttr{State: verbsio.QPStateRTS, RateLimit: kbps(mbps),
		MaxBurstSize: uint32(EffectiveBurst(cfg.Burst, cfg.Size)), TypicalPktSize: uint16(min(cfg.Size, math.MaxUint16))}
	if err := r.s.QPs[0].Modify(&attr, verbsio.QPAttrState|verbsio.QPAttrRateLimit); err != nil {
		return fmt.Errorf("set the rate limit to %v Mb/s: %w", mbps, err)
	}
	return nil
}

// send streams plan.Total() paced SENDs (fewer if plan.Cap passes), the
// last one carrying the stop, then lifts the limit.
func (r *runner) send(ctx context.Context, mbps float64, plan Plan) error {
	s, cfg := r.s, r.cfg
	q := s.QPs[0]
	if err := r.limit(mbps); err != nil {
		return err
	}
	r.sge[0] = s.MR.SGE(q.SendOff, cfg.Size)
	tx := int64(min(cfg.TxDepth, q.Cap().MaxSendWR-1))
	mod := min(cqMod, tx) // a window smaller than cqMod must still see completions
	total := plan.Total()
	capAt := clock.Now() + int64(plan.Cap)
	w := newBusy(ctx, r.cfg.Stall(), "the completions of our paced SENDs")
	var posted, done, lastSig int64
	for done < total {
		progressed := false
		if posted < total && clock.Now() >= capAt {
			total = posted + 1 // the rate is not sustained: end it with the next message
		}
		for posted < total && posted-done < tx {
			k := posted + 1
			wr := &r.wr[0]
			*wr = verbsio.SendWR{Opcode: verbsio.OpSend, SGL: r.sge[:]}
			if k == total {
				wr.Opcode, wr.Imm = verbsio.OpSendImm, session.StopImm
			}
			if k%mod == 0 || k == total {
				wr.Flags, wr.ID = verbsio.SendSignaled, uint64(k-lastSig)
				lastSig = k
			}
			if _, err := q.PostSend(r.wr[:]); err != nil {
				return fmt.Errorf("post SEND #%d: %w", k, err)
			}
			posted = k
			progressed = true
		}
		n, err := s.SendCQ.Poll(r.wcs[:])
		if err != nil {
			return fmt.Errorf("poll the send CQ: %w", err)
		}
		for i := range n {
			wc := &r.wcs[i]
			if wc.Status != verbsio.StatusSuccess {
				return &session.CompletionError{What: fmt.Sprintf("paced SEND #%d", done+1), WC: *wc}
			}
			if wc.ID == session.ProbeID {
				continue
			}
			done += int64(wc.ID)
			progressed = true
		}
		if progressed {
			w.progress()
			continue
		}
		if err := w.spin(); err != nil {
			return err
		}
	}
	off := verbsio.QPAttr{State: verbsio.QPStateRTS}
	if err := q.Modify(&off, verbsio.QPAttrState|verbsio.QPAttrRateLimit); err != nil {
		return fmt.Errorf("lift the rate limit: %w", err)
	}
	return nil
}

// busy bounds the sender's wait without ever napping: the engine paces
// by executing a held WQE when it is polled at or after its time, and a
// late poll keeps at most one burst of credit, so a longer nap would
// lengthen a gap (as a NIC's pacer never sleeps, the sender's
// engine must not either). Every session.CheckEvery spins it checks the
// context and the stall timeout.
type busy struct {
	ctx   context.Context
	what  string
	stall int64
	spins int
	since int64
}

func newBusy(ctx context.Context, stall time.Duration, what string) *busy {
	return &busy{ctx: ctx, what: what, stall: int64(stall)}
}

// progress restarts the stall clock.
func (b *busy) progress() { b.spins, b.since = 0, 0 }

// spin counts one spin without progress.
func (b *busy) spin() error {
	b.spins++
	if b.spins&(session.CheckEvery-1) != 0 {
		return nil
	}
	if err := b.ctx.Err(); err != nil {
		return fmt.Errorf("interrupted while waiting for %s: %w", b.what, err)
	}
	now := clock.Now()
	if b.since == 0 {
		b.since = now
	} else if now-b.since >= b.stall {
		return &session.StallError{What: b.what, For: time.Duration(now - b.since).Round(time.Millisecond)}
	}
	return nil
}

// arrivals accumulates a receiver's stamps: the first plan.Excluded
// messages are skipped; from then on every gap is recorded.
type arrivals struct {
	excluded    int64
	n           int64 // messages so far
	first, last int64 // stamps of the first measured message and the last
	rec         *reports.Recorder
}

// add takes the stamp of the next message.
func (a *arrivals) add(t int64) {
	switch {
	case a.n == a.excluded:
		a.first = t
	case a.n > a.excluded:
		a.rec.Record(t - a.last)
	}
	a.last = t
	a.n++
}

// measured is the number of messages measured.
func (a *arrivals) measured() int64 { return max(a.n-a.excluded, 0) }

// record turns a rate's arrivals into its record.
func (a *arrivals) record(size int, mbps float64, plan Plan, ps []float64) (reports.Result, error) {
	m := a.measured()
	if m < 2 || a.last <= a.first {
		return reports.Result{}, fmt.Errorf("only %d messages arrived after the %d of the initial burst: nothing to measure (run each rate longer)", m, a.excluded)
	}
	window := a.last - a.first
	achieved, err := reports.RateMbps(int64(size), m-1, window)
	if err != nil {
		return reports.Result{}, err
	}
	avg, err := reports.BWAverage(int64(size), m-1, window)
	if err != nil {
		return reports.Result{}, err
	}
	gap, err := reports.NewGap(a.rec, plan.GapNs, ps)
	if err != nil {
		return reports.Result{}, err
	}
	e := reports.ErrorPct(mbps, achieved)
	return reports.Result{
		Test: TestName, Bytes: int64(size), Iterations: m, Mode: reports.ModeIterations, ElapsedNs: window, Path: "generic",
		Bandwidth:     &reports.Bandwidth{BWAvgMiBps: avg.MiBps, BWAvgGbps: avg.Gbps, MsgRateMpps: avg.Mpps, PeakStatus: reports.PeakReceiver},
		RequestedMbps: &mbps, AchievedMbps: &achieved, ErrorPct: &e,
		Gap: gap, ExcludedMessages: plan.Excluded,
	}, nil
}

// receive takes one rate's messages until the stop and measures them.
func (r *runner) receive(ctx context.Context, mbps float64, plan Plan) (reports.Result, error) {
	s, cfg := r.s, r.cfg
	q := s.QPs[0]
	if r.rec == nil {
		rec, err := reports.NewRecorder(reports.RecorderOptions{})
		if err != nil {
			return reports.Result{}, err
		}
		r.rec = rec
	}
	r.rec.Reset()
	a := arrivals{excluded: plan.Excluded, rec: r.rec}
	w := s.NewWaiter(ctx, "the paced SENDs", true)
	wcs := r.wcs[:1] // one completion per poll: each message gets its own stamp
	w.Begin()
	for {
		n, err := s.RecvCQ.Poll(wcs)
		if err != nil {
			return reports.Result{}, fmt.Errorf("poll the receive CQ: %w", err)
		}
		if n == 0 {
			if err := w.Spin(); err != nil {
				return reports.Result{}, err
			}
			continue
		}
		t := clock.Now()
		wc := &wcs[0]
		if wc.Status != verbsio.StatusSuccess {
			return reports.Result{}, &session.CompletionError{What: fmt.Sprintf("receive #%d", a.n+1), WC: *wc}
		}
		a.add(t)
		if err := q.Repost(); err != nil {
			return reports.Result{}, fmt.Errorf("repost a receive: %w", err)
		}
		if wc.Flags&verbsio.WCWithImm != 0 && wc.Imm == session.StopImm {
			break
		}
		w.Index = a.n + 1
		w.Begin()
		if err := w.Tick(); err != nil {
			return reports.Result{}, err
		}
	}
	return a.record(cfg.Size, mbps, plan, cfg.Percentiles)
}
