package reports

import (
	"fmt"
	"io"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

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
	if _, err := h.PercentilesPrint(w, HGRMTicksPerHalfDistance, ticksPerUsec*float64(rttFactor)); err != nil {
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
