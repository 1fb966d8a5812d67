package main_test

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rperf/rperf/reports"
)

// TestCompletionTimestampsLoopback runs the latency tests with
// --completion-timestamps on the engine (shm and udp): the header names
// the completion clock, each size's row is followed by its row from the
// completion stamps, the true statistics by the same block from the
// stamps with the device's clock line, and the document holds both
// records per size; the two clocks' figures are of one order (they time
// the same cycles).
func TestCompletionTimestampsLoopback(t *testing.T) {
	cases := []struct {
		cmd, dev, label string
	}{
		{"send-lat", "shm0", "the peer's SENDs' receive completions"},
		{"write-lat", "udp_lo", "our RDMA WRITEs' completions"},
		{"read-lat", "shm0", "our RDMA READs' completions"},
		{"atomic-lat", "udp_lo", "our atomics' completions"},
	}
	// A true-statistics row: #bytes #samples min max mean stdev p50 ...
	statRow := regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s`)
	for _, c := range cases {
		t.Run(c.cmd+"/"+c.dev, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			r := rperf(t, c.cmd, "--loopback", "-d", c.dev, "-n", "400", "--completion-timestamps", "--json", out)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
			}
			for _, want := range []string{
				" Completion clock: 1000000 kHz (completion timestamps)\n",
				" from completion timestamps (" + c.label + ", one to the next, device clock):\n",
				" The same cycles from completion timestamps (" + c.label + ", one to the next):\n",
				" clock: the device's completion clock, 1000000 kHz",
			} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, r.stdout)
				}
			}
			// The true statistics: the software clock's block, then
			// the stamps'.
			rows := statRow.FindAllStringSubmatch(r.stdout[strings.Index(r.stdout, "rperf true statistics"):], -1)
			if len(rows) != 2 {
				t.Fatalf("%d true-statistics rows, want 2:\n%s", len(rows), r.stdout)
			}
			p50sw, _ := strconv.ParseFloat(rows[0][7], 64)
			p50ts, _ := strconv.ParseFloat(rows[1][7], 64)
			if rows[0][2] != "399" || rows[1][2] != "399" || !(p50ts > 0 && p50ts <= 3*p50sw+20 && p50sw <= 3*p50ts+20) {
				t.Errorf("samples %s and %s (want 399), p50 %.3f us (software) and %.3f us (completion stamps):\n%s", rows[0][2], rows[1][2], p50sw, p50ts, r.stdout)
			}

			doc, err := reports.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(doc.Results) != 2 || doc.Results[0].Clock != "" || doc.Results[1].Clock != reports.ClockCompletion ||
				doc.Results[1].Latency == nil || doc.Results[1].Samples != 399 {
				t.Fatalf("document results %+v", doc.Results)
			}
			if got := strconv.FormatFloat(doc.Results[1].Percentiles["50"], 'f', 3, 64); got != rows[1][7] {
				t.Errorf("the document's completion p50 %s us, the printed %s us", got, rows[1][7])
			}
			if doc.Env.Extra["completion_clock_khz"] != "1000000" {
				t.Errorf("env.extra %v: want completion_clock_khz 1000000", doc.Env.Extra)
			}
		})
	}
}
