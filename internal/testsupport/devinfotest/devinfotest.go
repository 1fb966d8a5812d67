// Package devinfotest parses ibv_devinfo-style text ("label:<tabs>value"
// lines) into fields, for tests that compare rdiag and the sysfs reader
// with a real device's `ibv_devinfo -v` capture.
package devinfotest

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Fields is one device's text: the device's fields and each port's,
// keyed by label; GID lines are keyed "GID[N]".
type Fields struct {
	Device map[string]string
	Ports  map[int]map[string]string
}

var gidLabel = regexp.MustCompile(`^GID\[\s*(\d+)\]$`)

// Parse reads the "label:<tabs>value" lines of one device. Lines without
// a value (section titles), continuation lines (flag names) and labels
// with spaces are skipped; "port:" starts a port. It stops at the first
// blank line after the device, so text that follows (rdiag's capability
// table) is not taken for devinfo fields. The first value of a repeated
// label is kept.
func Parse(text string) (Fields, error) {
	f := Fields{Device: map[string]string{}, Ports: map[int]map[string]string{}}
	cur := f.Device
	sc := bufio.NewScanner(strings.NewReader(text))
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if seen {
				break
			}
			continue
		}
		seen = true
		label, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		value = strings.TrimSpace(value)
		if m := gidLabel.FindStringSubmatch(label); m != nil {
			n, _ := strconv.Atoi(m[1])
			label = "GID[" + strconv.Itoa(n) + "]"
		}
		if !ok || value == "" || strings.ContainsAny(label, " \t") {
			continue
		}
		if label == "port" {
			n, err := strconv.Atoi(value)
			if err != nil {
				return f, fmt.Errorf("bad port line %q", line)
			}
			cur = map[string]string{}
			f.Ports[n] = cur
			continue
		}
		if _, dup := cur[label]; !dup {
			cur[label] = value
		}
	}
	return f, sc.Err()
}
