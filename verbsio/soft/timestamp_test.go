package soft_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// TestCompletionTimestampClock checks that the engine's completion stamps
// are the clock it reports (nanoseconds of CLOCK_REALTIME): every stamp of
// a send and of its receive lies between the wall clock read before the
// post and after the poll, on both fabrics, whether the completion is
// polled through verbsio or read from the ring with direct verbs.
func TestCompletionTimestampClock(t *testing.T) {
	for _, dev := range []struct {
		name string
		open verbsio.OpenOptions
	}{{"shm0", verbsio.OpenOptions{}}, {"udp_lo", verbsio.OpenOptions{UDPPort: -1}}} {
		t.Run(dev.name, func(t *testing.T) {
			p := verbstest.NewPair(t, verbstest.PairConfig{Device: dev.name, Open: dev.open, WCFlags: verbsio.WCExTS})
			direct, err := dv.InitCQ(p.B.CQ)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 20; i++ {
				if _, err := p.B.QP.PostRecv([]verbsio.RecvWR{{ID: uint64(i), SGL: []verbsio.SGE{p.B.MR.SGE(0, 64)}}}); err != nil {
					t.Fatal(err)
				}
				before := uint64(time.Now().UnixNano())
				if _, err := p.A.QP.PostSend([]verbsio.SendWR{{ID: uint64(i), Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled,
					SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}}}); err != nil {
					t.Fatal(err)
				}
				send := verbstest.PollOne(t, p.A.CQ)
				recv := nextCQE(t, direct)
				after := uint64(time.Now().UnixNano())
				for _, c := range []struct {
					what string
					ts   uint64
				}{{"send (verbsio.CQ.Poll)", send.Timestamp}, {"receive (dv.CQ.Next)", recv.Timestamp}} {
					if c.ts < before || c.ts > after {
						t.Fatalf("round %d: %s stamped %d, outside [%d, %d] (the wall clock around the exchange)", i, c.what, c.ts, before, after)
					}
				}
			}
		})
	}
}

// TestCreateCQExFlags checks what CreateCQEx refuses: flags libibverbs does
// not define (EINVAL, before the provider) and fields the engine does not
// deliver (EOPNOTSUPP).
func TestCreateCQExFlags(t *testing.T) {
	ctx, err := verbsio.Open("shm0")
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	for _, c := range []struct {
		flags verbsio.CQWCFlags
		want  error
	}{
		{1 << 40, unix.EINVAL},
		{verbsio.WCExCVLAN, unix.EOPNOTSUPP},
		{verbsio.WCExTMInfo | verbsio.WCExTS, unix.EOPNOTSUPP},
		{verbsio.WCExStandard | verbsio.WCExTS | verbsio.WCExFlowTag | verbsio.WCExCompletionTimestampWallclock, nil},
	} {
		cq, err := ctx.CreateCQEx(verbsio.CQInitAttr{CQE: 4, WCFlags: c.flags})
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.flags, err)
				continue
			}
			cq.Destroy()
		} else if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.flags, err, c.want)
		}
	}
}
