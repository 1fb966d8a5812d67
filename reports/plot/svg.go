package plot

import (
	"fmt"
	"io"
	"strings"
)

// chart is one line chart, ready to draw.
type chart struct {
	title  string
	x, y   axis
	series []series
}

// series is one line: its legend label, its stroke, and its points in
// data units, in drawing order.
type series struct {
	label   string
	color   string
	dash    string // stroke-dasharray; "" for a solid line
	markers bool   // a dot at each point (sizes are discrete)
	points  []point
}

type point struct{ x, y float64 }

// palette is the Okabe-Ito colour-blind-safe palette, without its yellow
// (too faint on white).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"}

// dashes tell apart the lines of one colour (percentiles, sizes).
var dashes = []string{"", "8 4", "3 3", "10 3 2 3", "1 3", "14 4"}

// Layout, in SVG user units (pixels).
const (
	width   = 900
	left    = 80  // plot area
	top     = 50  //
	plotW   = 540 //
	plotH   = 400 //
	legendX = left + plotW + 24
	lineH   = 18 // legend line height
	minH    = top + plotH + 70
)

// writeSVG draws the chart. The output depends only on the chart: fixed
// layout, coordinates rounded to 0.1, no timestamps or random ids.
func (c *chart) writeSVG(w io.Writer) error {
	h := max(minH, top+10+lineH*len(c.series)+20)
	var b strings.Builder
	f := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	px := func(v float64) float64 { return left + plotW*c.x.pos(v) }
	py := func(v float64) float64 { return top + plotH*(1-c.y.pos(v)) }

	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`+"\n", width, h, width, h)
	f(`<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, h)
	f(`<text x="%d" y="28" text-anchor="middle" font-size="15">%s</text>`+"\n", left+plotW/2, esc(c.title))
	f(`<clipPath id="plot-area"><rect x="%d" y="%d" width="%d" height="%d"/></clipPath>`+"\n", left, top, plotW, plotH)

	// Grid and tick labels.
	f(`<g stroke="#e0e0e0" stroke-width="1">` + "\n")
	for _, t := range c.x.ticks {
		f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`+"\n", px(t.v), top, px(t.v), top+plotH)
	}
	for _, t := range c.y.ticks {
		f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`+"\n", left, py(t.v), left+plotW, py(t.v))
	}
	f("</g>\n")
	f(`<g font-size="11" fill="#333333">` + "\n")
	for _, t := range c.x.ticks {
		f(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(t.v), top+plotH+17, esc(t.label))
	}
	for _, t := range c.y.ticks {
		f(`<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-7, py(t.v)+4, esc(t.label))
	}
	f("</g>\n")
	f(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333333"/>`+"\n", left, top, plotW, plotH)
	f(`<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", left+plotW/2, top+plotH+42, esc(c.x.label))
	f(`<text transform="translate(22 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", top+plotH/2, esc(c.y.label))

	// Lines, then markers, clipped to the plot area.
	f(`<g clip-path="url(#plot-area)" fill="none" stroke-width="1.8" stroke-linejoin="round">` + "\n")
	for _, s := range c.series {
		var pts []string
		for _, p := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.y)))
		}
		f(`<polyline stroke="%s"%s points="%s"/>`+"\n", s.color, dashAttr(s.dash), strings.Join(pts, " "))
		if s.markers {
			for _, p := range s.points {
				f(`<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s" stroke="none"/>`+"\n", px(p.x), py(p.y), s.color)
			}
		}
	}
	f("</g>\n")

	// Legend.
	f(`<g font-size="11">` + "\n")
	for i, s := range c.series {
		y := top + 10 + lineH*i
		f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.8"%s/>`+"\n", legendX, y, legendX+28, y, s.color, dashAttr(s.dash))
		f(`<text x="%d" y="%d">%s</text>`+"\n", legendX+36, y+4, esc(s.label))
	}
	f("</g>\n</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func dashAttr(d string) string {
	if d == "" {
		return ""
	}
	return ` stroke-dasharray="` + d + `"`
}

// esc escapes text for SVG (XML) content and attributes.
var esc = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace
