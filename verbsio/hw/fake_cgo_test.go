//go:build linux && cgo && ibverbs

package hw

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/hw/internal/fakeverbs"
	"golang.org/x/sys/unix"
)

// These tests run the ibverbs build's fast path, cgo crossing and C
// scratch included, against fakeverbs: the inline ibv_post_send,
// ibv_post_recv, ibv_post_srq_recv, ibv_poll_cq and ibv_req_notify_cq
// jump through the fake context's ops table into C functions that read the
// chained struct ibv_send_wr as a provider would.

func fakeQP(t *testing.T, f *fakeverbs.Fake, typ verbsio.QPType, cap verbsio.QPCap) *hwQP {
	t.Helper()
	f.SetQPType(int(typ))
	q, err := newQP(&hwContext{name: "fake"}, f.QP(), typ, cap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.release)
	return q
}

func newFake(t *testing.T) *fakeverbs.Fake {
	f := fakeverbs.New()
	t.Cleanup(f.Free)
	return f
}

func fakeSGL(s []verbsio.SGE) []fakeverbs.SGE {
	out := []fakeverbs.SGE{}
	for _, e := range s {
		out = append(out, fakeverbs.SGE(e))
	}
	return out
}

func TestFakePostSendRC(t *testing.T) {
	f := newFake(t)
	q := fakeQP(t, f, verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 16, MaxSendSGE: 2, MaxRecvWR: 16, MaxRecvSGE: 1})
	if q.QPN() != 0x1234 {
		t.Errorf("QPN = %#x, want the fake's 0x1234", q.QPN())
	}
	wrs := []verbsio.SendWR{
		{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled,
			SGL: []verbsio.SGE{{Addr: 0x1000, Length: 64, LKey: 7}, {Addr: 0x2000, Length: 32, LKey: 8}}},
		{ID: 2, Opcode: verbsio.OpRDMAWriteImm, Imm: 0xdeadbeef, SGL: []verbsio.SGE{{Addr: 0x3000, Length: 4096, LKey: 9}},
			Remote: verbsio.RemoteAddr{Addr: 0xfeed0000, RKey: 0x55}},
		{ID: 3, Opcode: verbsio.OpRDMARead, SGL: []verbsio.SGE{{Addr: 0x4000, Length: 8, LKey: 9}},
			Remote: verbsio.RemoteAddr{Addr: 0xfeed0100, RKey: 0x56}},
		{ID: 4, Opcode: verbsio.OpAtomicCmpSwp, Flags: verbsio.SendFence | verbsio.SendSignaled,
			SGL: []verbsio.SGE{{Addr: 0x5000, Length: 8, LKey: 9}}, Remote: verbsio.RemoteAddr{Addr: 0xfeed0200, RKey: 0x57},
			Atomic: verbsio.AtomicArgs{CompareAdd: 10, Swap: 20}},
		{ID: 5, Opcode: verbsio.OpAtomicFetchAdd, SGL: []verbsio.SGE{{Addr: 0x6000, Length: 8, LKey: 9}},
			Remote: verbsio.RemoteAddr{Addr: 0xfeed0300, RKey: 0x58}, Atomic: verbsio.AtomicArgs{CompareAdd: 3}},
		{ID: 6, Opcode: verbsio.OpSendImm, Flags: verbsio.SendInline | verbsio.SendSolicited, Imm: 1},
	}
	n, err := q.PostSend(wrs)
	if n != len(wrs) || err != nil {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	if f.PostCalls() != 1 {
		t.Errorf("%d crossings for one batch, want 1", f.PostCalls())
	}
	want := []fakeverbs.Send{
		{ID: 1, Opcode: 2, Flags: 2, NumSGE: 2, SGL: fakeSGL(wrs[0].SGL)},
		{ID: 2, Opcode: 1, Imm: 0xdeadbeef, NumSGE: 1, SGL: fakeSGL(wrs[1].SGL), RemoteAddr: 0xfeed0000, RKey: 0x55},
		{ID: 3, Opcode: 4, NumSGE: 1, SGL: fakeSGL(wrs[2].SGL), RemoteAddr: 0xfeed0100, RKey: 0x56},
		{ID: 4, Opcode: 5, Flags: 3, NumSGE: 1, SGL: fakeSGL(wrs[3].SGL), RemoteAddr: 0xfeed0200, RKey: 0x57, CompareAdd: 10, Swap: 20},
		{ID: 5, Opcode: 6, NumSGE: 1, SGL: fakeSGL(wrs[4].SGL), RemoteAddr: 0xfeed0300, RKey: 0x58, CompareAdd: 3},
		{ID: 6, Opcode: 3, Flags: 12, Imm: 1, SGL: []fakeverbs.SGE{}},
	}
	if d := cmp.Diff(want, f.Sent()); d != "" {
		t.Errorf("what the provider read (-want +got):\n%s", d)
	}
}

func TestFakePostSendUD(t *testing.T) {
	f := newFake(t)
	q := fakeQP(t, f, verbsio.QPTypeUD, verbsio.QPCap{MaxSendWR: 4, MaxSendSGE: 1})
	ah := newAH(t, fakeCtx{}, 0x77)
	wrs := []verbsio.SendWR{{ID: 9, Opcode: verbsio.OpSend, SGL: []verbsio.SGE{{Addr: 0x1000, Length: 100, LKey: 1}},
		UD: verbsio.UDAddr{AH: ah, RemoteQPN: 0xabcdef, RemoteQKey: 0x11111111}}}
	if n, err := q.PostSend(wrs); n != 1 || err != nil {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	want := []fakeverbs.Send{{ID: 9, Opcode: 2, NumSGE: 1, SGL: fakeSGL(wrs[0].SGL), AH: 0x77, RemoteQPN: 0xabcdef, RemoteQKey: 0x11111111}}
	if d := cmp.Diff(want, f.Sent()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	wrs[0].UD.AH = nil
	if n, err := q.PostSend(wrs); n != 0 || err != errNoAH {
		t.Errorf("PostSend without AH = %d, %v; want 0, %v", n, err, errNoAH)
	}
}

func TestFakePostSendBatches(t *testing.T) {
	sends := func(n int) []verbsio.SendWR {
		wrs := make([]verbsio.SendWR, n)
		for i := range wrs {
			wrs[i] = verbsio.SendWR{ID: uint64(i), Opcode: verbsio.OpSend, SGL: []verbsio.SGE{{Addr: uint64(i), Length: 1, LKey: 1}}}
		}
		return wrs
	}
	for _, c := range []struct {
		name      string
		ring      int // max_send_wr: the scratch holds this many
		batch     int
		failAt    int // in the chain of one crossing; -1 none
		nullBad   bool
		badSGEAt  int // index of a request with too many SGEs; -1 none
		wantN     int
		wantErr   error
		wantCalls int
	}{
		{"one crossing", 16, 10, -1, false, -1, 10, nil, 1},
		{"longer than the scratch", 4, 10, -1, false, -1, 10, nil, 3},
		{"device refuses [3]", 16, 10, 3, false, -1, 3, unix.ENOMEM, 1},
		{"device refuses without bad_wr", 16, 10, 3, true, -1, 0, unix.ENOMEM, 1},
		{"device refuses [1] of a batch longer than the scratch", 4, 10, 1, false, -1, 1, unix.ENOMEM, 1},
		{"unpackable [5]: [0,5) posted", 16, 10, -1, false, 5, 5, errSendTooManySGE, 1},
		{"unpackable [0]: nothing posted", 16, 10, -1, false, 0, 0, errSendTooManySGE, 0},
		{"empty batch", 16, 0, -1, false, -1, 0, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			q := fakeQP(t, f, verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: c.ring, MaxSendSGE: 1})
			if c.failAt >= 0 {
				f.FailAt(c.failAt, unix.ENOMEM, c.nullBad)
			}
			wrs := sends(c.batch)
			if c.badSGEAt >= 0 {
				wrs[c.badSGEAt].SGL = make([]verbsio.SGE, 2)
			}
			n, err := q.PostSend(wrs)
			if n != c.wantN || !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Errorf("PostSend = %d, %v; want %d, %v", n, err, c.wantN, c.wantErr)
			}
			if f.PostCalls() != c.wantCalls {
				t.Errorf("%d crossings, want %d", f.PostCalls(), c.wantCalls)
			}
			sent := f.Sent()
			if c.nullBad {
				return // some were accepted, but PostSend cannot know which
			}
			if len(sent) != c.wantN {
				t.Fatalf("provider accepted %d, PostSend says %d", len(sent), c.wantN)
			}
			for i, s := range sent {
				if s.ID != uint64(i) {
					t.Errorf("accepted[%d] has ID %d: order lost", i, s.ID)
				}
			}
		})
	}
}

func TestFakePostRecvAndSRQ(t *testing.T) {
	f := newFake(t)
	q := fakeQP(t, f, verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 1, MaxSendSGE: 1, MaxRecvWR: 8, MaxRecvSGE: 2})
	wrs := []verbsio.RecvWR{
		{ID: 1, SGL: []verbsio.SGE{{Addr: 0x1000, Length: 4096, LKey: 1}, {Addr: 0x9000, Length: 64, LKey: 2}}},
		{ID: 2, SGL: []verbsio.SGE{{Addr: 0x2000, Length: 4096, LKey: 1}}},
	}
	if n, err := q.PostRecv(wrs); n != 2 || err != nil {
		t.Fatalf("PostRecv = %d, %v", n, err)
	}
	s, err := newSRQ(&hwContext{name: "fake"}, f.SRQ(), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.release()
	if n, err := s.PostRecv(wrs[1:]); n != 1 || err != nil {
		t.Fatalf("SRQ PostRecv = %d, %v", n, err)
	}
	if n, err := s.PostRecv(wrs); n != 0 || err != errRecvTooManySGE {
		t.Errorf("SRQ PostRecv with 2 SGEs = %d, %v; want 0, %v", n, err, errRecvTooManySGE)
	}
	want := []fakeverbs.Recv{
		{ID: 1, NumSGE: 2, SGL: fakeSGL(wrs[0].SGL)},
		{ID: 2, NumSGE: 1, SGL: fakeSGL(wrs[1].SGL)},
		{ID: 2, NumSGE: 1, SGL: fakeSGL(wrs[1].SGL)},
	}
	if d := cmp.Diff(want, f.Received()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	f.FailAt(0, unix.EINVAL, false)
	if n, err := q.PostRecv(wrs); n != 0 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv refused = %d, %v; want 0, EINVAL", n, err)
	}
}

func TestFakeNoQueue(t *testing.T) {
	f := newFake(t)
	q := fakeQP(t, f, verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 4, MaxSendSGE: 1}) // receives via an SRQ
	if n, err := q.PostRecv([]verbsio.RecvWR{{ID: 1}}); n != 0 || err != errRecvNoQueue {
		t.Errorf("PostRecv without a receive queue = %d, %v", n, err)
	}
	q.release()
	if n, err := q.PostSend([]verbsio.SendWR{{Opcode: verbsio.OpSend}}); n != 0 || err != errSendClosed {
		t.Errorf("PostSend after release = %d, %v", n, err)
	}
}

func fakeCQ(t *testing.T, f *fakeverbs.Fake, depth int) *hwCQ {
	t.Helper()
	q, err := newCQ(&hwContext{name: "fake"}, f.CQ(), depth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.release)
	return q
}

func TestFakePoll(t *testing.T) {
	f := newFake(t)
	cq := fakeCQ(t, f, 2) // scratch of 2: longer polls cross more than once
	f.PushWC(fakeverbs.WC{ID: 1, Opcode: 0, ByteLen: 64, QPNum: 0x1234})
	f.PushWC(fakeverbs.WC{ID: 2, Opcode: 128, ByteLen: 1000, Imm: 0x0a0b0c0d, Flags: 3, QPNum: 0x1234, SrcQP: 0x99, PkeyIndex: 1, SLID: 7, SL: 2})
	f.PushWC(fakeverbs.WC{ID: 3, Status: 12, Opcode: 1, VendorErr: 0x81})
	f.PushWC(fakeverbs.WC{ID: 4, Status: 5, Opcode: 129})
	f.PushWC(fakeverbs.WC{ID: 5, Opcode: 3})
	wcs := make([]verbsio.WC, 8)
	n, err := cq.Poll(wcs)
	if n != 5 || err != nil {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	if f.PollCalls() != 3 {
		t.Errorf("%d crossings for 5 completions with a scratch of 2, want 3", f.PollCalls())
	}
	want := []verbsio.WC{
		{ID: 1, Opcode: verbsio.WCSend, ByteLen: 64, QPN: 0x1234},
		{ID: 2, Opcode: verbsio.WCRecv, ByteLen: 1000, Imm: 0x0a0b0c0d, Flags: verbsio.WCWithGRH | verbsio.WCWithImm,
			QPN: 0x1234, SrcQP: 0x99, PkeyIndex: 1, SLID: 7, SL: 2},
		{ID: 3, Status: verbsio.StatusRetryExcErr, Opcode: verbsio.WCRDMAWrite, VendorErr: 0x81},
		{ID: 4, Status: verbsio.StatusWRFlushErr, Opcode: verbsio.WCRecvRDMAWithImm},
		{ID: 5, Opcode: verbsio.WCCompSwap},
	}
	if d := cmp.Diff(want, wcs[:n]); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if n, err := cq.Poll(wcs); n != 0 || err != nil {
		t.Errorf("Poll on an empty CQ = %d, %v", n, err)
	}
	f.SetPollError(true)
	if n, err := cq.Poll(wcs); n != 0 || !errors.Is(err, unix.EIO) {
		t.Errorf("Poll on a failing CQ = %d, %v; want 0, EIO", n, err)
	}
}

func TestFakeWait(t *testing.T) {
	f := newFake(t)
	cq := fakeCQ(t, f, 16)
	start := time.Now()
	if err := cq.Wait(20 * time.Millisecond); err != verbsio.ErrTimeout {
		t.Fatalf("Wait on an empty CQ = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("Wait returned after %v, before its timeout", d)
	}
	f.PushWC(fakeverbs.WC{ID: 1})
	f.PushWC(fakeverbs.WC{ID: 2})
	if err := cq.Wait(time.Second); err != nil {
		t.Fatalf("Wait with a completion = %v", err)
	}
	if f.NotifyCalls() < 2 {
		t.Errorf("Wait did not arm the CQ before looking (%d req_notify_cq)", f.NotifyCalls())
	}
	if err := cq.Wait(0); err != nil {
		t.Errorf("Wait with a kept completion = %v", err)
	}
	// The completion Wait took comes first, then the rest.
	wcs := make([]verbsio.WC, 4)
	n, err := cq.Poll(wcs)
	if n != 2 || err != nil || wcs[0].ID != 1 || wcs[1].ID != 2 {
		t.Errorf("Poll after Wait = %d, %v, IDs %d %d; want 2 completions 1, 2", n, err, wcs[0].ID, wcs[1].ID)
	}
}

func TestFakeFastPathDoesNotAllocate(t *testing.T) {
	f := newFake(t)
	q := fakeQP(t, f, verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 64, MaxSendSGE: 1, MaxRecvWR: 64, MaxRecvSGE: 1})
	cq := fakeCQ(t, f, 64)
	send := make([]verbsio.SendWR, 32)
	recv := make([]verbsio.RecvWR, 32)
	for i := range send {
		send[i] = verbsio.SendWR{ID: uint64(i), Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{{Addr: 1, Length: 2, LKey: 3}}}
		recv[i] = verbsio.RecvWR{ID: uint64(i), SGL: []verbsio.SGE{{Addr: 1, Length: 2, LKey: 3}}}
	}
	wcs := make([]verbsio.WC, 32)
	// A QP whose post polls its send CQ, against a fake that completes
	// as it is posted.
	fe := newFake(t)
	fe.SetExecute(true)
	qe := fakeQP(t, fe, verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 64, MaxSendSGE: 1})
	qe.scq = fakeCQ(t, fe, 64)
	one := []verbsio.SendWR{{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{{Addr: 1, Length: 2, LKey: 3}}}}
	for name, fn := range map[string]func(){
		"PostSend": func() { f.Reset(); q.PostSend(send) },
		"PostSend polling and Poll": func() {
			fe.Reset()
			qe.PostSend(one)
			qe.scq.Poll(wcs[:1])
		},
		"PostRecv": func() { f.Reset(); q.PostRecv(recv) },
		"Poll":     func() { cq.Poll(wcs) },
		"PostSend refused": func() {
			f.Reset()
			f.FailAt(3, unix.ENOMEM, false)
			q.PostSend(send)
			f.FailAt(-1, 0, false)
		},
	} {
		if a := testing.AllocsPerRun(1000, fn); a != 0 {
			t.Errorf("%s: %v allocations per batch, want 0", name, a)
		}
	}
}

// TestFakeExecuteInline runs the fake as rxe completes: inline data is
// for SEND and RDMA WRITE only; on an RDMA READ or an atomic the post is
// accepted and the completion fails with LOC_PROT_ERR, flushing what
// follows (what TestDeviceInlineOnlyForSendAndWrite sees on rxe0).
func TestFakeExecuteInline(t *testing.T) {
	tests := []struct {
		op   verbsio.Opcode
		want []verbsio.Status // the inline request's completion, then the next one's
	}{
		{verbsio.OpSend, []verbsio.Status{verbsio.StatusSuccess, verbsio.StatusSuccess}},
		{verbsio.OpRDMAWrite, []verbsio.Status{verbsio.StatusSuccess, verbsio.StatusSuccess}},
		{verbsio.OpRDMAWriteImm, []verbsio.Status{verbsio.StatusSuccess, verbsio.StatusSuccess}},
		{verbsio.OpRDMARead, []verbsio.Status{verbsio.StatusLocProtErr, verbsio.StatusWRFlushErr}},
		{verbsio.OpAtomicFetchAdd, []verbsio.Status{verbsio.StatusLocProtErr, verbsio.StatusWRFlushErr}},
		{verbsio.OpAtomicCmpSwp, []verbsio.Status{verbsio.StatusLocProtErr, verbsio.StatusWRFlushErr}},
	}
	for _, tt := range tests {
		t.Run(tt.op.String(), func(t *testing.T) {
			f := newFake(t)
			f.SetExecute(true)
			q := fakeQP(t, f, verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 16, MaxSendSGE: 1, MaxInlineData: 16})
			cq := fakeCQ(t, f, 16)
			wrs := []verbsio.SendWR{
				{ID: 1, Opcode: tt.op, Flags: verbsio.SendSignaled | verbsio.SendInline, SGL: []verbsio.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}},
				{ID: 2, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}},
			}
			if n, err := q.PostSend(wrs); n != 2 || err != nil {
				t.Fatalf("PostSend = %d, %v; the post is accepted, the completion fails", n, err)
			}
			wcs := make([]verbsio.WC, 4)
			n, err := cq.Poll(wcs)
			if err != nil || n != 2 {
				t.Fatalf("Poll = %d, %v; want 2 completions", n, err)
			}
			for i, want := range tt.want {
				if wcs[i].ID != uint64(i+1) || wcs[i].Status != want {
					t.Errorf("completion %d: ID %d %s, want ID %d %s", i, wcs[i].ID, wcs[i].Status, i+1, want)
				}
			}
			if failed := tt.want[0] != verbsio.StatusSuccess; f.QPFailed() != failed {
				t.Errorf("QP failed = %v, want %v", f.QPFailed(), failed)
			}
		})
	}
}

// TestFakePostPolls checks that a signaled post takes the completions a
// device has ready in its own crossing, that Poll returns them first and
// in order without crossing again, and that the post stops polling a CQ
// where it finds nothing.
func TestFakePostPolls(t *testing.T) {
	f := newFake(t)
	f.SetExecute(true)
	q := fakeQP(t, f, verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 64, MaxSendSGE: 1})
	cq := fakeCQ(t, f, 64)
	q.scq = cq
	write := func(id uint64, fl verbsio.SendFlags) verbsio.SendWR {
		return verbsio.SendWR{ID: id, Opcode: verbsio.OpRDMAWrite, Flags: fl, SGL: []verbsio.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}
	}
	// An earlier completion (a Wait's) stays first.
	f.PushWC(fakeverbs.WC{ID: 100, Opcode: 1})
	if err := cq.Wait(time.Second); err != nil {
		t.Fatal(err)
	}
	if n, err := q.PostSend([]verbsio.SendWR{write(1, 0), write(2, verbsio.SendSignaled)}); n != 2 || err != nil {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	if n, err := q.PostSend([]verbsio.SendWR{write(3, verbsio.SendSignaled)}); n != 1 || err != nil {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	calls := f.PollCalls()
	var got []uint64
	wcs := make([]verbsio.WC, 1)
	for range 3 {
		n, err := cq.Poll(wcs)
		if n != 1 || err != nil {
			t.Fatalf("Poll = %d, %v", n, err)
		}
		got = append(got, wcs[0].ID)
	}
	if d := cmp.Diff([]uint64{100, 2, 3}, got); d != "" {
		t.Errorf("completion IDs (-want +got):\n%s", d)
	}
	if f.PollCalls() != calls {
		t.Errorf("Poll crossed %d times for completions the posts had taken, want 0", f.PollCalls()-calls)
	}
	if n, _ := cq.Poll(wcs); n != 0 {
		t.Errorf("Poll after the taken completions = %d, want 0", n)
	}

	// A device that completes later: the posts stop polling after a window.
	f.SetExecute(false)
	f.Reset()
	calls = f.PollCalls()
	posts := postPollWindow + postPollPause
	for i := range posts {
		if _, err := q.PostSend([]verbsio.SendWR{write(uint64(i), verbsio.SendSignaled)}); err != nil {
			t.Fatal(err)
		}
		f.Reset()
	}
	if polls := f.PollCalls() - calls; polls > postPollWindow {
		t.Errorf("%d signaled posts on a CQ that never had a completion polled %d times, want at most %d", posts, polls, postPollWindow)
	}
}

// BenchmarkFakePostSend measures the provider's own cost per batch: packing
// into the C scratch plus one cgo crossing, with a provider (the fake) that
// only walks the chain. Compare ns/wr across batch sizes to see the
// crossing amortized.
func BenchmarkFakePostSend(b *testing.B) {
	for _, batch := range []int{1, 4, 16, 64} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			f := fakeverbs.New()
			defer f.Free()
			q, err := newQP(&hwContext{name: "fake"}, f.QP(), verbsio.QPTypeRC, verbsio.QPCap{MaxSendWR: 64, MaxSendSGE: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer q.release()
			wrs := make([]verbsio.SendWR, batch)
			for i := range wrs {
				wrs[i] = verbsio.SendWR{ID: uint64(i), Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled,
					SGL: []verbsio.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}, Remote: verbsio.RemoteAddr{Addr: 0x2000, RKey: 2}}
			}
			b.ReportAllocs()
			for b.Loop() {
				f.Reset()
				if _, err := q.PostSend(wrs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/wr")
		})
	}
}

// BenchmarkFakePoll measures Poll: one crossing and the conversion.
func BenchmarkFakePoll(b *testing.B) {
	f := fakeverbs.New()
	defer f.Free()
	cq, err := newCQ(&hwContext{name: "fake"}, f.CQ(), 64)
	if err != nil {
		b.Fatal(err)
	}
	defer cq.release()
	wcs := make([]verbsio.WC, 16)
	b.ReportAllocs()
	for b.Loop() {
		cq.Poll(wcs) // empty: the cost of looking
	}
}
