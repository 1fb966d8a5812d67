package verbstest

import (
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
)

// testTimestamps checks completion timestamps on a device that claims them
// (completion_timestamp_mask and hca_core_clock non-zero): a CQ created
// with verbsio.WCExTS stamps every completion, sends and receives, within
// the mask, in order, and the clock runs at the rate the device reports
// (two sends 30 ms apart are stamped 30 ms apart, give or take the
// scheduler); a CQ created without the flag stamps nothing.
func testTimestamps(t *testing.T, dev target) {
	a := caps(t, dev)
	if a.Ext == nil || a.Ext.CompletionTimestampMask == 0 || a.Ext.HCACoreClock == 0 {
		t.Skip("the device reports no completion timestamps (completion_timestamp_mask or hca_core_clock 0)")
	}
	mask, khz := a.Ext.CompletionTimestampMask, a.Ext.HCACoreClock
	const gap = 30 * time.Millisecond
	run := func(t *testing.T, flags verbsio.CQWCFlags) []verbsio.WC {
		p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open, WCFlags: flags})
		if got := p.A.CQ.WCFlags(); got != flags {
			t.Errorf("CQ.WCFlags() = %s, want %s", got, flags)
		}
		recvs := []verbsio.RecvWR{{ID: 10, SGL: []verbsio.SGE{sge(p.B, 0, 64)}}, {ID: 11, SGL: []verbsio.SGE{sge(p.B, 64, 64)}}}
		if _, err := p.B.QP.PostRecv(recvs); err != nil {
			t.Fatal(err)
		}
		var out []verbsio.WC
		for i := 0; i < 2; i++ {
			if i > 0 {
				time.Sleep(gap)
			}
			w := verbsio.SendWR{ID: uint64(i + 1), Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 64)}}
			if _, err := p.A.QP.PostSend([]verbsio.SendWR{w}); err != nil {
				t.Fatal(err)
			}
			out = append(out, PollOne(t, p.A.CQ), PollOne(t, p.B.CQ))
		}
		for _, wc := range out {
			if wc.Status != verbsio.StatusSuccess {
				t.Fatalf("completion %+v", wc)
			}
		}
		return out
	}
	for _, flags := range []verbsio.CQWCFlags{verbsio.WCExStandard | verbsio.WCExTS, verbsio.WCExTS} {
		t.Run(flags.String(), func(t *testing.T) {
			wcs := run(t, flags)
			for _, wc := range wcs {
				if wc.Timestamp == 0 || wc.Timestamp&^mask != 0 {
					t.Errorf("completion %d (%s): timestamp %#x, want non-zero within mask %#x", wc.ID, wc.Opcode, wc.Timestamp, mask)
				}
			}
			// Send 1, receive 1, send 2, receive 2: devices differ on
			// whether a send or its receive completes first, but the
			// second of each kind comes a gap after the first.
			for _, i := range []int{0, 1} {
				first, second := wcs[i].Timestamp, wcs[i+2].Timestamp
				if second <= first {
					t.Errorf("%s completions: timestamps %d then %d, want increasing", wcs[i].Opcode, first, second)
					continue
				}
				ns, _ := verbsio.TimestampClock(second-first, khz)
				if d := time.Duration(ns); d < gap*8/10 || d > gap+5*time.Second {
					t.Errorf("%s completions %v apart by their timestamps (clock %d kHz), %v apart by the wall clock", wcs[i].Opcode, d, khz, gap)
				}
			}
		})
	}
	t.Run("NotAsked", func(t *testing.T) {
		for _, wc := range run(t, verbsio.WCExStandard) {
			if wc.Timestamp != 0 {
				t.Errorf("completion %d on a CQ without the timestamp flag has timestamp %d", wc.ID, wc.Timestamp)
			}
		}
	})
}
