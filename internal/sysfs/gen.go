package sysfs

// The fixture trees under testdata/sys are generated from the dumps under
// testdata/src; TestFixturesMatchSources keeps the two in step.
//
//go:generate go run ./internal/dumptree/mkfixture -o testdata/sys/rxe testdata/src/rxe/sysfs-dump.txt testdata/src/rxe/extra.txt
//go:generate go run ./internal/dumptree/mkfixture -o testdata/sys/ib testdata/src/ib.txt
//go:generate go run ./internal/dumptree/mkfixture -o testdata/sys/roce testdata/src/roce.txt
//go:generate go run ./internal/dumptree/mkfixture -o testdata/sys/portdown testdata/src/portdown.txt
//go:generate go run ./internal/dumptree/mkfixture -o testdata/sys/missing testdata/src/missing.txt
