package main_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOtherPlatforms: rperf and rdiag build on Linux only, and a build for
// another system stops with that reason, not with whatever library fails
// to compile first (docs/ARCHITECTURE.md, "Platforms").
func TestOtherPlatforms(t *testing.T) {
	for _, goos := range []string{"darwin", "windows"} {
		for _, cmd := range []string{"rperf", "rdiag"} {
			build := exec.Command("go", "build", "-o", os.DevNull, "../"+cmd)
			build.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
			out, err := build.CombinedOutput()
			want := cmd + " builds on Linux only"
			if err == nil || !strings.Contains(string(out), want) {
				t.Errorf("GOOS=%s go build ./cmd/%s: %v, output %q; want a failure saying %q", goos, cmd, err, out, want)
			}
			if strings.Contains(string(out), "undefined:") {
				t.Errorf("GOOS=%s go build ./cmd/%s failed in a library first:\n%s", goos, cmd, out)
			}
		}
	}
}
