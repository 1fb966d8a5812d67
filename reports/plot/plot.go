// Package plot draws rperf results as line charts, in SVG and PNG, with
// gonum.org/v1/plot doing the drawing, of three kinds:
//
//   - [Latency]: latency against message size, one line per percentile
//     (default p50, p99, p99.9), read from the records' HdrHistograms;
//   - [CDF]: the latency percentile distribution of each record, from its
//     HdrHistogram, on HdrHistogram's own axis: 1/(1−q) on a log scale
//     (0%, 90%, 99%, 99.9%, ...), which spreads out the tail where the
//     differences live; one panel per message size;
//   - [Bandwidth]: average bandwidth (Gb/s) against message size.
//
// One chart can overlay several documents (a baseline and a candidate,
// two paths, two devices): each document, test and path gets a colour,
// each percentile a dash pattern. Records repeated in one document (same
// test, size and path) are combined: latency histograms merged exactly,
// bandwidth by the median. [Runs] draws one key of a comparison run by
// run, for rperf compare's plots of the metrics it flags.
//
// This package decides what is drawn: the panels, series, axes, scales
// and ticks (message sizes in powers of two, the percentile tail axis);
// gonum/plot lays them out and renders them, so the output is
// deterministic for a given version of it. Latency is in microseconds as
// the records give it, divided by rtt_factor.
package plot

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rperf/rperf/internal/stats"
	"github.com/rperf/rperf/reports"
)

// Kind is what a chart shows.
type Kind string

// Chart kinds.
const (
	Latency   Kind = "latency"   // latency percentiles against message size
	CDF       Kind = "cdf"       // each record's latency percentile distribution
	Bandwidth Kind = "bandwidth" // average bandwidth against message size
)

// Kinds lists the chart kinds.
var Kinds = []Kind{Latency, CDF, Bandwidth}

// DefaultPercentiles are the lines of a latency chart when none are asked
// for.
var DefaultPercentiles = []float64{50, 99, 99.9}

// Input is one rperf/v1 document and the name its lines are labelled
// with (usually its file name).
type Input struct {
	Name string
	Doc  *reports.Document
}

// Options configures [WriteSVG].
type Options struct {
	// Kind of chart; "" picks Latency when any record is a latency
	// record, else Bandwidth.
	Kind Kind
	// Percentiles are the lines of a Latency chart; nil means
	// DefaultPercentiles.
	Percentiles []float64
	// Test keeps only the records of this test ("" keeps all).
	Test string
	// Bytes keeps only the records of this message size (0 keeps all).
	Bytes int64
	// Title replaces the chart's title.
	Title string
	// Panels splits the chart: [PanelsSize] (a CDF per message size),
	// [PanelsPercentile] (a latency chart per percentile) or [PanelsNone]
	// (one panel); "" picks one panel per size for a CDF of several
	// sizes, one per percentile for a latency chart of several, else one
	// panel.
	Panels Panels
}

// Panels is how a chart is split into panels.
type Panels string

// Panel splits.
const (
	PanelsNone       Panels = "none"
	PanelsSize       Panels = "size"
	PanelsPercentile Panels = "percentile"
)

// Build turns the inputs into a figure of the kind asked, ready to write
// as SVG or PNG.
func Build(inputs []Input, opts Options) (*Figure, error) {
	return build(inputs, opts)
}

// WriteSVG draws inputs as one SVG figure.
func WriteSVG(w io.Writer, inputs []Input, opts Options) error {
	f, err := build(inputs, opts)
	if err != nil {
		return err
	}
	return f.WriteSVG(w)
}

// line is the records of one document, test and path, by message size.
type line struct {
	input      int
	test, path string
	clock      string // reports.Result.Clock: a line of its own

	sizes  []int64 // ascending
	bySize map[int64][]reports.Result
}

// build turns the inputs into a figure of the kind asked.
func build(inputs []Input, opts Options) (*Figure, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("plot: no documents")
	}
	kind := opts.Kind
	if kind == "" {
		kind = Bandwidth
		for _, in := range inputs {
			if slices.ContainsFunc(in.Doc.Results, func(r reports.Result) bool { return r.Latency != nil }) {
				kind = Latency
				break
			}
		}
	}
	if !slices.Contains(Kinds, kind) {
		return nil, fmt.Errorf("plot: unknown kind %q: want latency, cdf or bandwidth", kind)
	}
	switch {
	case opts.Panels == "" || opts.Panels == PanelsNone:
	case opts.Panels == PanelsSize && kind != CDF:
		return nil, fmt.Errorf("plot: panels by size are for a cdf chart, not %s (a %s chart has sizes on its x axis)", kind, kind)
	case opts.Panels == PanelsPercentile && kind != Latency:
		return nil, fmt.Errorf("plot: panels by percentile are for a latency chart, not %s", kind)
	case opts.Panels != PanelsSize && opts.Panels != PanelsPercentile:
		return nil, fmt.Errorf("plot: unknown panels %q: want size, percentile or none", opts.Panels)
	}
	ls := lines(inputs, opts, kind != Bandwidth)
	if len(ls) == 0 {
		return nil, noRecords(inputs, opts, kind)
	}
	lab := newLabeler(inputs, ls)
	switch kind {
	case Latency:
		return latencyFigure(ls, lab, opts)
	case CDF:
		return cdfFigure(ls, lab, opts)
	}
	return &Figure{panels: []*chart{bandwidthChart(ls, lab, opts)}}, nil
}

// lines groups the records of the wanted kind that pass the filters.
func lines(inputs []Input, opts Options, latency bool) []*line {
	var out []*line
	for i, in := range inputs {
		byKey := map[[3]string]*line{}
		for _, r := range in.Doc.Results {
			kindOK := (latency && r.Latency != nil) || (!latency && r.Bandwidth != nil && r.Latency == nil)
			if !kindOK || (opts.Test != "" && r.Test != opts.Test) || (opts.Bytes != 0 && r.Bytes != opts.Bytes) {
				continue
			}
			path := r.Path
			if path == "generic" { // the default path, as records without one
				path = ""
			}
			k := [3]string{r.Test, path, r.Clock}
			l := byKey[k]
			if l == nil {
				l = &line{input: i, test: r.Test, path: path, clock: r.Clock, bySize: map[int64][]reports.Result{}}
				byKey[k] = l
				out = append(out, l)
			}
			if _, ok := l.bySize[r.Bytes]; !ok {
				l.sizes = append(l.sizes, r.Bytes)
			}
			l.bySize[r.Bytes] = append(l.bySize[r.Bytes], r)
		}
	}
	for _, l := range out {
		slices.Sort(l.sizes)
	}
	return out
}

// noRecords explains an empty chart: what the filters and kind asked
// for, and what the documents hold.
func noRecords(inputs []Input, opts Options, kind Kind) error {
	what := "latency"
	if kind == Bandwidth {
		what = "bandwidth"
	}
	var filters []string
	if opts.Test != "" {
		filters = append(filters, "test "+opts.Test)
	}
	if opts.Bytes != 0 {
		filters = append(filters, fmt.Sprintf("size %d", opts.Bytes))
	}
	var held []string
	for _, in := range inputs {
		var tests []string
		for _, r := range in.Doc.Results {
			t := r.Test + fmt.Sprintf(" %dB", r.Bytes)
			if !slices.Contains(tests, t) {
				tests = append(tests, t)
			}
		}
		if len(tests) > 6 {
			tests = append(tests[:6], fmt.Sprintf("and %d more", len(tests)-6))
		}
		if len(tests) == 0 {
			tests = []string{"no records"}
		}
		held = append(held, fmt.Sprintf("%s holds %s", in.Name, strings.Join(tests, ", ")))
	}
	msg := "plot: no " + what + " records"
	if len(filters) > 0 {
		msg += " with " + strings.Join(filters, " and ")
	}
	return fmt.Errorf("%s to draw a %s chart: %s", msg, kind, strings.Join(held, "; "))
}

// labeler names lines by what tells them apart: the document when there
// are several, the test when there are several, the path when set.
type labeler struct {
	inputs    []Input
	manyFiles bool
	manyTests bool
}

func newLabeler(inputs []Input, ls []*line) labeler {
	lab := labeler{inputs: inputs}
	files, tests := map[int]bool{}, map[string]bool{}
	for _, l := range ls {
		files[l.input], tests[l.test] = true, true
	}
	lab.manyFiles, lab.manyTests = len(files) > 1, len(tests) > 1
	return lab
}

// label names line l, with variant ("p99", "64B") appended when set.
func (lab labeler) label(l *line, variant string) string {
	var parts []string
	if lab.manyFiles {
		parts = append(parts, lab.inputs[l.input].Name)
	}
	if lab.manyTests || (!lab.manyFiles && l.path == "" && l.clock == "" && variant == "") {
		parts = append(parts, l.test)
	}
	if l.path != "" {
		parts = append(parts, "path="+l.path)
	}
	if l.clock != "" {
		parts = append(parts, "clock="+l.clock)
	}
	if variant != "" {
		parts = append(parts, variant)
	}
	return strings.Join(parts, " ")
}

// title is the chart's title: opts.Title, or what it shows and of which
// tests.
func title(opts Options, ls []*line, what string) string {
	if opts.Title != "" {
		return opts.Title
	}
	var tests []string
	for _, l := range ls {
		if !slices.Contains(tests, l.test) {
			tests = append(tests, l.test)
		}
	}
	return strings.Join(tests, ", ") + ": " + what
}

// merged merges the histograms of repeated latency records of one size
// and returns it with the largest true maximum (ns) and the rtt factor.
func merged(l *line, size int64) (*histogram, error) {
	rs := l.bySize[size]
	h := &histogram{rtt: rs[0].RTTFactor}
	var hs []*hdr.Histogram
	for _, r := range rs {
		if r.RTTFactor != h.rtt {
			return nil, fmt.Errorf("plot: %s %dB: records with rtt_factor %d and %d", l.test, size, h.rtt, r.RTTFactor)
		}
		d, err := reports.DecodeHDR(r.HDR)
		if err != nil {
			return nil, fmt.Errorf("plot: %s %dB: %w", l.test, size, err)
		}
		hs = append(hs, d)
		h.maxNs = max(h.maxNs, r.Latency.MaxNs())
	}
	m, err := reports.MergeHistograms(hs)
	if err != nil {
		return nil, fmt.Errorf("plot: %s %dB: %w", l.test, size, err)
	}
	h.h = m
	return h, nil
}

// yScale picks a log scale when the values span more than 20×.
func yScale(lo, hi float64) scale {
	if lo > 0 && hi/lo > 20 {
		return log10
	}
	return linear
}

// latencyFigure: one line per (document, test, path) and percentile, in
// one panel, or one panel per percentile.
func latencyFigure(ls []*line, lab labeler, opts Options) (*Figure, error) {
	ps := opts.Percentiles
	if ps == nil {
		ps = DefaultPercentiles
	}
	split := len(ps) > 1 && (opts.Panels == PanelsPercentile || opts.Panels == "")
	fig := &Figure{}
	one := &chart{title: title(opts, ls, "latency by message size")}
	for j, p := range ps {
		c := one
		if split {
			c = &chart{title: "p" + reports.PercentileKey(p)}
			fig.title = title(opts, ls, "latency by message size")
		}
		for i, l := range ls {
			s := series{color: palette[i%len(palette)], markers: true}
			s.label = lab.label(l, "p"+reports.PercentileKey(p))
			if split {
				s.label = lab.label(l, "")
			} else {
				s.dash = dashes[j%len(dashes)]
			}
			for _, size := range l.sizes {
				h, err := merged(l, size)
				if err != nil {
					return nil, err
				}
				s.points = append(s.points, point{float64(size), h.percentileUs(p)})
			}
			c.series = append(c.series, s)
		}
		if split || j == len(ps)-1 {
			latencyAxes(c)
			fig.panels = append(fig.panels, c)
		}
	}
	return fig, nil
}

// latencyAxes: sizes on a log2 axis, latency linear or, over a wide
// range, log10.
func latencyAxes(c *chart) {
	xlo, xhi, ylo, yhi := c.bounds()
	c.x = newAxis("message size [bytes]", log2, xlo, xhi)
	c.y = newAxis("latency [usec]", yScale(ylo, yhi), ylo, yhi)
}

// cdfSteps is the number of points per decade of 1/(1−q) in a CDF.
const cdfSteps = 20

// cdfFigure: one line per (document, test, path) and message size, in one
// panel per size (the default with several sizes), or all in one panel,
// where every line gets the next colour and the dash pattern changes with
// the document, test and path, and again each time the colours run out.
func cdfFigure(ls []*line, lab labeler, opts Options) (*Figure, error) {
	var sizes []int64
	for _, l := range ls {
		for _, s := range l.sizes {
			if !slices.Contains(sizes, s) {
				sizes = append(sizes, s)
			}
		}
	}
	slices.Sort(sizes)
	what := "latency percentile distribution"
	if opts.Panels == PanelsSize || (opts.Panels == "" && len(sizes) > 1) {
		fig := &Figure{title: title(opts, ls, what)}
		for _, size := range sizes {
			c := &chart{title: fmt.Sprintf("%d B", size)}
			for i, l := range ls {
				if _, ok := l.bySize[size]; !ok {
					continue
				}
				h, err := merged(l, size)
				if err != nil {
					return nil, err
				}
				c.series = append(c.series, series{label: lab.label(l, ""), color: palette[i%len(palette)], points: h.tailPoints()})
			}
			cdfAxes(c)
			fig.panels = append(fig.panels, c)
		}
		return fig, nil
	}
	c := &chart{title: title(opts, ls, what)}
	for i, l := range ls {
		for j, size := range l.sizes {
			h, err := merged(l, size)
			if err != nil {
				return nil, err
			}
			variant := ""
			if len(sizes) > 1 {
				variant = fmt.Sprintf("%dB", size)
			}
			k := len(c.series)
			c.series = append(c.series, series{
				label: lab.label(l, variant), color: palette[k%len(palette)], dash: dashes[(i+j/len(palette))%len(dashes)], points: h.tailPoints(),
			})
		}
	}
	cdfAxes(c)
	return &Figure{panels: []*chart{c}}, nil
}

// cdfAxes: the percentile tail axis, latency linear or log10.
func cdfAxes(c *chart) {
	_, xhi, ylo, yhi := c.bounds()
	c.x = newAxis("percentile", tail, 1, max(xhi, 10))
	c.y = newAxis("latency [usec]", yScale(ylo, yhi), ylo, yhi)
}

// bandwidthChart: one line per (document, test, path); repeated records
// of one size give their median.
func bandwidthChart(ls []*line, lab labeler, opts Options) *chart {
	c := &chart{title: title(opts, ls, "average bandwidth by message size")}
	for i, l := range ls {
		s := series{label: lab.label(l, ""), color: palette[i%len(palette)], markers: true}
		for _, size := range l.sizes {
			var vs []float64
			for _, r := range l.bySize[size] {
				vs = append(vs, r.BWAvgGbps)
			}
			s.points = append(s.points, point{float64(size), stats.Median(vs)})
		}
		c.series = append(c.series, s)
	}
	xlo, xhi, _, yhi := c.bounds()
	c.x = newAxis("message size [bytes]", log2, xlo, xhi)
	c.y = newAxis("average bandwidth [Gb/s]", linear, 0, yhi)
	return c
}

// bounds returns the range of the chart's finite points, and 1..1 when
// there are none.
func (c *chart) bounds() (xlo, xhi, ylo, yhi float64) {
	xlo, ylo = math.Inf(1), math.Inf(1)
	xhi, yhi = math.Inf(-1), math.Inf(-1)
	for _, s := range c.series {
		for _, p := range s.points {
			if !finite(p.x) || !finite(p.y) {
				continue
			}
			xlo, xhi = min(xlo, p.x), max(xhi, p.x)
			ylo, yhi = min(ylo, p.y), max(yhi, p.y)
		}
	}
	if xlo > xhi {
		return 1, 1, 1, 1
	}
	return xlo, xhi, ylo, yhi
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
