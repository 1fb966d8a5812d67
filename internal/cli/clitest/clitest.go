// Package clitest runs one subcommand as its binary's main would, for the
// commands' unit tests.
package clitest

import (
	"bytes"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli"
)

// Run runs sub under a root command named root, with args after the
// subcommand's name, through cli.Main (error printing and exit codes), and
// returns the exit code, stdout and stderr.
func Run(root string, sub *cobra.Command, args ...string) (code int, stdout, stderr string) {
	r := &cobra.Command{Use: root}
	r.AddCommand(sub)
	var out, errb bytes.Buffer
	r.SetOut(&out)
	r.SetErr(&errb) // what the command itself writes to stderr, before cli.Main's error line
	code = cli.Main(r, append([]string{sub.Name()}, args...), &errb)
	return code, out.String(), errb.String()
}
