//go:build linux && cgo && ibverbs

package hw

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/hw/internal/fakeverbs"
	"golang.org/x/sys/unix"
)

// TestFakeSendStream runs the send-stream family against the fake: the
// window, the signaled requests and their IDs (the messages each
// completion covers), the counts, the stamps, and what it leaves for
// Poll.
func TestFakeSendStream(t *testing.T) {
	signaled := uint32(fakeverbs.Const["IBV_SEND_SIGNALED"])
	write := turnWR(verbsio.OpRDMAWrite, 0)[0]
	badRead := turnWR(verbsio.OpRDMARead, verbsio.SendInline)[0]
	tests := []struct {
		name      string
		execute   bool // the fake completes while posted
		push      bool // a completion not of the stream is in the CQ first
		wr        verbsio.SendWR
		target    int64
		depth     int
		cqMod     int
		stamps    bool
		posted    int64
		completed int64
		polled    []verbsio.Status // what Poll then returns, in order
	}{
		{"whole run, stamped", true, false, write, 50, 8, 4, true, 50, 50, nil},
		{"whole run, first and last", true, false, write, 50, 8, 4, false, 50, 50, nil},
		{"target not a multiple of cq_mod", true, false, write, 10, 4, 3, true, 10, 10, nil},
		{"no completion comes: the window, then idle", false, false, write, 50, 8, 4, false, 8, 0, nil},
		{"failed completion left for Poll", true, false, badRead, 20, 2, 1, false, 2, 0,
			[]verbsio.Status{verbsio.StatusLocProtErr, verbsio.StatusWRFlushErr}},
		{"another completion first", true, true, write, 20, 2, 1, false, 2, 0,
			[]verbsio.Status{verbsio.StatusSuccess, verbsio.StatusSuccess, verbsio.StatusSuccess}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			f.SetExecute(tt.execute)
			q, _ := fakeTurn(t, f)
			str := &hwStream{q: q}
			t.Cleanup(func() { str.Release() })
			if tt.push {
				f.PushWC(fakeverbs.WC{ID: 100, Opcode: 1})
			}
			s := verbsio.Stream{WR: tt.wr, Tag: 3, Target: tt.target, Depth: tt.depth, CQMod: tt.cqMod,
				Idle: time.Millisecond, Budget: 10 * time.Second}
			if tt.stamps {
				s.PostStamps, s.CompStamps = make([]int64, tt.target), make([]int64, tt.target)
			}
			before := clock.Now()
			calls := runtime.NumCgoCall()
			err := str.Stream(&s)
			crossings := runtime.NumCgoCall() - calls
			after := clock.Now()
			if err != nil || s.Posted != tt.posted || s.Completed != tt.completed {
				t.Fatalf("Stream: %v, posted %d, completed %d; want %d, %d", err, s.Posted, s.Completed, tt.posted, tt.completed)
			}
			if crossings != 1 {
				t.Errorf("the call crossed into C %d times, want 1", crossings)
			}
			sent := f.Sent()
			if int64(len(sent)) != s.Posted {
				t.Fatalf("the fake saw %d posts, want %d", len(sent), s.Posted)
			}
			// Message k is signaled when k+1 is a multiple of cqMod or
			// it is the last; its ID counts the messages since the
			// previous signaled one.
			last := int64(0)
			for k, w := range sent {
				k := int64(k)
				sig := (k+1)%int64(tt.cqMod) == 0 || k == tt.target-1
				if got := w.Flags&signaled != 0; got != sig {
					t.Errorf("message %d signaled %v, want %v", k, got, sig)
				}
				if sig {
					if want := uint64(3)<<32 | uint64(k+1-last); w.ID != want {
						t.Errorf("message %d ID %#x, want %#x", k, w.ID, want)
					}
					last = k + 1
				}
			}
			if s.LastSig != last {
				t.Errorf("LastSig %d, want %d", s.LastSig, last)
			}
			inCall := func(what string, v int64) {
				if v < before || v > after {
					t.Errorf("%s %d outside the call [%d, %d] (clock.Now's scale)", what, v, before, after)
				}
			}
			switch {
			case tt.stamps:
				for k := range s.Posted {
					inCall("post stamp", s.PostStamps[k])
					if k > 0 && s.PostStamps[k] < s.PostStamps[k-1] {
						t.Errorf("post stamps go back at %d", k)
					}
				}
				for k := range s.Completed {
					inCall("completion stamp", s.CompStamps[k])
					if s.CompStamps[k] < s.PostStamps[k] {
						t.Errorf("message %d completed at %d before its post at %d", k, s.CompStamps[k], s.PostStamps[k])
					}
				}
			case s.Posted > 0:
				inCall("First", s.First)
			}
			if s.Completed == s.Target {
				inCall("Last", s.Last)
			} else if s.Last != 0 {
				t.Errorf("Last %d set before the target completed", s.Last)
			}
			wcs := make([]verbsio.WC, 8)
			n, err := q.scq.Poll(wcs)
			if err != nil || n != len(tt.polled) {
				t.Fatalf("Poll = %d, %v; want %d completions", n, err, len(tt.polled))
			}
			for i := range n {
				if wcs[i].Status != tt.polled[i] {
					t.Errorf("completion %d: %s, want %s", i, wcs[i].Status, tt.polled[i])
				}
			}
			if tt.push && wcs[0].ID != 100 {
				t.Errorf("first completion %d, want the pushed 100", wcs[0].ID)
			}
		})
	}
}

// TestFakeSendStreamResume: a call that stops at its budget leaves the
// state to carry on with, and the next call ends the run with the same
// requests as one call would have posted.
func TestFakeSendStreamResume(t *testing.T) {
	f := newFake(t)
	f.SetExecute(false)
	q, _ := fakeTurn(t, f)
	str := &hwStream{q: q}
	defer str.Release()
	s := verbsio.Stream{WR: turnWR(verbsio.OpRDMAWrite, 0)[0], Tag: 1, Target: 6, Depth: 4, CQMod: 2,
		Idle: time.Millisecond, Budget: time.Second}
	if err := str.Stream(&s); err != nil || s.Posted != 4 || s.Completed != 0 || s.LastSig != 4 {
		t.Fatalf("first call: %v, posted %d, completed %d, last signaled %d; want 4, 0, 4", err, s.Posted, s.Completed, s.LastSig)
	}
	// The two signaled requests complete (each covers 2 messages).
	for _, w := range f.Sent() {
		if w.ID != 0 && w.Flags&uint32(fakeverbs.Const["IBV_SEND_SIGNALED"]) != 0 {
			f.PushWC(fakeverbs.WC{ID: w.ID, Opcode: 1})
		}
	}
	f.SetExecute(true)
	if err := str.Stream(&s); err != nil || s.Posted != 6 || s.Completed != 6 {
		t.Fatalf("second call: %v, posted %d, completed %d; want 6, 6", err, s.Posted, s.Completed)
	}
	if len(f.Sent()) != 6 {
		t.Errorf("the fake saw %d posts, want 6", len(f.Sent()))
	}
}

func TestFakeSendStreamErrors(t *testing.T) {
	write := turnWR(verbsio.OpRDMAWrite, 0)[0]
	tests := []struct {
		name  string
		setup func(f *fakeverbs.Fake, str *hwStream, s *verbsio.Stream)
		errno unix.Errno
	}{
		{"refused", func(f *fakeverbs.Fake, _ *hwStream, _ *verbsio.Stream) { f.FailAt(0, unix.ENOMEM, false) }, unix.ENOMEM},
		{"released", func(_ *fakeverbs.Fake, str *hwStream, _ *verbsio.Stream) { str.Release() }, unix.EINVAL},
		{"no depth", func(_ *fakeverbs.Fake, _ *hwStream, s *verbsio.Stream) { s.Depth = 0 }, unix.EINVAL},
		{"short stamps", func(_ *fakeverbs.Fake, _ *hwStream, s *verbsio.Stream) { s.PostStamps = make([]int64, 2) }, unix.EINVAL},
		{"bad opcode", func(_ *fakeverbs.Fake, _ *hwStream, s *verbsio.Stream) { s.WR.Opcode = 99 }, unix.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			q, _ := fakeTurn(t, f)
			str := &hwStream{q: q}
			defer str.Release()
			s := verbsio.Stream{WR: write, Target: 4, Depth: 2, CQMod: 1, Idle: time.Millisecond, Budget: time.Second}
			tt.setup(f, str, &s)
			err := str.Stream(&s)
			var ve *verbsio.Error
			if !errors.As(err, &ve) || ve.Errno != tt.errno {
				t.Fatalf("Stream = %v, want errno %v", err, tt.errno)
			}
			if s.Posted != 0 {
				t.Errorf("posted %d after a refusal", s.Posted)
			}
		})
	}
}

func TestQuerySendStream(t *testing.T) {
	f := newFake(t)
	q, _ := fakeTurn(t, f)
	c := q.c
	sigAll := *q
	sigAll.sigAll = true
	noCQ := *q
	noCQ.scq = nil
	ud := *q
	ud.typ = verbsio.QPTypeUD
	tests := []struct {
		name string
		qp   *hwQP
		want verbsio.InterfaceStatus
	}{
		{"bound", q, verbsio.IntfOK},
		{"every request signaled", &sigAll, verbsio.IntfInvalObj},
		{"no send CQ", &noCQ, verbsio.IntfInvalObj},
		{"UD QP", &ud, verbsio.IntfInvalObj},
	}
	for _, tt := range tests {
		got, st := c.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilySendStream, Version: 1, Object: tt.qp})
		if _, ok := got.(*hwStream); st != tt.want || ok != (st == verbsio.IntfOK) {
			t.Errorf("%s: %T, %s; want %s", tt.name, got, st, tt.want)
		}
	}
	if _, st := c.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilySendStream, Version: 2}); st != verbsio.IntfVersionNotSupported {
		t.Errorf("version 2: %s", st)
	}
}
