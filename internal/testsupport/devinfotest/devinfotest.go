// Package devinfotest compares rdiag's output with what rdma-core's tools
// print for the same device: CompareDevinfo (ibv_devinfo [-v] against
// rdiag info [-v], field by field and line by line), ComparePorts
// (ibv_devinfo and `rdma link` against `rdiag ports`), CompareGIDs
// (ibv_devinfo -v's GID lines against `rdiag gids`) and CompareRdmaDev
// (`rdma dev` against rdiag info). Each returns every difference as a
// Diff; none means rdiag agrees. Parse reads one device's
// "label:<tabs>value" lines into fields for simpler checks.
//
// # The capture
//
// testdata/rxe0 holds what a real Soft-RoCE device said about itself, in
// the rxe VM (/work/shared/rxe-vm: Linux 6.1 rdma_rxe, rdma-core 44, one
// vCPU), run by vmcapture.sh with rdiag and rperf built by
// `make build-ibverbs` and the ibverbs provider's test binary: ibv_devinfo
// -v and ibv_devinfo, rdiag info -v and info (table and --json), rdiag
// ports and gids (and --json), rdma link, rdma dev, hw.test's device tests
// (hw-test.txt), and the versions; NAME.rc is each command's exit status. TestRXECapture compares them, so
// `make test` proves the parity offline. testdata/rxe0-before is the same
// device before rdiag printed the extended attributes (the diffs
// CompareDevinfo must find). To capture again (as root, ~30 s):
//
//	make build-ibverbs
//	CGO_ENABLED=1 go test -c -tags ibverbs -o bin/hw.test ./verbsio/hw
//	mkdir -p /tmp/devinfo-vm && echo "devinfo  true || vmcapture.sh" > /tmp/devinfo-vm/tests.txt
//	(cd /work/shared/rxe-vm && TMPDIR=/tmp/devinfo-vm RESULTS=/tmp/devinfo-vm/results \
//	  SMP=1 KVM_PROBE=0 TESTS=/tmp/devinfo-vm/tests.txt \
//	  EXTRA_BINS="$PWD/bin/rperf $PWD/bin/rdiag $PWD/bin/hw.test $PWD/internal/testsupport/devinfotest/vmcapture.sh" \
//	  ./run.sh single)
//	cp /tmp/devinfo-vm/results/single/devinfo/* internal/testsupport/devinfotest/testdata/rxe0/
//
// (the "true ||" test line runs nothing as the VM's server and
// vmcapture.sh as its client). On any machine with an RDMA device and
// rdma-core's tools, `vmcapture.sh DEV DIR` captures the same files.
package devinfotest

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Fields is one device's text: the device's fields and each port's,
// keyed by label; GID lines are keyed "GID[N]".
type Fields struct {
	Device map[string]string
	Ports  map[int]map[string]string
}

var gidLabel = regexp.MustCompile(`^GID\[\s*(\d+)\]$`)

// Parse reads the "label:<tabs>value" lines of one device. Lines without
// a value (section titles), continuation lines (flag names) and labels
// with spaces are skipped; "port:" starts a port. It stops at the first
// blank line after the device, so text that follows (rdiag's capability
// table) is not taken for devinfo fields. The first value of a repeated
// label is kept.
func Parse(text string) (Fields, error) {
	f := Fields{Device: map[string]string{}, Ports: map[int]map[string]string{}}
	cur := f.Device
	sc := bufio.NewScanner(strings.NewReader(text))
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if seen {
				break
			}
			continue
		}
		seen = true
		label, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		value = strings.TrimSpace(value)
		if m := gidLabel.FindStringSubmatch(label); m != nil {
			n, _ := strconv.Atoi(m[1])
			label = "GID[" + strconv.Itoa(n) + "]"
		}
		if !ok || value == "" || strings.ContainsAny(label, " \t") {
			continue
		}
		if label == "port" {
			n, err := strconv.Atoi(value)
			if err != nil {
				return f, fmt.Errorf("bad port line %q", line)
			}
			cur = map[string]string{}
			f.Ports[n] = cur
			continue
		}
		if _, dup := cur[label]; !dup {
			cur[label] = value
		}
	}
	return f, sc.Err()
}
