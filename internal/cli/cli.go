// Package cli is what rperf's and rdiag's commands share: exit codes, the
// error types that choose them, terminal detection, and a Main that runs a
// cobra root and turns any error into one line on stderr.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// Exit codes shared by rperf and rdiag (documented in the README).
const (
	ExitOK          = 0 // success
	ExitFailure     = 1 // the run failed: peer unreachable, peer died, I/O error, ...
	ExitUsage       = 2 // wrong or conflicting flags or arguments
	ExitRegression  = 3 // rperf compare found a regression; rdiag check found a FAIL
	ExitEnvironment = 4 // this machine cannot do what was asked (no device, not built with a provider, ...)
	ExitInterrupted = 130
)

// UsageError is a problem with flags or arguments; Main prints it with a
// hint to --help and exits with ExitUsage.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a *UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// EnvironmentError says the machine cannot do what was asked; it exits with
// ExitEnvironment.
type EnvironmentError struct{ Err error }

func (e *EnvironmentError) Error() string { return e.Err.Error() }
func (e *EnvironmentError) Unwrap() error { return e.Err }

// ExitError carries an exit code chosen by a command (for example a
// regression verdict) with an optional message; an empty message prints
// nothing.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// ExitCode maps an error to its exit code.
func ExitCode(err error) int {
	var ue *UsageError
	var ee *EnvironmentError
	var xe *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &xe):
		return xe.Code
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &ee):
		return ExitEnvironment
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	}
	return ExitFailure
}

// Main runs root with args and returns the exit code. Errors are printed
// as one line, "name: message", never as a stack trace; usage errors add a
// pointer to --help. SIGINT and SIGTERM cancel the command's context.
func Main(root *cobra.Command, args []string, stderr io.Writer) int {
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.SetArgs(args)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &UsageError{Err: err}
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitCode(err)
	if isCobraUsage(err) {
		code = ExitUsage
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "%s: %s\n", root.Name(), msg)
	}
	if code == ExitUsage && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// isCobraUsage recognises cobra's own argument errors (unknown command,
// wrong number of arguments), which it returns as plain errors.
func isCobraUsage(err error) bool {
	var ue *UsageError
	if errors.As(err, &ue) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand flag", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// IsTerminal reports whether f is a terminal (progress output goes only to
// terminals).
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
