package soft_test

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// fabrics are the built-in devices the dv tests run on, with how to open them.
var fabrics = []struct {
	name, dev string
	open      verbsio.OpenOptions
}{
	{"shm", "shm0", verbsio.OpenOptions{}},
	{"udp", "udp_lo", verbsio.OpenOptions{UDPPort: -1}},
}

type allocCall struct {
	res         dv.Resource
	size, align int
}

// recAlloc is an application's allocator for tests: aligned Go memory, a
// record of every call, and ways to misbehave.
type recAlloc struct {
	mu     sync.Mutex
	calls  []allocCall
	live   map[uintptr][]byte // handed out, not freed yet
	all    map[uintptr]dv.Resource
	frees  map[uintptr]int
	failOn dv.Resource         // Alloc for these fails
	mangle func([]byte) []byte // alters the buffer Alloc returns
}

var errAppAlloc = errors.New("the test's allocator is out of memory")

func newRecAlloc() *recAlloc {
	return &recAlloc{live: map[uintptr][]byte{}, all: map[uintptr]dv.Resource{}, frees: map[uintptr]int{}}
}

func base(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func (a *recAlloc) Allocator() dv.Allocator {
	return dv.Allocator{
		Alloc: func(res dv.Resource, size, align int) ([]byte, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.calls = append(a.calls, allocCall{res, size, align})
			if res&a.failOn != 0 {
				return nil, errAppAlloc
			}
			raw := make([]byte, size+2*align)
			for i := range raw {
				raw[i] = 0xa5 // not zero: the engine must format what it uses
			}
			off := (align - int(base(raw)%uintptr(align))) % align
			buf := raw[off : off+size]
			if a.mangle != nil {
				buf = a.mangle(buf)
			}
			a.live[base(buf)] = buf
			a.all[base(buf)] = res
			return buf, nil
		},
		Free: func(res dv.Resource, buf []byte) {
			a.mu.Lock()
			defer a.mu.Unlock()
			b := base(buf)
			a.frees[b]++
			if r, ok := a.all[b]; !ok || r != res {
				a.frees[b] += 1000 // a buffer it never handed out, or the wrong kind
			}
			delete(a.live, b)
		},
	}
}

// holder returns the buffer handed out for res that holds [p, p+n).
func (a *recAlloc) holder(res dv.Resource, p unsafe.Pointer, n int) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	for b, buf := range a.live {
		if a.all[b] == res && uintptr(p) >= b && uintptr(p)+uintptr(n) <= b+uintptr(len(buf)) {
			return buf
		}
	}
	return nil
}

func (a *recAlloc) callsFor(res dv.Resource) []allocCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []allocCall
	for _, c := range a.calls {
		if c.res == res {
			out = append(out, c)
		}
	}
	return out
}

// checkFreed fails unless every buffer handed out was freed exactly once.
func (a *recAlloc) checkFreed(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for b, res := range a.all {
		if a.frees[b] != 1 {
			t.Errorf("%s buffer %#x: freed %d times, want once", res, b, a.frees[b])
		}
	}
	for b, n := range a.frees {
		if _, ok := a.all[b]; !ok {
			t.Errorf("Free got %#x (%d times), which Alloc never returned", b, n)
		}
	}
}

// openFabric opens a built-in device. Both exist wherever the engine
// runs (shm0 always, udp_lo on any Linux host: loopback has 127.0.0.1 and
// the port is the kernel's pick), so failing to open one is a failure.
func openFabric(t *testing.T, dev string, o verbsio.OpenOptions) *verbsio.Context {
	t.Helper()
	ctx, err := verbsio.OpenWith(dev, o)
	if err != nil {
		t.Fatalf("open %s: %v", dev, err)
	}
	t.Cleanup(func() { ctx.Close() })
	return ctx
}

var dvCap = verbsio.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 1, MaxInlineData: 0}

// allocSide builds one side of a pair on ctx, after a is installed on it.
func allocSide(t *testing.T, ctx *verbsio.Context, cqe int) *verbstest.Side {
	t.Helper()
	s := &verbstest.Side{Ctx: ctx}
	var err error
	if s.PD, err = ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if s.CQ, err = ctx.CreateCQ(cqe); err != nil {
		t.Fatal(err)
	}
	if s.QP, err = s.PD.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: s.CQ, RecvCQ: s.CQ, Cap: dvCap}); err != nil {
		t.Fatal(err)
	}
	if s.Buf, err = ctx.Alloc(1 << 16); err != nil {
		t.Fatal(err)
	}
	if s.MR, err = s.PD.RegMR(s.Buf, verbstest.AllAccess); err != nil {
		t.Fatal(err)
	}
	g, err := ctx.QueryGID(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.GID = g.GID
	pa, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	s.LID = pa.LID
	return s
}

// nextCQE polls c's ring directly until a completion comes.
func nextCQE(t testing.TB, c *dv.CQ) dv.CQE {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if e := c.Next(); e != nil {
			return *e
		}
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no completion in the CQ's ring")
		}
	}
}

// TestDVAllocator installs an allocator on both contexts of a pair, on
// each fabric, and checks what it is asked for, that the rings live in its
// buffers, that traffic flows through them, and that each buffer is freed
// once when its object is destroyed or the context closes.
func TestDVAllocator(t *testing.T) {
	for _, f := range fabrics {
		t.Run(f.name, func(t *testing.T) {
			ctxA, ctxB := openFabric(t, f.dev, f.open), openFabric(t, f.dev, f.open)
			allocA, allocB := newRecAlloc(), newRecAlloc()
			want := dv.ResSendQueue
			if f.name == "udp" {
				want = dv.ResSendQueue | dv.ResRecvQueue | dv.ResCQ
			}
			for _, x := range []struct {
				ctx *verbsio.Context
				a   *recAlloc
			}{{ctxA, allocA}, {ctxB, allocB}} {
				got, err := dv.SetAllocator(x.ctx, x.a.Allocator())
				if err != nil || got != want {
					t.Fatalf("SetAllocator: %v, %v; want %v", got, err, want)
				}
			}
			a, b := allocSide(t, ctxA, 64), allocSide(t, ctxB, 64)
			if f.name == "udp" {
				for _, s := range []*verbstest.Side{a, b} {
					s := s
					stop := s.Ctx.StartProgress()
					t.Cleanup(stop)
				}
			}
			p := &verbstest.Pair{A: a, B: b, Cfg: verbstest.PairConfig{QPAcc: verbstest.AllAccess}}
			if err := p.Connect(); err != nil {
				t.Fatal(err)
			}

			// What the allocator was asked for.
			q, err := dv.InitQP(a.QP)
			if err != nil {
				t.Fatal(err)
			}
			// 16 slots of 128 bytes (64-byte header, 2 SGEs, rounded to
			// 64), then the doorbell record.
			if q.Depth != 16 || q.Stride != 128 {
				t.Fatalf("ring: %d slots of %d bytes", q.Depth, q.Stride)
			}
			if got := allocA.callsFor(dv.ResSendQueue); len(got) != 1 || got[0] != (allocCall{dv.ResSendQueue, 16*128 + dv.DBRecSize, dv.QueueAlign}) {
				t.Errorf("send queue calls: %+v", got)
			}
			rq, cqc := allocA.callsFor(dv.ResRecvQueue), allocA.callsFor(dv.ResCQ)
			if f.name == "udp" {
				// Receive ring: 128-byte header, 16 WQEs of 16+16 bytes.
				if len(rq) != 1 || rq[0] != (allocCall{dv.ResRecvQueue, 128 + 16*32, dv.QueueAlign}) {
					t.Errorf("receive queue calls: %+v", rq)
				}
				if len(cqc) != 1 || cqc[0] != (allocCall{dv.ResCQ, dv.CQHeaderSize + 64*dv.CQSlotSize, dv.QueueAlign}) {
					t.Errorf("CQ calls: %+v", cqc)
				}
			} else if len(rq)+len(cqc) != 0 {
				t.Errorf("shm: the allocator was asked for shared queues: %+v %+v", rq, cqc)
			}

			// The send ring and its doorbell record are in the allocator's
			// buffer; so is the CQ on udp.
			sq := allocA.holder(dv.ResSendQueue, unsafe.Pointer(&q.Buf[0]), len(q.Buf))
			if sq == nil || base(sq) != base(q.Buf) {
				t.Fatal("the send ring is not in the allocator's buffer")
			}
			if uintptr(unsafe.Pointer(q.DBRec)) != base(sq)+uintptr(len(q.Buf)) {
				t.Errorf("doorbell record at %#x, want right after the ring at %#x", uintptr(unsafe.Pointer(q.DBRec)), base(sq)+uintptr(len(q.Buf)))
			}
			c, err := dv.InitCQ(a.CQ)
			if err != nil {
				t.Fatal(err)
			}
			inCQ := allocA.holder(dv.ResCQ, unsafe.Pointer(&c.Buf[0]), len(c.Buf)) != nil
			if inCQ != (f.name == "udp") {
				t.Errorf("CQ ring in the allocator's memory: %v", inCQ)
			}

			// WQEs written through dv are the allocator's bytes; they run.
			fill := a.Buf[:4096]
			for i := range fill {
				fill[i] = byte(i*7 + 1)
			}
			for i := 0; i < 4; i++ {
				w, pos := q.Next()
				*w = dv.SendWQE{WRID: 0xa110c000 + uint64(i), Opcode: uint8(verbsio.OpRDMAWrite), NumSGE: 1,
					RAddr: b.MR.Addr() + uint64(1024*i), RKey: b.MR.RKey(), Flags: uint8(verbsio.SendSignaled)}
				q.SGEs(pos, 1)[0] = a.MR.SGE(1024*i, 1024)
				off := int(pos&(q.Depth-1)) * q.Stride
				if got := binary.LittleEndian.Uint64(sq[off:]); got != 0xa110c000+uint64(i) {
					t.Fatalf("slot %d of the allocator's buffer holds WRID %#x", pos, got)
				}
			}
			if err := q.Ring(); err != nil {
				t.Fatal(err)
			}
			if got := binary.LittleEndian.Uint32(sq[len(q.Buf):]); got != q.PI() {
				t.Errorf("doorbell record in the allocator's buffer: %d, want %d", got, q.PI())
			}
			for i := 0; i < 4; i++ {
				if e := nextCQE(t, c); e.Status != uint8(verbsio.StatusSuccess) || e.WRID != 0xa110c000+uint64(i) {
					t.Fatalf("completion %d: %+v", i, e)
				}
			}
			if string(b.Buf[:4096]) != string(fill) {
				t.Fatal("the target does not hold the data")
			}
			// A SEND lands in B's receive ring (the allocator's on udp).
			if _, err := b.QP.PostRecv([]verbsio.RecvWR{{ID: 77, SGL: []verbsio.SGE{b.MR.SGE(8192, 64)}}}); err != nil {
				t.Fatal(err)
			}
			if f.name == "udp" {
				var rqb []byte
				for bb, buf := range allocB.live {
					if allocB.all[bb] == dv.ResRecvQueue {
						rqb = buf
					}
				}
				if rqb == nil || binary.LittleEndian.Uint32(rqb) != 1 || binary.LittleEndian.Uint64(rqb[128:]) != 77 {
					t.Error("the receive WQE is not in the allocator's receive ring")
				}
			}
			w, pos := q.Next()
			*w = dv.SendWQE{WRID: 5, Opcode: uint8(verbsio.OpSend), NumSGE: 1, Flags: uint8(verbsio.SendSignaled)}
			q.SGEs(pos, 1)[0] = a.MR.SGE(0, 64)
			if err := q.Ring(); err != nil {
				t.Fatal(err)
			}
			if e := nextCQE(t, c); e.Status != uint8(verbsio.StatusSuccess) || e.WRID != 5 {
				t.Fatalf("send: %+v", e)
			}
			if wc := verbstest.PollOne(t, b.CQ); wc.Status != verbsio.StatusSuccess || wc.ID != 77 || wc.ByteLen != 64 {
				t.Fatalf("receive: %+v", wc)
			}

			// Destroying the QP frees its buffers, once; closing the
			// context frees the CQ's.
			nA := len(allocA.all)
			if err := a.QP.Destroy(); err != nil {
				t.Fatal(err)
			}
			if len(allocA.live) != nA-len(allocA.callsFor(dv.ResSendQueue))-len(allocA.callsFor(dv.ResRecvQueue)) {
				t.Errorf("after destroying the QP, %d buffers live", len(allocA.live))
			}
			if err := a.QP.Destroy(); err == nil {
				t.Error("a second Destroy succeeded")
			}
			ctxA.Close()
			ctxB.Close()
			allocA.checkFreed(t)
			allocB.checkFreed(t)
			if len(allocA.live)+len(allocB.live) != 0 {
				t.Errorf("%d buffers never freed", len(allocA.live)+len(allocB.live))
			}
		})
	}
}

// TestDVAllocatorMisuse: an allocator that fails, or returns a buffer too
// small or misaligned, fails the create call cleanly, and what was taken is
// given back once.
func TestDVAllocatorMisuse(t *testing.T) {
	for _, f := range fabrics {
		t.Run(f.name, func(t *testing.T) {
			ctx := openFabric(t, f.dev, f.open)
			pd, err := ctx.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			cq, err := ctx.CreateCQ(16)
			if err != nil {
				t.Fatal(err)
			}
			createQP := func() (*verbsio.QP, error) {
				return pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: dvCap})
			}
			try := func(name string, a *recAlloc, create func() error, errno unix.Errno, res dv.Resource) {
				t.Helper()
				if _, err := dv.SetAllocator(ctx, a.Allocator()); err != nil {
					t.Fatal(err)
				}
				err := create()
				var ae *dv.AllocError
				if !errors.Is(err, errno) || !errors.As(err, &ae) || ae.Resource != res {
					t.Errorf("%s: %v, want an AllocError for the %s matching %v", name, err, res, errno)
				}
				if errno == unix.ENOMEM && !errors.Is(err, errAppAlloc) {
					t.Errorf("%s: %v does not carry the allocator's error", name, err)
				}
				a.checkFreed(t)
				if len(a.live) != 0 {
					t.Errorf("%s: %d buffers not given back", name, len(a.live))
				}
			}
			fail := newRecAlloc()
			fail.failOn = dv.ResSendQueue
			try("failing Alloc", fail, func() error { _, err := createQP(); return err }, unix.ENOMEM, dv.ResSendQueue)
			if len(fail.frees) != 0 {
				t.Error("Free called for a failed Alloc")
			}
			short := newRecAlloc()
			short.mangle = func(b []byte) []byte { return b[:len(b)-1] }
			try("short buffer", short, func() error { _, err := createQP(); return err }, unix.EINVAL, dv.ResSendQueue)
			skew := newRecAlloc()
			skew.mangle = func(b []byte) []byte { return b[8:] }
			try("misaligned buffer", skew, func() error { _, err := createQP(); return err }, unix.EINVAL, dv.ResSendQueue)
			if f.name == "udp" {
				// The receive ring fails after the send ring was taken:
				// that one is given back.
				rq := newRecAlloc()
				rq.failOn = dv.ResRecvQueue
				try("failing receive ring", rq, func() error { _, err := createQP(); return err }, unix.ENOMEM, dv.ResRecvQueue)
				if len(rq.frees) != 1 {
					t.Errorf("send ring freed %d times after the receive ring failed", len(rq.frees))
				}
				cqf := newRecAlloc()
				cqf.failOn = dv.ResCQ
				try("failing CQ", cqf, func() error { _, err := ctx.CreateCQ(8); return err }, unix.ENOMEM, dv.ResCQ)
			}
			// Half an allocator is refused; the zero one removes it.
			if _, err := dv.SetAllocator(ctx, dv.Allocator{Alloc: newRecAlloc().Allocator().Alloc}); !errors.Is(err, unix.EINVAL) {
				t.Errorf("Alloc without Free: %v", err)
			}
			if got, err := dv.SetAllocator(ctx, dv.Allocator{}); err != nil || got != 0 {
				t.Fatalf("removing: %v %v", got, err)
			}
			// Nothing leaked from the context: queues still come (from the
			// engine now), and close cleanly.
			qp, err := createQP()
			if err != nil {
				t.Fatal(err)
			}
			if err := qp.Destroy(); err != nil {
				t.Fatal(err)
			}
			ctx.Close()
			if _, err := dv.SetAllocator(ctx, newRecAlloc().Allocator()); !errors.Is(err, unix.EBADF) {
				t.Errorf("SetAllocator on a closed context: %v", err)
			}
		})
	}
}

// TestDVAllocatorCallsVerbs: the callbacks run without the engine's locks,
// so an allocator may take its memory from the context itself.
func TestDVAllocatorCallsVerbs(t *testing.T) {
	ctx := openFabric(t, "shm0", verbsio.OpenOptions{})
	var allocs, frees int
	_, err := dv.SetAllocator(ctx, dv.Allocator{
		Alloc: func(res dv.Resource, size, align int) ([]byte, error) { allocs++; return ctx.Alloc(size) },
		Free: func(res dv.Resource, buf []byte) {
			frees++
			if err := ctx.Free(buf); err != nil {
				t.Errorf("Free: %v", err)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := ctx.AllocPD()
	cq, _ := ctx.CreateCQ(8)
	done := make(chan error, 1)
	go func() {
		qp, err := pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: dvCap})
		if err == nil {
			err = qp.Destroy()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an allocator that calls into the context deadlocked")
	}
	if allocs != 1 || frees != 1 {
		t.Errorf("%d allocs, %d frees", allocs, frees)
	}
}

// TestDVAllocatorNoLeak: contexts with an allocator, connected, moving
// data, and closed, leave no memfd, mapping, fd or goroutine behind, and
// every buffer freed once.
func TestDVAllocatorNoLeak(t *testing.T) {
	for _, f := range fabrics {
		t.Run(f.name, func(t *testing.T) {
			cycle := func() {
				ctxA, ctxB := openFabric(t, f.dev, f.open), openFabric(t, f.dev, f.open)
				al := newRecAlloc()
				dv.SetAllocator(ctxA, al.Allocator())
				dv.SetAllocator(ctxB, al.Allocator())
				a, b := allocSide(t, ctxA, 16), allocSide(t, ctxB, 16)
				stop := b.Ctx.StartProgress()
				p := &verbstest.Pair{A: a, B: b, Cfg: verbstest.PairConfig{QPAcc: verbstest.AllAccess}}
				if err := p.Connect(); err != nil {
					t.Fatal(err)
				}
				a.QP.PostSend([]verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{a.MR.SGE(0, 64)},
					Remote: verbsio.RemoteAddr{Addr: b.MR.Addr(), RKey: b.MR.RKey()}}})
				verbstest.PollOne(t, a.CQ)
				stop()
				ctxA.Close()
				ctxB.Close()
				al.checkFreed(t)
			}
			cycle()
			before := count(t)
			for i := 0; i < 10; i++ {
				cycle()
			}
			if after, grew := settle(t, before); grew {
				t.Errorf("leaked: before %+v, after %+v", before, after)
			}
		})
	}
}

// TestDVCQRing reads completions straight from the CQ's ring, on both
// fabrics, for many laps of a small ring: the send side's completions
// (produced by this process) and the receive side's (on shm produced by
// the sender's engine), checking every field against what CQ.Poll would
// have said; the engine frees the slots read (no overrun), and Poll after
// direct reads delivers only what was not read.
func TestDVCQRing(t *testing.T) {
	for _, f := range fabrics {
		t.Run(f.name, func(t *testing.T) {
			ctxA, ctxB := openFabric(t, f.dev, f.open), openFabric(t, f.dev, f.open)
			a, b := allocSide(t, ctxA, 4), allocSide(t, ctxB, 4)
			if f.name == "udp" {
				stop := b.Ctx.StartProgress()
				t.Cleanup(stop)
			}
			p := &verbstest.Pair{A: a, B: b, Cfg: verbstest.PairConfig{QPAcc: verbstest.AllAccess}}
			if err := p.Connect(); err != nil {
				t.Fatal(err)
			}
			q, err := dv.InitQP(a.QP)
			if err != nil {
				t.Fatal(err)
			}
			ca, err := dv.InitCQ(a.CQ)
			if err != nil {
				t.Fatal(err)
			}
			cb, err := dv.InitCQ(b.CQ)
			if err != nil {
				t.Fatal(err)
			}
			if ca.Depth != 4 || ca.CQESize != dv.CQSlotSize {
				t.Fatalf("CQ ring: depth %d, %d-byte slots", ca.Depth, ca.CQESize)
			}
			for i := 0; i < 40; i++ { // ten laps of the ring
				if _, err := b.QP.PostRecv([]verbsio.RecvWR{{ID: uint64(1000 + i), SGL: []verbsio.SGE{b.MR.SGE(0, 256)}}}); err != nil {
					t.Fatal(err)
				}
				w, pos := q.Next()
				*w = dv.SendWQE{WRID: uint64(i), Opcode: uint8(verbsio.OpSendImm), Imm: uint32(0xbeef0000 + i), NumSGE: 1, Flags: uint8(verbsio.SendSignaled)}
				q.SGEs(pos, 1)[0] = a.MR.SGE(0, 100+i)
				if err := q.Ring(); err != nil {
					t.Fatal(err)
				}
				e := nextCQE(t, ca)
				if e.WRID != uint64(i) || e.Status != uint8(verbsio.StatusSuccess) || e.Opcode != uint8(verbsio.WCSend) ||
					e.QPN != a.QP.QPN() || e.WQEIndex != pos {
					t.Fatalf("send %d: %+v", i, e)
				}
				if ca.DBRec.Load() != ca.CI() || ca.CI() != uint32(i+1) {
					t.Fatalf("send %d: consumer index %d, doorbell record %d", i, ca.CI(), ca.DBRec.Load())
				}
				r := nextCQE(t, cb)
				var wc verbsio.WC
				r.WC(&wc)
				if wc.ID != uint64(1000+i) || wc.Status != verbsio.StatusSuccess || wc.Opcode != verbsio.WCRecv ||
					wc.ByteLen != uint32(100+i) || wc.Imm != uint32(0xbeef0000+i) || wc.Flags&verbsio.WCWithImm == 0 || wc.QPN != b.QP.QPN() {
					t.Fatalf("receive %d: %+v", i, wc)
				}
			}
			for _, c := range []*dv.CQ{ca, cb} {
				if err := c.Update(); err != nil || c.Overruns() != 0 {
					t.Fatalf("after 10 laps: %v, %d overruns", err, c.Overruns())
				}
			}
			// Read one of two directly, then Poll: only the other comes.
			for i := 0; i < 2; i++ {
				w, pos := q.Next()
				*w = dv.SendWQE{WRID: uint64(500 + i), Opcode: uint8(verbsio.OpRDMAWrite), NumSGE: 1, RAddr: b.MR.Addr(), RKey: b.MR.RKey(), Flags: uint8(verbsio.SendSignaled)}
				q.SGEs(pos, 1)[0] = a.MR.SGE(0, 8)
			}
			if err := q.Ring(); err != nil {
				t.Fatal(err)
			}
			if e := nextCQE(t, ca); e.WRID != 500 {
				t.Fatalf("direct: %+v", e)
			}
			if wc := verbstest.PollOne(t, a.CQ); wc.ID != 501 {
				t.Fatalf("Poll after a direct read: %+v, want 501", wc)
			}
			verbstest.ExpectEmpty(t, a.CQ)
			// And direct reads pick up after Poll.
			w, pos := q.Next()
			*w = dv.SendWQE{WRID: 502, Opcode: uint8(verbsio.OpRDMAWrite), NumSGE: 1, RAddr: b.MR.Addr(), RKey: b.MR.RKey(), Flags: uint8(verbsio.SendSignaled)}
			q.SGEs(pos, 1)[0] = a.MR.SGE(0, 8)
			if err := q.Ring(); err != nil {
				t.Fatal(err)
			}
			if e := nextCQE(t, ca); e.WRID != 502 {
				t.Fatalf("direct after Poll: %+v", e)
			}

			// An error completion read from the ring moves the QP to ERR
			// (once the engine has freed its slot), as polling it would.
			w, pos = q.Next()
			*w = dv.SendWQE{WRID: 9, Opcode: uint8(verbsio.OpRDMAWrite), NumSGE: 1, RAddr: b.MR.Addr(), RKey: b.MR.RKey() ^ 0x5a5a, Flags: uint8(verbsio.SendSignaled)}
			q.SGEs(pos, 1)[0] = a.MR.SGE(0, 8)
			q.Ring()
			if e := nextCQE(t, ca); e.WRID != 9 || e.Status != uint8(verbsio.StatusRemAccessErr) {
				t.Fatalf("bad rkey: %+v", e)
			}
			ca.Update()
			if at, _ := a.QP.Query(); at.State != verbsio.QPStateErr {
				t.Errorf("after an error completion read from the ring: QP in %s", at.State)
			}
		})
	}
}

// TestDVDoorbellRecord: the doorbell record drives execution; a record
// past the ring (ahead or behind) moves the QP to ERR with an error
// completion and touches nothing; the checked Doorbell refuses the same
// index and leaves the QP alone; malformed WQEs complete with errors.
func TestDVDoorbellRecord(t *testing.T) {
	for _, f := range fabrics {
		t.Run(f.name, func(t *testing.T) {
			pair := func() (*verbstest.Pair, *dv.QP, *dv.CQ) {
				p := verbstest.NewPair(t, verbstest.PairConfig{Device: f.dev, Open: f.open, Cap: verbsio.QPCap{MaxSendWR: 8, MaxSendSGE: 2, MaxInlineData: 16}, CQE: 32})
				q, err := dv.InitQP(p.A.QP)
				if err != nil {
					t.Fatal(err)
				}
				c, err := dv.InitCQ(p.A.CQ)
				if err != nil {
					t.Fatal(err)
				}
				return p, q, c
			}
			sum := func(b []byte) (s uint64) {
				for _, x := range b {
					s = s*31 + uint64(x)
				}
				return s
			}
			state := func(qp *verbsio.QP) verbsio.QPState { at, _ := qp.Query(); return at.State }
			write := func(p *verbstest.Pair, w *dv.SendWQE, q *dv.QP, pos uint32, id uint64) {
				*w = dv.SendWQE{WRID: id, Opcode: uint8(verbsio.OpRDMAWrite), NumSGE: 1, RAddr: p.B.MR.Addr(), RKey: p.B.MR.RKey(), Flags: uint8(verbsio.SendSignaled)}
				q.SGEs(pos, 1)[0] = p.A.MR.SGE(0, 64)
			}

			// The engine executes exactly up to the record.
			p, q, c := pair()
			for i := 0; i < 3; i++ {
				w, pos := q.Next()
				write(p, w, q, pos, uint64(i))
			}
			q.DBRec.Store(q.PI() - 1) // only the first two
			if err := q.RingDB(); err != nil {
				t.Fatal(err)
			}
			if q.Producer() != q.PI()-1 {
				t.Fatalf("engine at %d after a record of %d", q.Producer(), q.PI()-1)
			}
			nextCQE(t, c)
			nextCQE(t, c)
			if err := q.Ring(); err != nil { // and the third
				t.Fatal(err)
			}
			if e := nextCQE(t, c); e.WRID != 2 {
				t.Fatalf("third: %+v", e)
			}

			// The checked doorbell refuses past the ring and changes nothing.
			if err := q.Doorbell(q.PI() + q.Depth + 1); !errors.Is(err, unix.EINVAL) || state(p.A.QP) != verbsio.QPStateRTS {
				t.Fatalf("checked doorbell past the ring: %v, QP %s", err, state(p.A.QP))
			}

			// A record past the ring: the QP goes to ERR, one error
			// completion, the target untouched.
			for _, bad := range []struct {
				name string
				pi   func(q *dv.QP) uint32
			}{
				{"ahead", func(q *dv.QP) uint32 { return q.Producer() + q.Depth + 1 }},
				{"behind", func(q *dv.QP) uint32 { return q.Producer() - 1 }},
			} {
				p, q, c := pair()
				before := sum(p.B.Buf)
				w, pos := q.Next()
				write(p, w, q, pos, 0xdb)
				q.DBRec.Store(bad.pi(q))
				if err := q.RingDB(); !errors.Is(err, dv.ErrDoorbell) {
					t.Errorf("%s: RingDB %v, want ErrDoorbell", bad.name, err)
				}
				if s := state(p.A.QP); s != verbsio.QPStateErr {
					t.Errorf("%s: QP in %s, want ERR", bad.name, s)
				}
				e := nextCQE(t, c)
				if e.Status != uint8(verbsio.StatusLocQPOpErr) || e.VendorErr != dv.VendorErrDoorbell || e.WRID != 0xdb {
					t.Errorf("%s: completion %+v, want LOC_QP_OP_ERR, vendor error %#x", bad.name, e, dv.VendorErrDoorbell)
				}
				if sum(p.B.Buf) != before {
					t.Errorf("%s: the target changed", bad.name)
				}
				// Later WQEs flush.
				w, pos = q.Next()
				if w == nil {
					t.Fatalf("%s: no slot after the QP went to ERR", bad.name)
				}
				write(p, w, q, pos, 0xf1)
				if err := q.Ring(); err != nil {
					t.Fatal(err)
				}
				if e := nextCQE(t, c); e.Status != uint8(verbsio.StatusWRFlushErr) || e.WRID != 0xf1 {
					t.Errorf("%s: after ERR: %+v, want WR_FLUSH_ERR", bad.name, e)
				}
				if sum(p.B.Buf) != before {
					t.Errorf("%s: the target changed", bad.name)
				}
			}

			// A WQE the engine had accepted but not finished (a SEND
			// waiting for a receive) flushes before the doorbell's error.
			{
				p, q, c := pair()
				w, pos := q.Next()
				*w = dv.SendWQE{WRID: 0x5e, Opcode: uint8(verbsio.OpSend), NumSGE: 1, Flags: uint8(verbsio.SendSignaled)}
				q.SGEs(pos, 1)[0] = p.A.MR.SGE(0, 8)
				if err := q.Ring(); err != nil {
					t.Fatal(err)
				}
				// No receive is posted and the pair retries RNR for ever,
				// so the SEND holds its slot (shm: blocked at the head;
				// udp: on the wire, unacknowledged).
				if q.Free() != q.Depth-1 {
					t.Fatalf("a SEND with no receive posted left %d slots free of %d, want %d: it did not wait", q.Free(), q.Depth, q.Depth-1)
				}
				w, pos = q.Next()
				write(p, w, q, pos, 0xdb)
				q.DBRec.Store(q.Producer() + q.Depth)
				if err := q.RingDB(); !errors.Is(err, dv.ErrDoorbell) {
					t.Errorf("RingDB %v", err)
				}
				if e := nextCQE(t, c); e.WRID != 0x5e || e.Status != uint8(verbsio.StatusWRFlushErr) {
					t.Errorf("waiting SEND: %+v, want WR_FLUSH_ERR", e)
				}
				if e := nextCQE(t, c); e.WRID != 0xdb || e.Status != uint8(verbsio.StatusLocQPOpErr) {
					t.Errorf("doorbell: %+v, want LOC_QP_OP_ERR", e)
				}
			}

			// Malformed WQEs complete with an error status.
			for _, m := range []struct {
				name string
				set  func(p *verbstest.Pair, w *dv.SendWQE, q *dv.QP, pos uint32)
				want verbsio.Status
			}{
				{"bad opcode", func(p *verbstest.Pair, w *dv.SendWQE, q *dv.QP, pos uint32) { w.Opcode = 0x63 }, verbsio.StatusLocQPOpErr},
				{"too many SGEs", func(p *verbstest.Pair, w *dv.SendWQE, q *dv.QP, pos uint32) { w.NumSGE = 3 }, verbsio.StatusLocLenErr},
				{"too much inline", func(p *verbstest.Pair, w *dv.SendWQE, q *dv.QP, pos uint32) {
					w.Flags |= uint8(verbsio.SendInline)
					w.NumSGE, w.InlineLen = 0, 1000
				}, verbsio.StatusLocLenErr},
				{"bad lkey", func(p *verbstest.Pair, w *dv.SendWQE, q *dv.QP, pos uint32) { q.SGEs(pos, 1)[0].LKey ^= 0x777 }, verbsio.StatusLocProtErr},
				{"SGE out of bounds", func(p *verbstest.Pair, w *dv.SendWQE, q *dv.QP, pos uint32) { q.SGEs(pos, 1)[0].Addr += 1 << 20 }, verbsio.StatusLocProtErr},
			} {
				p, q, c := pair()
				before := sum(p.B.Buf)
				w, pos := q.Next()
				write(p, w, q, pos, 0xbad)
				m.set(p, w, q, pos)
				if err := q.Ring(); err != nil {
					t.Fatalf("%s: %v", m.name, err)
				}
				if e := nextCQE(t, c); e.Status != uint8(m.want) || e.WRID != 0xbad {
					t.Errorf("%s: %+v, want %s", m.name, e, m.want)
				}
				if sum(p.B.Buf) != before {
					t.Errorf("%s: the target changed", m.name)
				}
			}
		})
	}
}

// TestDVFastPathAllocs: writing WQEs in the ring, ringing the doorbell and
// reading the completion from the CQ's ring allocate nothing.
func TestDVFastPathAllocs(t *testing.T) {
	for _, f := range fabrics {
		t.Run(f.name, func(t *testing.T) {
			p := verbstest.NewPair(t, verbstest.PairConfig{Device: f.dev, Open: f.open})
			q, err := dv.InitQP(p.A.QP)
			if err != nil {
				t.Fatal(err)
			}
			c, err := dv.InitCQ(p.A.CQ)
			if err != nil {
				t.Fatal(err)
			}
			sge := p.A.MR.SGE(0, 64)
			run := func() {
				for i := 0; i < 4; i++ {
					w, pos := q.Next()
					*w = dv.SendWQE{WRID: uint64(i), Opcode: uint8(verbsio.OpRDMAWrite), NumSGE: 1, RAddr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}
					if i == 3 {
						w.Flags = uint8(verbsio.SendSignaled)
					}
					q.SGEs(pos, 1)[0] = sge
				}
				if err := q.Ring(); err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(5 * time.Second)
				for {
					if e := c.Next(); e != nil {
						if e.Status != uint8(verbsio.StatusSuccess) || e.WRID != 3 {
							t.Fatalf("completion %+v", *e)
						}
						return
					}
					if time.Now().After(deadline) {
						t.Fatal("no completion")
					}
				}
			}
			run()
			if a := testing.AllocsPerRun(500, run); a != 0 {
				t.Errorf("%.2f allocations per batch of 4 WQEs and its completion", a)
			}
			// An empty ring polled directly allocates nothing either.
			if a := testing.AllocsPerRun(1000, func() { c.Next() }); a != 0 {
				t.Errorf("empty ring: %.2f allocations", a)
			}
		})
	}
}

// TestDVAllocatorDestroysCQ: an allocator that destroys the CQ the QP is
// being created on (it runs without the engine's locks) makes CreateQP
// fail cleanly, its buffer given back, instead of attaching the QP to a
// dead CQ whose memory the QP's own segment may now reuse.
func TestDVAllocatorDestroysCQ(t *testing.T) {
	ctx := openFabric(t, "shm0", verbsio.OpenOptions{})
	pd, _ := ctx.AllocPD()
	cq, err := ctx.CreateCQ(8)
	if err != nil {
		t.Fatal(err)
	}
	var frees int
	if _, err := dv.SetAllocator(ctx, dv.Allocator{
		Alloc: func(res dv.Resource, size, align int) ([]byte, error) {
			cq.Destroy()
			return ctx.Alloc(size)
		},
		Free: func(res dv.Resource, buf []byte) { frees++; ctx.Free(buf) },
	}); err != nil {
		t.Fatal(err)
	}
	_, err = pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: dvCap})
	if !errors.Is(err, unix.EINVAL) {
		t.Fatalf("CreateQP on a CQ its allocator destroyed: %v, want EINVAL", err)
	}
	if frees != 1 {
		t.Errorf("%d buffers given back, want the 1 allocated", frees)
	}
}
