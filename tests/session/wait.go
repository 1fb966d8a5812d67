package session

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// Waiting policy.
const (
	// CheckEvery is how many spins a loop makes between two calls of
	// Waiter.Check (a power of two): a few microseconds, so the check's
	// clock read and context test cost well under 1% of a wait.
	CheckEvery = 1 << 12
	// BackoffAfter is how long a wait spins before it starts napping
	// BackoffNap between checks. Healthy round trips end long before; a
	// wait this long means the peer is starved of CPU (more busy threads
	// than cores) or gone, and napping lets it run.
	BackoffAfter = 2 * time.Millisecond
	// BackoffNap is the nap of a backed-off wait (see nap).
	BackoffNap = 20 * time.Microsecond
	// YieldEvery is how often a busy loop yields to the Go scheduler
	// (runtime.Gosched). The runtime preempts a goroutine that ran 10 ms
	// without rescheduling; when that lands in a cgo call (most of an
	// ibverbs loop's time) the P is taken from under the call, the
	// goroutine moves to another thread, and sysmon polls every 20 us for
	// a while. Yielding first, on the same thread, avoids all three.
	YieldEvery = 5 * time.Millisecond
	// ProbeAfter is how long a wait lasts before, on RC, a zero-length
	// RDMA WRITE probes whether the peer is still there; ProbeEvery spaces
	// the probes that follow.
	ProbeAfter = 200 * time.Millisecond
	ProbeEvery = 200 * time.Millisecond
)

// Waiter bounds one kind of wait in a measurement loop. The loop calls
// Begin when a wait starts and Spin on every spin; Spin costs an increment
// and a test, and every CheckEvery spins it checks the context, the stall
// timeout and, when probing is enabled, the peer. A Waiter never allocates
// until it returns an error.
type Waiter struct {
	s     *Session
	done  <-chan struct{}
	ctx   context.Context
	what  string
	probe bool
	stall int64

	spins int
	ticks int
	since int64 // clock at the wait's first check; 0: not yet
	yield int64 // clock at the last yield
	// Index is the iteration or message the loop waits for; it appears in
	// errors.
	Index int64
	// Until, when non-zero, is a clock time at which Check ends the wait
	// with ErrOwnEnd: against perftest in duration mode each side stops at
	// its own end, whatever the peer is doing.
	Until int64
}

// ErrOwnEnd is Check's error when the wait reached Waiter.Until.
var ErrOwnEnd = errors.New("this side's duration ended")

// NewWaiter returns a Waiter for waits described by what (e.g. "the
// peer's RDMA WRITE"). With probe set, and on RC, a wait longer than
// ProbeAfter sends zero-length RDMA WRITEs to find out whether the peer is
// gone; use it only where the send CQ is otherwise idle during the wait.
func (s *Session) NewWaiter(ctx context.Context, what string, probe bool) *Waiter {
	return &Waiter{
		s: s, ctx: ctx, done: ctx.Done(), what: what,
		probe: probe && s.Spec.Type == verbsio.QPTypeRC,
		stall: int64(s.Spec.StallTimeout),
	}
}

// Begin starts a new wait.
func (w *Waiter) Begin() {
	w.spins = 0
	w.since = 0
}

// Tick is called once per iteration of a loop that may never wait (a
// sender that always has work): every CheckEvery ticks it checks the
// context, so an interrupt ends the loop promptly.
func (w *Waiter) Tick() error {
	w.ticks++
	if w.ticks&(yieldCheckEvery-1) == 0 {
		w.maybeYield(clock.Now())
	}
	if w.ticks&(CheckEvery-1) != 0 {
		return nil
	}
	select {
	case <-w.done:
		return fmt.Errorf("interrupted: %w", w.ctx.Err())
	default:
		return nil
	}
}

// Spin counts one spin of the wait and, every CheckEvery spins, checks it.
func (w *Waiter) Spin() error {
	w.spins++
	if w.spins&(CheckEvery-1) != 0 {
		return nil
	}
	return w.Check()
}

// Check ends the wait with an error if the context is done, the peer made
// no progress for the stall timeout, or a probe failed; it naps when the
// wait has lasted longer than BackoffAfter.
func (w *Waiter) Check() error {
	select {
	case <-w.done:
		return fmt.Errorf("interrupted while waiting for %s: %w", w.describe(), w.ctx.Err())
	default:
	}
	now := clock.Now()
	if w.Until != 0 && now >= w.Until {
		return ErrOwnEnd
	}
	w.maybeYield(now)
	if w.since == 0 {
		w.since = now
		return nil
	}
	idle := now - w.since
	s := w.s
	if s.probing {
		if err := w.pollProbe(); err != nil {
			return err
		}
	}
	if w.probe && !s.probing && idle >= int64(ProbeAfter) && now >= s.nextProbe {
		if err := w.postProbe(); err != nil {
			return err
		}
		s.nextProbe = now + int64(ProbeEvery)
	}
	if idle >= w.stall {
		return &StallError{What: w.describe(), For: time.Duration(idle).Round(time.Millisecond), Unreliable: w.s.Spec.Type != verbsio.QPTypeRC}
	}
	if idle >= int64(BackoffAfter) {
		nap(BackoffNap)
	}
	return nil
}

// nap sleeps about d in one nanosleep system call, on this thread.
// time.Sleep would park the goroutine on the runtime's timers, whose
// netpoller wakes it with millisecond granularity (a 20 us time.Sleep
// took 1.07 ms on the development host, 0.11-1.1 ms in the rxe VM) and
// maybe on another thread; nanosleep takes d plus the kernel's timer
// slack (about 90 us for 20 us).
func nap(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	_ = unix.Nanosleep(&ts, nil)
}

// yieldCheckEvery is how many Ticks pass between two looks at the clock
// for YieldEvery (a power of two).
const yieldCheckEvery = 64

// maybeYield yields if YieldEvery has passed since the last yield.
func (w *Waiter) maybeYield(now int64) {
	if now-w.yield >= int64(YieldEvery) {
		w.yield = now
		runtime.Gosched()
	}
}

func (w *Waiter) describe() string {
	if w.Index > 0 {
		return fmt.Sprintf("%s (#%d)", w.what, w.Index)
	}
	return w.what
}

func (w *Waiter) postProbe() error {
	q := w.s.QPs[0]
	w.s.probeWR[0] = verbsio.SendWR{ID: ProbeID, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, Remote: q.Remote}
	if _, err := q.PostSend(w.s.probeWR[:]); err != nil {
		return fmt.Errorf("post a liveness probe: %w", err)
	}
	w.s.probing = true
	return w.pollProbe()
}

func (w *Waiter) pollProbe() error {
	n, err := w.s.SendCQ.Poll(w.s.wcs[:])
	if err != nil {
		return fmt.Errorf("poll the send CQ: %w", err)
	}
	if n == 0 {
		return nil
	}
	wc := w.s.wcs[0]
	if wc.ID == ProbeID {
		w.s.probing = false
	}
	if wc.Status != verbsio.StatusSuccess {
		return &CompletionError{What: "a liveness probe (zero-length RDMA WRITE) sent while waiting for " + w.describe(), WC: wc}
	}
	return nil
}

// StallError says the peer made no progress for the stall timeout.
type StallError struct {
	What       string
	For        time.Duration
	Unreliable bool // UC/UD: a dead peer cannot be told from a slow one
}

func (e *StallError) Error() string {
	why := "it stopped, hangs, or is starved of CPU"
	if e.Unreliable {
		why = "it exited, stopped, or is starved of CPU (over UC/UD rperf cannot tell which)"
	}
	return fmt.Sprintf("no progress from the peer for %v while waiting for %s: %s; check the peer's output, or allow more time with --timeout", e.For, e.What, why)
}

// CompletionError is a work completion with an error status.
type CompletionError struct {
	What string // the request, e.g. "RDMA WRITE #12 on QP 0"
	WC   verbsio.WC
}

func (e *CompletionError) Error() string {
	st := e.WC.Status
	msg := fmt.Sprintf("%s completed with %s (%s)", e.What, st, st.Text())
	switch st {
	case verbsio.StatusRetryExcErr, verbsio.StatusRespTimeoutErr:
		return msg + ": the peer stopped answering; it exited or its QP failed (check the peer's output)"
	case verbsio.StatusWRFlushErr:
		return msg + ": the QP had already failed, most likely because the peer exited (check the peer's output)"
	case verbsio.StatusRNRRetryExcErr:
		return msg + ": the peer had no receive posted; it stopped receiving (check the peer's output)"
	case verbsio.StatusRemAccessErr, verbsio.StatusRemInvReqErr, verbsio.StatusLocLenErr:
		return msg + ": the peer refused the request; are both sides running the same test with the same flags?"
	}
	return msg
}

// LoadByte reads b[off] with an atomic load, for spinning on memory a peer
// writes. b must extend to the end of the aligned 4-byte word holding
// b[off] (message regions are page-rounded, so they do).
func LoadByte(b []byte, off int) byte {
	w := (*uint32)(unsafe.Pointer(&b[off&^3]))
	return byte(atomic.LoadUint32(w) >> (byteShift * (off & 3)))
}

// byteShift is 8 on little-endian machines; on big-endian ones the
// shift is computed from the other end.
var byteShift = func() int {
	x := uint32(1)
	if *(*byte)(unsafe.Pointer(&x)) == 1 {
		return 8
	}
	panic("session: big-endian machines are not supported")
}()

// Phases is perftest's duration-mode state machine, driven by clock
// readings the loop takes anyway instead of by SIGALRM: a warm-up margin,
// the sample window, a cool-down margin, then the end.
type Phases struct {
	SampleAt, StopAt, EndAt int64
}

// NewPhases starts the phases at start (a clock.Now reading).
func NewPhases(start int64, duration, margin time.Duration) Phases {
	return Phases{
		SampleAt: start + int64(margin),
		StopAt:   start + int64(duration-margin),
		EndAt:    start + int64(duration),
	}
}

// Sampling reports whether now lies in the sample window.
func (p *Phases) Sampling(now int64) bool { return now >= p.SampleAt && now < p.StopAt }

// Ended reports whether the run is over at now.
func (p *Phases) Ended(now int64) bool { return now >= p.EndAt }

// WindowStart returns where the sample window began for a loop that took
// a reading inside it: SampleAt, as perftest stamps the window's start
// when its alarm fires, whatever the loop was doing. A loop that the
// machine kept off its CPU across SampleAt counts, at its first reading,
// what completed meanwhile; the window includes the time that took (a
// window started at that reading instead was short by the stall, 50 to
// 220 ms of a 400 ms window on a loaded two-CPU machine, with the
// messages of the stall in it).
func (p *Phases) WindowStart() int64 { return p.SampleAt }

// WindowEnd returns where the sample window ended for a loop that stopped
// at now: StopAt if the loop got that far (as perftest stamps the window's
// end when its alarm fires, whatever the loop was doing), else last, the
// loop's last reading inside the window (a side that the peer stopped
// early).
func (p *Phases) WindowEnd(now, last int64) int64 {
	if now >= p.StopAt {
		return p.StopAt
	}
	return last
}
