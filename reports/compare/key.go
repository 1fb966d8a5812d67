package compare

import (
	"fmt"
	"strings"

	"github.com/rperf/rperf/reports"
)

// Key identifies what a record measured: a test at a message size on a
// send path. Records with equal keys are repetitions of one measurement,
// whether they come from one document or several.
type Key struct {
	Test  string
	Bytes int64
	Path  string // empty when the record names no path
	// Clock is the record's reports.Result.Clock: empty for the software
	// clock, "completion" for the same run timed by completion
	// timestamps, never a repetition of the software clock's record.
	Clock string
}

// KeyOf returns the key of a record. The generic send path has the key
// of a record that names no path: records written before send paths
// existed were generic, and generic is what every test runs by default.
func KeyOf(r reports.Result) Key {
	p := r.Path
	if p == "generic" {
		p = ""
	}
	return Key{Test: r.Test, Bytes: r.Bytes, Path: p, Clock: r.Clock}
}

// String formats a key as the reports print it: "write_lat 2B", or
// "write_lat 2B path=inline" when the record names a path.
func (k Key) String() string {
	s := fmt.Sprintf("%s %dB", k.Test, k.Bytes)
	if k.Path != "" {
		s += " path=" + k.Path
	}
	if k.Clock != "" {
		s += " clock=" + k.Clock
	}
	return s
}

// Input is one rperf/v1 document and the name it is reported under,
// usually its file name.
type Input struct {
	Name string
	Doc  *reports.Document
}

// run is one record: one repetition of a key's measurement.
type run struct {
	file string
	res  reports.Result
}

// side is every record of one side (baseline or candidate), grouped by
// key in the order keys first appear.
type side struct {
	name   string // "baseline" or "candidate"
	keys   []Key
	groups map[Key]*group
}

// newSide groups the records of inputs by key and checks that the
// records of a key can be repetitions of each other: all latency or all
// bandwidth, with one rtt_factor.
func newSide(name string, inputs []Input) (*side, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("no %s documents", name)
	}
	s := &side{name: name, groups: map[Key]*group{}}
	for _, in := range inputs {
		if len(in.Doc.Results) == 0 {
			return nil, fmt.Errorf("%s %s has no results", name, in.Name)
		}
		for i, r := range in.Doc.Results {
			if (r.Latency == nil) == (r.Bandwidth == nil) {
				return nil, fmt.Errorf("%s %s: record %d (%s) is neither a latency nor a bandwidth record", name, in.Name, i, KeyOf(r))
			}
			k := KeyOf(r)
			g := s.groups[k]
			if g == nil {
				g = &group{key: k, latency: r.Latency != nil}
				s.groups[k] = g
				s.keys = append(s.keys, k)
			}
			if err := g.add(run{file: in.Name, res: r}); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return s, nil
}

// NoMatchError says that no key appears on both sides, and lists what
// each side has.
type NoMatchError struct {
	Baseline, Candidate []Key
}

func (e *NoMatchError) Error() string {
	return fmt.Sprintf("no matching records: the baseline has %s; the candidate has %s (records match on test, message size, path and clock)",
		keyList(e.Baseline), keyList(e.Candidate))
}

// keyList names up to eight keys.
func keyList(keys []Key) string {
	const shown = 8
	var names []string
	for i, k := range keys {
		if i == shown {
			names = append(names, fmt.Sprintf("and %d more", len(keys)-shown))
			break
		}
		names = append(names, k.String())
	}
	return strings.Join(names, ", ")
}
