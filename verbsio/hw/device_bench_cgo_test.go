//go:build linux && cgo && ibverbs

package hw

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/verbsio"
)

// The benchmarks in this file split a latency iteration on a real device
// into its parts (they skip without one, like the device tests): the
// clock read every iteration stamps, an empty poll (the crossing and the
// provider's look at the CQ), and a signaled RDMA WRITE posted and polled
// to its completion over a loopback RC pair.

var benchSink int64

func BenchmarkDeviceClock(b *testing.B) {
	b.Run("src=Now", func(b *testing.B) {
		for b.Loop() {
			benchSink += clock.Now()
		}
	})
	tsc, err := clock.CalibrateTSC(0)
	if err != nil {
		b.Logf("no TSC: %v", err)
		return
	}
	b.Run("src=tsc", func(b *testing.B) {
		for b.Loop() {
			benchSink += tsc.Now()
		}
	})
}

// benchPair sets up a loopback RC pair on the device under test with a
// registered buffer.
func benchPair(b *testing.B) (ctx *verbsio.Context, cq *verbsio.CQ, a *verbsio.QP, mr *verbsio.MR) {
	ctx, port := testDevice(b)
	pd, err := ctx.AllocPD()
	if err != nil {
		b.Fatal(err)
	}
	if cq, err = ctx.CreateCQ(64); err != nil {
		b.Fatal(err)
	}
	a, _ = rcPair(b, ctx, pd, cq, port)
	buf, err := ctx.Alloc(16 << 10)
	if err != nil {
		b.Fatal(err)
	}
	if mr, err = pd.RegMR(buf, verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite|verbsio.AccessRemoteRead); err != nil {
		b.Fatal(err)
	}
	return ctx, cq, a, mr
}

func BenchmarkDevicePollEmpty(b *testing.B) {
	_, cq, _, _ := benchPair(b)
	for _, n := range []int{1, 16} {
		b.Run("wcs="+strconv.Itoa(n), func(b *testing.B) {
			wcs := make([]verbsio.WC, n)
			for b.Loop() {
				if got, err := cq.Poll(wcs); got != 0 || err != nil {
					b.Fatalf("Poll = %d, %v", got, err)
				}
			}
		})
	}
}

// BenchmarkDeviceWriteCompletion posts one signaled 2-byte RDMA WRITE
// and polls until its completion, as a latency iteration does; polls
// reports the polls per completion.
func BenchmarkDeviceWriteCompletion(b *testing.B) {
	_, cq, a, mr := benchPair(b)
	for _, inline := range []bool{false, true} {
		b.Run("inline="+strconv.FormatBool(inline), func(b *testing.B) {
			flags := verbsio.SendSignaled
			if inline {
				if a.Cap().MaxInlineData < 2 {
					b.Skip("no inline data")
				}
				flags |= verbsio.SendInline
			}
			wr := []verbsio.SendWR{{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: flags, SGL: []verbsio.SGE{mr.SGE(0, 2)},
				Remote: verbsio.RemoteAddr{Addr: mr.Addr() + 8192, RKey: mr.RKey()}}}
			wcs := make([]verbsio.WC, 1)
			polls := 0
			calls := runtime.NumCgoCall()
			for b.Loop() {
				if _, err := a.PostSend(wr); err != nil {
					b.Fatal(err)
				}
				for {
					polls++
					n, err := cq.Poll(wcs)
					if err != nil {
						b.Fatal(err)
					}
					if n == 1 {
						if wcs[0].Status != verbsio.StatusSuccess {
							b.Fatalf("completion %s", wcs[0].Status)
						}
						break
					}
				}
			}
			b.ReportMetric(float64(polls)/float64(b.N), "polls/op")
			b.ReportMetric(float64(runtime.NumCgoCall()-calls)/float64(b.N), "crossings/op")
		})
	}
}

// BenchmarkDeviceWriteTurns is write_lat's iteration through the
// write_turn family, against itself: the pair's first QP writes a 2-byte
// marker from the buffer's byte 1 into its byte 8193, where the next turn
// waits for it (rxe completes a WRITE while it is posted, so it is there
// at once), and the turn takes the completion in C. turns=1 crosses once
// per iteration, as PostSend's poll does; turns=64 is what the latency
// loop asks for. crossings/iter counts runtime.NumCgoCall.
func BenchmarkDeviceWriteTurns(b *testing.B) {
	ctx, _, a, mr := benchPair(b)
	f, st := ctx.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilyWriteTurn, Version: 1, Object: a})
	if st != verbsio.IntfOK {
		b.Fatalf("write_turn: %s", st)
	}
	turn := f.(verbsio.WriteTurn)
	defer turn.Release()
	buf := mr.Buf()
	wr := []verbsio.SendWR{{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{mr.SGE(0, 2)},
		Remote: verbsio.RemoteAddr{Addr: mr.Addr() + 8192, RKey: mr.RKey()}}}
	for _, per := range []int{1, 64} {
		b.Run("turns="+strconv.Itoa(per), func(b *testing.B) {
			stamps := make([]int64, per)
			buf[1], buf[8193] = 0, 0
			iters := 0
			calls := runtime.NumCgoCall()
			for b.Loop() {
				// Turn k waits for the marker turn k-1 wrote; the
				// first for the one already there.
				n, owed, err := turn.Turns(&buf[8193], buf[1], 1<<20, &buf[1], buf[1]+1, wr, stamps)
				if err != nil || owed || n != per {
					b.Fatalf("Turns = %d, %v, %v", n, owed, err)
				}
				iters += n
			}
			b.ReportMetric(float64(runtime.NumCgoCall()-calls)/float64(iters), "crossings/iter")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iters), "ns/iter")
		})
	}
}
