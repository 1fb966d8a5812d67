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

func fakeTurn(t *testing.T, execute bool) (*fakeverbs.Fake, *hwQP, *hwTurn) {
	t.Helper()
	f := newFake(t)
	f.SetExecute(execute)
	q := fakeQP(t, f, verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 16, MaxSendSGE: 1})
	q.scq = fakeCQ(t, f, 16)
	return f, q, &hwTurn{q: q}
}

// TestFakeWriteTurn checks a turn against the fake: it posts nothing and
// stores nothing until the awaited byte holds the wanted value, then
// stamps the monotonic clock, stores the marker before the post, posts
// the request, and takes the completion a device that completes while
// posted has ready, in the same crossing.
func TestFakeWriteTurn(t *testing.T) {
	wr := []verbsio.SendWR{{ID: 7, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled,
		SGL: []verbsio.SGE{{Addr: 0x1000, Length: 2, LKey: 1}}, Remote: verbsio.RemoteAddr{Addr: 0x2000, RKey: 2}}}
	tests := []struct {
		name     string
		wait     bool // wait on a byte (else post at once)
		have     byte // the byte's value
		posted   bool
		crossing int64 // cgo calls the turn makes
	}{
		{"no wait", false, 0, true, 1},
		{"byte there", true, 5, true, 1},
		{"byte not there", true, 4, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, q, turn := fakeTurn(t, true)
			var wait *byte
			mem := []byte{tt.have, 0}
			if tt.wait {
				wait = &mem[0]
			}
			before := clock.Now()
			calls := runtime.NumCgoCall()
			stamp, posted, err := turn.Turn(wait, 5, 100, &mem[1], 9, wr)
			crossings := runtime.NumCgoCall() - calls
			if err != nil || posted != tt.posted {
				t.Fatalf("Turn = %d, %v, %v; want posted %v", stamp, posted, err, tt.posted)
			}
			if crossings != tt.crossing {
				t.Errorf("the turn crossed into C %d times, want %d", crossings, tt.crossing)
			}
			if !tt.posted {
				if stamp != 0 || mem[1] != 0 || f.PostCalls() != 0 {
					t.Errorf("a turn still waiting stamped %d, stored %d, posted %d times; want nothing", stamp, mem[1], f.PostCalls())
				}
				return
			}
			if mem[1] != 9 {
				t.Errorf("marker %d, want 9", mem[1])
			}
			if sent := f.Sent(); len(sent) != 1 || sent[0].ID != 7 || sent[0].RemoteAddr != 0x2000 {
				t.Errorf("sent %+v, want the one request", sent)
			}
			// The stamp is CLOCK_MONOTONIC: a later clock.Now is at
			// least as far from an earlier one as from the stamp.
			if after := clock.Now(); stamp <= 0 || after-before < 0 {
				t.Errorf("stamp %d", stamp)
			}
			polls := f.PollCalls()
			wcs := make([]verbsio.WC, 1)
			if n, err := q.scq.Poll(wcs); n != 1 || err != nil || wcs[0].ID != 7 {
				t.Errorf("Poll = %d, %v, %+v; want the turn's completion", n, err, wcs[0])
			}
			if f.PollCalls() != polls {
				t.Errorf("Poll crossed for a completion the turn had taken")
			}
		})
	}
}

// TestFakeWriteTurnStamps checks that the stamps of consecutive turns
// measure the time between them on the clock clock.Now reads.
func TestFakeWriteTurnStamps(t *testing.T) {
	_, _, turn := fakeTurn(t, false)
	wr := []verbsio.SendWR{{ID: 1, Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{{Addr: 0x1000, Length: 2, LKey: 1}}}}
	var mark byte
	s1, _, err := turn.Turn(nil, 0, 1, &mark, 1, wr)
	if err != nil {
		t.Fatal(err)
	}
	c1 := clock.Now()
	for clock.Now()-c1 < 2e6 {
	}
	c2 := clock.Now()
	s2, _, err := turn.Turn(nil, 0, 1, &mark, 2, wr)
	if err != nil {
		t.Fatal(err)
	}
	if d := s2 - s1; d < c2-c1 {
		t.Errorf("stamps %d ns apart, want at least the %d ns spun between them", d, c2-c1)
	}
}

func TestFakeWriteTurnErrors(t *testing.T) {
	wr := verbsio.SendWR{ID: 1, Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{{Addr: 0x1000, Length: 2, LKey: 1}}}
	var mark byte
	tests := []struct {
		name  string
		setup func(f *fakeverbs.Fake, turn *hwTurn)
		wrs   []verbsio.SendWR
		mark  *byte
		errno unix.Errno
	}{
		{"refused", func(f *fakeverbs.Fake, _ *hwTurn) { f.FailAt(0, unix.ENOMEM, false) }, []verbsio.SendWR{wr}, &mark, unix.ENOMEM},
		{"no request", nil, nil, &mark, unix.EINVAL},
		{"no marker", nil, []verbsio.SendWR{wr}, nil, unix.EINVAL},
		{"released", func(_ *fakeverbs.Fake, turn *hwTurn) { turn.Release() }, []verbsio.SendWR{wr}, &mark, unix.EINVAL},
		{"bad opcode", nil, []verbsio.SendWR{{Opcode: 99}}, &mark, unix.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _, turn := fakeTurn(t, false)
			if tt.setup != nil {
				tt.setup(f, turn)
			}
			_, posted, err := turn.Turn(nil, 0, 1, tt.mark, 1, tt.wrs)
			var ve *verbsio.Error
			if posted || !errors.As(err, &ve) || ve.Errno != tt.errno {
				t.Errorf("Turn = posted %v, %v; want %s", posted, err, tt.errno)
			}
		})
	}
}

func TestFakeWriteTurnDoesNotAllocate(t *testing.T) {
	f, q, turn := fakeTurn(t, true)
	wr := []verbsio.SendWR{{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{{Addr: 1, Length: 2, LKey: 3}}}}
	mem := []byte{1, 0}
	wcs := make([]verbsio.WC, 1)
	for name, fn := range map[string]func(){
		"posting": func() {
			f.Reset()
			turn.Turn(&mem[0], 1, 10, &mem[1], 2, wr)
			q.scq.Poll(wcs)
		},
		"waiting": func() { turn.Turn(&mem[0], 3, 10, &mem[1], 2, wr) },
	} {
		if a := testing.AllocsPerRun(1000, fn); a != 0 {
			t.Errorf("%s: %v allocations per turn, want 0", name, a)
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

// BenchmarkFakeTurn compares a write_lat iteration's crossings into C,
// against a fake device that completes while posted: "post+poll" is the
// loop without the family (PostSend, which polls in its crossing, then
// the Go spin on the peer's byte, then Poll, which returns what the post
// took), "turn" the loop with it. crossings/op is runtime.NumCgoCall per
// iteration.
func BenchmarkFakeTurn(b *testing.B) {
	wr := []verbsio.SendWR{{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{{Addr: 1, Length: 2, LKey: 3}}}}
	for _, mode := range []string{"post+poll", "turn"} {
		b.Run("loop="+mode, func(b *testing.B) {
			f := fakeverbs.New()
			defer f.Free()
			f.SetExecute(true)
			q, err := newQP(&hwContext{name: "fake"}, f.QP(), verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 16, MaxSendSGE: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer q.release()
			cq, err := newCQ(&hwContext{name: "fake"}, f.CQ(), 16)
			if err != nil {
				b.Fatal(err)
			}
			defer cq.release()
			q.scq = cq
			turn := &hwTurn{q: q}
			mem := []byte{1, 0}
			wcs := make([]verbsio.WC, 1)
			b.ReportAllocs()
			calls := runtime.NumCgoCall()
			for b.Loop() {
				f.Reset()
				if mode == "turn" {
					if _, _, err := turn.Turn(&mem[0], 1, 16, &mem[1], 2, wr); err != nil {
						b.Fatal(err)
					}
				} else {
					for mem[0] != 1 {
					}
					_ = clock.Now()
					mem[1] = 2
					if _, err := q.PostSend(wr); err != nil {
						b.Fatal(err)
					}
				}
				if n, err := cq.Poll(wcs); n != 1 || err != nil {
					b.Fatalf("Poll = %d, %v", n, err)
				}
			}
			b.ReportMetric(float64(runtime.NumCgoCall()-calls)/float64(b.N), "crossings/op")
		})
	}
}
