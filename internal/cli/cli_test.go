package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestExitCode(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailure},
		{Usagef("bad -s"), ExitUsage},
		{fmt.Errorf("wrapped: %w", Usagef("bad -s")), ExitUsage},
		{&EnvironmentError{Err: errors.New("no device")}, ExitEnvironment},
		{&ExitError{Code: ExitRegression}, ExitRegression},
	}
	for _, c := range cases {
		if got := ExitCode(c.err); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestMainOneLineErrors(t *testing.T) {
	mk := func(run func() error) *cobra.Command {
		root := &cobra.Command{Use: "tool"}
		sub := &cobra.Command{Use: "do", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return run() }}
		sub.Flags().Int("n", 0, "")
		root.AddCommand(sub)
		return root
	}
	cases := []struct {
		name     string
		args     []string
		run      func() error
		code     int
		contains []string
	}{
		{"ok", []string{"do"}, func() error { return nil }, ExitOK, nil},
		{"failure", []string{"do"}, func() error { return errors.New("peer died") }, ExitFailure, []string{"tool: peer died\n"}},
		{"unknown flag", []string{"do", "--bogus"}, func() error { return nil }, ExitUsage, []string{"unknown flag: --bogus", "Run 'tool do --help' for usage."}},
		{"bad value", []string{"do", "--n", "x"}, func() error { return nil }, ExitUsage, []string{"invalid argument"}},
		{"extra argument", []string{"do", "extra"}, func() error { return nil }, ExitUsage, []string{"unknown command"}},
		{"usage from run", []string{"do"}, func() error { return Usagef("-s 0: size must be at least 1") }, ExitUsage, []string{"tool: -s 0: size must be at least 1"}},
		{"silent exit", []string{"do"}, func() error { return &ExitError{Code: 3} }, 3, nil},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		code := Main(mk(c.run), c.args, &stderr)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d (stderr %q)", c.name, code, c.code, stderr.String())
		}
		for _, s := range c.contains {
			if !strings.Contains(stderr.String(), s) {
				t.Errorf("%s: stderr %q lacks %q", c.name, stderr.String(), s)
			}
		}
		if c.contains == nil && stderr.Len() != 0 {
			t.Errorf("%s: unexpected stderr %q", c.name, stderr.String())
		}
		if strings.Contains(stderr.String(), "goroutine") {
			t.Errorf("%s: stack trace on stderr", c.name)
		}
	}
}
