package soft_test

import (
	"testing"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
)

func TestConformanceShm(t *testing.T) { verbstest.Run(t, "shm0") }

func TestConformanceUDPLoopback(t *testing.T) {
	verbstest.RunWith(t, "udp_lo", verbsio.OpenOptions{UDPPort: -1})
}
