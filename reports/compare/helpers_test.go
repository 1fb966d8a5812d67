package compare

import (
	"math/rand/v2"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/internal/testkit"
)

// latencyResult records samples (ns) into a latency record.
var latencyResult = testkit.LatencyRecord

// bwResult is a bandwidth record with the given average (Gb/s) and
// message rate (Mpps).
func bwResult(test string, bytes int64, gbps, mpps float64) reports.Result {
	return reports.Result{Test: test, Bytes: bytes, Iterations: 5000, Mode: reports.ModeIterations, ElapsedNs: 1e6,
		Bandwidth: &reports.Bandwidth{BWAvgGbps: gbps, BWAvgMiBps: gbps * 1e9 / 8 / (1 << 20), MsgRateMpps: mpps, PeakStatus: reports.PeakDisabled}}
}

// doc wraps records in a document measured on device dev.
func doc(dev string, results ...reports.Result) *reports.Document {
	d := reports.NewDocument(reports.Env{Time: "2026-11-23T12:00:00Z", Host: "vm", Kernel: "6.18", CPUs: 2,
		Provider: "soft", Fabric: "shm", Device: dev, MTU: 4096, SendPath: "generic", RperfVersion: "devel"})
	d.Results = results
	return d
}

// inputs makes one input per document, named prefix-1.json, prefix-2.json...
func inputs(prefix string, docs ...*reports.Document) []Input {
	out := make([]Input, len(docs))
	for i, d := range docs {
		out[i] = Input{Name: prefix + "-" + string(rune('1'+i)) + ".json", Doc: d}
	}
	return out
}

// spreadSamples returns n samples around center ns: a body within ±10%
// and a 0.5% tail at 5×, from a fixed seed.
func spreadSamples(seed uint64, n int, center float64) []int64 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]int64, n)
	for i := range out {
		v := center * (0.9 + 0.2*r.Float64())
		if r.IntN(200) == 0 {
			v *= 5
		}
		out[i] = int64(v)
	}
	return out
}

// bwDocs makes one document per value, each with one send_bw record.
func bwDocs(test string, bytes int64, gbps ...float64) []*reports.Document {
	out := make([]*reports.Document, len(gbps))
	for i, g := range gbps {
		out[i] = doc("shm0", bwResult(test, bytes, g, g/8))
	}
	return out
}
