package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func golden(t *testing.T, name string, got []byte) { testkit.Golden(t, name, got, *update) }

var latencyResult = testkit.LatencyRecord

func ticks(a axis) []string {
	var out []string
	for _, t := range a.ticks {
		out = append(out, t.label)
	}
	return out
}

func TestAxes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a        axis
		min, max float64
		want     []string
	}{
		{"linear, from 0", newAxis("", linear, 3, 37), 0, 40, []string{"0", "10", "20", "30", "40"}},
		{"linear, fractions", newAxis("", linear, 0, 0.9), 0, 1, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{"linear, flat", newAxis("", linear, 0, 0), 0, 1, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{"sizes 2..4K", newAxis("", log2, 2, 4096), 2, 4096, []string{"2", "4", "8", "16", "32", "64", "128", "256", "512", "1K", "2K", "4K"}},
		// 2..8M is 22 doublings: every second power, aligned to even
		// exponents, closed above.
		{"sizes 2..8M", newAxis("", log2, 2, 8<<20), 1, 16 << 20, []string{"1", "4", "16", "64", "256", "1K", "4K", "16K", "64K", "256K", "1M", "4M", "16M"}},
		{"one size", newAxis("", log2, 64, 64), 32, 128, []string{"32", "64", "128"}},
		{"latency, wide", newAxis("", log10, 0.19, 1500), 0.1, 10000, []string{"0.1", "1", "10", "100", "1000", "10000"}},
		{"latency, narrow", newAxis("", log10, 0.19, 9), 0.1, 10, []string{"0.1", "0.2", "0.5", "1", "2", "5", "10"}},
		{"tail, 999 samples", newAxis("", tail, 1, 999), 1, 1000, []string{"0%", "90%", "99%", "99.9%"}},
		{"tail, 1e6 samples", newAxis("", tail, 1, 1e6), 1, 1e6, []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.a.min != tc.min || tc.a.max != tc.max {
				t.Errorf("range %v..%v, want %v..%v", tc.a.min, tc.a.max, tc.min, tc.max)
			}
			if diff := cmp.Diff(tc.want, ticks(tc.a)); diff != "" {
				t.Errorf("ticks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTailPoints: for samples 1..1000 ns (exact in the histogram, rtt
// factor 1) the point at x = 1/(1−q) is the sample of rank round(1000q):
// x = 10 is q = 90%, rank 900, 0.900 us; x = 100 is rank 990.
func TestTailPoints(t *testing.T) {
	s := make([]int64, 1000)
	for i := range s {
		s[i] = int64(i + 1)
	}
	r := latencyResult(t, "read_lat", 2, 1, s)
	h, err := reports.DecodeHDR(r.HDR)
	if err != nil {
		t.Fatal(err)
	}
	pts := (&histogram{h: h, maxNs: r.MaxNs(), rtt: 1}).tailPoints()
	want := map[int]point{0: {1, 0.001}, cdfSteps: {10, 0.9}, 2 * cdfSteps: {100, 0.99}}
	for i, p := range want {
		if got := pts[i]; !near(got.x, p.x) || !near(got.y, p.y) {
			t.Errorf("point %d = %+v, want %+v", i, got, p)
		}
	}
	if last := pts[len(pts)-1]; last != (point{1000, 1}) {
		t.Errorf("last point %+v, want the maximum at x = 1000", last)
	}
	if len(pts) != 3*cdfSteps+1 {
		t.Errorf("%d points, want %d (three decades, then the maximum)", len(pts), 3*cdfSteps+1)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// samples: n values around center ns with a 1% tail at 4×.
func samples(seed uint64, n int, center float64) []int64 {
	r := rand.New(rand.NewPCG(seed, 3))
	out := make([]int64, n)
	for i := range out {
		v := center * (0.9 + 0.2*r.Float64())
		if r.IntN(100) == 0 {
			v *= 4 * (1 + r.Float64())
		}
		out[i] = int64(v)
	}
	return out
}

// latencyDoc is write_lat at 2..4096 bytes, latency growing with size,
// scaled by slow.
func latencyDoc(t *testing.T, seed uint64, slow float64) *reports.Document {
	d := reports.NewDocument(reports.Env{Device: "shm0"})
	for i, size := 0, int64(2); size <= 4096; i, size = i+1, size*4 {
		d.Results = append(d.Results, latencyResult(t, "write_lat", size, 2, samples(seed+uint64(i), 2000, slow*(400+float64(size)/4))))
	}
	return d
}

func bandwidthDoc(path string, scale float64) *reports.Document {
	d := reports.NewDocument(reports.Env{Device: "shm0"})
	for size := int64(64); size <= 1<<20; size *= 4 {
		g := scale * 80 * float64(size) / float64(size+4096)
		d.Results = append(d.Results, reports.Result{Test: "write_bw", Bytes: size, Iterations: 5000, Mode: reports.ModeIterations, Path: path,
			Bandwidth: &reports.Bandwidth{BWAvgGbps: g, MsgRateMpps: g * 1e9 / 8 / float64(size) / 1e6}})
	}
	return d
}

func render(t *testing.T, inputs []Input, opts Options) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteSVG(&b, inputs, opts); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML throughout.
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
	}
	return b.Bytes()
}

func TestGoldenSVG(t *testing.T) {
	base, cand := latencyDoc(t, 1, 1), latencyDoc(t, 100, 1.3)
	two := []Input{{"baseline.json", base}, {"candidate.json", cand}}
	for _, tc := range []struct {
		file   string
		inputs []Input
		opts   Options
	}{
		{"latency.svg", two, Options{}},
		{"latency_p50.svg", []Input{{"run.json", base}}, Options{Percentiles: []float64{50}, Title: "p50 <one-way> & more"}},
		{"cdf.svg", two, Options{Kind: CDF, Bytes: 32}},
		{"cdf_sizes.svg", []Input{{"run.json", base}}, Options{Kind: CDF}},
		{"bandwidth.svg", []Input{{"a.json", bandwidthDoc("generic", 1)}, {"b.json", bandwidthDoc("inline", 1.2)}}, Options{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got := render(t, tc.inputs, tc.opts)
			golden(t, tc.file, got)
			if again := render(t, tc.inputs, tc.opts); !bytes.Equal(got, again) {
				t.Error("two renderings differ")
			}
		})
	}
}

// TestRepeatedRecords: records repeated in one document are one point,
// from their merged histograms (latency) or median (bandwidth).
func TestRepeatedRecords(t *testing.T) {
	a := samples(1, 1000, 1000)
	b := samples(2, 1000, 3000)
	d := reports.NewDocument(reports.Env{})
	d.Results = append(d.Results, latencyResult(t, "send_lat", 8, 2, a), latencyResult(t, "send_lat", 8, 2, b))
	c, err := build([]Input{{"x", d}}, Options{Percentiles: []float64{50}})
	if err != nil {
		t.Fatal(err)
	}
	all := latencyResult(t, "send_lat", 8, 2, append(append([]int64{}, a...), b...))
	if len(c.series) != 1 || len(c.series[0].points) != 1 || c.series[0].points[0].y != all.Percentiles["50"] {
		t.Errorf("series %+v, want one point at the p50 of all samples, %v", c.series, all.Percentiles["50"])
	}

	bw := reports.NewDocument(reports.Env{})
	for _, g := range []float64{10, 30, 20} {
		bw.Results = append(bw.Results, reports.Result{Test: "send_bw", Bytes: 64, Bandwidth: &reports.Bandwidth{BWAvgGbps: g}})
	}
	c, err = build([]Input{{"x", bw}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.series[0].points; len(p) != 1 || p[0].y != 20 {
		t.Errorf("points %+v, want one at the median, 20", p)
	}
}

func TestErrors(t *testing.T) {
	bw := []Input{{"bw.json", bandwidthDoc("", 1)}}
	lat := []Input{{"lat.json", latencyDoc(t, 1, 1)}}
	for _, tc := range []struct {
		name   string
		inputs []Input
		opts   Options
		want   string
	}{
		{"latency of bandwidth", bw, Options{Kind: Latency}, "plot: no latency records to draw a latency chart: bw.json holds write_bw 64B, write_bw 256B, write_bw 1024B, write_bw 4096B, write_bw 16384B, write_bw 65536B, and 2 more"},
		{"bandwidth of latency", lat, Options{Kind: Bandwidth}, "no bandwidth records to draw a bandwidth chart: lat.json holds write_lat 2B"},
		{"filters", lat, Options{Kind: CDF, Test: "send_lat", Bytes: 3}, "no latency records with test send_lat and size 3 to draw a cdf chart"},
		{"kind", lat, Options{Kind: "pie"}, `unknown kind "pie"`},
		{"nothing", nil, Options{}, "no documents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteSVG(io.Discard, tc.inputs, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLabels(t *testing.T) {
	d := reports.NewDocument(reports.Env{})
	d.Results = []reports.Result{
		{Test: "send_bw", Bytes: 64, Bandwidth: &reports.Bandwidth{BWAvgGbps: 1}},
		{Test: "send_bw", Bytes: 64, Path: "inline", Bandwidth: &reports.Bandwidth{BWAvgGbps: 2}},
		{Test: "write_bw", Bytes: 64, Bandwidth: &reports.Bandwidth{BWAvgGbps: 3}},
	}
	for _, tc := range []struct {
		inputs []Input
		want   []string
	}{
		{[]Input{{"a.json", d}}, []string{"send_bw", "send_bw path=inline", "write_bw"}},
		{[]Input{{"a.json", d}, {"b.json", d}}, []string{"a.json send_bw", "a.json send_bw path=inline", "a.json write_bw", "b.json send_bw", "b.json send_bw path=inline", "b.json write_bw"}},
	} {
		c, err := build(tc.inputs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range c.series {
			got = append(got, s.label)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
	}
}
