// Package testkit holds what the tests of the reports packages share:
// latency records built from given samples (golden files are
// internal/testsupport/golden's).
package testkit

import (
	"testing"

	"github.com/rperf/rperf/reports"
)

// LatencyRecord records samples (ns) into an iterations-mode latency
// record of test at size bytes with rtt factor rtt.
func LatencyRecord(t testing.TB, test string, bytes int64, rtt int, samples []int64) reports.Result {
	t.Helper()
	rec, err := reports.NewRecorder(reports.RecorderOptions{Expected: len(samples)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		rec.Record(s)
	}
	r, err := reports.NewLatencyResult(reports.LatencySpec{
		Test: test, Bytes: bytes, Iterations: int64(len(samples)) + 1, Mode: reports.ModeIterations, RTTFactor: rtt,
	}, rec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
