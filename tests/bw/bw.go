// Package bw runs perftest's bandwidth tests over verbsio: send_bw,
// write_bw, read_bw and atomic_bw, with perftest's data-path conventions,
// and returns one reports.Result per message size.
//
// # What is measured
//
// The sender keeps up to TxDepth messages outstanding on each QP, posts
// them PostList at a time, and asks for a completion every CQMod messages
// (and for the last one). It stamps the clock at each post and at each
// completion it polls, as perftest's tposted and tcompleted; the average
// bandwidth is messages × size over last completion minus first post, and
// the peak is perftest's best window over those stamps (skipped above
// 20000 iterations, as perftest does).
//
//   - write_bw, read_bw, atomic_bw: the client sends; the server is passive
//     (the initiator does the work, as with RDMA hardware) and receives the
//     client's report at the end, which it prints as its own.
//   - send_bw: the server receives into RxDepth pre-posted receives per QP,
//     reposting each as it completes, and reports what it received: its
//     bandwidth runs from the first receive to the last, without a peak,
//     as perftest's server does.
//   - Bidirectional (-b): both sides send (and receive, for send_bw); each
//     measures what it sends, they exchange reports and both print the sum.
//
// A SEND stream ends, on each QP, with a SEND_WITH_IMM carrying
// session.StopImm: its last message in iterations mode, an extra message
// after the run in duration mode. Over UC and UD, where messages can be
// lost, the receiver also stops after a second without traffic and
// reports how many messages never arrived.
//
// In duration mode the sender posts until the duration has passed and
// counts the messages completed inside the sample window between the
// margins; the peak is not measured, as in perftest.
//
// # Data validation
//
// With Config.Validate every message carries a pattern its receiver
// checks byte by byte (see package datacheck): the send_bw receiver
// checks every message it receives, the write_bw target the last message
// of each QP after the run, the read_bw initiator every READ's data
// against the target's pattern, the atomic_bw initiator every returned
// value against the sequence of operations. Every outstanding message
// then has its own buffer (ValidationBytes, at most ValidateBudget), and
// the checks cost bandwidth.
//
// The test's identity, the configuration every family shares, the session
// and the run's skeleton are package session's; this package is the
// measurement (session.Measurer).
package bw

import (
	"context"
	"encoding/binary"
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

// The bandwidth tests.
const (
	Send   = session.SendBW
	Write  = session.WriteBW
	Read   = session.ReadBW
	Atomic = session.AtomicBW
)

// Tests lists every bandwidth test.
var Tests = []session.Test{Send, Write, Read, Atomic}

// Defaults and limits, as perftest's for bandwidth tests.
const (
	DefaultCQMod   = session.DefaultCQMod   // DEF_CQ_MOD
	CQModSizeLimit = session.CQModSizeLimit // MSG_SIZE_CQ_MOD_LIMIT
	MaxCQMod       = session.MaxCQMod       // -Q
	MaxQPs         = 16384                  // -q
	// UnreliableQuiet is how long a UC/UD receiver waits without traffic
	// before it takes the missing messages as lost.
	UnreliableQuiet = time.Second
	// maxStamps bounds the per-message stamps kept for the peak.
	maxStamps = 1 << 22
)

// Config describes a bandwidth test: the shared configuration (the test,
// its sizes, iterations per QP or duration, warm-up messages per QP,
// queues, path and link; see session.Config) and the bandwidth tests'
// own knobs. TxDepth is capped at Iterations, as perftest caps it.
// Default gives perftest's defaults.
type Config struct {
	session.Config
	// QPs is the number of queue pairs (perftest -q).
	QPs int
	// PostList chains this many requests per post (perftest -l); CQ
	// moderation then equals it.
	PostList int
	// CQMod is perftest's -Q, 1 to MaxCQMod; 0 means perftest's rule: 100,
	// capped at the tx depth, and 1 for messages above 8 KiB.
	CQMod         int
	Bidirectional bool // perftest -b
	NoPeak        bool // perftest -N
	// ReportGbits sets the unit of the report exchanged with the peer
	// (perftest --report_gbits): Gb/s instead of MiB/s.
	ReportGbits bool
	// RateLimitKbps paces each QP that sends (perftest --rate_limit
	// with --rate_limit_type PP): the QP's packet pacing, set at RTS
	// before the first message; 0 sends as fast as the queue allows.
	RateLimitKbps uint32
}

// Default returns perftest's defaults for t.
func Default(t session.Test) Config {
	return Config{Config: session.Default(t), QPs: 1, PostList: 1}
}

// Check reports every problem with c that would stop Run (session.Problems
// of FieldErrors), nil if there is none.
func (c *Config) Check() error {
	if c.Test.Valid() && c.Test.Family() != session.Bandwidth {
		return session.Problems{{Field: "Test", Value: c.Test.Name(), Reason: "not a bandwidth test"}}
	}
	var ps session.Problems
	ps.Add(c.Config.Check())
	if !c.Test.Valid() {
		return ps.Err()
	}
	switch {
	case c.QPs < 1:
		ps.AddField(session.NewFieldError("QPs", c.QPs, "the number of QPs must be between 1 and %d", MaxQPs).WithFix("at least 1 is needed"))
	case c.QPs > MaxQPs:
		ps.AddField(session.NewFieldError("QPs", c.QPs, "the number of QPs must be between 1 and %d", MaxQPs))
	}
	switch {
	case c.PostList < 1:
		ps.AddField(session.NewFieldError("PostList", c.PostList, "the post list must be at least 1"))
	case c.PostList > c.txDepth() && c.Duration == 0:
		ps.AddField(session.NewFieldError("PostList", c.PostList, "the post list cannot be longer than the tx depth ({TxDepth=}) or the iterations ({Iterations=})").
			WithValue("TxDepth", c.TxDepth).WithValue("Iterations", c.Iterations))
	case c.PostList > c.txDepth():
		ps.AddField(session.NewFieldError("PostList", c.PostList, "the post list cannot be longer than the tx depth ({TxDepth=})").
			WithValue("TxDepth", c.TxDepth))
	}
	switch {
	case c.CQMod != 0:
		ps.Add(session.CheckCQMod(c.CQMod))
		if c.PostList > 1 {
			ps.AddField(session.NewFieldError("CQMod", c.CQMod, "{CQMod} and {PostList} conflict: with a post list, CQ moderation equals the list length").
				WithFix("drop {CQMod}"))
		}
	}
	if c.Path == sendpath.Burst && c.QPs > 1 {
		ps.AddField(session.NewFieldError("Path", c.Path, "{Path=} runs one QP: cq_poll counts completions without naming their QP, and RecvBurst posts receives without work request IDs").
			WithValue("QPs", c.QPs).WithFix("drop {QPs=}"))
	}
	if need := c.ValidationBytes(); c.Validate && need > ValidateBudget {
		rx := ""
		if c.Test == Send {
			rx = " {RxDepth=}"
		}
		ps.AddField(session.NewFieldError("Validate", c.Validate,
			"{Validate} keeps a buffer for every outstanding message: %d MiB with {TxDepth=}%s {QPs=} and %d-byte messages, more than %d MiB",
			need>>20, rx, c.MaxSize(), ValidateBudget>>20).
			WithValue("TxDepth", c.TxDepth).WithValue("RxDepth", c.RxDepth).WithValue("QPs", c.QPs).
			WithFix("use a smaller tx depth, fewer QPs or smaller messages"))
	}
	return ps.Err()
}

// ValidateBudget bounds the message buffers of a validated run
// (ValidationBytes).
const ValidateBudget = 256 << 20

// slots returns the send and receive slots per QP: one each, or with
// Validate one per outstanding message (and one more send slot for the
// message that ends a duration-mode run).
func (c *Config) slots() (send, recv int) {
	if !c.Validate {
		return 1, 1
	}
	send, recv = c.txDepth()+1, 1
	if c.Test == Send {
		recv = c.RxDepth
	}
	return send, recv
}

// ValidationBytes is about what the message buffers of a validated run
// take on each side: a slot of the largest size for every outstanding
// message and posted receive of every QP.
func (c *Config) ValidationBytes() int64 {
	size := 0
	for _, s := range c.Sizes {
		size = max(size, s)
	}
	if c.Connection == verbsio.QPTypeUD {
		size += session.GRHSize
	}
	send, recv := c.slots()
	return int64(c.QPs) * int64(send+recv) * int64(size)
}

// txDepth is the tx depth in use: capped at the iterations, as perftest
// caps it.
func (c *Config) txDepth() int {
	if c.Duration == 0 && c.Iterations > 0 && c.TxDepth > c.Iterations {
		return c.Iterations
	}
	return c.TxDepth
}

// CQModFor returns the CQ moderation used for messages of size bytes.
func (c *Config) CQModFor(size int) int {
	if c.PostList > 1 {
		return c.PostList
	}
	return session.CQModFor(c.CQMod, c.txDepth(), size)
}

// role says what this side does.
type role struct {
	send    bool // runs the sender loop
	recv    bool // runs the receiver loop (send_bw)
	passive bool // waits for the client's run (one-sided server)
}

func (c *Config) role(server bool) role {
	switch {
	case c.Bidirectional:
		return role{send: true, recv: c.Test == Send}
	case !server:
		return role{send: true}
	case c.Test == Send:
		return role{recv: true}
	}
	return role{passive: true}
}

// Run runs the test over conn on dev (session.Run) and returns this
// side's results, one per size (on a passive server, the client's
// report). It never closes dev; conn is closed when it returns.
func Run(ctx context.Context, dev *verbsio.Context, conn *oob.Conn, cfg Config) ([]reports.Result, error) {
	return session.Run(ctx, dev, conn, &cfg.Config, &runner{cfg: &cfg})
}

// runner is the bandwidth family's session.Measurer.
type runner struct {
	cfg  *Config
	s    *session.Session
	role role
	snd  *sender
	rcv  *receiver
	v    *validation // nil unless cfg.Validate
	last measured    // the last run's outcome (against perftest, for its report)
}

func (r *runner) Check() error { return r.cfg.Check() }

// Shape sets the QPs, the tx depth in use and, for validation, a message
// slot per outstanding message.
func (r *runner) Shape(spec *session.Spec) {
	cfg := r.cfg
	spec.QPs, spec.TxDepth = cfg.QPs, cfg.txDepth()
	spec.Duplex = cfg.Bidirectional
	spec.SendSlots, spec.RecvSlots = cfg.slots()
	spec.PeerSends = cfg.Bidirectional
}

// Roles: the sender loop posts, the receiver loop (send_bw) reposts.
func (r *runner) Roles(server bool) (send, recv bool) {
	ro := r.cfg.role(server)
	return ro.send, ro.recv
}

// Start sets up this side's sender and receiver loops on the path's ends.
func (r *runner) Start(s *session.Session, ends *session.Ends) error {
	cfg := r.cfg
	r.s, r.role = s, cfg.role(s.Server)
	if cfg.Validate {
		r.v = &validation{s: s, side: datacheck.Client}
		if s.Server {
			r.v.side = datacheck.Server
		}
	}
	if r.role.send {
		r.snd = newSender(s, cfg.Test.Verb().Opcode(cfg.AtomicOp), cfg.PostList)
		r.snd.v = r.v
		for i, q := range r.snd.qps {
			q.tx = ends.Senders[i]
		}
		r.snd.comp = ends.Send
		if cfg.RateLimitKbps > 0 {
			if err := r.pace(); err != nil {
				return err
			}
		}
	}
	if r.role.recv {
		r.rcv = newReceiver(s)
		r.rcv.v = r.v
		r.rcv.counts = s.Scripted()
		for i, q := range r.rcv.qps {
			q.rx = ends.Receivers[i]
		}
		r.rcv.comp = ends.Recv
	}
	return nil
}

// pace sets the rate limit on every sending QP (RTS to RTS).
func (r *runner) pace() error {
	for _, q := range r.s.QPs {
		attr := verbsio.QPAttr{State: verbsio.QPStateRTS, RateLimit: r.cfg.RateLimitKbps}
		if err := q.Modify(&attr, verbsio.QPAttrState|verbsio.QPAttrRateLimit); err != nil {
			return fmt.Errorf("rate limit %d kbit/s on QP %d: %w", r.cfg.RateLimitKbps, q.Index, err)
		}
	}
	return nil
}

// Measure runs size number i: the warm-up messages, the measured run, and
// (between two rperfs) the exchange of reports with the peer. Against a
// perftest peer the session runs the exchanges (session.Scripted): a
// bidirectional side's result waits for the report (PeerReport).
func (r *runner) Measure(ctx context.Context, i, size int) (reports.Result, bool, error) {
	cfg := r.cfg
	if cfg.Warmup > 0 {
		if _, err := r.runOnce(ctx, size, int64(cfg.Warmup), false); err != nil {
			return reports.Result{}, false, err
		}
	}
	local, err := r.runOnce(ctx, size, int64(cfg.Iterations), true)
	if err != nil {
		return reports.Result{}, false, err
	}
	if r.s.Scripted() {
		r.last = local
		return local.res, local.have && !cfg.Bidirectional, nil
	}
	res, err := r.exchange(ctx, size, local)
	return res, err == nil, err
}

// Prepare readies size number i before the exchanges that lead to its run
// against a perftest peer (session.Preparer).
func (r *runner) Prepare(i, size int) error {
	if r.rcv != nil {
		if err := r.rcv.drain(); err != nil {
			return err
		}
	}
	if r.v != nil {
		r.v.run++
		r.v.size = size
		r.v.prepareTarget(r.cfg.Test)
	}
	return nil
}

// LocalReport is the report of this side's last run (session.Reporter).
func (r *runner) LocalReport(size int) oob.BWReport { return r.report(size, r.last) }

// PeerReport makes this side's result of a report exchange with a perftest
// peer (session.Reporter): the sum of both sides' figures when
// bidirectional, the client's figures on a passive server, none on the
// client of a unidirectional test (its result came with its run).
func (r *runner) PeerReport(size int, local, remote oob.BWReport) (reports.Result, bool, error) {
	if !r.cfg.Bidirectional && !r.role.passive {
		return reports.Result{}, false, nil
	}
	res, err := r.combine(r.last, remote)
	return res, err == nil, err
}

// measured is one side's outcome of a run.
type measured struct {
	res  reports.Result // sender or receiver result; zero on a passive side
	have bool
}

// runOnce runs one size between two barriers.
func (r *runner) runOnce(ctx context.Context, size int, iters int64, measure bool) (measured, error) {
	cfg, s := r.cfg, r.s
	if !s.Scripted() || !measure {
		// Against perftest the session prepared the measured run
		// (Prepare) before its exchanges.
		if err := r.Prepare(0, size); err != nil {
			return measured{}, err
		}
	}
	if err := r.barrier(ctx); err != nil {
		return measured{}, err
	}
	if r.role.passive {
		wait := cfg.PassiveWait
		if wait <= 0 {
			wait = 10 * r.cfg.Stall()
		}
		if err := s.Barrier(ctx, wait+cfg.Duration); err != nil {
			return measured{}, err
		}
		if r.v != nil && cfg.Test == Write {
			return measured{}, r.v.checkWritten(iters, cfg.Duration > 0, cfg.Connection)
		}
		return measured{}, nil
	}
	dur := measure && cfg.Duration > 0
	var ph *session.Phases
	if dur {
		p := session.NewPhases(clock.Now(), cfg.Duration, cfg.Margin)
		ph = &p
		iters = -1
	}
	peak := measure && !dur && !cfg.NoPeak && iters <= reports.PeakIterationLimit && iters*int64(cfg.QPs) <= maxStamps
	var m measured
	var err error
	if r.snd != nil {
		var st sendStats
		st, err = r.snd.run(ctx, runParams{
			size: size, iters: iters, txDepth: cfg.txDepth(), cqMod: cfg.CQModFor(size), postList: cfg.PostList,
			inline: cfg.SendsInline(size), stamps: peak, ph: ph, last: r.cfg.Test == Send,
		}, r.rcv)
		if err == nil && measure {
			m.res, err = r.senderResult(size, iters, st, peak)
			m.have = true
		}
	} else {
		var st recvStats
		st, err = r.rcv.run(ctx, iters, ph)
		if err == nil && measure {
			m.res, err = r.receiverResult(size, iters, st)
			m.have = true
		}
	}
	if err != nil {
		return measured{}, err
	}
	// The acknowledgements this side owes for the peer's last messages
	// leave now (see latency's Measure).
	if err := s.Drive(); err != nil {
		return measured{}, err
	}
	if err := r.barrier(ctx); err != nil {
		return measured{}, err
	}
	if r.v != nil && cfg.Test == Write && cfg.Bidirectional {
		if err := r.v.checkWritten(iters, dur, cfg.Connection); err != nil {
			return measured{}, err
		}
	}
	return m, nil
}

func (r *runner) senderResult(size int, iters int64, st sendStats, peak bool) (reports.Result, error) {
	cfg := r.cfg
	name := cfg.Test.Name()
	if st.dur {
		if st.window <= 0 || st.msgs == 0 {
			return reports.Result{}, fmt.Errorf("%d B: no message completed inside the %v sample window; run longer (-D) or with a smaller margin (-f)",
				size, cfg.Duration-2*cfg.Margin)
		}
		return reports.NewBandwidthDurationResult(reports.BWDurationSpec{Test: name, Bytes: int64(size), Messages: st.msgs, WindowNs: st.window})
	}
	spec := reports.BWSpec{
		Test: name, Bytes: int64(size), Iterations: iters, QPs: cfg.QPs, PostList: cfg.PostList, CQMod: cfg.CQModFor(size),
		NoPeak: !peak,
	}
	if peak {
		spec.Posted, spec.Completed = st.posted, st.completed
	} else {
		spec.ElapsedNs = max(st.last-st.first, 1)
	}
	res, err := reports.NewBandwidthResult(spec)
	if err != nil {
		return reports.Result{}, fmt.Errorf("%d B: %w", size, err)
	}
	switch {
	case cfg.NoPeak:
	case iters > reports.PeakIterationLimit || !peak:
		res.PeakStatus = reports.PeakOverIterationLimit
	}
	return res, nil
}

func (r *runner) receiverResult(size int, iters int64, st recvStats) (reports.Result, error) {
	cfg := r.cfg
	res := reports.Result{Test: cfg.Test.Name(), Bytes: int64(size), Mode: reports.ModeIterations}
	msgs, elapsed := st.count, st.last-st.first
	if elapsed <= 0 && msgs > 0 {
		// Every message came in one poll (a few small ones): no
		// interval between the first and the last, so the run is
		// timed from when this side began to wait for it.
		elapsed = st.last - st.began
	}
	if st.dur {
		res.Mode = reports.ModeDuration
		msgs, elapsed = st.winCount, st.window
	}
	res.Iterations = msgs
	res.Bandwidth = &reports.Bandwidth{PeakStatus: reports.PeakReceiver}
	switch {
	case msgs > 0 && elapsed > 0:
		avg, err := reports.BWAverage(int64(size), msgs, elapsed)
		if err != nil {
			return reports.Result{}, err
		}
		res.ElapsedNs = elapsed
		res.BWAvgMiBps, res.BWAvgGbps, res.MsgRateMpps = avg.MiBps, avg.Gbps, avg.Mpps
	case st.dur || r.reliableRecv():
		return reports.Result{}, fmt.Errorf("%d B: too few messages received to measure (%d); run longer", size, msgs)
	}
	// Over UC/UD, so few messages arrived that no interval separates the
	// first from the last: the rates stay 0 and lost_messages says why.
	if !st.dur {
		if want := iters * int64(cfg.QPs); st.count < want {
			res.LostMessages = want - st.count
		}
	}
	return res, nil
}

func (r *runner) reliableRecv() bool { return r.cfg.Connection == verbsio.QPTypeRC }

// barrier synchronises a run's start and end with an rperf peer; against
// perftest the session's walk of its sequence does.
func (r *runner) barrier(ctx context.Context) error {
	if r.s.Scripted() {
		return nil
	}
	return r.s.Barrier(ctx, 0)
}

// report is the report of a run, as it goes to the peer.
func (r *runner) report(size int, local measured) oob.BWReport {
	rep := oob.BWReport{Size: uint64(size)}
	if local.have {
		rep.Iters = uint64(local.res.Iterations)
		b := local.res.Bandwidth
		rep.BWPeak, rep.BWAvg, rep.MsgRate = b.BWPeakMiBps, b.BWAvgMiBps, b.MsgRateMpps
		if r.cfg.ReportGbits {
			rep.BWPeak, rep.BWAvg = b.BWPeakGbps, b.BWAvgGbps
		}
	}
	return rep
}

// exchange swaps reports with the peer and returns this side's result.
func (r *runner) exchange(ctx context.Context, size int, local measured) (reports.Result, error) {
	remote, err := r.s.Conn.ExchangeBWReport(ctx, r.report(size, local))
	if err != nil {
		return reports.Result{}, err
	}
	return r.combine(local, remote)
}

// combine is this side's result given the peer's report: the sum when
// bidirectional, the peer's figures on a passive side, else its own.
func (r *runner) combine(local measured, remote oob.BWReport) (reports.Result, error) {
	cfg := r.cfg
	if cfg.Bidirectional || r.role.passive {
		// The peer's figures become this side's result.
		if err := remote.Check(); err != nil {
			return reports.Result{}, err
		}
	}
	switch {
	case cfg.Bidirectional:
		res := local.res
		sum := res.Bandwidth.Plus(*r.fromReport(remote).Bandwidth)
		res.Bandwidth = &sum
		return res, nil
	case r.role.passive:
		return r.fromReport(remote), nil
	}
	return local.res, nil
}

// fromReport turns a peer's exchanged report into a result.
func (r *runner) fromReport(rep oob.BWReport) reports.Result {
	cfg := r.cfg
	mode := reports.ModeIterations
	if cfg.Duration > 0 {
		mode = reports.ModeDuration
	}
	toMiB := func(v float64) float64 { return v }
	toGb := func(v float64) float64 { return v * reports.MiB / reports.GbpsBytes }
	if cfg.ReportGbits {
		toMiB = func(v float64) float64 { return v * reports.GbpsBytes / reports.MiB }
		toGb = func(v float64) float64 { return v }
	}
	b := &reports.Bandwidth{
		BWPeakMiBps: toMiB(rep.BWPeak), BWPeakGbps: toGb(rep.BWPeak),
		BWAvgMiBps: toMiB(rep.BWAvg), BWAvgGbps: toGb(rep.BWAvg),
		MsgRateMpps: rep.MsgRate, PeakStatus: reports.PeakMeasured,
	}
	if rep.BWPeak == 0 {
		switch {
		case cfg.Duration > 0:
			b.PeakStatus = reports.PeakDurationMode
		case int64(rep.Iters) > reports.PeakIterationLimit*int64(cfg.QPs):
			b.PeakStatus = reports.PeakOverIterationLimit
		default:
			b.PeakStatus = reports.PeakDisabled
		}
	}
	return reports.Result{Test: cfg.Test.Name(), Bytes: int64(rep.Size), Iterations: int64(rep.Iters), Mode: mode, Bandwidth: b}
}

// runParams describes one sender run.
type runParams struct {
	size, txDepth, cqMod, postList int
	iters                          int64 // per QP; -1 in duration mode
	inline                         bool
	stamps                         bool // keep per-message stamps for the peak
	ph                             *session.Phases
	last                           bool // end each QP's stream with a SEND_WITH_IMM (send_bw)
}

// sendStats is what a sender run measured.
type sendStats struct {
	posted, completed []int64 // per message, when stamped
	first, last       int64   // first post, last completion
	dur               bool
	msgs              int64 // duration: completed inside the window
	window            int64 // duration: the window
}

type sqp struct {
	q       *session.QP
	tx      *session.Sender // posts by the path
	wrs     []verbsio.SendWR
	sges    []verbsio.SGE
	scnt    int64
	ccnt    int64
	lastSig int64 // messages up to here are covered by a signaled request
}

// sender is perftest's run_iter_bw (and the sending half of run_iter_bi).
type sender struct {
	s      *session.Session
	v      *validation // nil unless validating
	op     verbsio.Opcode
	qps    []*sqp
	comp   *session.Completions // the send CQ's completions, by the path
	wcs    []verbsio.WC
	posted []int64
	compl  []int64
	ss     verbsio.Stream // the send-stream family's state (streamFor)
}

func newSender(s *session.Session, op verbsio.Opcode, postList int) *sender {
	x := &sender{s: s, op: op, wcs: make([]verbsio.WC, 64)}
	for _, q := range s.QPs {
		p := &sqp{q: q, wrs: make([]verbsio.SendWR, postList), sges: make([]verbsio.SGE, postList)}
		x.qps = append(x.qps, p)
	}
	return x
}

// wrID packs a QP index and the number of messages a signaled request
// completes.
func wrID(qp int, msgs int64) uint64 { return uint64(qp)<<32 | uint64(msgs) }

func (x *sender) prepare(rp *runParams) {
	s := x.s
	for _, p := range x.qps {
		p.scnt, p.ccnt, p.lastSig = 0, 0, 0
		for j := range p.wrs {
			n := rp.size
			p.sges[j] = s.MR.SGE(p.q.SendOff, n)
			wr := verbsio.SendWR{Opcode: x.op, SGL: p.sges[j : j+1], Remote: p.q.Remote, UD: p.q.UD}
			if rp.inline {
				wr.Flags = verbsio.SendInline
			}
			if x.op == verbsio.OpAtomicFetchAdd {
				wr.Atomic.CompareAdd = 1
			}
			p.wrs[j] = wr
		}
	}
	if rp.stamps {
		n := int(rp.iters) * len(x.qps)
		if cap(x.posted) < n {
			x.posted, x.compl = make([]int64, n), make([]int64, n)
		}
		x.posted, x.compl = x.posted[:n], x.compl[:n]
	}
}

// run sends one run; with recv set (bidirectional send_bw) it also drives
// the receiver until the peer's stream has ended.
func (x *sender) run(ctx context.Context, rp runParams, recv *receiver) (sendStats, error) {
	s := x.s
	x.prepare(&rp)
	dur := rp.ph != nil
	target := rp.iters
	if dur {
		target = math.MaxInt64
	}
	tx, pl := int64(rp.txDepth), int64(rp.postList)
	cqMod := int64(rp.cqMod)
	var st sendStats
	st.dur = dur
	var totS, totC, total int64
	if !dur {
		total = target * int64(len(x.qps))
	}
	if recv != nil {
		recv.start(rp.iters, rp.ph)
	}
	str := x.streamFor(rp, recv)
	if str != nil {
		defer str.Release()
	}
	w := s.NewWaiter(ctx, "completions of our "+x.op.String()+"s", false)
	w.Begin()
	ending := false
	var winBeg int64
	for {
		if err := w.Tick(); err != nil {
			return st, err
		}
		progressed := false
		if str != nil {
			// The posts and polls below, in the device's call (see
			// streamFor); what it leaves on the CQ (an error, a stray
			// completion) the Poll below takes.
			p := x.qps[0]
			ss := &x.ss
			ss.Posted, ss.Completed, ss.LastSig = p.scnt, p.ccnt, p.lastSig
			err := str.Stream(ss)
			dp, dc := ss.Posted-p.scnt, ss.Completed-p.ccnt
			if totS == 0 && dp > 0 && !rp.stamps {
				st.first = ss.First
			}
			p.scnt, p.ccnt, p.lastSig = ss.Posted, ss.Completed, ss.LastSig
			totS += dp
			totC += dc
			w.Index = totS + 1
			if totC >= total && dc > 0 {
				st.last = ss.Last
			}
			if err != nil {
				return st, fmt.Errorf("post %s #%d on QP %d: %w", x.op, p.scnt+1, p.q.Index, err)
			}
			progressed = dp+dc > 0
		}
		var now int64
		if dur {
			now = clock.Now()
			if !ending && rp.ph.Ended(now) {
				ending = true
				if err := x.finish(rp.last); err != nil {
					return st, err
				}
			}
			if winBeg == 0 && rp.ph.Sampling(now) {
				winBeg = rp.ph.WindowStart()
			}
		}
		if !ending && str == nil {
			for _, p := range x.qps {
				for p.scnt < target && p.scnt-p.ccnt+pl <= tx {
					m := min(pl, target-p.scnt)
					for j := int64(0); j < m; j++ {
						k := p.scnt + j
						wr := &p.wrs[j]
						wr.Opcode, wr.Imm = x.op, 0
						if (k+1)%cqMod == 0 || k == target-1 {
							wr.Flags |= verbsio.SendSignaled
							wr.ID = wrID(p.q.Index, k+1-p.lastSig)
							p.lastSig = k + 1
						} else {
							wr.Flags &^= verbsio.SendSignaled
						}
						if rp.last && k == target-1 {
							wr.Opcode, wr.Imm = verbsio.OpSendImm, session.StopImm
						}
						if x.v != nil {
							x.v.prepare(p, int(j), k, x.op)
						}
					}
					if rp.stamps {
						t := clock.Now()
						for j := int64(0); j < m; j++ {
							x.posted[totS+j] = t
						}
					} else if totS == 0 && !dur {
						st.first = clock.Now()
					}
					w.Index = totS + 1
					if err := p.tx.Post(p.wrs[:m]); err != nil {
						return st, fmt.Errorf("post %s #%d on QP %d: %w", x.op, p.scnt+1, p.q.Index, err)
					}
					p.scnt += m
					totS += m
					progressed = true
				}
			}
		}
		n, err := x.comp.Poll(x.wcs)
		if err != nil {
			return st, fmt.Errorf("poll the send CQ: %w", err)
		}
		if n > 0 {
			progressed = true
			t := clock.Now()
			for i := range n {
				wc := &x.wcs[i]
				if wc.Status != verbsio.StatusSuccess {
					return st, &session.CompletionError{What: fmt.Sprintf("%s #%d on QP %d", x.op, x.qps[int(wc.ID>>32)%len(x.qps)].ccnt+1, wc.ID>>32), WC: *wc}
				}
				qi := int(wc.ID >> 32)
				if qi >= len(x.qps) {
					continue // a probe or a stray completion
				}
				cnt := int64(uint32(wc.ID))
				if x.v != nil {
					if err := x.v.completed(x.qps[qi], cnt, x.op); err != nil {
						return st, err
					}
				}
				x.qps[qi].ccnt += cnt
				if rp.stamps {
					for j := int64(0); j < cnt && totC+j < total; j++ {
						x.compl[totC+j] = t
					}
				}
				totC += cnt
				if dur && !ending && rp.ph.Sampling(t) {
					st.msgs += cnt
				}
			}
			if !dur && totC >= total {
				st.last = t
			}
		}
		recvDone := true
		if recv != nil {
			k, err := recv.step()
			if err != nil {
				return st, err
			}
			if k > 0 {
				progressed = true
			}
			recv.ownEnd()
			recvDone = recv.finished()
		}
		sendDone := !dur && totC >= total
		if dur && ending {
			sendDone = true
			for _, p := range x.qps {
				sendDone = sendDone && p.ccnt == p.scnt
			}
		}
		if sendDone && recvDone {
			break
		}
		if progressed {
			w.Begin()
			continue
		}
		if recv != nil && recv.quietCheck() {
			continue
		}
		if err := w.Spin(); err != nil {
			return st, err
		}
	}
	if dur && winBeg != 0 {
		end := clock.Now()
		st.window = rp.ph.WindowEnd(end, end) - winBeg
	}
	if rp.stamps {
		st.posted, st.completed = x.posted, x.compl
	}
	return st, nil
}

// streamFor returns the device's send-stream family (verbsio.SendStream)
// on the one QP when this run can use it: iterations mode, one QP, one
// request per post, no data validation, not bidirectional, no stream end
// to mark (send_bw's SEND_WITH_IMM), and a send path that posts with
// PostSend (generic or inline). Otherwise, or when the device has none,
// it returns nil and run posts and polls in its own loop. The family's
// loop is this one's: the same window, the same signaled requests and
// IDs, the same stamps.
func (x *sender) streamFor(rp runParams, recv *receiver) verbsio.SendStream {
	if rp.ph != nil || len(x.qps) != 1 || rp.postList != 1 || x.v != nil || recv != nil || rp.last ||
		(x.s.Spec.Path != sendpath.Generic && x.s.Spec.Path != sendpath.Inline) {
		return nil
	}
	p := x.qps[0]
	f := sendStreamOf(x.s, p.q)
	if f == nil {
		return nil
	}
	x.ss = verbsio.Stream{
		WR: p.wrs[0], Tag: uint32(p.q.Index), Target: rp.iters, Depth: rp.txDepth, CQMod: rp.cqMod,
		Idle: streamIdle, Budget: streamBudget,
	}
	x.ss.WR.Opcode, x.ss.WR.Imm = x.op, 0
	if rp.stamps {
		x.ss.PostStamps, x.ss.CompStamps = x.posted, x.compl
	}
	return f
}

// streamIdle and streamBudget bound one SendStream call: the loop's own
// checks (the interrupt, the stall timeout) run between calls.
const (
	streamIdle   = 2 * time.Millisecond
	streamBudget = 200 * time.Millisecond
)

// sendStreamOf asks the device for the send-stream family bound to q;
// nil when it has none. Tests replace it.
var sendStreamOf = func(s *session.Session, q *session.QP) verbsio.SendStream {
	return session.QPFamily[verbsio.SendStream](s, verbsio.FamilySendStream, q)
}

// finish ends a duration-mode run: on every QP whose last request was not
// signaled, or always for SEND (to carry the stop), one more signaled
// request, so that every posted message completes and the receiver stops.
func (x *sender) finish(stop bool) error {
	for _, p := range x.qps {
		if p.scnt == p.lastSig && !stop {
			continue
		}
		wr := &p.wrs[0]
		wr.Flags |= verbsio.SendSignaled
		wr.Opcode, wr.Imm = x.op, 0
		if stop {
			wr.Opcode, wr.Imm = verbsio.OpSendImm, session.StopImm
		}
		if x.v != nil {
			x.v.prepare(p, 0, p.scnt, x.op)
		}
		wr.ID = wrID(p.q.Index, p.scnt+1-p.lastSig)
		if err := p.tx.Post(p.wrs[:1]); err != nil {
			return fmt.Errorf("post the end-of-run request on QP %d: %w", p.q.Index, err)
		}
		p.scnt++
		p.lastSig = p.scnt
	}
	return nil
}

// recvStats is what a receiver run measured.
type recvStats struct {
	count       int64 // messages received
	first, last int64 // first and last receive
	began       int64 // when the receiver began to wait for them
	dur         bool
	winCount    int64
	window      int64
}

type rqp struct {
	q    *session.QP
	rx   *session.Receiver // reposts by the path
	rcnt int64
	done bool
	next int64 // validation: the first message number still expected
}

// receiver is perftest's run_iter_bw_server (and the receiving half of
// run_iter_bi).
type receiver struct {
	s        *session.Session
	v        *validation // nil unless validating
	qps      []*rqp
	comp     *session.Completions // the receive CQ's completions, by the path
	wcs      []verbsio.WC
	reliable bool

	ph      *session.Phases
	ndone   int
	st      recvStats
	winBeg  int64
	lastRx  int64 // clock at the last receive, for the quiet rule
	spins   int
	stalled bool // quiet rule fired: the rest is lost

	// counts is set against a perftest sender, which marks no stream's
	// end (session.StopImm): a QP's stream ends after iters messages, and
	// in duration mode the run ends with this side's own duration, as
	// perftest's receiver does.
	counts bool
	iters  int64
	ticks  int
	over   bool // counts: the duration ended
}

func newReceiver(s *session.Session) *receiver {
	r := &receiver{s: s, wcs: make([]verbsio.WC, 64), reliable: s.Spec.Type == verbsio.QPTypeRC}
	for _, q := range s.QPs {
		r.qps = append(r.qps, &rqp{q: q})
	}
	return r
}

func (r *receiver) start(iters int64, ph *session.Phases) {
	for _, p := range r.qps {
		p.rcnt, p.done, p.next = 0, false, 0
	}
	r.ph, r.ndone, r.st, r.winBeg, r.spins, r.stalled = ph, 0, recvStats{dur: ph != nil}, 0, 0, false
	r.iters, r.ticks, r.over = iters, 0, false
	r.lastRx = clock.Now()
	r.st.began = r.lastRx
}

// ownEnd reports, against a perftest sender in duration mode, whether this
// side's duration is over. It reads the clock only every CheckEvery calls.
func (r *receiver) ownEnd() bool {
	if !r.counts || r.ph == nil {
		return false
	}
	r.ticks++
	if r.ticks&(session.CheckEvery-1) == 0 && r.ph.Ended(clock.Now()) {
		r.over = true
	}
	return r.over
}

// finished reports whether every QP's stream has ended.
func (r *receiver) finished() bool { return r.ndone == len(r.qps) || r.stalled || r.over }

// step polls the receive CQ once, reposting what completed.
func (r *receiver) step() (int, error) {
	n, err := r.comp.Poll(r.wcs)
	if err != nil {
		return 0, fmt.Errorf("poll the receive CQ: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	t := clock.Now()
	r.lastRx = t
	if r.st.count == 0 {
		r.st.first = t
	}
	for i := range n {
		wc := &r.wcs[i]
		if wc.Status != verbsio.StatusSuccess {
			return 0, &session.CompletionError{What: fmt.Sprintf("receive #%d", r.st.count+1), WC: *wc}
		}
		qi, slot := session.RecvID(wc.ID)
		p := r.qps[qi%len(r.qps)]
		if r.v != nil {
			if err := r.v.received(p, slot, wc, r.reliable); err != nil {
				return 0, err
			}
		}
		p.rcnt++
		r.st.count++
		p.rx.RepostLater()
		stop := wc.Flags&verbsio.WCWithImm != 0 && wc.Imm == session.StopImm
		if !p.done && (stop || r.counts && r.iters > 0 && p.rcnt >= r.iters) {
			p.done = true
			r.ndone++
		}
		if r.ph != nil && r.ph.Sampling(t) {
			if r.winBeg == 0 {
				r.winBeg = r.ph.WindowStart()
			}
			r.st.winCount++
		}
	}
	for _, p := range r.qps {
		if err := p.rx.Flush(); err != nil {
			return 0, fmt.Errorf("repost receives on QP %d: %w", p.q.Index, err)
		}
	}
	r.st.last = t
	return n, nil
}

// quietCheck applies the UC/UD rule: after UnreliableQuiet without a
// message, the rest of the stream is taken as lost. It reads the clock
// only every CheckEvery calls.
func (r *receiver) quietCheck() bool {
	if r.reliable || r.finished() {
		return false
	}
	r.spins++
	if r.spins&(session.CheckEvery-1) != 0 {
		return false
	}
	if clock.Now()-r.lastRx >= int64(UnreliableQuiet) {
		r.stalled = true
		return true
	}
	return false
}

// run receives until every QP's stream has ended.
func (r *receiver) run(ctx context.Context, iters int64, ph *session.Phases) (recvStats, error) {
	r.start(iters, ph)
	w := r.s.NewWaiter(ctx, "the peer's SENDs", true)
	w.Begin()
	for !r.finished() {
		n, err := r.step()
		if err != nil {
			return r.st, err
		}
		if r.ownEnd() {
			break
		}
		if n > 0 {
			w.Index = r.st.count + 1
			w.Begin()
			if err := w.Tick(); err != nil {
				return r.st, err
			}
			continue
		}
		if r.quietCheck() {
			break
		}
		if err := w.Spin(); err != nil {
			return r.st, err
		}
	}
	if r.ph != nil && r.winBeg != 0 {
		r.st.window = r.ph.WindowEnd(clock.Now(), r.st.last) - r.winBeg
	}
	return r.st, nil
}

// drain takes completions left from a previous run (UC/UD messages that
// arrived after the quiet rule fired) and reposts their receives.
func (r *receiver) drain() error {
	for {
		n, err := r.comp.Poll(r.wcs)
		if err != nil {
			return fmt.Errorf("poll the receive CQ: %w", err)
		}
		if n == 0 {
			return nil
		}
		for i := range n {
			qi, _ := session.RecvID(r.wcs[i].ID)
			r.qps[qi%len(r.qps)].rx.RepostLater()
		}
		for _, p := range r.qps {
			if err := p.rx.Flush(); err != nil {
				return fmt.Errorf("repost receives: %w", err)
			}
		}
	}
}

// validation is the data validation of a run (Config.Validate).
type validation struct {
	s    *session.Session
	side int // this side's datacheck side
	run  int // counts runOnce calls, the same on both sides
	size int
}

// id names message k of QP qp in this run, sent by side.
func (v *validation) id(side, qp int, k int64) uint64 { return datacheck.ID(side, qp, v.run, k) }

// prepareTarget readies, before a run, the memory the peer's one-sided
// operations target: read_bw reads a known pattern from each QP's
// receive region, atomic_bw counts from 0 in its first 8 bytes.
func (v *validation) prepareTarget(t session.Test) {
	for _, q := range v.s.QPs {
		switch t {
		case Read:
			datacheck.Fill(v.s.Buf[q.RecvOff:q.RecvOff+v.size], v.id(v.side, q.Index, 0))
		case Atomic:
			clear(v.s.Buf[q.RecvOff : q.RecvOff+session.AtomicSize])
		}
	}
}

// prepare readies message k of p, about to be posted as p.wrs[j]: its own
// send slot, filled with its pattern (SEND, WRITE), cleared (READ) or
// poisoned (atomics); a CMP_AND_SWAP compares with k and swaps in k+1, so
// that every operation changes the target as FETCH_AND_ADD 1 does.
func (v *validation) prepare(p *sqp, j int, k int64, op verbsio.Opcode) {
	s := v.s
	off := p.q.SendSlot(k)
	b := s.Buf[off : off+v.size]
	p.sges[j] = s.MR.SGE(off, v.size)
	switch op {
	case verbsio.OpSend, verbsio.OpRDMAWrite:
		datacheck.Fill(b, v.id(v.side, p.q.Index, k))
	case verbsio.OpRDMARead:
		clear(b)
	default:
		binary.LittleEndian.PutUint64(b, ^uint64(0))
		if op == verbsio.OpAtomicCmpSwp {
			p.wrs[j].Atomic.CompareAdd, p.wrs[j].Atomic.Swap = uint64(k), uint64(k+1)
		}
	}
}

// completed checks the cnt messages of p that a completion covers (from
// p.ccnt on): READ data against the target's pattern, atomic results
// against the count of operations before each.
func (v *validation) completed(p *sqp, cnt int64, op verbsio.Opcode) error {
	if op != verbsio.OpRDMARead && op != verbsio.OpAtomicFetchAdd && op != verbsio.OpAtomicCmpSwp {
		return nil
	}
	s, qi := v.s, p.q.Index
	for k := p.ccnt; k < p.ccnt+cnt; k++ {
		off := p.q.SendSlot(k)
		if op == verbsio.OpRDMARead {
			if m := datacheck.Check(s.Buf[off:off+v.size], v.id(1-v.side, qi, 0)); m != nil {
				return datacheck.Errorf("our "+op.String(), k+1, qi, m)
			}
			continue
		}
		if got := binary.LittleEndian.Uint64(s.Buf[off:]); got != uint64(k) {
			return datacheck.Errorf("our "+op.String(), k+1, qi,
				fmt.Errorf("it returned %d, want %d: the target must have counted every operation before it exactly once", got, k))
		}
	}
	return nil
}

// received checks a SEND that landed in receive slot slot of p: its
// length and every byte. Over RC it must be the next message; over UC and
// UD, where messages may be lost, any later one.
func (v *validation) received(p *rqp, slot int, wc *verbsio.WC, reliable bool) error {
	s, qi := v.s, p.q.Index
	want := uint32(v.size)
	if s.Spec.Type == verbsio.QPTypeUD {
		want += session.GRHSize
	}
	k := p.next
	if wc.ByteLen != want {
		return datacheck.Errorf("the peer's SEND", k+1, qi, fmt.Errorf("%d bytes arrived, want %d", wc.ByteLen, want))
	}
	off := s.RecvPayloadAt(p.q, slot)
	b := s.Buf[off : off+v.size]
	if !reliable {
		var ok bool
		if k, ok = datacheck.Number(b, v.id(1-v.side, qi, 0), p.next); !ok || k < p.next {
			return datacheck.Errorf("the peer's SEND", p.next+1, qi,
				fmt.Errorf("it is not a later message of this QP and run (message id %#016x)", datacheck.Head(b)))
		}
	}
	if m := datacheck.Check(b, v.id(1-v.side, qi, k)); m != nil {
		return datacheck.Errorf("the peer's SEND", k+1, qi, m)
	}
	p.next = k + 1
	return nil
}

// checkWritten checks, after a write_bw run, that each QP's receive
// region holds the peer's last message of the run: message iters-1 over
// RC in iterations mode, else the one it names. Over UC the last messages
// may have been lost, and a message that lost a packet leaves the packets
// before it placed: the region is then a mix of messages, as UC allows,
// so only messages of one packet are checked, and a region no message of
// the run reached is skipped.
func (v *validation) checkWritten(iters int64, dur bool, t verbsio.QPType) error {
	s := v.s
	if t == verbsio.QPTypeUC && v.size > s.MTU.Bytes() {
		return nil
	}
	for _, q := range s.QPs {
		b := s.Buf[q.RecvOff : q.RecvOff+v.size]
		base := v.id(1-v.side, q.Index, 0)
		k := iters - 1
		if dur || t != verbsio.QPTypeRC {
			n, ok := datacheck.Number(b, base, 0)
			switch {
			case !ok && t != verbsio.QPTypeRC:
				continue
			case !ok:
				return datacheck.Errorf("the peer's last RDMA WRITE", 0, q.Index, fmt.Errorf("the region holds no message of this run (message id %#016x)", datacheck.Head(b)))
			}
			k = n
		}
		if m := datacheck.Check(b, v.id(1-v.side, q.Index, k)); m != nil {
			return datacheck.Errorf("the peer's last RDMA WRITE", k+1, q.Index, m)
		}
	}
	return nil
}
