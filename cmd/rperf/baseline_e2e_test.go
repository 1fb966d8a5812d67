package main_test

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/rperf/rperf/reports"
)

// TestBaseline runs rperf baseline end to end, small: every machine
// record is there, each engine record names the machine record it is
// compared with, and its ratio is the two figures of merit divided, as
// worked out here from the document itself.
func TestBaseline(t *testing.T) {
	r := rperf(t, "baseline", "-n", "300", "--bw-iters", "60", "--cold-region", "8M", "--json", "-")
	if r.code != 0 {
		t.Fatalf("rperf baseline: exit %d\n%s", r.code, r.stderr)
	}
	var doc reports.Document
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("--json -: %v\n%s", err, r.stdout)
	}
	machine := map[string]reports.Result{}
	var engine []reports.Result
	for _, rec := range doc.Results {
		if strings.HasPrefix(rec.Test, "baseline_") {
			machine[rec.Test+"/"+itoa(rec.Bytes)] = rec
			continue
		}
		engine = append(engine, rec)
	}
	for _, want := range []string{"baseline_udp_pingpong/64", "baseline_udp_stream/65536", "baseline_shm_pingpong/8",
		"baseline_memmove_warm/65536", "baseline_memmove_cold/65536", "baseline_memmove_warm/1048576", "baseline_memmove_cold/1048576",
		"baseline_syscall/0", "baseline_syscall_raw/0", "baseline_clock_read/0"} {
		if _, ok := machine[want]; !ok {
			t.Errorf("no machine record %s", want)
		}
	}
	if len(machine) != 10 {
		t.Errorf("%d machine records; want 10", len(machine))
	}
	// send-lat and write-lat on udp_lo, write-bw on udp_lo, write-lat on
	// shm0, write-bw on shm0 twice for each of two sizes (warm and cold).
	if len(engine) != 8 {
		t.Errorf("%d engine records; want 8", len(engine))
	}
	for _, e := range engine {
		m, ok := machine[e.Baseline+"/"+itoa(e.Bytes)]
		if !ok || e.RatioToBaseline == nil || e.Device == "" {
			t.Errorf("engine record %s %d B on %q: baseline %q, ratio %v", e.Test, e.Bytes, e.Device, e.Baseline, e.RatioToBaseline)
			continue
		}
		var want float64
		if e.Latency != nil {
			want = e.Percentiles["50"] / m.Percentiles["50"]
		} else {
			want = e.MsgRateMpps / m.MsgRateMpps
		}
		if math.Abs(*e.RatioToBaseline-want) > 1e-12*want {
			t.Errorf("%s %d B against %s: ratio %v; want %v", e.Test, e.Bytes, e.Baseline, *e.RatioToBaseline, want)
		}
	}

	// The table names the work, the engine's command and the ratio.
	r = rperf(t, "baseline", "-n", "300", "--bw-iters", "60", "--cold-region", "8M", "--engine=false")
	if r.code != 0 {
		t.Fatalf("rperf baseline --engine=false: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"UDP ping-pong 64 B", "UDP stream 64 KiB, GSO+GRO", "shm ping-pong 8 B", "memmove 1 MiB cold", "clock read"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table without %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "rperf send-lat") {
		t.Errorf("--engine=false ran the engine:\n%s", r.stdout)
	}

	for _, bad := range []struct{ args, want string }{
		{"-n 0", "at least 1 round trip"},
		{"--bw-iters 1", "2 messages"},
		{"--cold-region 1M", "--cold-region 1M: give at least 2M"},
		{"--cold-region lots", "--cold-region lots"},
	} {
		r := rperf(t, append([]string{"baseline"}, strings.Fields(bad.args)...)...)
		if r.code != 2 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("rperf baseline %s: exit %d, %s; want 2 and %q", bad.args, r.code, r.stderr, bad.want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
