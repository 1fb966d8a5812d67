package clock

import (
	"bufio"
	"bytes"
	"strings"
)

// invariantTSC reports whether a /proc/cpuinfo text advertises a TSC that
// ticks at a constant rate (constant_tsc) and keeps ticking in deep C-states
// (nonstop_tsc) on every listed CPU. Only then are TSC differences a clock.
func invariantTSC(cpuinfo []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	seen := false
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(key) != "flags" {
			continue
		}
		seen = true
		var constant, nonstop bool
		for _, f := range strings.Fields(val) {
			switch f {
			case "constant_tsc":
				constant = true
			case "nonstop_tsc":
				nonstop = true
			}
		}
		if !constant || !nonstop {
			return false
		}
	}
	return seen
}
