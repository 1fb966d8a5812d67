// Command mkfixture rebuilds a sysfs fixture tree from one or more dumps.
//
// Usage:
//
//	go run ./internal/dumptree/mkfixture -o testdata/sys/rxe testdata/src/rxe/sysfs-dump.txt testdata/src/rxe/extra.txt
//
// The output directory is removed first, so files dropped from a dump do
// not linger. As a guard, it must lie under a directory named testdata.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rperf/rperf/internal/sysfs/internal/dumptree"
)

func main() {
	out := flag.String("o", "", "output directory (under testdata/), replaced")
	flag.Parse()
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "mkfixture:", err)
		os.Exit(1)
	}
}

func run(out string, dumps []string) error {
	if out == "" || len(dumps) == 0 {
		return fmt.Errorf("usage: mkfixture -o testdata/sys/NAME DUMP...")
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Split(filepath.ToSlash(abs), "/"), "testdata") {
		return fmt.Errorf("refusing to replace %s: not under a testdata directory", out)
	}
	entries, err := dumptree.ParseFiles(dumps...)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	return dumptree.Write(out, entries)
}
