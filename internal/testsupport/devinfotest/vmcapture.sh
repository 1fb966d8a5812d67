#!/bin/sh
# vmcapture.sh: run inside a Linux with a real RDMA device (the rxe VM of
# /work/shared/rxe-vm, or any machine with rdma-core's tools) to capture
# what ibv_devinfo, rdma and rdiag (built with `make build-ibverbs`) say
# about it, one file per command, for devinfotest's comparison and for
# testdata/ (see doc.go). Usage: vmcapture.sh [DEV [OUTDIR]]
# (defaults rxe0 and /out/devinfo). Arguments that are not a device
# name are ignored, so the VM's "true || vmcapture.sh" test line (which
# appends the VM's address) works as is.
DEV=rxe0
case "${1:-}" in [a-z]*) DEV=$1 ;; esac
OUT=${2:-${OUT:-/out}/devinfo}
mkdir -p "$OUT"
run() { # name command...: output in NAME.txt, exit status in NAME.rc
	name=$1; shift
	"$@" > "$OUT/$name.txt" 2>&1
	echo $? > "$OUT/$name.rc"
}
run ibv_devinfo-v ibv_devinfo -v -d "$DEV"
run ibv_devinfo ibv_devinfo
run rdiag-info-v rdiag info -v "$DEV"
run rdiag-info rdiag info "$DEV"
run rdiag-ports rdiag ports
run rdiag-gids rdiag gids
run rdma-link rdma link
run rdma-dev rdma dev
run rdiag-info-json rdiag info --json "$DEV"
run rdiag-ports-json rdiag ports --json
run rdiag-gids-json rdiag gids --json
{
	echo "kernel: $(uname -r)"
	echo "cpus: $(nproc)"
	ls /usr/lib/x86_64-linux-gnu/libibverbs.so.1.* 2>/dev/null
	ls /usr/lib/x86_64-linux-gnu/libibverbs/ 2>/dev/null | grep rxe
} > "$OUT/versions.txt" 2>&1
# The ibverbs provider's own device tests, when the test binary came along
# (go test -c -tags ibverbs -o hw.test ./verbsio/hw).
if command -v hw.test >/dev/null; then
	export RPERF_TEST_DEVICE="$DEV"
	run hw-test hw.test -test.v -test.run '^TestDevice'
fi
