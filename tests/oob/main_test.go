package oob

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the run if goroutines started by the tests (fake peers,
// AfterFunc hooks) outlive them: every exchange must end in bounded time.
// Fuzzing (-test.fuzz) is left alone: its engine keeps goroutines of its
// own (a signal handler); the seed corpus runs, checked, in every go test.
func TestMain(m *testing.M) {
	flag.Parse()
	fuzzing := flag.Lookup("test.fuzz").Value.String() != ""
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 && !fuzzing {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			fmt.Fprintf(os.Stderr, "goroutine leak: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
			code = 1
		}
	}
	os.Exit(code)
}
