package compare

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rperf/rperf/reports"
)

// fuzzSeed is a document with four repetitions of a latency key and of a
// bandwidth key, enough for the runs basis, and one of a key alone.
func fuzzSeed(f *testing.F, center float64, gbps float64) []byte {
	f.Helper()
	var rs []reports.Result
	for i := range 4 {
		rs = append(rs, latencyResult(f, "write_lat", 2, 2, spreadSamples(uint64(i+1), 200, center)))
		rs = append(rs, bwResult("write_bw", 4096, gbps*(1+0.01*float64(i)), gbps/32))
	}
	rs = append(rs, latencyResult(f, "read_lat", 8, 1, spreadSamples(9, 50, 2*center)))
	var b bytes.Buffer
	if err := doc("shm0", rs...).Write(&b); err != nil {
		f.Fatal(err)
	}
	return b.Bytes()
}

// FuzzCompare feeds rperf compare two documents as they come from disk:
// every input gives a report or an error that says what is wrong, never a
// panic, and a report has no NaN or infinity in a verdict's numbers and
// writes itself in every format.
func FuzzCompare(f *testing.F) {
	base, cand := fuzzSeed(f, 1000, 10), fuzzSeed(f, 1300, 8)
	f.Add(base, cand)
	f.Add(base, base)
	f.Add(base, []byte(`{"schema":"rperf/v1","env":{},"results":[{"test":"write_bw","bytes":4096,"bw_avg_gbps":-1,"msg_rate_mpps":0}]}`))
	f.Add([]byte(`{"schema":"rperf/v1","results":[{"test":"write_lat","bytes":2,"rtt_factor":2,"hdr":"HISTFAAAACl4nJNpmSzMwMDAywABzFCaEUzOmNZg/wEi0NjHxMTAxFTOyMbIzsDAAMcfBV4="}]}`), base)
	f.Add([]byte(`{"schema":"rperf/v1","results":[{"test":"write_lat","bytes":2,"rtt_factor":0,"mean_us":1e308,"samples":9007199254740993}]}`), base)
	f.Add([]byte(`{}`), []byte(`not json`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		da, errA := reports.Read(bytes.NewReader(a))
		db, errB := reports.Read(bytes.NewReader(b))
		for _, err := range []error{errA, errB} {
			if err != nil && strings.TrimSpace(err.Error()) == "" {
				t.Fatal("an error without a message")
			}
		}
		if errA != nil || errB != nil {
			return
		}
		rep, err := Compare([]Input{{Name: "a.json", Doc: da}}, []Input{{Name: "b.json", Doc: db}}, Options{})
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		verdicts := []Verdict{Better, Worse, Same, Unsure, NoVerdict}
		for _, c := range rep.Comparisons {
			nums := []float64{c.ChangePct, c.Baseline.Value, c.Candidate.Value}
			if iv := c.Interval; iv != nil {
				nums = append(nums, iv.LoPct, iv.HiPct, iv.Confidence, iv.EstimatePct, iv.DF)
			}
			for _, v := range nums {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("%s %s: %s with a non-finite number: %+v", c.Key(), c.Metric, c.Verdict, c)
				}
			}
			if !slices.Contains(verdicts, c.Verdict) || c.Reason == "" {
				t.Fatalf("%s %s: verdict %q, reason %q", c.Key(), c.Metric, c.Verdict, c.Reason)
			}
		}
		for _, write := range []func(io.Writer) error{rep.WriteText, rep.WriteMarkdown, rep.WriteJUnit, rep.WriteJSON} {
			if err := write(io.Discard); err != nil {
				t.Fatalf("write: %v", err)
			}
		}
		var back bytes.Buffer
		if err := rep.WriteJSON(&back); err != nil || !json.Valid(back.Bytes()) {
			t.Fatalf("comparison document: %v", err)
		}
	})
}
