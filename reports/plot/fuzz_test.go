package plot

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/rperf/rperf/reports"
)

// FuzzPlot feeds rperf plot a document as it comes from disk: every input
// draws or gives an error that says what is wrong, never a panic.
func FuzzPlot(f *testing.F) {
	var lat, bw bytes.Buffer
	if err := latencyDoc(f, 1, 1).Write(&lat); err != nil {
		f.Fatal(err)
	}
	if err := bandwidthDoc("inline", 1).Write(&bw); err != nil {
		f.Fatal(err)
	}
	f.Add(lat.Bytes())
	f.Add(bw.Bytes())
	f.Add([]byte(`{"schema":"rperf/v1","results":[{"test":"write_bw","bytes":0,"bw_avg_gbps":-3},{"test":"write_bw","bytes":-8,"bw_avg_gbps":1e308}]}`))
	f.Add([]byte(`{"schema":"rperf/v1","results":[{"test":"write_lat","bytes":2,"rtt_factor":0,"true_max_us":-1,"hdr":"HISTFAAAACl4nJNpmSzMwMDAywABzFCaEUzOmNZg/wEi0NjHxMTAxFTOyMbIzsDAAMcfBV4="}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := reports.Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		in := []Input{{Name: "a.json", Doc: d}, {Name: "b.json", Doc: d}}
		for _, opts := range []Options{{}, {Kind: CDF}, {Kind: Bandwidth}, {Kind: Latency, Panels: PanelsNone}} {
			fig, err := Build(in, opts)
			if err != nil {
				if strings.TrimSpace(err.Error()) == "" {
					t.Fatal("an error without a message")
				}
				continue
			}
			if err := fig.WriteSVG(io.Discard); err != nil && strings.TrimSpace(err.Error()) == "" {
				t.Fatal("an error without a message")
			}
		}
		// A comparison's figure of the first key, its records split in two.
		if len(d.Results) >= 2 {
			k := d.Results[0]
			var same []reports.Result
			for _, r := range d.Results {
				if r.Test == k.Test && r.Bytes == k.Bytes {
					same = append(same, r)
				}
			}
			if len(same) >= 2 {
				if fig, err := Runs(same[:1], same[1:], RunsOptions{Percentile: 99}); err == nil {
					_ = fig.WriteSVG(io.Discard)
				}
			}
		}
	})
}
