package reports

import (
	"bytes"
	"fmt"
	"io"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// hgrmHeader is HdrHistogram's column title line, widths 12, 14, 10 and 14.
var hgrmHeader = fmt.Sprintf("%12s %14s %10s %14s\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)")

// HGRMTicksPerHalfDistance is the percentile-ticks density of .hgrm output,
// HdrHistogram's usual 5.
const HGRMTicksPerHalfDistance = 5

// WriteHGRM writes a histogram of nanosecond samples as HdrHistogram's
// standard percentile distribution text (.hgrm), values in microseconds
// divided by rttFactor, so they match the result's other one-way figures.
// HdrHistogram's plotter reads it as is.
func WriteHGRM(w io.Writer, h *hdr.Histogram, rttFactor int) error {
	if rttFactor < 1 {
		return fmt.Errorf("write hgrm: rtt factor %d < 1", rttFactor)
	}
	var buf bytes.Buffer
	if _, err := h.PercentilesPrint(&buf, HGRMTicksPerHalfDistance, ticksPerUsec*float64(rttFactor)); err != nil {
		return fmt.Errorf("write hgrm: %w", err)
	}
	// The Go library separates the column titles with tabs; HdrHistogram's
	// own (Java) output right-aligns them in fixed widths, which is what
	// readers that match on the header expect.
	text := buf.Bytes()
	if i := bytes.IndexByte(text, '\n'); i >= 0 && bytes.Contains(text[:i], []byte("Percentile")) {
		text = append([]byte(hgrmHeader), text[i+1:]...)
	}
	if _, err := w.Write(text); err != nil {
		return fmt.Errorf("write hgrm: %w", err)
	}
	return nil
}

// WriteResultHGRM decodes a latency result's hdr field and writes it with
// [WriteHGRM].
func WriteResultHGRM(w io.Writer, r Result) error {
	if r.Latency == nil {
		return fmt.Errorf("write hgrm: %s %d B: not a latency result", r.Test, r.Bytes)
	}
	h, err := DecodeHDR(r.HDR)
	if err != nil {
		return fmt.Errorf("write hgrm: %w", err)
	}
	return WriteHGRM(w, h, r.RTTFactor)
}
