package soft_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// BenchmarkWritePingPong measures a perftest write_lat round trip between
// two processes (each side writes the peer's buffer and spins on the last
// byte of its own), beside the reference measured in the same run: a bare
// ping-pong of a shared-memory counter between the same two processes.
// Metrics: ns/rtt (engine), ref-ns/rtt (bare) and x-ref (their ratio).
func BenchmarkWritePingPong(b *testing.B) {
	for _, size := range []int{8, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) { benchPingPong(b, size) })
	}
}

func benchPingPong(b *testing.B, size int) {
	fd, err := unix.MemfdCreate("bare-pingpong", unix.MFD_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	unix.Ftruncate(fd, 4096)
	f := os.NewFile(uintptr(fd), "bare")
	defer f.Close()
	mem, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mem)

	os.Setenv("RPERF_SOFT_SIZE", strconv.Itoa(max(2*size, 4096)))
	defer os.Unsetenv("RPERF_SOFT_SIZE")
	s := verbstest.NewSide(b, verbstest.PairConfig{Device: "shm0", BufSize: max(2*size, 4096), Cap: verbsio.QPCap{MaxSendWR: 256, MaxRecvWR: 16, MaxInlineData: 64}})
	c := startChild(b, "pingpong", f)
	shared, _ := parseEndpoint(c.recv(b))
	c.recv(b)
	c.send(b, "%s", formatEndpoint(s.Endpoint()))
	if err := s.QP.Connect(s.Endpoint(), shared, verbsio.ConnectOptions{Access: verbsio.AccessRemoteWrite}); err != nil {
		b.Fatal(err)
	}
	c.recv(b) // ready
	// Interleave reference and engine in rounds so both see the same
	// machine; report the median round of each.
	m := 2000
	rounds := max(b.N/m, 5)
	n := rounds * m
	c.send(b, "%d", rounds)
	c.send(b, "%d", m)
	c.send(b, "%d", size)

	ping := (*atomic.Uint64)(unsafe.Pointer(&mem[0]))
	pong := (*atomic.Uint64)(unsafe.Pointer(&mem[64]))
	buf := s.MR.Buf()
	out := buf[size : 2*size]
	wr := []verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{s.MR.SGE(size, size)},
		Remote: verbsio.RemoteAddr{Addr: shared.VAddr, RKey: shared.RKey}}}
	if size <= 64 {
		wr[0].Flags |= verbsio.SendInline
	}
	wcs := make([]verbsio.WC, 16)
	refRounds := make([]time.Duration, rounds)
	engRounds := make([]time.Duration, rounds)
	b.ResetTimer()
	start := time.Now()
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		for i := r*m + 1; i <= r*m+m; i++ {
			ping.Store(uint64(i))
			for pong.Load() != uint64(i) {
			}
		}
		t1 := time.Now()
		for i := r*m + 1; i <= r*m+m; i++ {
			out[size-1] = byte(i)
			if i%64 == 0 {
				wr[0].Flags |= verbsio.SendSignaled
			}
			if _, err := s.QP.PostSend(wr); err != nil {
				b.Fatal(err)
			}
			if wr[0].Flags&verbsio.SendSignaled != 0 {
				wr[0].Flags &^= verbsio.SendSignaled
				s.CQ.Poll(wcs)
			}
			// A bounded wait, by the clock: on a machine busy with other
			// work the child may wait long for a CPU (16M spins, the
			// earlier bound, were 20-80 ms at load 8).
			var since time.Time
			for spins := 0; atomicLoadByte(&buf[size-1]) != byte(i); spins++ {
				if spins&0xfffff != 0xfffff {
					continue
				}
				if since.IsZero() {
					since = time.Now()
				}
				if time.Since(since) > 10*time.Second {
					a, _ := s.QP.Query()
					k, perr := s.CQ.Poll(wcs)
					b.Fatalf("stuck at round %d iteration %d: have %d, QP %s, cq %d %v %+v", r, i, buf[size-1], a.State, k, perr, wcs[:k])
				}
			}
		}
		refRounds[r] = t1.Sub(t0)
		engRounds[r] = time.Since(t1)
	}
	el := time.Since(start)
	b.StopTimer()
	if got := c.recv(b); got != "done" {
		b.Fatalf("child: %s", got)
	}
	c.send(b, "exit")
	_ = el
	eng, ref := median(engRounds)/time.Duration(m), median(refRounds)/time.Duration(m)
	b.ReportMetric(float64(eng.Nanoseconds()), "ns/rtt")
	b.ReportMetric(float64(ref.Nanoseconds()), "ref-ns/rtt")
	b.ReportMetric(float64(eng)/float64(ref), "x-ref")
	b.ReportMetric(float64(n), "rtts")
}

// BenchmarkWriteBandwidth measures one-sided RDMA WRITE bandwidth into a
// passive peer process (tx depth 16, every 16th request signaled), beside
// memmove of the same size measured in the same run. Metrics: GiB/s
// (2^30 bytes per second), ref-GiB/s (memmove) and x-ref.
func BenchmarkWriteBandwidth(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) { benchWriteBW(b, size) })
	}
}

func benchWriteBW(b *testing.B, size int) {
	const depth = 16
	os.Setenv("RPERF_SOFT_SIZE", strconv.Itoa(size*depth))
	defer os.Unsetenv("RPERF_SOFT_SIZE")
	s := verbstest.NewSide(b, verbstest.PairConfig{Device: "shm0", BufSize: size * depth, Cap: verbsio.QPCap{MaxSendWR: 256, MaxRecvWR: 16}})
	c := startChild(b, "target")
	shared, _ := parseEndpoint(c.recv(b))
	c.recv(b)
	c.send(b, "%s", formatEndpoint(s.Endpoint()))
	if err := s.QP.Connect(s.Endpoint(), shared, verbsio.ConnectOptions{Access: verbsio.AccessRemoteWrite}); err != nil {
		b.Fatal(err)
	}
	c.recv(b)
	n := b.N

	// Reference: memmove of the same size, cycling through the same
	// number of distinct buffers.
	// Both are written first: untouched Go memory would read the zero
	// page and fault on the first write, and measure the kernel.
	src := make([]byte, size*depth)
	dst := make([]byte, size*depth)
	for i := range src {
		src[i], dst[i] = byte(i), byte(i>>8)
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		k := i % depth * size
		copy(dst[k:k+size], src[k:k+size])
	}
	ref := time.Since(start)

	wr := make([]verbsio.SendWR, 1)
	wcs := make([]verbsio.WC, depth)
	b.ResetTimer()
	start = time.Now()
	outstanding := 0
	for i := 0; i < n; i++ {
		k := i % depth * size
		wr[0] = verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{s.MR.SGE(k, size)},
			Remote: verbsio.RemoteAddr{Addr: shared.VAddr + uint64(k), RKey: shared.RKey}}
		if i%depth == depth-1 || i == n-1 {
			wr[0].Flags = verbsio.SendSignaled
		}
		if _, err := s.QP.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		outstanding++
		if wr[0].Flags != 0 {
			for {
				m, err := s.CQ.Poll(wcs)
				if err != nil {
					b.Fatal(err)
				}
				if m > 0 {
					if wcs[0].Status != verbsio.StatusSuccess {
						b.Fatal(wcs[0].Status)
					}
					break
				}
			}
			outstanding = 0
		}
	}
	el := time.Since(start)
	b.StopTimer()
	c.send(b, "report")
	c.recv(b)
	c.send(b, "exit")
	gib := func(d time.Duration) float64 { return float64(n) * float64(size) / d.Seconds() / (1 << 30) }
	b.SetBytes(int64(size))
	b.ReportMetric(gib(el), "GiB/s")
	b.ReportMetric(gib(ref), "ref-GiB/s")
	b.ReportMetric(gib(el)/gib(ref), "x-ref")
}

// median returns the middle of ds (ds is reordered).
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}
