package session

import (
	"context"
	"testing"
	"time"

	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/verbsio"
)

func TestIDFIFO(t *testing.T) {
	f := newIDFIFO(3)
	if _, ok := f.pop(); ok {
		t.Fatal("pop from empty")
	}
	for i := uint64(1); i <= 3; i++ {
		f.push(i)
	}
	if id, _ := f.pop(); id != 1 {
		t.Fatalf("first out %d", id)
	}
	f.push(4) // wraps
	f.push(5) // over capacity: the oldest (2) is dropped
	var got []uint64
	for {
		id, ok := f.pop()
		if !ok {
			break
		}
		got = append(got, id)
	}
	if len(got) != 3 || got[0] != 3 || got[1] != 4 || got[2] != 5 {
		t.Errorf("order %v, want [3 4 5]", got)
	}
}

// pair opens a SEND session on both sides of shm0 and runs the two
// sides' bodies.
func pair(t *testing.T, spec Spec, server, client func(ctx context.Context, s *Session) error) {
	t.Helper()
	side := func(body func(context.Context, *Session) error) pairtest.Side {
		return func(ctx context.Context, dev *verbsio.Context, conn *oob.Conn) error {
			s, err := Open(ctx, dev, conn, spec)
			if err != nil {
				return err
			}
			err = body(ctx, s)
			if cerr := s.Close(ctx, err == nil); err == nil {
				err = cerr
			}
			return err
		}
	}
	srvErr, cliErr := pairtest.Run(t, 30*time.Second, side(server), side(client))
	if srvErr != nil || cliErr != nil {
		t.Fatalf("server: %v; client: %v", srvErr, cliErr)
	}
}

// waitWCs polls c until n completions arrived.
func waitWCs(ctx context.Context, s *Session, c *Completions, n int) ([]verbsio.WC, error) {
	w := s.NewWaiter(ctx, "completions", false)
	var got []verbsio.WC
	for len(got) < n {
		wc, err := c.Wait(w, "a completion")
		if err != nil {
			return got, err
		}
		got = append(got, wc)
	}
	return got, nil
}

// The burst path stages SENDs (one inline) and flushes once; the
// SEND_WITH_IMM that ends a stream goes through PostSend, in order; the
// completions PollCount counts carry the signaled requests' IDs in
// posting order; receives come back through RecvBurst.
func TestBurstPath(t *testing.T) {
	spec := Spec{Verb: Send, Type: verbsio.QPTypeRC, MaxSize: 256, TxDepth: 16, RxDepth: 4, Inline: 64,
		Link: Link{Params: oob.Params{Test: "burst"}}}
	sizes := []int{100, 40, 200, 256}
	pair(t, spec,
		func(ctx context.Context, s *Session) error {
			rx, err := NewReceiver(sendpath.Burst, s, s.QPs[0])
			if err != nil {
				return err
			}
			defer rx.Release()
			rc, _ := NewCompletions(sendpath.Burst, s, s.RecvCQ, nil) // receives: CQ.Poll
			for round := 0; round < 2; round++ {
				wcs, err := waitWCs(ctx, s, rc, 4)
				if err != nil {
					return err
				}
				for i, wc := range wcs {
					if int(wc.ByteLen) != sizes[i] || (i == 3) != (wc.Flags&verbsio.WCWithImm != 0) {
						t.Errorf("round %d receive %d: %d bytes, flags %v", round, i, wc.ByteLen, wc.Flags)
					}
					rx.RepostLater()
				}
				if err := rx.Flush(); err != nil {
					return err
				}
				if err := s.Barrier(ctx, 0); err != nil {
					return err
				}
			}
			return nil
		},
		func(ctx context.Context, s *Session) error {
			q := s.QPs[0]
			tx, err := NewSender(sendpath.Burst, s, q)
			if err != nil {
				return err
			}
			defer tx.Release()
			comp, err := NewCompletions(sendpath.Burst, s, s.SendCQ, tx)
			if err != nil {
				return err
			}
			defer comp.Release()
			for round := 0; round < 2; round++ {
				wrs := make([]verbsio.SendWR, 4)
				sges := make([]verbsio.SGE, 4)
				for i, n := range sizes {
					sges[i] = s.MR.SGE(q.SendOff, n)
					wrs[i] = verbsio.SendWR{ID: uint64(10*round + i + 1), Opcode: verbsio.OpSend, SGL: sges[i : i+1]}
				}
				wrs[1].Flags = verbsio.SendInline | verbsio.SendSignaled
				wrs[2].Flags = verbsio.SendSignaled
				wrs[3].Opcode, wrs[3].Imm, wrs[3].Flags = verbsio.OpSendImm, StopImm, verbsio.SendSignaled
				if err := tx.Post(wrs); err != nil {
					return err
				}
				wcs, err := waitWCs(ctx, s, comp, 3)
				if err != nil {
					return err
				}
				for i, want := range []uint64{2, 3, 4} {
					if wcs[i].ID != uint64(10*round)+want || wcs[i].Status != verbsio.StatusSuccess {
						t.Errorf("round %d completion %d: %+v, want ID %d", round, i, wcs[i], uint64(10*round)+want)
					}
				}
				if err := s.Barrier(ctx, 0); err != nil {
					return err
				}
			}
			return nil
		})
}

// The dv path writes WQEs into the ring (an inline RDMA WRITE, a
// gathered one, a SEND_WITH_IMM) and rings once; the CQ's ring returns
// the real completions.
func TestDVPath(t *testing.T) {
	spec := Spec{Verb: Send, Type: verbsio.QPTypeRC, MaxSize: 128, TxDepth: 8, RxDepth: 4, Inline: 64,
		Link: Link{Params: oob.Params{Test: "dv"}}}
	pair(t, spec,
		func(ctx context.Context, s *Session) error {
			rc, _ := NewCompletions(sendpath.DV, s, s.RecvCQ, nil)
			wcs, err := waitWCs(ctx, s, rc, 1)
			if err != nil {
				return err
			}
			q := s.QPs[0]
			if wcs[0].Imm != 77 || wcs[0].ByteLen != 8 || string(s.Buf[q.RecvOff:q.RecvOff+8]) != "gathered" {
				t.Errorf("receive %+v, buffer %q", wcs[0], s.Buf[q.RecvOff:q.RecvOff+8])
			}
			if got := string(s.Buf[q.RecvOff+64 : q.RecvOff+70]); got != "inline" {
				t.Errorf("the inline WRITE left %q", got)
			}
			return s.Barrier(ctx, 0)
		},
		func(ctx context.Context, s *Session) error {
			q := s.QPs[0]
			copy(s.Buf[q.SendOff:], "gathered")
			copy(s.Buf[q.SendOff+64:], "inline")
			tx, err := NewSender(sendpath.DV, s, q)
			if err != nil {
				return err
			}
			comp, err := NewCompletions(sendpath.DV, s, s.SendCQ, tx)
			if err != nil {
				return err
			}
			sg := []verbsio.SGE{s.MR.SGE(q.SendOff+64, 6), s.MR.SGE(q.SendOff, 8)}
			wrs := []verbsio.SendWR{
				{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendInline | verbsio.SendSignaled, SGL: sg[:1],
					Remote: verbsio.RemoteAddr{Addr: q.Remote.Addr + 64, RKey: q.Remote.RKey}},
				{ID: 2, Opcode: verbsio.OpRDMAWrite, SGL: sg[1:], Remote: q.Remote},
				{ID: 3, Opcode: verbsio.OpSendImm, Imm: 77, Flags: verbsio.SendSignaled, SGL: sg[1:]},
			}
			// The inline payload is copied at post time: changing the
			// buffer afterwards must not matter.
			if err := tx.Post(wrs); err != nil {
				return err
			}
			copy(s.Buf[q.SendOff+64:], "XXXXXX")
			wcs, err := waitWCs(ctx, s, comp, 2)
			if err != nil {
				return err
			}
			if wcs[0].ID != 1 || wcs[1].ID != 3 {
				t.Errorf("completions %+v", wcs)
			}
			return s.Barrier(ctx, 0)
		})
}

// The dm path's buffers are device memory, zero-based: the key exchange
// carries offsets, bytes are reached with 4-byte copies, and the peer's
// RDMA WRITE lands there.
func TestDeviceMemorySession(t *testing.T) {
	spec := Spec{Verb: Write, Type: verbsio.QPTypeRC, MaxSize: 64, TxDepth: 2, Path: sendpath.DM,
		Link: Link{Params: oob.Params{Test: "dm"}}}
	pair(t, spec,
		func(ctx context.Context, s *Session) error {
			q := s.QPs[0]
			if s.DM == nil || s.Buf != nil || s.MR.Addr() != 0 || s.Local[0].VAddr != uint64(q.RecvOff) {
				t.Errorf("DM %v, Buf %v, MR addr %#x, announced %#x (receive region at %#x)", s.DM, s.Buf != nil, s.MR.Addr(), s.Local[0].VAddr, q.RecvOff)
			}
			if err := s.Barrier(ctx, 0); err != nil { // the client writes
				return err
			}
			if err := s.Barrier(ctx, 0); err != nil { // ... and is done
				return err
			}
			for i, want := range []byte("dm!") {
				if b, err := s.PeekByte(q.RecvOff + 63 + 3*i); err != nil || b != want {
					t.Errorf("byte %d of the write: %q, %v; want %q", i, b, err, want)
				}
			}
			return nil
		},
		func(ctx context.Context, s *Session) error {
			q := s.QPs[0]
			// A byte at any offset goes through the 4-byte word holding it,
			// whose other bytes become 0.
			if err := s.StoreByte(q.SendOff+62, 'x'); err != nil {
				return err
			}
			for i, b := range []byte("dm!") {
				off := q.SendOff + 63 + 3*i
				if err := s.StoreByte(off, b); err != nil {
					return err
				}
				if got, _ := s.PeekByte(off); got != b {
					t.Errorf("stored %q at %d, read %q", b, off, got)
				}
			}
			if got, _ := s.PeekByte(q.SendOff + 62); got != 0 {
				t.Errorf("the word's other bytes: %q, want 0", got)
			}
			// They are the dm path's ping-pong: no allocation.
			if a := testing.AllocsPerRun(100, func() {
				s.StoreByte(q.SendOff+63, 'd')
				s.PeekByte(q.SendOff + 63)
			}); a != 0 {
				t.Errorf("StoreByte and PeekByte: %v allocations", a)
			}
			if err := s.Barrier(ctx, 0); err != nil {
				return err
			}
			tx, _ := NewSender(sendpath.DM, s, q)
			comp, _ := NewCompletions(sendpath.DM, s, s.SendCQ, tx)
			sge := []verbsio.SGE{s.MR.SGE(q.SendOff+60, 12)}
			if err := tx.Post([]verbsio.SendWR{{ID: 5, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: sge,
				Remote: verbsio.RemoteAddr{Addr: q.Remote.Addr + 60, RKey: q.Remote.RKey}}}); err != nil {
				return err
			}
			if _, err := waitWCs(ctx, s, comp, 1); err != nil {
				return err
			}
			return s.Barrier(ctx, 0)
		})
}

// Posting, polling and reposting by every path allocate nothing: the
// client posts and waits for its completion, the server waits for the
// receive and reposts it, AllocsPerRun times each (plus its warm-up run).
func TestNoAllocations(t *testing.T) {
	spec := Spec{Verb: Send, Type: verbsio.QPTypeRC, MaxSize: 64, TxDepth: 8, RxDepth: 16, Inline: 64,
		Link: Link{Params: oob.Params{Test: "allocs"}}}
	const runs = 100
	for _, p := range []sendpath.Path{sendpath.Generic, sendpath.Burst, sendpath.Inline, sendpath.DV} {
		t.Run(p.String(), func(t *testing.T) {
			check := func(side string, allocs float64, failed error) error {
				if failed != nil {
					return failed
				}
				if allocs != 0 {
					t.Errorf("%s: %v allocations per run", side, allocs)
				}
				return nil
			}
			pair(t, spec,
				func(ctx context.Context, s *Session) error {
					q := s.QPs[0]
					rx, err := NewReceiver(p, s, q)
					if err != nil {
						return err
					}
					defer rx.Release()
					rc, err := NewCompletions(p, s, s.RecvCQ, nil)
					if err != nil {
						return err
					}
					w := s.NewWaiter(ctx, "a receive", false)
					var failed error
					allocs := testing.AllocsPerRun(runs, func() {
						if _, err := rc.Wait(w, "a receive"); err != nil && failed == nil {
							failed = err
						}
						rx.RepostLater()
						if err := rx.Flush(); err != nil && failed == nil {
							failed = err
						}
					})
					return check("receiver", allocs, failed)
				},
				func(ctx context.Context, s *Session) error {
					q := s.QPs[0]
					tx, err := NewSender(p, s, q)
					if err != nil {
						return err
					}
					defer tx.Release()
					comp, err := NewCompletions(p, s, s.SendCQ, tx)
					if err != nil {
						return err
					}
					defer comp.Release()
					sge := []verbsio.SGE{s.MR.SGE(q.SendOff, 64)}
					wr := []verbsio.SendWR{{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: sge}}
					if p == sendpath.Inline {
						wr[0].Flags |= verbsio.SendInline
					}
					w := s.NewWaiter(ctx, "a completion", false)
					var failed error
					allocs := testing.AllocsPerRun(runs, func() {
						if err := tx.Post(wr); err != nil && failed == nil {
							failed = err
						}
						if _, err := comp.Wait(w, "a SEND"); err != nil && failed == nil {
							failed = err
						}
					})
					return check("sender", allocs, failed)
				})
		})
	}
}
