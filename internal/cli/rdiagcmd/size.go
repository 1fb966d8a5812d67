package rdiagcmd

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// parseSize parses a byte count: a number with an optional unit, binary
// (KiB, MiB, GiB, TiB) or its one- or two-letter short form (K, KB, M, MB,
// G, GB, T, TB, which are binary too, as ulimit and perftest read them),
// or "unlimited".
func parseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "unlimited") {
		return math.MaxUint64, nil
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (KiB, MiB, GiB)", s)
	}
	shift := map[string]uint{"": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20,
		"g": 30, "gb": 30, "gib": 30, "t": 40, "tb": 40, "tib": 40}
	sh, ok := shift[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (want KiB, MiB, GiB or TiB)", s, unit)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: bad number", s)
	}
	b := v * float64(uint64(1)<<sh)
	if b >= math.MaxUint64 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return uint64(b), nil
}
