package latency

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// BenchmarkIterationOverhead measures what rperf itself adds to every
// latency iteration, without the engine: the interrupt tick, the clock
// read, the sample (Recorder.Record through the sampler), the marker byte
// and one check of the peer's byte. It reports the result (ns/op) beside
// the engine's round trip, measured by a real write_lat run between two
// contexts of shm0 in this process (engine-rtt-ns, the median), and their
// ratio (overhead-%). The raw path is iterations mode; the duration path
// is duration mode past the raw-sample buffer, where every sample goes
// straight to the exact sums and the histogram.
func BenchmarkIterationOverhead(b *testing.B) {
	rtt := engineRTT(b)
	for _, path := range []string{"raw", "duration"} {
		b.Run("path="+path, func(b *testing.B) {
			const chunk = 1 << 20
			opts := reports.RecorderOptions{Expected: chunk}
			if path == "duration" {
				opts = reports.RecorderOptions{RawLimit: 1}
			}
			rec, err := reports.NewRecorder(opts)
			if err != nil {
				b.Fatal(err)
			}
			sm := &sampler{rec: rec, first: 1}
			s := &session.Session{Spec: session.Spec{Type: verbsio.QPTypeRC, Link: session.Link{StallTimeout: time.Minute}}}
			w := s.NewWaiter(context.Background(), "x", false)
			buf := make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%chunk == chunk-1 && path == "raw" {
					b.StopTimer()
					rec.Reset()
					b.StartTimer()
				}
				if err := w.Tick(); err != nil {
					b.Fatal(err)
				}
				sm.stamp(clock.Now())
				buf[7] = marker(int64(i), false)
				w.Begin()
				if session.LoadByte(buf, 7) != byte(i) {
					if err := w.Spin(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if rtt > 0 {
				b.ReportMetric(rtt, "engine-rtt-ns")
				b.ReportMetric(100*perOp/rtt, "overhead-%")
			}
		})
	}
}

var rttOnce struct {
	sync.Once
	ns float64
}

// engineRTT runs write_lat (2 bytes, 20000 iterations) between two
// goroutines and returns the median round trip in ns, once per process.
func engineRTT(b *testing.B) float64 {
	rttOnce.Do(func() {
		cfg := Default(Write)
		cfg.Iterations = 20000
		cfg.Percentiles = []float64{50}
		_, res, serr, cerr := pairtest.Results(b, pairtest.Shm0, Run, cfg, cfg)
		if serr != nil || cerr != nil || len(res) != 1 {
			b.Logf("engine round trip not measured: server %v, client %v", serr, cerr)
			return
		}
		rttOnce.ns = res[0].Percentiles["50"] * 1000 * float64(res[0].RTTFactor)
	})
	return rttOnce.ns
}
