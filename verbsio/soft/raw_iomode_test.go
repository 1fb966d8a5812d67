package soft_test

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft"
	"github.com/rperf/rperf/verbsio/soft/internal/afpacket"
)

// TestRawIOModes runs the raw tests again under each raw I/O mode that
// is not the default (the default runs them as themselves): steering and
// the kernel filter, TSO (engine-cut on veth; AF_XDP has no GSO), VLANs,
// timestamps, the mana profile's EBUSY port lock, oversized frames,
// pacing and the send paths. The conformance suite runs per mode in
// TestConformanceRaw.
func TestRawIOModes(t *testing.T) {
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"SendReceive", TestRawSendReceive},
		{"Oversized", TestRawOversized},
		{"Steering", TestRawSteering},
		{"FlowWhileTraffic", TestRawFlowWhileTraffic},
		{"TSO", TestRawTSO},
		{"VLAN", TestRawVLAN},
		{"Timestamps", TestRawTimestamps},
		{"NoAlloc", TestRawNoAlloc},
		{"Mana", TestRawMana},
		{"PacedStream", TestRawPacedStream},
	}
	for _, mode := range []string{"v3", "bypass", "xdp"} {
		t.Run("io="+mode, func(t *testing.T) {
			rawIOUnderTest = mode
			defer func() { rawIOUnderTest = "" }()
			for _, tc := range tests {
				t.Run(tc.name, tc.run)
			}
		})
	}
}

// TestRawIOOption checks OpenOptions.RawIO: each mode opens and reports
// itself in full, bad words get an error naming the word and the choices,
// and AF_XDP's one socket per queue gives a second context on the port
// an error naming the alternative.
func TestRawIOOption(t *testing.T) {
	p := netns.Setup(t, netns.Options{})
	open := func(io string) (*verbsio.Context, error) {
		var ctx *verbsio.Context
		err := p.A.Run(func() (err error) {
			ctx, err = verbsio.OpenWith("raw_"+p.A.Link, verbsio.OpenOptions{RawIO: io})
			return err
		})
		return ctx, err
	}
	for _, c := range []struct{ io, want, seg string }{
		{"", "v2,sendmmsg,nobypass", "engine"},
		{"default", "v2,sendmmsg,nobypass", "engine"},
		{"v3", "v3,sendmmsg,nobypass", "engine"},
		{"V3, txring", "v3,txring,nobypass", "engine"},
		{"bypass", "v2,sendmmsg,bypass", "engine"},
		{"nobypass,txring,v2", "v2,txring,nobypass", "engine"},
		{"xdp", "v2,xdp,nobypass", "engine"},
		{"xdp,v3", "v3,xdp,nobypass", "engine"},
	} {
		ctx, err := open(c.io)
		if err != nil {
			t.Errorf("RawIO %q: %v", c.io, err)
			continue
		}
		sc := ctx.Impl().(*soft.Context)
		if got := sc.RawIO(); got != c.want {
			t.Errorf("RawIO %q opened as %q, want %q", c.io, got, c.want)
		}
		if who, _ := sc.Segmentation(); who != c.seg {
			t.Errorf("RawIO %q: segmentation %q, want %q", c.io, who, c.seg)
		}
		ctx.Close()
	}
	for _, c := range []struct{ io, want string }{
		{"v4", `unknown raw I/O word "v4"`},
		{"v2,v3", `names "v3"'s choice twice`},
		{"xdp,txring", `names "txring"'s choice twice`},
		{"xdp,bypass", "AF_XDP (xdp) sends past the qdisc always"},
		{"fast", `want "v2" or "v3"`},
	} {
		ctx, err := open(c.io)
		if err == nil {
			ctx.Close()
			t.Errorf("RawIO %q opened", c.io)
			continue
		}
		if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RawIO %q: %v; want EINVAL saying %q", c.io, err, c.want)
		}
	}
	// Where the kernel would segment (checksum offload off), xdp still
	// leaves TSO to the engine by default: AF_XDP has no GSO.
	if err := p.A.Run(func() error { return afpacket.SetFeature(p.A.Link, afpacket.OffloadTxCsum, false) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ io, who, why string }{
		{"", "kernel", "checksum offload is off"},
		{"xdp", "engine", "AF_XDP sends have no GSO"},
	} {
		ctx, err := open(c.io)
		if err != nil {
			t.Fatal(err)
		}
		if who, why := ctx.Impl().(*soft.Context).Segmentation(); who != c.who || !strings.Contains(why, c.why) {
			t.Errorf("RawIO %q with checksum offload off: segmentation %q (%s), want %q saying %q", c.io, who, why, c.who, c.why)
		}
		ctx.Close()
	}
	if err := p.A.Run(func() error { return afpacket.SetFeature(p.A.Link, afpacket.OffloadTxCsum, true) }); err != nil {
		t.Fatal(err)
	}
	first, err := open("xdp")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := open("xdp")
	if err == nil {
		second.Close()
		t.Fatal("a second AF_XDP context on one port opened")
	}
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "already has an AF_XDP socket") || !strings.Contains(err.Error(), "sendmmsg or txring") {
		t.Errorf("second AF_XDP context: %v; want EBUSY naming the queue and the alternative", err)
	}
	if other, err := open("sendmmsg"); err != nil {
		t.Errorf("a packet-socket context beside the AF_XDP one: %v", err)
	} else {
		other.Close()
	}
}
