package soft_test

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// TestCommEst: on the udp fabric a connected RC QP raises COMM_EST when
// the first request reaches it, once; the requester, which receives only
// acknowledgements, raises none; a cancelled subscriber hears nothing
// more. On shm, whose target runs no code, there is no such event.
func TestCommEst(t *testing.T) {
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, NoConnect: true})
	evs := make(chan verbsio.AsyncEvent, 8)
	for _, s := range []*verbstest.Side{p.A, p.B} {
		cancel, err := s.Ctx.SubscribeAsyncEvents(func(e verbsio.AsyncEvent) { evs <- e })
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
	}
	if err := p.Connect(); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-evs:
		t.Fatalf("event %s before any packet", e)
	case <-time.After(50 * time.Millisecond):
	}
	send := func(id uint64) {
		t.Helper()
		if _, err := p.B.QP.PostRecv([]verbsio.RecvWR{{ID: id, SGL: []verbsio.SGE{p.B.MR.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.A.QP.PostSend([]verbsio.SendWR{{ID: id, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := verbstest.Poll(p.A.CQ, 1, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := verbstest.Poll(p.B.CQ, 1, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	send(1)
	select {
	case e := <-evs:
		if e.Type != verbsio.EventCommEst || e.QPN != p.B.QP.QPN() || e.String() == "" {
			t.Errorf("event %s, want COMM_EST of the responder's QP %#x", e, p.B.QP.QPN())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no COMM_EST")
	}
	send(2)
	select {
	case e := <-evs:
		t.Errorf("a second event %s", e)
	case <-time.After(100 * time.Millisecond):
	}

	shm := verbstest.NewPair(t, verbstest.PairConfig{Device: "shm0"})
	cancel, err := shm.B.Ctx.SubscribeAsyncEvents(func(e verbsio.AsyncEvent) { evs <- e })
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	cancel() // idempotent
	if _, err := shm.B.Ctx.SubscribeAsyncEvents(nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("nil handler: %v", err)
	}
}

// TestProgressHolders: background progress runs while anyone holds it
// (StartProgress twice, QP1 lazily) and stops with the last holder.
func TestProgressHolders(t *testing.T) {
	ctx, err := verbsio.OpenWith("udp_lo", verbsio.OpenOptions{UDPPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	base := goroutines()
	stop1 := ctx.StartProgress()
	stop2 := ctx.StartProgress()
	mp, err := ctx.OpenMADPort(1)
	if err != nil {
		t.Fatal(err)
	}
	running := goroutines()
	if running <= base { // the progress goroutine and QP1's
		t.Fatalf("%d goroutines with progress and QP1, %d before", running, base)
	}
	stop1()
	stop1() // idempotent
	stop2()
	if err := mp.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for goroutines() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after every holder stopped, %d before", goroutines(), base)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func goroutines() int { return runtime.NumGoroutine() }
