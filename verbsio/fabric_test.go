package verbsio_test

import (
	"testing"

	"github.com/rperf/rperf/verbsio"
	_ "github.com/rperf/rperf/verbsio/soft"
)

func TestUDPNetdev(t *testing.T) {
	cases := []struct {
		name, netdev string
		ok           bool
	}{
		{"udp_eth0", "eth0", true},
		{"udp_lo", "lo", true},
		{"udp_", "", false},
		{"shm0", "", false},
		{"mlx5_0", "", false},
		{"rxe_udp_0", "", false},
	}
	for _, c := range cases {
		if n, ok := verbsio.UDPNetdev(c.name); n != c.netdev || ok != c.ok {
			t.Errorf("UDPNetdev(%q) = %q, %v; want %q, %v", c.name, n, ok, c.netdev, c.ok)
		}
	}
}

// The built-in engine answers the optional questions for both fabrics;
// a context that implements none answers as hardware does.
func TestFabricQuestions(t *testing.T) {
	cases := []struct {
		device   string
		opts     verbsio.OpenOptions
		poll     bool
		port     int // -1: any non-zero port but 4791
		counters bool
		segments bool
	}{
		{"shm0", verbsio.OpenOptions{}, false, 0, false, false},
		{"udp_lo", verbsio.OpenOptions{UDPPort: -1}, true, -1, true, true},
		{"udp_lo", verbsio.OpenOptions{QueryOnly: true}, true, verbsio.RoCEv2Port, true, true},
	}
	for _, c := range cases {
		dev, err := verbsio.OpenWith(c.device, c.opts)
		if err != nil {
			t.Fatalf("%s: %v", c.device, err)
		}
		port := dev.UDPPort()
		if dev.PollDriven() != c.poll || (c.port >= 0 && port != c.port) || (c.port < 0 && (port <= 0 || port == verbsio.RoCEv2Port)) ||
			(dev.Counters() != nil) != c.counters || dev.Device.Segments() != c.segments {
			t.Errorf("%s %+v: poll-driven %v, UDP port %d, counters %v, segments %v", c.device, c.opts, dev.PollDriven(), port, dev.Counters(), dev.Device.Segments())
		}
		if c.port < 0 {
			// The port is the one peers learn as the LID.
			pa, err := dev.QueryPort(1)
			if err != nil || int(pa.LID) != port {
				t.Errorf("%s: UDP port %d, LID %d (%v)", c.device, port, pa.LID, err)
			}
		}
		dev.Close()
	}
	if (verbsio.DeviceInfo{Fabric: "raw"}).Segments() != true || (verbsio.DeviceInfo{}).Segments() {
		t.Error("Segments: raw segments, hardware does not")
	}
}
