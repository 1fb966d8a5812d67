package oob

import (
	"strconv"
	"strings"
)

// Version is the version string rperf advertises in the version exchange.
//
// perftest reads the peer's version with C atof(), which stops at the first
// character that cannot continue a number, so perftest sees 6.27. That
// value is chosen because
//
//   - it is >= 5.70: perftest refuses peers older than that;
//   - it is >= 5.31, 5.32 and 5.33: perftest uses the 2-byte MTU message,
//     exchanges sys-data and sends 8-byte iteration counts in BW reports;
//   - it is < 6.28: perftest 6.28 and newer skip negotiate_params(), a raw
//     struct (312 or 320 bytes, partly in host byte order, depending on the
//     peer's build flags) that an independent implementation cannot
//     reproduce reliably.
//
// The " rperf/1" suffix, invisible to atof, lets one rperf recognise
// another; 1 is the version of rperf's own extension (the test-parameter
// exchange). The string is 12 bytes, well inside perftest's 16-byte field.
const Version = "6.27 rperf/1"

// VersionSize is the size of the version message: perftest's char[16],
// NUL padded.
const VersionSize = 16

// Version thresholds perftest applies to the peer's version.
const (
	minPeerVersion      = 5.70 // check_version_compatibility()
	mtuShortVersion     = 5.31 // MTU message 2 bytes from here, else 4
	sysDataVersion      = 5.32 // check_sys_data() exchanges from here
	reportIters64       = 5.33 // BW report iters is 8 bytes from here, else 4
	negotiateVersion    = 6.28 // negotiate_params() runs from here; rperf stays below
	rperfMarker         = " rperf/"
	rperfExtensionLevel = 1
)

// atof returns the value of the longest prefix of s that C's atof() would
// read as a decimal number (leading blanks skipped), or 0 when there is
// none. Hexadecimal, "inf" and "nan" forms are not recognised; no perftest
// version uses them.
func atof(s string) float64 {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	start := i
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0
	}
	end := i
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j {
			end = k
		}
	}
	// Out of range gives ±Inf with an error; atof gives ±HUGE_VAL, the same.
	v, _ := strconv.ParseFloat(s[start:end], 64)
	return v
}

// rperfLevel returns the rperf extension level a version string
// advertises, or 0 when it is not an rperf version string.
func rperfLevel(v string) int {
	_, rest, ok := strings.Cut(v, rperfMarker)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// versionMessage returns v as perftest's 16-byte, NUL-padded version field.
func versionMessage(v string) []byte {
	b := make([]byte, VersionSize)
	copy(b, v)
	return b
}

// versionString returns the text of a received version field: the bytes
// before the first NUL.
func versionString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
