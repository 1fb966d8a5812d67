package soft_test

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// fuzzSide owns two buffers of three pages each, shared (Alloc) and
// ordinary, with a region registered over the middle page only. The first
// and last pages are guards no request may change.
type fuzzSide struct {
	*verbstest.Side
	bufs [2][]byte
	mrs  [2]*verbsio.MR
}

const page = 4096

var (
	fuzzOnce sync.Once
	fuzzA    *fuzzSide
	fuzzB    *fuzzSide
	fuzzErr  error
)

func newFuzzSide(cfg verbstest.PairConfig) (*fuzzSide, error) {
	s := &fuzzSide{}
	var err error
	s.Side, err = newSideNoCleanup(cfg)
	if err != nil {
		return nil, err
	}
	if s.bufs[0], err = s.Ctx.Alloc(3 * page); err != nil {
		return nil, err
	}
	s.bufs[1] = make([]byte, 3*page)
	for i := range s.bufs {
		access := verbstest.AllAccess
		if i == 1 {
			access &^= verbsio.AccessRemoteAtomic
		}
		if s.mrs[i], err = s.PD.RegMR(s.bufs[i][page:2*page], access); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func newSideNoCleanup(cfg verbstest.PairConfig) (*verbstest.Side, error) {
	var s *verbstest.Side
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = r.(error)
			}
		}()
		s = verbstest.NewSide(noCleanup{}, cfg)
	}()
	return s, err
}

// noCleanup lets the fuzz fixture outlive a single input.
type noCleanup struct{ testing.TB }

func (noCleanup) Helper()                   {}
func (noCleanup) Cleanup(func())            {}
func (noCleanup) Fatalf(f string, a ...any) { panic(errorf(f, a...)) }

type fuzzError string

func (e fuzzError) Error() string { return string(e) }
func errorf(f string, a ...any) error {
	return fuzzError(f)
}

func guards(s *fuzzSide) [4][]byte {
	return [4][]byte{s.bufs[0][:page], s.bufs[0][2*page:], s.bufs[1][:page], s.bufs[1][2*page:]}
}

func fillGuards(s *fuzzSide) {
	for _, g := range guards(s) {
		for i := range g {
			g[i] = 0xA5
		}
	}
}

var guardWant = bytes.Repeat([]byte{0xA5}, page)

func reconnect(a, b *fuzzSide) error {
	for _, s := range []*fuzzSide{a, b} {
		if err := s.QP.Modify(&verbsio.QPAttr{State: verbsio.QPStateReset}, verbsio.QPAttrState); err != nil {
			return err
		}
	}
	o := verbsio.ConnectOptions{Access: verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead | verbsio.AccessRemoteAtomic,
		ZeroRNRRetry: true, MinRNRTimer: 1, Timeout: 1, RetryCnt: 1}
	if err := a.QP.Connect(a.Endpoint(), b.Endpoint(), o); err != nil {
		return err
	}
	return b.QP.Connect(b.Endpoint(), a.Endpoint(), o)
}

// FuzzPostSend posts random work requests (opcodes, keys, addresses,
// lengths, SGE lists, inline flags) between two contexts and checks that
// nothing panics and that no byte outside the registered pages changes.
func FuzzPostSend(f *testing.F) {
	f.Add([]byte{0, 2, 1, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{4, 2, 2, 1, 0xff, 0xff, 0, 1, 1, 0, 0x10, 0, 0, 0, 8, 0})
	f.Add([]byte{5, 2, 1, 0, 0, 8, 8, 0, 0, 0, 0x0f, 0xf8, 0, 0, 8, 0})
	f.Add([]byte{2, 10, 1, 2, 0x12, 0x34, 0, 0x40, 3, 2, 0x7f, 0xff, 0xff, 0xf0, 0xff, 0xff})
	f.Add(bytes.Repeat([]byte{0, 2, 1, 0, 0, 0, 0xf0, 0x0f, 0, 0, 0, 0x0f, 0xff, 0x10}, 8))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzOnce.Do(func() {
			cfg := verbstest.PairConfig{Device: "shm0", Cap: verbsio.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxInlineData: 64}, CQE: 1024}
			cfg.Type = verbsio.QPTypeRC
			if fuzzA, fuzzErr = newFuzzSide(cfg); fuzzErr == nil {
				fuzzB, fuzzErr = newFuzzSide(cfg)
			}
		})
		if fuzzErr != nil {
			t.Fatal(fuzzErr)
		}
		a, b := fuzzA, fuzzB
		fillGuards(a)
		fillGuards(b)
		if err := reconnect(a, b); err != nil {
			t.Fatal(err)
		}
		// Receives for SENDs: some good, some with wild keys.
		for i := 0; i < 4; i++ {
			key := b.mrs[i%2].LKey()
			if i == 3 {
				key ^= 0x5a5a
			}
			b.QP.PostRecv([]verbsio.RecvWR{{ID: uint64(i), SGL: []verbsio.SGE{{Addr: b.mrs[i%2].Addr() + uint64(i*64), Length: 512, LKey: key}}}})
		}
		r := fuzzReader{data: data}
		var sges [8]verbsio.SGE
		wrs := make([]verbsio.SendWR, 0, 8)
		for r.more() && len(wrs) < 8 {
			op := verbsio.Opcode(r.u8() % 8)
			flags := verbsio.SendFlags(r.u8()) & (verbsio.SendSignaled | verbsio.SendInline)
			n := int(r.u8() % 6)
			if n > len(sges) {
				n = len(sges)
			}
			wr := verbsio.SendWR{ID: uint64(len(wrs)), Opcode: op, Flags: flags}
			for i := 0; i < n; i++ {
				sel := r.u8()
				off := int64(int16(r.u16()))
				ln := uint32(r.u16())
				var mr *verbsio.MR
				switch sel % 4 {
				case 0, 1:
					mr = a.mrs[sel%2]
				case 2:
					mr = b.mrs[0] // a key of the other context
				}
				if mr != nil {
					sges[i] = verbsio.SGE{Addr: uint64(int64(mr.Addr()) + off), Length: ln, LKey: mr.LKey()}
				} else {
					sges[i] = verbsio.SGE{Addr: uint64(off) << 12, Length: ln, LKey: uint32(r.u16())}
				}
			}
			wr.SGL = append([]verbsio.SGE(nil), sges[:n]...)
			sel := r.u8()
			roff := int64(int32(r.u32()))
			var key uint32
			var base uint64
			switch sel % 4 {
			case 0, 1:
				key, base = b.mrs[sel%2].RKey(), b.mrs[sel%2].Addr()
			case 2:
				key, base = a.mrs[0].RKey(), a.mrs[0].Addr()
			default:
				key, base = r.u32(), uint64(r.u32())<<12
			}
			wr.Remote = verbsio.RemoteAddr{Addr: uint64(int64(base) + roff), RKey: key}
			wr.Atomic = verbsio.AtomicArgs{CompareAdd: uint64(r.u16()), Swap: uint64(r.u16())}
			wrs = append(wrs, wr)
		}
		a.QP.PostSend(wrs)
		// Drain: requests either complete, fail, or wait (RNR/no
		// response); everything ends within the QP's tiny timeouts.
		wcs := make([]verbsio.WC, 64)
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			n, errA := a.CQ.Poll(wcs)
			m, errB := b.CQ.Poll(wcs)
			if errA != nil || errB != nil {
				t.Fatalf("poll: %v %v", errA, errB)
			}
			if n == 0 && m == 0 {
				if err := a.CQ.Wait(2 * time.Millisecond); err != nil {
					break
				}
			}
		}
		for _, s := range []*fuzzSide{a, b} {
			for i, g := range guards(s) {
				if !bytes.Equal(g, guardWant) {
					t.Fatalf("guard page %d of a context changed: a request wrote outside its registered region", i)
				}
			}
		}
	})
}

type fuzzReader struct {
	data []byte
	off  int
}

func (r *fuzzReader) more() bool { return r.off < len(r.data) }

func (r *fuzzReader) u8() byte {
	if r.off >= len(r.data) {
		return 0
	}
	r.off++
	return r.data[r.off-1]
}

func (r *fuzzReader) u16() uint16 { return uint16(r.u8())<<8 | uint16(r.u8()) }
func (r *fuzzReader) u32() uint32 {
	var b [4]byte
	for i := range b {
		b[i] = r.u8()
	}
	return binary.BigEndian.Uint32(b[:])
}
