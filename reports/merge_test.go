package reports

import (
	"strings"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// TestMergeHistograms: percentiles of merged histograms equal those of
// one histogram of all the samples; the inputs are left alone; a
// histogram of another precision is refused.
func TestMergeHistograms(t *testing.T) {
	parts := [][]int64{{1, 5, 9, 2047, 2049}, {100000, 3, 3, 3}, {7777777, 42}}
	var hs []*hdr.Histogram
	all := hdr.New(DefaultLowestNs, DefaultHighestNs, DefaultSigFigs)
	for _, p := range parts {
		h := hdr.New(DefaultLowestNs, DefaultHighestNs, DefaultSigFigs)
		for _, v := range p {
			if err := h.RecordValue(v); err != nil {
				t.Fatal(err)
			}
			if err := all.RecordValue(v); err != nil {
				t.Fatal(err)
			}
		}
		hs = append(hs, h)
	}
	m, err := MergeHistograms(hs)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Equals(all) {
		t.Error("merged histogram differs from the histogram of all samples")
	}
	for _, p := range []float64{1, 10, 50, 90, 99, 100} {
		if a, b := m.ValueAtPercentile(p), all.ValueAtPercentile(p); a != b {
			t.Errorf("p%v: merged %d, all %d", p, a, b)
		}
	}
	if hs[0].TotalCount() != 5 {
		t.Errorf("the first input was modified: %d samples", hs[0].TotalCount())
	}
	coarse := hdr.New(DefaultLowestNs, DefaultHighestNs, 2)
	if _, err := MergeHistograms([]*hdr.Histogram{hs[0], coarse}); err == nil || !strings.Contains(err.Error(), "histogram 2 covers 1..3600000000000 at 2 digits") {
		t.Errorf("error %v", err)
	}
	if _, err := MergeHistograms(nil); err == nil {
		t.Error("no error for no histograms")
	}
}
