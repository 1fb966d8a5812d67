// Package suite runs a declared list of rperf tests with repetitions,
// interleaved between one or two rperf binaries (a baseline and a
// candidate), into a folder of rperf/v1 documents with the environment
// captured once. rperf suite is built on it; the file format is described
// in docs/ci.md.
//
// Every run is a new process of the binary, with --json added: the noise
// that a regression check must see is between processes (another start,
// other memory placement, a noisy neighbour), and the two sides'
// processes alternate, test by test and repetition by repetition (ABBA),
// so that drift in the machine hits both alike.
package suite

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of a suite file.
const (
	DefaultRepetitions = 5
	DefaultTimeout     = 10 * time.Minute
)

// Suite is a parsed suite file.
type Suite struct {
	// Name is the file's name, for messages.
	Name string
	// Repetitions is how many measured runs each test gets per side.
	Repetitions int
	// Warmup is how many runs of each test per side precede them, not
	// kept.
	Warmup int
	// Timeout bounds each run.
	Timeout time.Duration
	// Tests are the tests, in file order.
	Tests []Test
}

// Test is one line "test NAME ARGS...": an rperf command line.
type Test struct {
	// Name names the test's files: NAME-REP.json.
	Name string
	// Args are rperf's arguments, without the program name: the command
	// ("write-lat") and its flags.
	Args []string
	// Line is where the test was declared.
	Line int
}

// validName is what a test name may be: it becomes a file name.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// notForTests are rperf commands that do not measure.
var notForTests = []string{"compare", "plot", "suite", "help", "completion"}

// reserved are flags the suite sets itself or that write elsewhere.
var reserved = []string{"--json", "--hgrm", "--help", "-h", "--version"}

// Parse reads a suite file. Each line holds one declaration; '#' starts
// a comment; blank lines are ignored:
//
//	repetitions N     measured runs of each test per side (default 5)
//	warmup N          runs of each test per side before them, not kept (default 0)
//	timeout D         bound on each run, a Go duration (default 10m)
//	test NAME ARGS    an rperf command line, without "rperf" and --json
//
// ARGS are split into words as a POSIX shell would split them, with
// single and double quotes and backslash escapes, and no expansion.
func Parse(r io.Reader, name string) (*Suite, error) {
	s := &Suite{Name: name, Repetitions: DefaultRepetitions, Timeout: DefaultTimeout}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		fail := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, a...))
		}
		words, err := split(sc.Text())
		if err != nil {
			return nil, fail("%v", err)
		}
		if len(words) == 0 {
			continue
		}
		key, args := words[0], words[1:]
		switch key {
		case "repetitions", "warmup":
			if len(args) != 1 {
				return nil, fail("%s takes one number, e.g. %q", key, key+" 5")
			}
			n, err := strconv.Atoi(args[0])
			low := 1
			if key == "warmup" {
				low = 0
			}
			if err != nil || n < low || n > 1000 {
				return nil, fail("%s %s: want a whole number from %d to 1000", key, args[0], low)
			}
			if key == "warmup" {
				s.Warmup = n
			} else {
				s.Repetitions = n
			}
		case "timeout":
			d, err := time.ParseDuration(strings.Join(args, ""))
			if len(args) != 1 || err != nil || d <= 0 {
				return nil, fail("timeout takes one positive duration, e.g. \"timeout 5m\"")
			}
			s.Timeout = d
		case "test":
			t, err := parseTest(args, line)
			if err != nil {
				return nil, fail("%v", err)
			}
			if seen[t.Name] {
				return nil, fail("test %s is declared twice: give each test its own name", t.Name)
			}
			seen[t.Name] = true
			s.Tests = append(s.Tests, t)
		default:
			return nil, fail("unknown declaration %q: want repetitions, warmup, timeout or test", key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(s.Tests) == 0 {
		return nil, fmt.Errorf("%s declares no test: add lines such as \"test lat write-lat --loopback -a --max-size 4096\"", name)
	}
	return s, nil
}

func parseTest(args []string, line int) (Test, error) {
	if len(args) < 2 {
		return Test{}, fmt.Errorf("test needs a name and an rperf command line, e.g. \"test lat write-lat --loopback\"")
	}
	t := Test{Name: args[0], Args: args[1:], Line: line}
	if !validName.MatchString(t.Name) {
		return Test{}, fmt.Errorf("test name %q: use letters, digits, '.', '_' and '-' (it names the files)", t.Name)
	}
	if t.Args[0] == "rperf" {
		t.Args = t.Args[1:]
	}
	if len(t.Args) == 0 || strings.HasPrefix(t.Args[0], "-") {
		return Test{}, fmt.Errorf("test %s: the command line must start with an rperf command, e.g. write-lat", t.Name)
	}
	if slices.Contains(notForTests, t.Args[0]) {
		return Test{}, fmt.Errorf("test %s: rperf %s measures nothing; a suite runs test commands (write-lat, send-bw, ...)", t.Name, t.Args[0])
	}
	for _, a := range t.Args {
		flag, _, _ := strings.Cut(a, "=")
		if slices.Contains(reserved, flag) {
			return Test{}, fmt.Errorf("test %s: drop %s: the suite writes each run's --json document itself", t.Name, flag)
		}
	}
	return t, nil
}

// split splits a line into words as a POSIX shell does, without
// expansion: blanks separate words, '#' at the start of a word begins a
// comment, single quotes keep everything, double quotes keep everything
// but backslash escapes of '"', '\\', '$' and '`', and a backslash
// outside quotes keeps the next character.
func split(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'':
			inWord = true
			j := slices.Index(rs[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote")
			}
			w.WriteString(string(rs[i+1 : i+1+j]))
			i += j + 1
		case c == '"':
			inWord = true
			closed := false
			for i++; i < len(rs); i++ {
				if rs[i] == '"' {
					closed = true
					break
				}
				if rs[i] == '\\' && i+1 < len(rs) && strings.ContainsRune("\"\\$`", rs[i+1]) {
					i++
				}
				w.WriteRune(rs[i])
			}
			if !closed {
				return nil, fmt.Errorf("unterminated double quote")
			}
		case c == '\\':
			inWord = true
			if i+1 < len(rs) {
				i++
				w.WriteRune(rs[i])
			}
		default:
			inWord = true
			w.WriteRune(c)
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
