// Package testkit holds what the tests of the reports packages share:
// golden files and latency records built from given samples.
package testkit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/reports"
)

// Golden compares got with testdata/name; with update it first rewrites
// the file.
func Golden(t testing.TB, name string, got []byte, update bool) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got); run go test -update if intended\n%s", path, diff)
	}
}

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
