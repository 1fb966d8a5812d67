package compare

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// formatValue prints v with four significant digits, without exponent:
// 0.1975, 52.49, 9.862, 38524.
func formatValue(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	prec := 3 - int(math.Floor(math.Log10(math.Abs(v))))
	return strconv.FormatFloat(v, 'f', max(prec, 0), 64)
}

// formatPct prints a signed relative change: "+4.1%", "-12.0%", and
// whole percents from 100% on: "+262%", "+21677%".
func formatPct(p float64) string {
	if math.Abs(p) >= 99.95 {
		return fmt.Sprintf("%+.0f%%", p)
	}
	return fmt.Sprintf("%+.1f%%", p)
}

// formatThreshold prints a threshold percentage: "5%", "2.5%".
func formatThreshold(p float64) string {
	return strconv.FormatFloat(p, 'f', -1, 64) + "%"
}

// formatConfidence prints a confidence level as a whole percentage, or
// with one decimal when that is needed: "95%", "96.8%", "99.5%"; above
// 99%, with two significant digits of what it lacks to 100%: "99.38%",
// "99.922%".
func formatConfidence(c float64) string {
	p := 100 * c
	if r := math.Round(p); math.Abs(p-r) < 0.05 && !(p > 99 && r == 100) {
		return fmt.Sprintf("%.0f%%", r)
	}
	if p > 99 && p < 100 {
		decimals := 1 - int(math.Floor(math.Log10(100-p)))
		s := strings.TrimRight(strconv.FormatFloat(p, 'f', decimals, 64), "0")
		return strings.TrimSuffix(s, ".") + "%"
	}
	return fmt.Sprintf("%.1f%%", p)
}

// formatInterval prints an interval of a change: "[+2.0%, +6.3%]".
func formatInterval(iv *Interval) string {
	if iv == nil {
		return "-"
	}
	return "[" + formatPct(iv.LoPct) + ", " + formatPct(iv.HiPct) + "]"
}

// noiseLabel is the short noise column: "5v5 runs, 96.8%", "3v3 range,
// 90%", "1v1 histogram", "1v1 none".
func noiseLabel(c *Comparison) string {
	s := fmt.Sprintf("%dv%d %s", c.Baseline.Runs, c.Candidate.Runs, c.Noise)
	if c.Interval != nil && c.Interval.Confidence > 0 {
		s += ", " + formatConfidence(c.Interval.Confidence)
	}
	return s
}

// fileNames lists up to four names, then how many more.
func fileNames(fs []File) string {
	const shown = 4
	var names []string
	for i, f := range fs {
		if i == shown {
			names = append(names, fmt.Sprintf("and %d more", len(fs)-shown))
			break
		}
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// plural is "1 document" or "2 documents".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
