package reports_test

import (
	"fmt"
	"os"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
)

// A ping-pong latency loop: one clock read per iteration, the sample being
// the time between consecutive posts (perftest's tposted[i+1]-tposted[i]),
// so iters iterations give iters-1 round-trip samples.
func ExampleRecorder() {
	const iters = 1000
	rec, err := reports.NewRecorder(reports.RecorderOptions{Expected: iters - 1})
	if err != nil {
		panic(err)
	}
	prev := clock.Now()
	for i := 0; i < iters; i++ {
		// post the message, wait for the peer's reply ...
		now := clock.Now()
		if i > 0 {
			rec.Record(now - prev)
		}
		prev = now
	}
	res, err := reports.NewLatencyResult(reports.LatencySpec{
		Test: "write_lat", Bytes: 2, Iterations: iters,
		Mode: reports.ModeIterations, RTTFactor: reports.RTTFactorRoundTrip,
	}, rec)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Samples, res.Perftest.Samples, res.AllSamples)
	// Output: 999 999 true
}

// A bandwidth result from per-message stamps, as perftest's tposted and
// tcompleted.
func ExampleNewBandwidthResult() {
	posted := []int64{0, 100, 200, 300}
	completed := []int64{1000, 1100, 1200, 1300}
	res, err := reports.NewBandwidthResult(reports.BWSpec{
		Test: "write_bw", Bytes: 65536, Iterations: 4, Posted: posted, Completed: completed,
	})
	if err != nil {
		panic(err)
	}
	// 4 × 65536 B in 1300 ns; the best window is the whole run, 325 ns/msg.
	fmt.Printf("avg %.2f MiB/s, peak %.2f Gb/s, %.6f Mpps, peak %s\n",
		res.BWAvgMiBps, res.BWPeakGbps, res.MsgRateMpps, res.PeakStatus)
	// Output: avg 192307.69 MiB/s, peak 1613.19 Gb/s, 3.076923 Mpps, peak measured
}

// Writing a document: gather the environment once, add a result per size.
func ExampleDocument_Write() {
	env := reports.GatherEnv(reports.System{}) // measures the clock too
	env.Provider, env.Fabric, env.Device, env.MTU, env.SendPath = "soft", "shm", "soft_0", 4096, "wr"
	doc := reports.NewDocument(env)
	bw, _ := reports.NewBandwidthDurationResult(reports.BWDurationSpec{
		Test: "send_bw", Bytes: 4096, Messages: 1_000_000, WindowNs: 1_000_000_000,
	})
	doc.Results = append(doc.Results, bw)
	if err := doc.Write(os.Stdout); err != nil {
		panic(err)
	}
}
