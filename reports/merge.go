package reports

import (
	"errors"
	"fmt"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// MergeHistograms returns a new histogram holding every sample of hs, for
// example the decoded hdr fields of repeated runs of one test. The merge
// is exact: HdrHistogram's Merge adds each bucket's count to the same
// bucket, so the result equals the histogram one recorder would have built
// from all the samples, provided the histograms share range and precision.
// That is checked (every rperf record's histogram covers 1 ns to 1 hour at
// 3 significant digits); an error names the first that differs. hs is not
// modified.
func MergeHistograms(hs []*hdr.Histogram) (*hdr.Histogram, error) {
	if len(hs) == 0 {
		return nil, errors.New("merge histograms: none given")
	}
	f := hs[0]
	for i, h := range hs[1:] {
		if h.LowestTrackableValue() != f.LowestTrackableValue() || h.HighestTrackableValue() != f.HighestTrackableValue() ||
			h.SignificantFigures() != f.SignificantFigures() {
			return nil, fmt.Errorf("merge histograms: histogram %d covers %d..%d at %d digits, the first %d..%d at %d: they cannot be merged exactly",
				i+2, h.LowestTrackableValue(), h.HighestTrackableValue(), h.SignificantFigures(),
				f.LowestTrackableValue(), f.HighestTrackableValue(), f.SignificantFigures())
		}
	}
	m := f.Clone()
	for i, h := range hs[1:] {
		if dropped := m.Merge(h); dropped != 0 {
			return nil, fmt.Errorf("merge histograms: histogram %d: %d samples dropped", i+2, dropped)
		}
	}
	return m, nil
}
