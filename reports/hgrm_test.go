package reports

import (
	"bufio"
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/rperf/rperf/internal/testsupport/golden"
)

// TestWriteHGRM checks the .hgrm text against a golden file and parses it
// the way HdrHistogram's plotter does: a header, then "value percentile
// count 1/(1-p)" rows with non-decreasing values and percentiles ending at
// 1, then the #[...] footer.
func TestWriteHGRM(t *testing.T) {
	res := latencyResult(t, LatencySpec{Test: "write_lat", Bytes: 2, Iterations: 11, Mode: ModeIterations, RTTFactor: 2},
		RecorderOptions{Expected: 10}, seq(10))
	var buf bytes.Buffer
	if err := WriteResultHGRM(&buf, res); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "write_lat_2.hgrm"), buf.Bytes())

	sc := bufio.NewScanner(&buf)
	sc.Scan()
	// HdrHistogram's (Java) header: titles right-aligned in 12, 14, 10 and
	// 14 columns. The plotter splits lines on spaces and keeps those with 4
	// numeric fields, so it skips this line and the footer.
	if got := sc.Text(); got != "       Value     Percentile TotalCount 1/(1-Percentile)" {
		t.Fatalf("header %q", got)
	}
	var rows int
	var lastV, lastP float64
	var lastCount int64
	var footer []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "#["):
			footer = append(footer, line)
		default:
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("row %q: %d fields", line, len(f))
			}
			v, err1 := strconv.ParseFloat(f[0], 64)
			p, err2 := strconv.ParseFloat(f[1], 64)
			c, err3 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil || err3 != nil || v < lastV || p < lastP || c < lastCount {
				t.Fatalf("row %q after value %v percentile %v count %d", line, lastV, lastP, lastCount)
			}
			lastV, lastP, lastCount = v, p, c
			rows++
		}
	}
	// Values are one-way microseconds: samples 1..10 us / rtt 2 → 0.5..5.0035
	// (the last bucket's highest equivalent value, 10007 ns / 2000, printed as
	// 5.003 since 5.0035 is not exact in binary).
	if rows == 0 || lastP != 1 || lastCount != 10 || lastV != 5.003 {
		t.Errorf("%d rows, last row %v %v %d; want percentile 1, count 10, value 5.003", rows, lastV, lastP, lastCount)
	}
	if len(footer) != 3 || !strings.Contains(footer[1], "Total count    =           10") {
		t.Errorf("footer %q", footer)
	}
}

func TestWriteHGRMErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteResultHGRM(&buf, Result{Bandwidth: &Bandwidth{}}); err == nil {
		t.Error("bandwidth result: no error")
	}
	if err := WriteResultHGRM(&buf, Result{Latency: &Latency{RTTFactor: 1, HDR: "not base64!"}}); err == nil {
		t.Error("corrupt hdr: no error")
	}
	r := newRec(t, RecorderOptions{})
	if err := WriteHGRM(&buf, r.Histogram(), 0); err == nil {
		t.Error("rtt 0: no error")
	}
}

// FuzzDecodeHDR feeds the hdr field's decoder, which rperf compare and
// rperf plot run on every latency record they read: a histogram or an
// error, never a panic, and a decoded histogram answers what the readers
// ask of it.
func FuzzDecodeHDR(f *testing.F) {
	rec, err := NewRecorder(RecorderOptions{Expected: 100})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 100 {
		rec.Record(int64(200 + i*i))
	}
	r, err := NewLatencyResult(LatencySpec{Test: "write_lat", Bytes: 2, Iterations: 101, Mode: ModeIterations, RTTFactor: 2}, rec)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(r.HDR)
	f.Add("HISTFAAAACl4nJNpmSzMwMDAywABzFCaEUzOmNZg/wEi0NjHxMTAxFTOyMbIzsDAAMcfBV4=")
	f.Add("")
	f.Add("HISTF")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := DecodeHDR(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		_ = PercentilesUs(h, []float64{50, 99, 99.9, 100}, 2, 1<<40)
		if _, err := MergeHistograms([]*hdr.Histogram{h, h}); err != nil && err.Error() == "" {
			t.Fatal("an error without a message")
		}
	})
}
