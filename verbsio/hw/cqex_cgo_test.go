//go:build linux && cgo && ibverbs

package hw

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/hw/internal/fakeverbs"
)

// fakeCQEx is the fake's extended CQ delivering flags, with a scratch of
// depth entries.
func fakeCQEx(t *testing.T, f *fakeverbs.Fake, depth int, flags verbsio.CQWCFlags) *hwCQ {
	t.Helper()
	// The extended CQ begins with the struct ibv_cq ibv_cq_ex_to_cq casts to.
	q, err := newCQ(&hwContext{name: "fake"}, f.CQEx(), depth)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.extend(f.CQEx(), flags); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.release)
	return q
}

// TestFakePollEx polls an extended CQ through the start/next/end API: the
// standard fields the flags name, the completion timestamp and the flow
// tag of each completion; an error completion with its status and vendor
// error only; a scratch of 2 crossing once per 2.
func TestFakePollEx(t *testing.T) {
	f := newFake(t)
	cq := fakeCQEx(t, f, 2, verbsio.WCExStandard|verbsio.WCExTS|verbsio.WCExFlowTag)
	f.PushWC(fakeverbs.WC{ID: 1, Opcode: 0, ByteLen: 64, QPNum: 0x1234, Timestamp: 1_000_123, FlowTag: 7})
	f.PushWC(fakeverbs.WC{ID: 2, Opcode: 128, ByteLen: 1000, Imm: 0x0a0b0c0d, Flags: 2, QPNum: 0x1234, SrcQP: 0x99, SLID: 7, SL: 2,
		Timestamp: 1_000_999, FlowTag: 42})
	f.PushWC(fakeverbs.WC{ID: 3, Status: 12, Opcode: 1, VendorErr: 0x81, ByteLen: 5, Timestamp: 77, FlowTag: 9})
	wcs := make([]verbsio.WC, 8)
	n, err := cq.Poll(wcs)
	if n != 3 || err != nil {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	if f.StartPollCalls() != 2 || f.PollCalls() != 0 {
		t.Errorf("%d start_poll and %d poll_cq crossings for 3 completions with a scratch of 2, want 2 and 0", f.StartPollCalls(), f.PollCalls())
	}
	want := []verbsio.WC{
		{ID: 1, Opcode: verbsio.WCSend, ByteLen: 64, QPN: 0x1234, Timestamp: 1_000_123, FlowTag: 7},
		{ID: 2, Opcode: verbsio.WCRecv, ByteLen: 1000, Imm: 0x0a0b0c0d, Flags: verbsio.WCWithImm, QPN: 0x1234, SrcQP: 0x99, SLID: 7, SL: 2,
			Timestamp: 1_000_999, FlowTag: 42},
		{ID: 3, Status: verbsio.Status(12), VendorErr: 0x81},
	}
	if d := cmp.Diff(want, wcs[:n]); d != "" {
		t.Errorf("completions (-want +got):\n%s", d)
	}
	if n, err := cq.Poll(wcs); n != 0 || err != nil {
		t.Errorf("Poll of an empty CQ = %d, %v", n, err)
	}
}

// TestFakePollExFields reads only what the CQ was created to deliver:
// without BYTE_LEN, QP_NUM and the timestamp those stay zero.
func TestFakePollExFields(t *testing.T) {
	f := newFake(t)
	cq := fakeCQEx(t, f, 8, verbsio.WCExFlowTag)
	f.PushWC(fakeverbs.WC{ID: 5, Opcode: 128, ByteLen: 60, QPNum: 0x1234, Timestamp: 99, FlowTag: 3})
	wcs := make([]verbsio.WC, 1)
	if n, err := cq.Poll(wcs); n != 1 || err != nil {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	if d := cmp.Diff(verbsio.WC{ID: 5, Opcode: verbsio.WCRecv, FlowTag: 3}, wcs[0]); d != "" {
		t.Errorf("completion (-want +got):\n%s", d)
	}
}

// TestFakeExWaitAndPost: the completion Wait takes keeps its timestamp
// for the next Poll, and a signaled post does not poll an extended send
// CQ in its crossing (only its own API polls it).
func TestFakeExWaitAndPost(t *testing.T) {
	f := newFake(t)
	f.SetExecute(true)
	q := fakeQP(t, f, verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 8, MaxSendSGE: 1})
	cq := fakeCQEx(t, f, 8, verbsio.WCExStandard|verbsio.WCExTS)
	q.scq = cq
	f.PushWC(fakeverbs.WC{ID: 100, Opcode: 1, Timestamp: 555})
	if err := cq.Wait(time.Second); err != nil {
		t.Fatal(err)
	}
	if n, err := q.PostSend([]verbsio.SendWR{{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled,
		SGL: []verbsio.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}}); n != 1 || err != nil {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	if f.PollCalls() != 0 || f.Pending() != 1 {
		t.Errorf("the post polled the extended CQ: %d poll_cq calls, %d completions left, want 0 and 1", f.PollCalls(), f.Pending())
	}
	wcs := make([]verbsio.WC, 4)
	n, err := cq.Poll(wcs)
	if n != 2 || err != nil {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	if wcs[0].ID != 100 || wcs[0].Timestamp != 555 || wcs[1].ID != 1 {
		t.Errorf("completions %+v", wcs[:n])
	}
}

// TestFakeExStampSeries polls an extended CQ one completion at a time,
// as the latency tests' loops take their completions, and times the
// cycles between them as --completion-timestamps does: each completion
// keeps its own stamp, and the differences, masked to a 48-bit clock
// that wraps between two completions and converted at 156.25 MHz (6.4 ns
// a tick), are the hand-computed ones.
func TestFakeExStampSeries(t *testing.T) {
	const mask, khz = 1<<48 - 1, 156250
	f := newFake(t)
	cq := fakeCQEx(t, f, 4, verbsio.WCExStandard|verbsio.WCExTS)
	stamps := []uint64{mask - 99, mask - 49, 50, 300} // 50, 100 and 250 ticks apart
	for i, s := range stamps {
		f.PushWC(fakeverbs.WC{ID: uint64(i + 1), Opcode: 128, ByteLen: 2, Timestamp: s})
	}
	var got []uint64
	wcs := make([]verbsio.WC, 1)
	for range stamps {
		if n, err := cq.Poll(wcs); n != 1 || err != nil {
			t.Fatalf("Poll = %d, %v", n, err)
		}
		got = append(got, wcs[0].Timestamp)
	}
	if d := cmp.Diff(stamps, got); d != "" {
		t.Fatalf("stamps (-want +got):\n%s", d)
	}
	var ns []uint64
	for i := 1; i < len(got); i++ {
		v, ok := verbsio.TimestampClock((got[i]-got[i-1])&mask, khz)
		if !ok {
			t.Fatal("TimestampClock: no clock")
		}
		ns = append(ns, v)
	}
	if d := cmp.Diff([]uint64{320, 640, 1600}, ns); d != "" {
		t.Errorf("cycles in ns (-want +got):\n%s", d)
	}
}
