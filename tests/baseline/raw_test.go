package baseline

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/reports"
)

// rawEnds opens a packet socket at each end of a veth pair between two
// namespaces the test creates.
func rawEnds(t testing.TB) (a, b RawEnd) {
	t.Helper()
	p := netns.Setup(t, netns.Options{})
	for _, e := range []struct {
		h    netns.Host
		end  *RawEnd
		port uint16
	}{{p.A, &a, 6000}, {p.B, &b, 7000}} {
		if err := e.h.Run(func() (err error) { *e.end, err = OpenRawEnd(e.h.Link, e.port); return err }); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { unix.Close(a.FD) })
	return a, b
}

func TestRawPingPong(t *testing.T) {
	for _, size := range []int{60, 1514} {
		a, b := rawEnds(t)
		r, err := RawPingPong(launch, a, b, size, 500)
		if err != nil {
			t.Fatal(err)
		}
		checkLatency(t, r, NameRawPingPong, int64(size), 500, reports.RTTFactorRoundTrip)
	}
}

func TestRawPingPongBadInput(t *testing.T) {
	for _, tc := range []struct {
		size, iters int
		want        string
	}{
		{59, 10, "size 59: must be 60 to 9216"},
		{9217, 10, "size 9217"},
		{60, 0, "iterations 0: must be at least 1"},
	} {
		a, b := rawEnds(t)
		_, err := RawPingPong(launch, a, b, tc.size, tc.iters)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("size %d, %d iterations: %v; want an error with %q", tc.size, tc.iters, err, tc.want)
		}
	}
	if _, err := OpenRawEnd("no-such-link0", 1); err == nil || !strings.Contains(err.Error(), "no-such-link0") {
		t.Errorf("a missing link: %v; want an error naming it", err)
	}
}

// BenchmarkRawPingPong64 is the reference docs/raw.md compares rperf
// raw-lat with: 60-byte frames (64 on the wire), b.N round trips after
// Warmup, reported one-way as raw-lat prints them (p50 and mean, us).
//
//	go test ./tests/baseline -run '^$' -bench RawPingPong64 -benchtime 20000x
func BenchmarkRawPingPong64(b *testing.B) {
	ea, eb := rawEnds(b)
	r, err := RawPingPong(launch, ea, eb, 60, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.Percentiles["50"], "p50-us")
	b.ReportMetric(r.MeanUs, "mean-us")
}
