//go:build linux && cgo && ibverbs

package hw

import (
	"errors"
	"runtime"
	"testing"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/hw/internal/fakeverbs"
	"golang.org/x/sys/unix"
)

func fakeTurn(t testing.TB, f *fakeverbs.Fake) (*hwQP, *hwTurn) {
	t.Helper()
	q, err := newQP(&hwContext{name: "fake"}, f.QP(), verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 16, MaxSendSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.release)
	cq, err := newCQ(&hwContext{name: "fake"}, f.CQ(), 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cq.release)
	q.scq = cq
	return q, &hwTurn{q: q}
}

func turnWR(op verbsio.Opcode, flags verbsio.SendFlags) []verbsio.SendWR {
	return []verbsio.SendWR{{ID: 7, Opcode: op, Flags: flags, SGL: []verbsio.SGE{{Addr: 0x1000, Length: 2, LKey: 1}},
		Remote: verbsio.RemoteAddr{Addr: 0x2000, RKey: 2}}}
}

// TestFakeWriteTurns runs turns against the fake. The byte a turn waits
// on is the one the previous turn stored (markAt == wait), so that a call
// can run several turns. A turn posts only once its byte holds the
// wanted value, and a completion that is the request's success is taken
// in the same crossing; one that did not come, or is another, is owed to
// the CQ's Poll, in order.
func TestFakeWriteTurns(t *testing.T) {
	write := turnWR(verbsio.OpRDMAWrite, verbsio.SendSignaled)
	tests := []struct {
		name    string
		execute bool // the fake completes while posted
		wait    bool // wait on the byte (else: no wait, one turn)
		have    byte // the byte's value before the call
		push    bool // another completion is in the CQ first
		wrs     []verbsio.SendWR
		n       int
		posted  int
		owed    bool
		polled  []verbsio.Status // what Poll then returns, in order
		pollIDs []uint64
	}{
		{"no wait, one turn", true, false, 0, false, write, 4, 1, false, nil, nil},
		{"three turns feeding each other", true, true, 5, false, write, 3, 3, false, nil, nil},
		{"byte not there", true, true, 4, false, write, 3, 0, false, nil, nil},
		{"completion later", false, true, 5, false, write, 3, 1, true, nil, nil},
		{"completion failed", true, true, 5, false, turnWR(verbsio.OpRDMARead, verbsio.SendSignaled|verbsio.SendInline), 3, 1, true,
			[]verbsio.Status{verbsio.StatusLocProtErr}, []uint64{7}},
		{"another completion first", true, true, 5, true, write, 3, 1, true,
			[]verbsio.Status{verbsio.StatusSuccess, verbsio.StatusSuccess}, []uint64{100, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			f.SetExecute(tt.execute)
			q, turn := fakeTurn(t, f)
			if tt.push {
				f.PushWC(fakeverbs.WC{ID: 100, Opcode: 1})
			}
			mem := []byte{tt.have}
			var wait *byte
			if tt.wait {
				wait = &mem[0]
			}
			stamps := make([]int64, tt.n)
			before := clock.Now()
			calls := runtime.NumCgoCall()
			posted, owed, err := turn.Turns(wait, 5, 100, &mem[0], 6, tt.wrs, stamps)
			crossings := runtime.NumCgoCall() - calls
			after := clock.Now()
			if err != nil || posted != tt.posted || owed != tt.owed {
				t.Fatalf("Turns = %d, %v, %v; want %d, %v", posted, owed, err, tt.posted, tt.owed)
			}
			if crossings != 1 {
				t.Errorf("the call crossed into C %d times, want 1", crossings)
			}
			if len(f.Sent()) != posted {
				t.Errorf("the fake saw %d posts, want %d", len(f.Sent()), posted)
			}
			if want := tt.have + byte(posted); posted > 0 && mem[0] != 5+byte(posted) || posted == 0 && mem[0] != want {
				t.Errorf("marker %d after %d turns", mem[0], posted)
			}
			// The stamps are CLOCK_MONOTONIC, which clock.Now reads
			// from another origin: only their spacing is checked.
			for i := 1; i < posted; i++ {
				if d := stamps[i] - stamps[i-1]; d < 0 || d > after-before {
					t.Errorf("stamps %v: %d ns between turns %d and %d, the call took %d", stamps[:posted], d, i-1, i, after-before)
				}
			}
			wcs := make([]verbsio.WC, 4)
			n, err := q.scq.Poll(wcs)
			if err != nil || n != len(tt.polled) {
				t.Fatalf("Poll = %d, %v; want %d completions", n, err, len(tt.polled))
			}
			for i := range n {
				if wcs[i].Status != tt.polled[i] || wcs[i].ID != tt.pollIDs[i] {
					t.Errorf("completion %d: %d %s, want %d %s", i, wcs[i].ID, wcs[i].Status, tt.pollIDs[i], tt.polled[i])
				}
			}
		})
	}
}

func TestFakeWriteTurnsErrors(t *testing.T) {
	write := turnWR(verbsio.OpRDMAWrite, verbsio.SendSignaled)
	var mark byte
	tests := []struct {
		name   string
		setup  func(f *fakeverbs.Fake, turn *hwTurn)
		wrs    []verbsio.SendWR
		mark   *byte
		errno  unix.Errno
		posted int
	}{
		{"refused", func(f *fakeverbs.Fake, _ *hwTurn) { f.FailAt(0, unix.ENOMEM, false) }, write, &mark, unix.ENOMEM, 0},
		{"two requests", nil, append(turnWR(verbsio.OpRDMAWrite, 0), write...), &mark, unix.EINVAL, 0},
		{"unsignaled", nil, turnWR(verbsio.OpRDMAWrite, 0), &mark, unix.EINVAL, 0},
		{"no marker", nil, write, nil, unix.EINVAL, 0},
		{"released", func(_ *fakeverbs.Fake, turn *hwTurn) { turn.Release() }, write, &mark, unix.EINVAL, 0},
		{"bad opcode", nil, []verbsio.SendWR{{Opcode: 99, Flags: verbsio.SendSignaled}}, &mark, unix.EINVAL, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			_, turn := fakeTurn(t, f)
			if tt.setup != nil {
				tt.setup(f, turn)
			}
			posted, owed, err := turn.Turns(nil, 0, 1, tt.mark, 1, tt.wrs, make([]int64, 2))
			var ve *verbsio.Error
			if posted != tt.posted || owed || !errors.As(err, &ve) || ve.Errno != tt.errno {
				t.Errorf("Turns = %d, %v, %v; want %d, %s", posted, owed, err, tt.posted, tt.errno)
			}
		})
	}
}

func TestFakeWriteTurnsDoNotAllocate(t *testing.T) {
	f := newFake(t)
	f.SetExecute(true)
	_, turn := fakeTurn(t, f)
	wr := turnWR(verbsio.OpRDMAWrite, verbsio.SendSignaled)
	mem := []byte{0}
	stamps := make([]int64, 16)
	for name, fn := range map[string]func(){
		"posting": func() {
			f.Reset()
			turn.Turns(&mem[0], mem[0], 10, &mem[0], mem[0]+1, wr, stamps)
		},
		"waiting": func() { turn.Turns(&mem[0], mem[0]+3, 10, &mem[0], 2, wr, stamps) },
	} {
		if a := testing.AllocsPerRun(1000, fn); a != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, a)
		}
	}
}

func TestQueryWriteTurn(t *testing.T) {
	f := newFake(t)
	c := &hwContext{name: "fake"}
	q, err := newQP(c, f.QP(), verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 4, MaxSendSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer q.release()
	ud := &hwQP{c: c, qp: q.qp, typ: verbsio.QPTypeUD}
	other := &hwQP{c: &hwContext{name: "other"}, qp: q.qp, typ: verbsio.QPTypeRC}
	tests := []struct {
		name string
		q    verbsio.InterfaceQuery
		want verbsio.InterfaceStatus
	}{
		{"capability", verbsio.InterfaceQuery{Family: verbsio.FamilyWriteTurn}, verbsio.IntfOK},
		{"bound", verbsio.InterfaceQuery{Family: verbsio.FamilyWriteTurn, Version: 1, Object: q}, verbsio.IntfOK},
		{"qp_burst", verbsio.InterfaceQuery{Family: verbsio.FamilyQPBurst, Object: q}, verbsio.IntfNotSupported},
		{"future version", verbsio.InterfaceQuery{Family: verbsio.FamilyWriteTurn, Version: 2, Object: q}, verbsio.IntfVersionNotSupported},
		{"vendor scope", verbsio.InterfaceQuery{Scope: verbsio.ScopeVendor, Family: verbsio.FamilyWriteTurn}, verbsio.IntfVendorNotSupported},
		{"unknown flags", verbsio.InterfaceQuery{Family: verbsio.FamilyWriteTurn, Flags: 1 << 7, Object: q}, verbsio.IntfInvalParam},
		{"UD QP", verbsio.InterfaceQuery{Family: verbsio.FamilyWriteTurn, Object: ud}, verbsio.IntfInvalObj},
		{"another context's QP", verbsio.InterfaceQuery{Family: verbsio.FamilyWriteTurn, Object: other}, verbsio.IntfInvalObj},
		{"a CQ", verbsio.InterfaceQuery{Family: verbsio.FamilyWriteTurn, Object: &hwCQ{}}, verbsio.IntfInvalObj},
	}
	for _, tt := range tests {
		f, st := c.QueryInterface(tt.q)
		if st != tt.want || (st != verbsio.IntfOK && f != nil) || (tt.q.Object != nil && st == verbsio.IntfOK && f == nil) {
			t.Errorf("%s: %v, %s; want %s", tt.name, f, st, tt.want)
		}
	}
}

// BenchmarkFakeTurns counts a write_lat iteration's crossings into C
// against a fake device that completes while posted: "post+poll" is the
// loop without the family (PostSend, which polls in its crossing, and
// Poll, which returns what the post took), "turns=N" the loop through
// Turns with N turns per call (the latency loop asks for 4,096: a call
// starts a thread and wakes the caller, 27 us on the development host,
// so few turns a call cost more than they did inline). The fake keeps at
// most 64 requests, so calls of 32 are reset between.
// crossings/op is runtime.NumCgoCall per iteration.
func BenchmarkFakeTurns(b *testing.B) {
	wr := turnWR(verbsio.OpRDMAWrite, verbsio.SendSignaled)
	for _, per := range []int{0, 1, 32} {
		name := "post+poll"
		if per > 0 {
			name = "turns=" + string(rune('0'+per/10)) + string(rune('0'+per%10))
		}
		b.Run(name, func(b *testing.B) {
			f := fakeverbs.New()
			defer f.Free()
			f.SetExecute(true)
			q, turn := fakeTurn(b, f)
			mem := []byte{0}
			stamps := make([]int64, max(per, 1))
			wcs := make([]verbsio.WC, 1)
			b.ReportAllocs()
			calls := runtime.NumCgoCall()
			iters := 0
			for b.Loop() {
				f.Reset()
				if per == 0 {
					_ = clock.Now()
					mem[0]++
					if _, err := q.PostSend(wr); err != nil {
						b.Fatal(err)
					}
					if n, err := q.scq.Poll(wcs); n != 1 || err != nil {
						b.Fatalf("Poll = %d, %v", n, err)
					}
					iters++
					continue
				}
				n, owed, err := turn.Turns(&mem[0], mem[0], 16, &mem[0], mem[0]+1, wr, stamps)
				if n != per || owed || err != nil {
					b.Fatalf("Turns = %d, %v, %v", n, owed, err)
				}
				iters += n
			}
			b.ReportMetric(float64(runtime.NumCgoCall()-calls)/float64(iters), "crossings/iter")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iters), "ns/iter")
		})
	}
}
