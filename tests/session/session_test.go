package session

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/verbsio"
)

func TestLoadByte(t *testing.T) {
	b := make([]byte, 16)
	for i := range b {
		b[i] = byte(0xa0 + i)
	}
	for i := range b {
		if got := LoadByte(b, i); got != b[i] {
			t.Errorf("LoadByte(%d) = %#x, want %#x", i, got, b[i])
		}
	}
	// A store through another alias is seen (the load is atomic, not hoisted).
	w := (*atomic.Uint32)(unsafe.Pointer(&b[4]))
	w.Store(0x11223344)
	if got := LoadByte(b, 7); got != 0x11 {
		t.Errorf("after store: %#x", got)
	}
}

func TestPhases(t *testing.T) {
	p := NewPhases(1000, 5*time.Second, 2*time.Second)
	s := int64(time.Second)
	cases := []struct {
		at              int64
		sampling, ended bool
	}{
		{1000, false, false},
		{1000 + 2*s - 1, false, false},
		{1000 + 2*s, true, false},
		{1000 + 3*s - 1, true, false},
		{1000 + 3*s, false, false},
		{1000 + 5*s - 1, false, false},
		{1000 + 5*s, false, true},
	}
	for _, c := range cases {
		if p.Sampling(c.at) != c.sampling || p.Ended(c.at) != c.ended {
			t.Errorf("at %d: sampling %v ended %v, want %v %v", c.at-1000, p.Sampling(c.at), p.Ended(c.at), c.sampling, c.ended)
		}
	}
	if got := p.WindowEnd(1000+4*s, 1000+2*s+5); got != p.StopAt {
		t.Errorf("WindowEnd after the window: %d, want StopAt", got)
	}
	if got := p.WindowEnd(1000+3*s-10, 1000+2*s+5); got != 1000+2*s+5 {
		t.Errorf("WindowEnd of a loop stopped inside the window: %d, want its last reading", got)
	}
	z := NewPhases(0, time.Second, 0)
	if !z.Sampling(0) || z.Sampling(int64(time.Second)) || !z.Ended(int64(time.Second)) {
		t.Error("no margin: the window is the whole run")
	}
}

// spin drives a waiter until it fails or gives up after limit.
func spin(w *Waiter, limit time.Duration) error {
	w.Begin()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if err := w.Spin(); err != nil {
			return err
		}
	}
	return nil
}

func TestWaiterStall(t *testing.T) {
	for _, typ := range []verbsio.QPType{verbsio.QPTypeUC, verbsio.QPTypeUD} {
		s := &Session{Spec: Spec{Type: typ, Link: Link{StallTimeout: 100 * time.Millisecond}}}
		w := s.NewWaiter(context.Background(), "the peer's SEND", true)
		w.Index = 42
		start := time.Now()
		err := spin(w, 5*time.Second)
		var se *StallError
		if !errors.As(err, &se) {
			t.Fatalf("%s: err = %v, want a stall", typ, err)
		}
		if el := time.Since(start); el < 100*time.Millisecond || el > 2*time.Second {
			t.Errorf("%s: stalled after %v, want about 100ms", typ, el)
		}
		for _, want := range []string{"no progress from the peer", "the peer's SEND (#42)", "cannot tell which", "--timeout"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q lacks %q", err, want)
			}
		}
	}
}

func TestWaiterCancel(t *testing.T) {
	s := &Session{Spec: Spec{Type: verbsio.QPTypeUC, Link: Link{StallTimeout: time.Minute}}}
	ctx, cancel := context.WithCancel(context.Background())
	w := s.NewWaiter(ctx, "x", false)
	time.AfterFunc(50*time.Millisecond, cancel)
	err := spin(w, 5*time.Second)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// Tick sees it too, in a loop that never waits.
	w2 := s.NewWaiter(ctx, "x", false)
	var terr error
	for i := 0; i < 2*CheckEvery && terr == nil; i++ {
		terr = w2.Tick()
	}
	if !errors.Is(terr, context.Canceled) {
		t.Errorf("Tick: %v", terr)
	}
}

// TestWaiterBacksOff checks that a long wait naps: far fewer spins than
// a busy loop would make.
func TestWaiterBacksOff(t *testing.T) {
	s := &Session{Spec: Spec{Type: verbsio.QPTypeUC, Link: Link{StallTimeout: time.Minute}}}
	w := s.NewWaiter(context.Background(), "x", false)
	w.Begin()
	start := time.Now()
	for time.Since(start) < 300*time.Millisecond {
		if err := w.Spin(); err != nil {
			t.Fatal(err)
		}
	}
	// Busy, the loop spins tens of millions of times in 300 ms; backed off
	// after 2 ms, each check (every CheckEvery spins) naps >= 20 us.
	if max := int(300*time.Millisecond/BackoffNap) * CheckEvery; w.spins > max {
		t.Errorf("%d spins in 300ms: no back-off (at most %d expected)", w.spins, max)
	}
}

// TestWaiterDoesNotAllocate runs the Waiter's paths in a measurement loop,
// the yield and a backed-off wait's nap included, under AllocsPerRun.
func TestWaiterDoesNotAllocate(t *testing.T) {
	s := &Session{Spec: Spec{Type: verbsio.QPTypeUC, Link: Link{StallTimeout: time.Minute}}}
	w := s.NewWaiter(context.Background(), "x", false)
	w.Begin()
	w.since = clock.Now() - int64(BackoffAfter) // backed off: every check naps
	w.yield = clock.Now() - int64(YieldEvery)   // the next clock look yields
	for _, c := range []struct {
		name string
		runs int
		fn   func()
	}{
		{"Tick", 2 * CheckEvery, func() { _ = w.Tick() }},
		{"Spin", 2 * CheckEvery, func() { _ = w.Spin() }},
		{"Check", 100, func() { _ = w.Check() }},
	} {
		name := c.name
		if a := testing.AllocsPerRun(c.runs, c.fn); a != 0 {
			t.Errorf("%s: %v allocations per call", name, a)
		}
	}
}

func TestCompletionErrorText(t *testing.T) {
	cases := map[verbsio.Status]string{
		verbsio.StatusRetryExcErr:    "the peer stopped answering",
		verbsio.StatusWRFlushErr:     "most likely because the peer exited",
		verbsio.StatusRNRRetryExcErr: "no receive posted",
		verbsio.StatusRemAccessErr:   "same flags",
		verbsio.StatusLocProtErr:     "LOC_PROT_ERR (local protection error)",
	}
	for st, want := range cases {
		err := &CompletionError{What: "RDMA_WRITE #3", WC: verbsio.WC{Status: st}}
		if !strings.HasPrefix(err.Error(), "RDMA_WRITE #3 completed with "+st.String()) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q", st, err)
		}
	}
}
