package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/plot/vg"

	"github.com/rperf/rperf/internal/testsupport/golden"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/internal/testkit"
)

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
func latencyDoc(t testing.TB, seed uint64, slow float64) *reports.Document {
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

func renderInputs(t *testing.T, inputs []Input, opts Options) []byte {
	t.Helper()
	f, err := Build(inputs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return render(t, f)
}

// render writes f as SVG and checks that it is well-formed XML.
func render(t *testing.T, f *Figure) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := f.WriteSVG(&b); err != nil {
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
		{"cdf_sizes.svg", []Input{{"run.json", base}}, Options{Kind: CDF, Panels: PanelsNone}},
		{"cdf_panels.svg", two, Options{Kind: CDF}},
		{"latency_panels.svg", two, Options{Panels: PanelsPercentile}},
		{"bandwidth.svg", []Input{{"a.json", bandwidthDoc("generic", 1)}, {"b.json", bandwidthDoc("inline", 1.2)}}, Options{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got := renderInputs(t, tc.inputs, tc.opts)
			golden.Check(t, filepath.Join("testdata", tc.file), got)
			if again := renderInputs(t, tc.inputs, tc.opts); !bytes.Equal(got, again) {
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
	if ss := c.panels[0].series; len(c.panels) != 1 || len(ss) != 1 || len(ss[0].points) != 1 || ss[0].points[0].y != all.Percentiles["50"] {
		t.Errorf("series %+v, want one point at the p50 of all samples, %v", ss, all.Percentiles["50"])
	}

	// The same run timed by completion timestamps is a line of its
	// own, not a repetition.
	ts := latencyResult(t, "send_lat", 8, 2, b)
	ts.Clock = reports.ClockCompletion
	d.Results = []reports.Result{latencyResult(t, "send_lat", 8, 2, a), ts}
	if c, err = build([]Input{{"x", d}}, Options{Percentiles: []float64{50}}); err != nil {
		t.Fatal(err)
	}
	if ss := c.panels[0].series; len(ss) != 2 || ss[0].label != "p50" || ss[1].label != "clock=completion p50" ||
		ss[1].points[0].y != ts.Percentiles["50"] {
		t.Errorf("series %+v, want the software clock's and the completion stamps' lines", ss)
	}

	bw := reports.NewDocument(reports.Env{})
	for _, g := range []float64{10, 30, 20} {
		bw.Results = append(bw.Results, reports.Result{Test: "send_bw", Bytes: 64, Bandwidth: &reports.Bandwidth{BWAvgGbps: g}})
	}
	c, err = build([]Input{{"x", bw}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.panels[0].series[0].points; len(p) != 1 || p[0].y != 20 {
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
		{"panels by size of a latency chart", lat, Options{Panels: PanelsSize}, "panels by size are for a cdf chart, not latency"},
		{"panels by percentile of a cdf", lat, Options{Kind: CDF, Panels: PanelsPercentile}, "panels by percentile are for a latency chart, not cdf"},
		{"panels", lat, Options{Panels: "grid"}, `unknown panels "grid"`},
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
		for _, s := range c.panels[0].series {
			got = append(got, s.label)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
	}
}

// TestPanels: a CDF of several sizes gets a panel per size, each with a
// line per document and the size as its title, the legend on the first
// only; a latency chart split by percentile gets a panel per percentile.
func TestPanels(t *testing.T) {
	base, cand := latencyDoc(t, 1, 1), latencyDoc(t, 100, 1.3)
	two := []Input{{"baseline.json", base}, {"candidate.json", cand}}
	f, err := Build(two, Options{Kind: CDF})
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, p := range f.panels {
		titles = append(titles, p.title)
		if len(p.series) != 2 || p.series[0].label != "baseline.json" || p.series[1].color == p.series[0].color {
			t.Errorf("panel %s: series %+v", p.title, p.series)
		}
	}
	if want := []string{"2 B", "8 B", "32 B", "128 B", "512 B", "2048 B"}; !slices.Equal(titles, want) || f.columns() != 3 {
		t.Errorf("panels %q in %d columns, want %q in 3", titles, f.columns(), want)
	}
	if f, err = Build(two, Options{Panels: PanelsPercentile, Percentiles: []float64{50, 99}}); err != nil || f.Panels() != 2 || f.panels[1].title != "p99" || f.panels[1].series[0].dash != "" {
		t.Errorf("latency by percentile: %v, %d panels", err, f.Panels())
	}
}

// TestPNG: the PNG is an image of the figure's size at the PNG DPI, not
// blank: it has the lines' colours.
func TestPNG(t *testing.T) {
	f, err := Build([]Input{{"baseline.json", latencyDoc(t, 1, 1)}, {"candidate.json", latencyDoc(t, 100, 1.3)}}, Options{Kind: CDF})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := f.WritePNG(&b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	w, h := f.size()
	if got := img.Bounds().Size(); math.Abs(float64(got.X)-float64(w/vg.Inch)*pngDPI) > 1 || math.Abs(float64(got.Y)-float64(h/vg.Inch)*pngDPI) > 1 {
		t.Errorf("PNG %v, want %.0fx%.0f", got, float64(w/vg.Inch)*pngDPI, float64(h/vg.Inch)*pngDPI)
	}
	colours := map[string]bool{}
	for y := 0; y < img.Bounds().Dy(); y += 2 {
		for x := 0; x < img.Bounds().Dx(); x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[fmt.Sprintf("%02x%02x%02x", r>>8, g>>8, b>>8)] = true
		}
	}
	for _, c := range palette[:2] {
		if !colours[strings.ToLower(strings.TrimPrefix(c, "#"))] {
			t.Errorf("no pixel of %s in the PNG", c)
		}
	}
}

// TestRuns: a comparison's figure of one latency key has a thin line per
// run, a bold one per side and the compared percentile marked; of one
// bandwidth key, each side's runs in order.
func TestRuns(t *testing.T) {
	var base, cand []reports.Result
	for i := range 4 {
		base = append(base, latencyResult(t, "write_lat", 64, 2, samples(uint64(i), 2000, 400)))
		cand = append(cand, latencyResult(t, "write_lat", 64, 2, samples(uint64(10+i), 2000, 520)))
	}
	f, err := Runs(base, cand, RunsOptions{Title: "write_lat 64B p99: worse", Percentile: 99})
	if err != nil {
		t.Fatal(err)
	}
	ss := f.panels[0].series
	if len(ss) != 11 || ss[4].label != "baseline, all runs" || ss[4].width <= ss[0].width || ss[10].label != "p99" || ss[10].points[0].x != 100 {
		t.Errorf("%d series; labels %q %q, widths %v %v, marker at %v", len(ss), ss[4].label, ss[10].label, ss[0].width, ss[4].width, ss[10].points[0].x)
	}
	golden.Check(t, filepath.Join("testdata", "runs_latency.svg"), render(t, f))

	bw := func(g ...float64) []reports.Result {
		var out []reports.Result
		for _, v := range g {
			out = append(out, reports.Result{Test: "write_bw", Bytes: 4096, Bandwidth: &reports.Bandwidth{BWAvgGbps: v, MsgRateMpps: v / 32}})
		}
		return out
	}
	f, err = Runs(bw(30, 31, 29, 30.5), bw(24, 25, 23.5, 24), RunsOptions{Title: "write_bw 4096B bw_avg", Metric: "bw_avg"})
	if err != nil {
		t.Fatal(err)
	}
	if ss := f.panels[0].series; len(ss) != 2 || ss[1].points[2] != (point{3, 23.5}) || f.panels[0].x.max != 4.5 {
		t.Errorf("bandwidth runs: %+v", ss)
	}
	if _, err := Runs(base, bw(1), RunsOptions{}); err == nil {
		t.Error("latency against bandwidth records accepted")
	}
}
