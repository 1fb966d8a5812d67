package plot

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Figure is one or more panels under a header with the title and the
// legend, ready to write as SVG or PNG.
type Figure struct {
	// title is the figure's; a single panel's own title stands in when it
	// is empty.
	title  string
	panels []*chart
}

// chart is one panel: a line chart with its axes.
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
	dash    string // dash and gap lengths in points, e.g. "8 4"; "" for a solid line
	width   float64
	markers bool // a dot at each point (sizes are discrete)
	points  []point
}

type point struct{ x, y float64 }

// palette is the Okabe-Ito colour-blind-safe palette, without its yellow
// (too faint on white).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"}

// dashes tell apart the lines of one colour (percentiles, sizes).
var dashes = []string{"", "8 4", "3 3", "10 3 2 3", "1 3", "14 4"}

// Layout: each panel's size, the header's title and legend lines, and
// the DPI of PNG output.
const (
	panelW  = 4.6 * vg.Inch
	panelH  = 3.3 * vg.Inch
	titleH  = 24 // points
	legendH = 9  // points per legend entry
	pngDPI  = 110
)

// Panels returns how many panels the figure has.
func (f *Figure) Panels() int { return len(f.panels) }

// columns is the grid's width: up to two panels side by side, three for
// up to nine, four beyond.
func (f *Figure) columns() int {
	switch n := len(f.panels); {
	case n <= 2:
		return max(n, 1)
	case n <= 4:
		return 2
	case n <= 9:
		return 3
	}
	return 4
}

// legend is the figure's legend: the labelled series of the first panel
// (colours and dashes mean the same in every panel).
func (f *Figure) legend() []series {
	var out []series
	if len(f.panels) > 0 {
		for _, s := range f.panels[0].series {
			if s.label != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// header is the height of the band above the panels: the title, then
// the legend, one entry a line.
func (f *Figure) header() vg.Length {
	return vg.Points(titleH + legendH*float64(len(f.legend())) + 6)
}

// size is the figure's width and height.
func (f *Figure) size() (vg.Length, vg.Length) {
	cols := f.columns()
	rows := (len(f.panels) + cols - 1) / cols
	return vg.Length(cols) * panelW, vg.Length(rows)*panelH + f.header()
}

// WriteSVG writes the figure as SVG.
func (f *Figure) WriteSVG(w io.Writer) error {
	width, height := f.size()
	c := vgsvg.New(width, height)
	if err := f.draw(draw.New(c)); err != nil {
		return err
	}
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}

// WritePNG writes the figure as PNG.
func (f *Figure) WritePNG(w io.Writer) error {
	width, height := f.size()
	c := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(pngDPI), vgimg.UseBackgroundColor(color.White))
	if err := f.draw(draw.New(c)); err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}

// draw writes the header (title and legend) and lays the panels out in a
// grid under it.
func (f *Figure) draw(dc draw.Canvas) error {
	dc.SetColor(color.White) // an opaque background in SVG too
	dc.Fill(dc.Rectangle.Path())
	if len(f.panels) == 0 {
		return fmt.Errorf("plot: nothing to draw")
	}
	title := f.title
	if len(f.panels) == 1 && title == "" {
		title = f.panels[0].title
	}
	plots := make([]*gplot.Plot, len(f.panels))
	for i, c := range f.panels {
		p, err := c.plot()
		if err != nil {
			return err
		}
		if len(f.panels) == 1 {
			p.Title.Text = ""
		}
		plots[i] = p
	}

	head := draw.Crop(dc, 0, 0, dc.Size().Y-f.header(), 0)
	sty := text.Style{Color: color.Black, Font: font.From(gplot.DefaultFont, 14), XAlign: draw.XCenter, YAlign: draw.YTop, Handler: gplot.DefaultTextHandler}
	head.FillText(sty, vg.Point{X: (head.Min.X + head.Max.X) / 2, Y: head.Max.Y - 4}, title)
	leg := gplot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.XOffs, leg.YOffs = vg.Inch/2, -vg.Points(titleH)
	leg.TextStyle.Font.Size = 9
	leg.ThumbnailWidth = 0.4 * vg.Inch
	for _, s := range f.legend() {
		l, sc, err := s.plotters(nil)
		if err != nil {
			return err
		}
		thumbs := []gplot.Thumbnailer{l}
		if sc != nil {
			thumbs = append(thumbs, sc)
		}
		leg.Add(s.label, thumbs...)
	}
	leg.Draw(head)

	body := draw.Crop(dc, 0, 0, 0, -f.header())
	cols := f.columns()
	rows := (len(plots) + cols - 1) / cols
	grid := make([][]*gplot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*gplot.Plot, cols)
		for k := range cols {
			if i := r*cols + k; i < len(plots) {
				grid[r][k] = plots[i]
			}
		}
	}
	pad := vg.Millimeter
	canvases := gplot.Align(grid, draw.Tiles{Rows: rows, Cols: cols, PadX: pad, PadY: pad, PadTop: pad, PadBottom: pad, PadLeft: pad, PadRight: pad}, body)
	for r := range grid {
		for k, p := range grid[r] {
			if p != nil {
				p.Draw(canvases[r][k])
			}
		}
	}
	return nil
}

// plot turns a panel into a gonum plot.
func (c *chart) plot() (*gplot.Plot, error) {
	p := gplot.New()
	p.Title.Text = c.title
	p.X.Label.Text, p.Y.Label.Text = c.x.label, c.y.label
	for _, a := range []struct {
		src *axis
		dst *gplot.Axis
	}{{&c.x, &p.X}, {&c.y, &p.Y}} {
		a.dst.Min, a.dst.Max = a.src.min, a.src.max
		if a.src.scale != linear {
			a.dst.Scale = gplot.LogScale{}
		}
		var ticks gplot.ConstantTicks
		for _, t := range a.src.ticks {
			ticks = append(ticks, gplot.Tick{Value: t.v, Label: t.label})
		}
		a.dst.Tick.Marker = ticks
	}
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = color.Gray{Y: 0xe0}, color.Gray{Y: 0xe0}
	p.Add(grid)
	for _, s := range c.series {
		pts := c.drawable(s.points)
		if len(pts) == 0 {
			continue
		}
		l, sc, err := s.plotters(pts)
		if err != nil {
			return nil, err
		}
		p.Add(l)
		if sc != nil {
			p.Add(sc)
		}
	}
	return p, nil
}

// plotters returns the series' line and, with markers, its dots, over
// pts (nil: a single point, for the legend's thumbnails).
func (s series) plotters(pts plotter.XYs) (*plotter.Line, *plotter.Scatter, error) {
	if pts == nil {
		pts = plotter.XYs{{X: 0, Y: 0}}
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil, nil, fmt.Errorf("plot: %s: %w", s.label, err)
	}
	l.Color = hexColor(s.color)
	l.Width = vg.Points(1.6)
	if s.width > 0 {
		l.Width = vg.Points(s.width)
	}
	l.Dashes = dashLengths(s.dash)
	if !s.markers {
		return l, nil, nil
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return nil, nil, fmt.Errorf("plot: %s: %w", s.label, err)
	}
	sc.Color = l.Color
	sc.Shape = draw.CircleGlyph{}
	sc.Radius = vg.Points(2.2)
	return l, sc, nil
}

// drawable keeps the points the axes can show: finite, and positive on a
// log axis.
func (c *chart) drawable(ps []point) plotter.XYs {
	var out plotter.XYs
	for _, p := range ps {
		if !finite(p.x) || !finite(p.y) || (c.x.scale != linear && p.x <= 0) || (c.y.scale != linear && p.y <= 0) {
			continue
		}
		out = append(out, plotter.XY{X: p.x, Y: p.y})
	}
	return out
}

// hexColor parses "#rrggbb".
func hexColor(s string) color.Color {
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	if err != nil {
		return color.Black
	}
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

// dashLengths parses "8 4" into dash and gap lengths in points.
func dashLengths(d string) []vg.Length {
	var out []vg.Length
	for _, f := range strings.Fields(d) {
		if v, err := strconv.ParseFloat(f, 64); err == nil && v > 0 && !math.IsInf(v, 0) {
			out = append(out, vg.Points(v))
		}
	}
	return out
}
