// Package plotcmd is rperf plot: charts of rperf --json documents, as SVG
// and PNG, drawn by package reports/plot.
package plotcmd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/plot"
)

// Options are rperf plot's flags and arguments.
type Options struct {
	Files       []string
	Out         string // "-" for stdout
	Kind        string // "" picks latency or bandwidth from the records
	Percentiles []float64
	Test        string
	Size        int64
	Title       string
	Panels      string
	// PNG writes a PNG beside an SVG file.
	PNG bool
}

// New returns the plot command. A non-nil run replaces its action (tests
// of flag parsing use it); nil runs [Run].
func New(run func(*Options) error) *cobra.Command {
	o := &Options{PNG: true}
	cmd := &cobra.Command{
		Use:   "plot RESULT.json... --out FILE.svg",
		Short: "draw --json results as SVG and PNG: latency or bandwidth by size, latency percentile distribution",
		Long: `Draw a chart from rperf --json documents, as SVG with a PNG beside it
(FILE.svg and FILE.png; --out FILE.png writes the PNG alone, --png=false the
SVG alone). Several documents are overlaid (a baseline and a candidate, two
paths, two devices), each in its own colour.

Kinds (--kind):
  latency     latency against message size, one line per percentile
              (--percentiles, default 50,99,99.9), from the HdrHistograms
  cdf         the latency percentile distribution of each record, from its
              HdrHistogram, on a log-scaled tail axis (0%, 90%, 99%, 99.9%...),
              one panel per message size
  bandwidth   average bandwidth (Gb/s) against message size

Panels (--panels): size (a cdf per message size, the default for a cdf of
several sizes), percentile (a latency chart per percentile), none (one panel).

Without --kind the chart is latency when the documents hold latency records,
bandwidth otherwise. Latency is in microseconds as rperf reports it (divided
by rtt_factor). Records repeated in a document are combined: histograms merged
exactly, bandwidth by the median.

Examples:
  rperf write-lat --loopback -a --json lat.json && rperf plot lat.json --out lat.svg
  rperf plot base.json cand.json --kind cdf --out cdf.svg       one panel per size
  rperf plot base.json cand.json --kind cdf --size 64 --out cdf64.png
  rperf plot bw.json --kind bandwidth --out bw.svg`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(args); err != nil {
				return err
			}
			if run != nil {
				return run(o)
			}
			return Run(o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Out, "out", "o", "", "write the chart to `FILE`: .svg (and a .png beside it) or .png; - for SVG on stdout; required")
	f.StringVar(&o.Kind, "kind", "", "chart kind: latency, cdf or bandwidth (default: from the records)")
	f.Float64SliceVar(&o.Percentiles, "percentiles", plot.DefaultPercentiles, "the lines of a latency chart")
	f.StringVar(&o.Test, "test", "", "draw only this test's records (e.g. write_lat)")
	f.Int64Var(&o.Size, "size", 0, "draw only records of this message size in bytes")
	f.StringVar(&o.Title, "title", "", "the chart's title (default: the tests and the kind)")
	f.StringVar(&o.Panels, "panels", "", "split the chart: size (cdf), percentile (latency) or none (default: a panel per size for a cdf)")
	f.BoolVar(&o.PNG, "png", true, "with an .svg --out, also write the PNG beside it")
	return cmd
}

// complete checks what the flags alone cannot.
func (o *Options) complete(args []string) error {
	o.Files = args
	if len(args) == 0 {
		return cli.Usagef("plot needs at least one rperf --json document")
	}
	switch {
	case o.Out == "":
		return cli.Usagef("--out is required: name the SVG file to write (- for stdout)")
	case o.Out != "-" && !strings.HasSuffix(strings.ToLower(o.Out), ".svg") && !strings.HasSuffix(strings.ToLower(o.Out), ".png"):
		return cli.Usagef("--out %s: rperf plot writes SVG or PNG; name the file .svg (a .png is written beside it) or .png", o.Out)
	}
	if o.Panels != "" && !slices.Contains([]plot.Panels{plot.PanelsSize, plot.PanelsPercentile, plot.PanelsNone}, plot.Panels(o.Panels)) {
		return cli.Usagef("--panels %s: want size, percentile or none", o.Panels)
	}
	if o.Kind != "" && !slices.Contains(plot.Kinds, plot.Kind(o.Kind)) {
		return cli.Usagef("--kind %s: want latency, cdf or bandwidth", o.Kind)
	}
	for _, p := range o.Percentiles {
		if !(p > 0 && p <= 100) {
			return cli.Usagef("--percentiles: %v is outside (0, 100]", p)
		}
	}
	if o.Size < 0 {
		return cli.Usagef("--size %d: want a message size in bytes", o.Size)
	}
	return nil
}

// Run reads the documents and writes the chart: SVG and, beside it, PNG.
func Run(o *Options, stdout io.Writer) error {
	var inputs []plot.Input
	for _, name := range o.Files {
		d, err := reports.ReadFile(name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		inputs = append(inputs, plot.Input{Name: name, Doc: d})
	}
	f, err := plot.Build(inputs, plot.Options{
		Kind: plot.Kind(o.Kind), Percentiles: o.Percentiles, Test: o.Test, Bytes: o.Size, Title: o.Title, Panels: plot.Panels(o.Panels),
	})
	if err != nil {
		return err
	}
	if o.Out == "-" {
		return f.WriteSVG(stdout)
	}
	return WriteFigure(f, o.Out, o.PNG)
}

// WriteFigure writes f to name, .svg or .png; for .svg with png, also to
// the .png beside it. Each file is rendered in memory first, so a failure
// leaves no partial file.
func WriteFigure(f *plot.Figure, name string, png bool) error {
	ext := strings.ToLower(filepath.Ext(name))
	outs := []struct {
		name  string
		write func(io.Writer) error
	}{{name, f.WriteSVG}}
	switch {
	case ext == ".png":
		outs[0].write = f.WritePNG
	case png:
		outs = append(outs, struct {
			name  string
			write func(io.Writer) error
		}{strings.TrimSuffix(name, filepath.Ext(name)) + ".png", f.WritePNG})
	}
	for _, out := range outs {
		var b bytes.Buffer
		if err := out.write(&b); err != nil {
			return err
		}
		if err := os.WriteFile(out.name, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", out.name, err)
		}
	}
	return nil
}
