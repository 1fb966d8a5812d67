package soft_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// The send paths compared, each against generic posting measured in the
// same run, in alternating rounds (medians reported):
//
//	BenchmarkMessageRate  64-byte SENDs: generic (one PostSend per message,
//	                      perftest's -l 1), burst (qp_burst: stage 64,
//	                      flush once) and dv (WQEs written into the ring,
//	                      one doorbell per 64)
//	BenchmarkInline       8-byte WRITE post-to-completion time, inline vs
//	                      gathered from a registered region
//	BenchmarkDeviceMemory 64-byte WRITE post-to-completion time from
//	                      device memory vs host memory
//	BenchmarkPacing       achieved rate of a paced stream vs the rate asked
//
// Both contexts live in this process and this goroutine drives both (no
// background progress), so the figures are the engine's own cost per
// message, the receiver's included.

func fabricPair(b *testing.B, fabric string, cfg verbstest.PairConfig) *verbstest.Pair {
	cfg.NoProgress = true
	switch fabric {
	case "shm":
		cfg.Device = "shm0"
	case "udp":
		cfg.Device = "udp_lo"
		cfg.Open = verbsio.OpenOptions{UDPPort: -1}
	}
	return verbstest.NewPair(b, cfg)
}

// drain polls both sides until want completions arrived on cq.
func drain(b *testing.B, p *verbstest.Pair, cq *verbsio.CQ, wcs []verbsio.WC, want int) {
	got := 0
	deadline := time.Now().Add(10 * time.Second)
	for got < want {
		n, err := cq.Poll(wcs)
		if err != nil {
			b.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != verbsio.StatusSuccess {
				b.Fatalf("completion %s", wc.Status)
			}
		}
		got += n
		if cq == p.A.CQ {
			p.B.CQ.Poll(wcs[n:n])
		} else {
			p.A.CQ.Poll(wcs[n:n])
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d completions", got, want)
		}
	}
}

// alternate runs ref and path in rounds and reports the path's median
// per-op time and its ratio to the reference's.
func alternate(b *testing.B, ops int, ref, path func(), unit string) {
	alternateAs(b, ops, ref, path, unit, "generic")
}

// alternateAs is alternate with the reference named refName in the
// metrics (refName-ns/unit, x-refName).
func alternateAs(b *testing.B, ops int, ref, path func(), unit, refName string) {
	rounds := max(b.N/ops, 8)
	var rt, pt []time.Duration
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		ref()
		t1 := time.Now()
		path()
		rt = append(rt, t1.Sub(t0))
		pt = append(pt, time.Since(t1))
	}
	b.StopTimer()
	slices.Sort(rt)
	slices.Sort(pt)
	r, p := rt[len(rt)/2]/time.Duration(ops), pt[len(pt)/2]/time.Duration(ops)
	b.ReportMetric(float64(p.Nanoseconds()), "ns/"+unit)
	b.ReportMetric(float64(r.Nanoseconds()), refName+"-ns/"+unit)
	b.ReportMetric(float64(r)/float64(p), "x-"+refName)
}

func BenchmarkMessageRate(b *testing.B) {
	const batch = 64
	for _, fabric := range []string{"shm", "udp"} {
		for _, path := range []string{"generic", "burst", "dv"} {
			b.Run(fmt.Sprintf("fabric=%s/path=%s/size=64", fabric, path), func(b *testing.B) {
				p := fabricPair(b, fabric, verbstest.PairConfig{CQE: 4096, Cap: verbsio.QPCap{MaxSendWR: 256, MaxRecvWR: 4096}})
				recvs := make([]verbsio.SGE, batch)
				for i := range recvs {
					recvs[i] = p.B.MR.SGE(i*64, 64)
				}
				rb, _ := p.B.Ctx.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilyQPBurst, Object: p.B.QP})
				recvBurst := rb.(verbsio.QPBurst)
				wcs := make([]verbsio.WC, 2*batch)
				sge := p.A.MR.SGE(0, 64)
				wr := []verbsio.SendWR{{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{sge}}}
				receive := func() {
					recvBurst.RecvBurst(recvs)
				}
				finish := func() {
					drain(b, p, p.A.CQ, wcs, 1)
					drain(b, p, p.B.CQ, wcs, batch)
				}
				generic := func() {
					receive()
					for i := 0; i < batch; i++ {
						wr[0].Flags = 0
						if i == batch-1 {
							wr[0].Flags = verbsio.SendSignaled
						}
						if _, err := p.A.QP.PostSend(wr); err != nil {
							b.Fatal(err)
						}
					}
					finish()
				}
				var run func()
				switch path {
				case "generic":
					run = generic
				case "burst":
					f, st := p.A.Ctx.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilyQPBurst, Object: p.A.QP})
					if st != verbsio.IntfOK {
						b.Fatal(st)
					}
					burst := f.(verbsio.QPBurst)
					run = func() {
						receive()
						for i := 0; i < batch-1; i++ {
							burst.SendPending(sge.Addr, sge.Length, sge.LKey, 0)
						}
						burst.SendPending(sge.Addr, sge.Length, sge.LKey, verbsio.BurstSignaled)
						burst.SendFlush()
						finish()
					}
				case "dv":
					q, err := dv.InitQP(p.A.QP)
					if err != nil {
						b.Fatal(err)
					}
					run = func() {
						receive()
						for i := 0; i < batch; i++ {
							w, pos := q.Next()
							*w = dv.SendWQE{Opcode: uint8(verbsio.OpSend), NumSGE: 1}
							if i == batch-1 {
								w.Flags = uint8(verbsio.SendSignaled)
							}
							q.SGEs(pos, 1)[0] = sge
						}
						if err := q.Ring(); err != nil {
							b.Fatal(err)
						}
						finish()
					}
				}
				generic()
				run()
				alternate(b, batch, generic, run, "msg")
			})
		}
	}
}

// postWait posts wr and waits for its completion.
func postWait(b *testing.B, p *verbstest.Pair, wr []verbsio.SendWR, wcs []verbsio.WC) {
	if _, err := p.A.QP.PostSend(wr); err != nil {
		b.Fatal(err)
	}
	drain(b, p, p.A.CQ, wcs, 1)
}

func BenchmarkInline(b *testing.B) {
	for _, fabric := range []string{"shm", "udp"} {
		b.Run(fmt.Sprintf("fabric=%s/size=8", fabric), func(b *testing.B) {
			p := fabricPair(b, fabric, verbstest.PairConfig{Cap: verbsio.QPCap{MaxInlineData: 64}})
			remote := verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}
			gen := []verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 8)}, Remote: remote}}
			inl := []verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled | verbsio.SendInline, SGL: []verbsio.SGE{p.A.MR.SGE(0, 8)}, Remote: remote}}
			wcs := make([]verbsio.WC, 4)
			const ops = 200
			alternate(b, ops, func() {
				for i := 0; i < ops; i++ {
					postWait(b, p, gen, wcs)
				}
			}, func() {
				for i := 0; i < ops; i++ {
					postWait(b, p, inl, wcs)
				}
			}, "op")
		})
	}
}

func BenchmarkDeviceMemory(b *testing.B) {
	for _, fabric := range []string{"shm", "udp"} {
		b.Run(fmt.Sprintf("fabric=%s/size=64", fabric), func(b *testing.B) {
			p := fabricPair(b, fabric, verbstest.PairConfig{})
			d, err := p.A.Ctx.AllocDM(4096, 6)
			if err != nil {
				b.Fatal(err)
			}
			dmr, err := p.A.PD.RegDMMR(d, 0, 4096, verbsio.AccessLocalWrite)
			if err != nil {
				b.Fatal(err)
			}
			remote := verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}
			host := []verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)}, Remote: remote}}
			dev := []verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{dmr.SGE(0, 64)}, Remote: remote}}
			wcs := make([]verbsio.WC, 4)
			const ops = 200
			alternate(b, ops, func() {
				for i := 0; i < ops; i++ {
					postWait(b, p, host, wcs)
				}
			}, func() {
				for i := 0; i < ops; i++ {
					postWait(b, p, dev, wcs)
				}
			}, "op")
		})
	}
}

// BenchmarkPacing paces 4 KiB WRITEs, one outstanding, through a bucket
// one packet deep (rperf pacing's default) for about 200 ms per rate, and
// reports the achieved rate and its error.
func BenchmarkPacing(b *testing.B) {
	for _, fabric := range []string{"shm", "udp"} {
		for _, mbps := range []uint32{10, 100, 1000} {
			b.Run(fmt.Sprintf("fabric=%s/rate=%dMbps", fabric, mbps), func(b *testing.B) {
				p := fabricPair(b, fabric, verbstest.PairConfig{BufSize: 1 << 16, Cap: verbsio.QPCap{MaxSendWR: 256}})
				size := 4096
				n := int(uint64(mbps) * 1e6 / 8 / uint64(size) / 5)
				attr := verbsio.QPAttr{State: verbsio.QPStateRTS, RateLimit: mbps * 1000, MaxBurstSize: uint32(size), TypicalPktSize: uint16(size)}
				if err := p.A.QP.Modify(&attr, verbsio.QPAttrState|verbsio.QPAttrRateLimit); err != nil {
					b.Fatal(err)
				}
				wr := []verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, size)},
					Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}}
				wcs := make([]verbsio.WC, 16)
				// The first message empties the bucket; the clock starts
				// when the second, paced, is done, so that n messages
				// are n intervals.
				postWait(b, p, wr, wcs)
				postWait(b, p, wr, wcs)
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < n; i++ {
					postWait(b, p, wr, wcs)
				}
				el := time.Since(start)
				b.StopTimer()
				achieved := float64(n*size*8) / el.Seconds() / 1e6
				b.ReportMetric(achieved, "Mbps")
				b.ReportMetric(100*(achieved-float64(mbps))/float64(mbps), "error%")
			})
		}
	}
}

// BenchmarkTSO streams 64 KiB RDMA WRITEs over udp_lo, 16 outstanding,
// on a QP whose messages the kernel cuts into path-MTU packets (UDP GSO:
// one system call per run of packets) and on one whose messages the
// engine cuts (one datagram each), in alternating rounds. Metrics: ns
// per message for each, and tso's bandwidth over the engine-cut one's
// (x-generic).
func BenchmarkTSO(b *testing.B) {
	const size, window, ops = 64 << 10, 16, 64
	stream := func(seg verbsio.Segmenter) func() {
		p := fabricPair(b, "udp", verbstest.PairConfig{BufSize: size * window, CQE: 1024,
			Cap: verbsio.QPCap{MaxSendWR: 2 * window}, Segmenter: seg})
		wcs := make([]verbsio.WC, window)
		wr := make([]verbsio.SendWR, window)
		for i := range wr {
			wr[i] = verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(i*size, size)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + uint64(i*size), RKey: p.B.MR.RKey()}}
		}
		return func() {
			for done := 0; done < ops; done += window {
				if _, err := p.A.QP.PostSend(wr); err != nil {
					b.Fatal(err)
				}
				drain(b, p, p.A.CQ, wcs, window)
			}
		}
	}
	generic, tso := stream(verbsio.SegmentEngine), stream(verbsio.SegmentKernel)
	generic()
	tso()
	alternate(b, ops, generic, tso, "msg")
}
