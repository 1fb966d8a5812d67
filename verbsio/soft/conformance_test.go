package soft_test

import (
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

// TestConformanceRaw runs the raw part of the suite on raw_<netdev>
// devices at the two ends of a veth pair between two namespaces.
func TestConformanceRaw(t *testing.T) {
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
			err = h.Run(func() error { ctx, err = verbsio.Open("raw_" + h.Link); return err })
			return ctx, err
		}, mac
	}
	cfg := verbstest.RawConfig{IPA: p.A.Addr4.Addr(), IPB: p.B.Addr4.Addr(), MTU: 1500}
	cfg.OpenA, cfg.MACA = end(p.A)
	cfg.OpenB, cfg.MACB = end(p.B)
	verbstest.RunRaw(t, cfg)
}
