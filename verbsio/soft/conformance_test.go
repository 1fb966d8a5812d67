package soft_test

import (
	"cmp"
	"net"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"testing"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
)

func TestConformanceShm(t *testing.T) { verbstest.Run(t, "shm0") }

func TestConformanceUDPLoopback(t *testing.T) {
	verbstest.RunWith(t, "udp_lo", verbsio.OpenOptions{UDPPort: -1})
}

// rawIOModes are the raw port's I/O choices (OpenOptions.RawIO) that
// the raw tests run under: the default and each alternative.
var rawIOModes = []string{"", "v3", "txring", "bypass", "txring,bypass", "xdp", "v3,xdp"}

// TestConformanceRaw runs the raw part of the suite on raw_<netdev>
// devices at the two ends of a veth pair between two namespaces, once per
// raw I/O mode.
func TestConformanceRaw(t *testing.T) {
	for _, mode := range rawIOModes {
		t.Run("io="+cmp.Or(mode, "default"), func(t *testing.T) { conformanceRaw(t, mode) })
	}
}

func conformanceRaw(t *testing.T, mode string) {
	p := netns.Setup(t, netns.Options{})
	end := func(h netns.Host) (func() (*verbsio.Context, error), verbsio.MAC) {
		var mac verbsio.MAC
		if err := h.Run(func() error {
			ifc, err := net.InterfaceByName(h.Link)
			if err == nil {
				copy(mac[:], ifc.HardwareAddr)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return func() (ctx *verbsio.Context, err error) {
			err = h.Run(func() error { ctx, err = verbsio.OpenWith("raw_"+h.Link, verbsio.OpenOptions{RawIO: mode}); return err })
			return ctx, err
		}, mac
	}
	cfg := verbstest.RawConfig{IPA: p.A.Addr4.Addr(), IPB: p.B.Addr4.Addr(), MTU: 1500}
	cfg.OpenA, cfg.MACA = end(p.A)
	cfg.OpenB, cfg.MACB = end(p.B)
	verbstest.RunRaw(t, cfg)
}
