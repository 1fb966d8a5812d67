package table

import (
	"fmt"
	"io"
	"strconv"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
)

// Options configures [Write].
type Options struct {
	// Gbits reports bandwidth in Gb/s (perftest --report_gbits) instead of
	// MiB/s.
	Gbits bool
}

// Write prints a whole document: for each test, in the order results first
// appear, perftest's block (header, one line per message size, between
// separators); for latency tests, rperf's true-statistics block and the
// clock line after it; for bandwidth tests, notes on unmeasured peaks and
// the clock line.
func Write(w io.Writer, doc *reports.Document, opts Options) error {
	for i, g := range group(doc.Results) {
		if i == 0 { // later groups start after the previous group's closing line
			if err := WriteResultLine(w); err != nil {
				return fmt.Errorf("write table: %w", err)
			}
		}
		if err := writeGroup(w, g, doc, opts); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	return nil
}

// resultGroup is the results of one test, of one kind and mode, in order.
type resultGroup struct {
	latency bool
	mode    reports.Mode
	clock   string // reports.Result.Clock: completion-timestamp records group apart
	results []reports.Result
}

func group(results []reports.Result) []*resultGroup {
	type key struct {
		test    string
		latency bool
		mode    reports.Mode
		clock   string
	}
	var order []*resultGroup
	byKey := map[key]*resultGroup{}
	for _, r := range results {
		k := key{r.Test, r.Latency != nil, r.Mode, r.Clock}
		g := byKey[k]
		if g == nil {
			g = &resultGroup{latency: k.latency, mode: r.Mode, clock: r.Clock}
			byKey[k] = g
			order = append(order, g)
		}
		g.results = append(g.results, r)
	}
	return order
}

// writeGroup writes one group, from its header to its closing separator.
func writeGroup(w io.Writer, g *resultGroup, doc *reports.Document, opts Options) error {
	if g.latency {
		clk := doc.Env.Clock
		if g.clock == reports.ClockCompletion {
			// Timed by the device's completion stamps, not by the
			// software clock the environment names.
			clk = clock.Info{Name: "the device's completion clock"}
			if khz, err := strconv.ParseUint(doc.Env.Extra["completion_clock_khz"], 10, 64); err == nil && khz > 0 {
				clk.Name += fmt.Sprintf(", %d kHz", khz)
				clk.ResolutionNs = int64(max(1, 1e9/(khz*1000)))
			}
			if _, err := fmt.Fprintf(w, " from completion timestamps (device clock):\n"); err != nil {
				return err
			}
		}
		if err := WriteLatencyHeader(w, g.mode); err != nil {
			return err
		}
		for _, r := range g.results {
			if err := WriteLatencyRow(w, r); err != nil {
				return err
			}
		}
		if err := WriteResultLine(w); err != nil {
			return err
		}
		if err := WriteTrueLatency(w, g.results, clk); err != nil {
			return err
		}
		return WriteResultLine(w)
	}
	if err := WriteBandwidthHeader(w, opts.Gbits); err != nil {
		return err
	}
	for _, r := range g.results {
		if err := WriteBandwidthRow(w, r, opts.Gbits); err != nil {
			return err
		}
	}
	if err := WriteResultLine(w); err != nil {
		return err
	}
	if err := WriteBandwidthNotes(w, g.results, doc.Env.Clock); err != nil {
		return err
	}
	return WriteResultLine(w)
}

// WriteBandwidthNotes writes the notes on bandwidth results (unmeasured
// peaks, lost messages) and the clock line that close perftest's block when
// the rows were written one by one with [WriteBandwidthRow].
func WriteBandwidthNotes(w io.Writer, results []reports.Result, clk clock.Info) error {
	ew := &errWriter{w: w}
	for _, r := range results {
		if r.Bandwidth == nil {
			continue
		}
		for _, n := range bandwidthNotes(r) {
			ew.printf(" note: %d B: %s\n", r.Bytes, n)
		}
	}
	writeClock(ew, clk)
	return ew.err
}
