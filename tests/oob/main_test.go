package oob

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the run if goroutines started by the tests (fake peers,
// AfterFunc hooks) outlive them: every exchange must end in bounded time.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
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
