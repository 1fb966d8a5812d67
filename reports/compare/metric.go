package compare

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rperf/rperf/reports"
)

// Metric is one figure compared for each key.
type Metric struct {
	// Name is the metric as --metrics and the reports spell it: "p50",
	// "p99.9", "mean", "bw_avg" or "msg_rate".
	Name string
	// Unit is the unit of its values: "us", "Gb/s" or "Mpps".
	Unit string
	// HigherIsBetter is true for bandwidth and message rate; latency is
	// better lower.
	HigherIsBetter bool
	// Latency is true for metrics of latency records, false for metrics
	// of bandwidth records.
	Latency bool
	// Percentile is the percentile of a pNN metric (0 < p ≤ 100), 0 for
	// the others.
	Percentile float64
}

// DefaultMetrics are the metrics compared when none are named: each
// applies to the records of its kind.
var DefaultMetrics = []string{"p50", "p99", "p99.9", "mean", "bw_avg", "msg_rate"}

// ParseMetric parses one metric name: pNN for any latency percentile
// (recomputed from the histograms, so it need not be one the run
// printed), mean (latency), bw_avg (average bandwidth in Gb/s) or
// msg_rate (message rate in Mpps).
func ParseMetric(name string) (Metric, error) {
	switch name {
	case "mean":
		return Metric{Name: name, Unit: "us", Latency: true}, nil
	case "bw_avg":
		return Metric{Name: name, Unit: "Gb/s", HigherIsBetter: true}, nil
	case "msg_rate":
		return Metric{Name: name, Unit: "Mpps", HigherIsBetter: true}, nil
	}
	if rest, ok := strings.CutPrefix(name, "p"); ok {
		p, err := strconv.ParseFloat(rest, 64)
		if err == nil && p > 0 && p <= 100 {
			return Metric{Name: "p" + reports.PercentileKey(p), Unit: "us", Latency: true, Percentile: p}, nil
		}
	}
	return Metric{}, fmt.Errorf("unknown metric %q: want pNN (a latency percentile, 0 < NN ≤ 100, e.g. p99.9), mean, bw_avg or msg_rate", name)
}

// ParseMetrics parses metric names (see [ParseMetric]), dropping
// repeats; no names at all is an error.
func ParseMetrics(names []string) ([]Metric, error) {
	var out []Metric
	seen := map[string]bool{}
	for _, n := range names {
		m, err := ParseMetric(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		if !seen[m.Name] {
			seen[m.Name] = true
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no metrics to compare: name at least one of pNN, mean, bw_avg, msg_rate")
	}
	return out, nil
}

// better is the direction word used in reports.
func (m Metric) better() string {
	if m.HigherIsBetter {
		return "higher"
	}
	return "lower"
}
