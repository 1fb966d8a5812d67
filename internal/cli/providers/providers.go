// Package providers links the verbs providers into rperf and rdiag: the
// built-in engine (devices shm0 and udp_<netdev>) and rdma-core's
// libibverbs (the kernel's RDMA devices, which it opens in a build with
// -tags ibverbs and only lists otherwise). Both commands' mains import it,
// and nothing else does: the command packages and their tests see
// whatever providers the binary links.
package providers

import (
	"github.com/rperf/rperf/verbsio/hw"
	_ "github.com/rperf/rperf/verbsio/soft" // registers shm0 and udp_<netdev>
)

// IBVerbs reports whether this binary's ibverbs provider opens kernel RDMA
// devices (a build with -tags ibverbs and cgo).
const IBVerbs = hw.Built
