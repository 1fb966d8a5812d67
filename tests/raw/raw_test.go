package raw_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/raw"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
	_ "github.com/rperf/rperf/verbsio/soft"
)

// end is one side of the wire: raw_<link> opened in its namespace.
type end struct {
	host netns.Host
	mac  [6]byte
	dev  *verbsio.Context
}

// rawIO is the raw port I/O (verbsio.OpenOptions.RawIO) the ends open
// with: TestRawBWIOModes sets it while it runs TestRawBW again.
var rawIO string

func openEnd(t *testing.T, h netns.Host) *end {
	t.Helper()
	e := &end{host: h}
	err := h.Run(func() error {
		ifc, err := net.InterfaceByName(h.Link)
		if err != nil {
			return err
		}
		copy(e.mac[:], ifc.HardwareAddr)
		e.dev, err = verbsio.OpenWith("raw_"+h.Link, verbsio.OpenOptions{RawIO: rawIO})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.dev.Close() })
	return e
}

// frames returns the spec of the frames from a to b.
func frames(a, b *end, sport, dport uint16) raw.FrameSpec {
	return raw.FrameSpec{Addresses: raw.Addresses{SrcMAC: a.mac, DstMAC: b.mac, SrcIP: a.host.Addr4.Addr(), DstIP: b.host.Addr4.Addr(),
		SrcPort: sport, DstPort: dport}}
}

// pair runs the server on b and, once it is ready, the client on a; it
// returns both sides' results. The waits are generous and bounded: the
// whole run has a minute on a loaded machine.
func pair(t *testing.T, test session.Test, tune func(c *raw.Config)) (client, server []reports.Result) {
	t.Helper()
	return pairOver(t, netns.Options{}, test, tune, nil)
}

// pairOver is pair over the wire opts builds (a veth pair, or two veth
// pairs joined by a bridge in a third namespace).
// wired, when not nil, is called once the wire is up, before either side
// starts (to sniff it).
func pairOver(t *testing.T, opts netns.Options, test session.Test, tune func(c *raw.Config), wired func(p *netns.Pair)) (client, server []reports.Result) {
	t.Helper()
	client, server, _, _ = pairEnds(t, opts, test, tune, wired)
	return client, server
}

// pairEnds is pairOver that also returns the ends, the client's a and
// the server's b, for their devices' counters.
func pairEnds(t *testing.T, opts netns.Options, test session.Test, tune func(c *raw.Config), wired func(p *netns.Pair)) (client, server []reports.Result, a, b *end) {
	t.Helper()
	p := netns.Setup(t, opts)
	if wired != nil {
		wired(p)
	}
	a, b = openEnd(t, p.A), openEnd(t, p.B)
	srv, cli := raw.Default(test), raw.Default(test)
	srv.Server = true
	srv.Frame, cli.Frame = frames(b, a, 7000, 6000), frames(a, b, 6000, 7000)
	for _, c := range []*raw.Config{&srv, &cli} {
		c.StallTimeout = 5 * time.Second
		tune(c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ready := make(chan struct{})
	type out struct {
		res []reports.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := raw.Run(ctx, b.dev, &srv, func(raw.Info) { close(ready) })
		done <- out{res, err}
	}()
	select {
	case <-ready:
	case o := <-done:
		t.Fatalf("server: %v", o.err)
	}
	client, err := raw.Run(ctx, a.dev, &cli, nil)
	if err != nil {
		cancel() // the server stops before the cleanup closes its device
		<-done
		t.Fatalf("client: %v", err)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("server: %v", o.err)
	}
	return client, o.res, a, b
}

// TestRawBW runs raw_ethernet_bw over a veth pair: UDP and TCP flows, one
// size and three, a sniffer and a promiscuous server. Each size's results
// add up (received and lost: the iterations), and every frame the server
// reports lost is one the kernel or the engine dropped and counted.
func TestRawBW(t *testing.T) {
	const n = 2000
	for _, c := range []struct {
		name         string
		sizes        []int
		flows, burst int
		tcp          bool
		rule         verbsio.FlowType // the server's
	}{
		{"udp 64", []int{64}, 1, 1, false, verbsio.FlowNormal},
		{"udp sizes", []int{64, 512, 1500}, 1, 1, false, verbsio.FlowNormal},
		{"tcp 4 flows", []int{128}, 4, 3, true, verbsio.FlowNormal},
		{"sniffer server", []int{100, 200}, 1, 1, false, verbsio.FlowSniffer},
		{"promiscuous server", []int{100}, 2, 1, true, verbsio.FlowAllDefault},
	} {
		t.Run(c.name, func(t *testing.T) {
			var wire *netns.Pair
			var before netns.Drops
			client, server, _, b := pairEnds(t, netns.Options{}, session.RawBW, func(cfg *raw.Config) {
				cfg.Sizes, cfg.Iterations, cfg.Flows, cfg.FlowsBurst = c.sizes, n, c.flows, c.burst
				cfg.Frame.TCP = c.tcp
				if cfg.Server {
					cfg.RuleType = c.rule
				}
				// Enough receives that a veth between two namespaces
				// keeps up: a lost frame is reported, not waited for.
				cfg.RxDepth = 4096
			}, func(p *netns.Pair) {
				wire = p
				var err error
				if before, err = p.Drops(); err != nil {
					t.Fatal(err)
				}
			})
			if len(client) != len(c.sizes) || len(server) != len(c.sizes) {
				t.Fatalf("%d client and %d server results for %d sizes", len(client), len(server), len(c.sizes))
			}
			var lost int64
			for i, size := range c.sizes {
				cr, sr := client[i], server[i]
				if cr.Test != "raw_ethernet_bw" || cr.Bytes != int64(size) || cr.Iterations != n || cr.MsgRateMpps <= 0 || cr.Path != "generic" {
					t.Errorf("client %d B: %+v %+v", size, cr, cr.Bandwidth)
				}
				if sr.Bytes != int64(size) || sr.Iterations+sr.Bandwidth.LostMessages != n || sr.Iterations < 2 || sr.MsgRateMpps <= 0 {
					t.Errorf("server %d B: %d frames, %d lost, %.3f Mpps; want %d in all", size, sr.Iterations, sr.Bandwidth.LostMessages, sr.MsgRateMpps, n)
				}
				lost += sr.Bandwidth.LostMessages
				t.Logf("%d B: client %.3f Mpps, server %.3f Mpps, %d lost", size, cr.MsgRateMpps, sr.MsgRateMpps, sr.Bandwidth.LostMessages)
			}
			// Every frame the server reports lost is one the kernel (its
			// ring full while the server was off a CPU, a backlog, a link)
			// or the engine (no receive posted) dropped and counted: none
			// on an idle machine; what arrived is counted, whichever
			// size's turn took it from the CQ.
			after, err := wire.Drops()
			if err != nil {
				t.Fatal(err)
			}
			cnt := b.dev.Counters()
			wireDrops := after.Sub(before)
			if dropped := int64(cnt["rx_ring_drops"] + cnt["rx_no_wqe"] + wireDrops.Total()); lost > dropped {
				t.Errorf("the server reported %d frames lost; the kernel and the engine dropped %d (ring %d, no receive posted %d, wire %+v): frames that arrived were not counted",
					lost, dropped, cnt["rx_ring_drops"], cnt["rx_no_wqe"], wireDrops)
			} else if lost > 0 {
				t.Logf("%d frames lost, all dropped on the way (ring %d, no receive posted %d, wire %+v)", lost, cnt["rx_ring_drops"], cnt["rx_no_wqe"], wireDrops)
			}
		})
	}
}

// TestRawBWIOModes runs TestRawBW (UDP and TCP flows, the sniffer and
// the promiscuous server) with both ends on a V3 receive ring and on
// AF_XDP transmit (OpenOptions.RawIO).
func TestRawBWIOModes(t *testing.T) {
	for _, mode := range []string{"v3", "xdp"} {
		t.Run("io="+mode, func(t *testing.T) {
			rawIO = mode
			defer func() { rawIO = "" }()
			TestRawBW(t)
		})
	}
}

// TestRawMulticast is perftest's --raw_mcast: the client sends to group
// 239.1.2.3 at its MAC 01:00:5e:01:02:03, which is not the server's; the
// server's rule for the group's MAC takes them, and a server ruling on
// its own MAC (no Multicast) gets none of them.
func TestRawMulticast(t *testing.T) {
	const n = 1000
	group := netipAddr("239.1.2.3")
	if m := raw.MulticastMAC(group); m != [6]byte{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03} {
		t.Fatalf("MulticastMAC(%v) = % x", group, m)
	}
	if m := raw.MulticastMAC(netipAddr("224.129.255.1")); m != [6]byte{0x01, 0x00, 0x5e, 0x01, 0xff, 0x01} {
		t.Errorf("MulticastMAC keeps 23 bits: % x", m)
	}
	client, server := pair(t, session.RawBW, func(c *raw.Config) {
		c.Sizes, c.Iterations, c.RxDepth = []int{128}, n, 4096
		c.Multicast, c.Frame.DstIP, c.Frame.DstMAC = true, group, raw.MulticastMAC(group)
	})
	if len(client) != 1 || client[0].Iterations != n || len(server) != 1 ||
		server[0].Iterations+server[0].Bandwidth.LostMessages != n || server[0].Iterations < n/2 {
		t.Fatalf("multicast raw-bw: client %+v, server %+v", client, server)
	}
	t.Logf("multicast: %.3f Mpps sent, %d of %d received", client[0].MsgRateMpps, server[0].Iterations, n)

	// Without Multicast the server's rule is for its own MAC: the
	// group's frames are not its, and it waits in vain (bounded).
	p := netns.Setup(t, netns.Options{})
	a, b := openEnd(t, p.A), openEnd(t, p.B)
	srv, cli := raw.Default(session.RawBW), raw.Default(session.RawBW)
	srv.Server, srv.FirstWait = true, 2*time.Second
	srv.Frame, cli.Frame = frames(b, a, 7000, 6000), frames(a, b, 6000, 7000)
	cli.Multicast, cli.Frame.DstIP, cli.Frame.DstMAC = true, group, raw.MulticastMAC(group)
	cli.Iterations = n
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := raw.Run(ctx, b.dev, &srv, func(raw.Info) { close(ready) })
		done <- err
	}()
	<-ready
	if _, err := raw.Run(ctx, a.dev, &cli, nil); err != nil {
		cancel() // the server stops before the cleanup closes its device
		<-done
		t.Fatalf("client: %v", err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "waiting for the first") {
		t.Errorf("a unicast server got the group's frames: %v", err)
	}
}

// TestRawOverBridge runs raw-bw and raw-lat between two namespaces
// joined by a kernel bridge in a third, so that frames cross a switch.
func TestRawOverBridge(t *testing.T) {
	opts := netns.Options{Middle: true, Bridge: true}
	client, server := pairOver(t, opts, session.RawBW, func(c *raw.Config) {
		c.Sizes, c.Iterations, c.RxDepth = []int{256}, 1000, 2048
	}, nil)
	if len(client) != 1 || client[0].Iterations != 1000 || len(server) != 1 || server[0].Iterations+server[0].Bandwidth.LostMessages != 1000 ||
		server[0].Iterations < 500 {
		t.Fatalf("raw-bw over a bridge: client %+v, server %+v", client, server)
	}
	lat, _ := pairOver(t, opts, session.RawLat, func(c *raw.Config) { c.Iterations = 200 }, nil)
	if len(lat) != 1 || lat[0].Latency == nil || lat[0].Samples != 200 || lat[0].TrueMinUs <= 0 {
		t.Fatalf("raw-lat over a bridge: %+v", lat)
	}
	t.Logf("over a bridge: %.3f Mpps sent, %d of 1000 received; raw-lat p50 %.2f us", client[0].MsgRateMpps, server[0].Iterations, lat[0].Percentiles["50"])
}

func TestRawLat(t *testing.T) {
	const n = 300
	client, server := pair(t, session.RawLat, func(c *raw.Config) {
		c.Sizes, c.Iterations, c.Warmup, c.CompletionTimestamps = []int{64, 1024}, n, 10, true
	})
	if len(server) != 0 {
		t.Errorf("the server measured %d results; it only answers", len(server))
	}
	if len(client) != 4 {
		t.Fatalf("%d results, want 2 per size (software clock, completion timestamps)", len(client))
	}
	for i := 0; i < len(client); i += 2 {
		sw, ts := client[i], client[i+1]
		if sw.Clock != "" || ts.Clock != raw.ClockCompletion || sw.Bytes != ts.Bytes {
			t.Errorf("results %d, %d: clocks %q, %q; sizes %d, %d", i, i+1, sw.Clock, ts.Clock, sw.Bytes, ts.Bytes)
		}
		for _, r := range []reports.Result{sw, ts} {
			if r.Latency == nil || r.Samples != n || r.TrueMinUs <= 0 || r.RTTFactor != 2 {
				t.Fatalf("%d B clock %q: %+v", r.Bytes, r.Clock, r.Latency)
			}
		}
		// The completion stamps lie inside the software clock's round
		// trip: the ping's send completes after its post, the pong's
		// receive completes before its poll.
		if ts.MeanUs > sw.MeanUs || ts.TrueMinUs > sw.TrueMinUs {
			t.Errorf("%d B: completion-timestamp mean %.2f us, min %.2f us exceed the software clock's %.2f, %.2f",
				sw.Bytes, ts.MeanUs, ts.TrueMinUs, sw.MeanUs, sw.TrueMinUs)
		}
		t.Logf("%d B: software clock mean %.2f us, completion timestamps mean %.2f us", sw.Bytes, sw.MeanUs, ts.MeanUs)
	}
}

// goodConfig is a raw-bw configuration Check accepts.
func goodConfig() raw.Config {
	good := raw.Default(session.RawBW)
	good.Frame = raw.FrameSpec{Addresses: raw.Addresses{DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, SrcPort: 1, DstPort: 2}}
	good.Frame.SrcIP, good.Frame.DstIP = netipAddr("10.0.0.1"), netipAddr("10.0.0.2")
	return good
}

func TestRawCheck(t *testing.T) {
	good := goodConfig()
	if err := good.Check(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range []struct {
		name string
		mod  func(c *raw.Config)
		want string
	}{
		{"small frame", func(c *raw.Config) { c.Sizes = []int{63} }, "Sizes 63: a frame is at least 64 bytes"},
		{"tcp v6 headers", func(c *raw.Config) {
			c.Frame.TCP, c.Frame.SrcIP, c.Frame.DstIP = true, netipAddr("fd00::1"), netipAddr("fd00::2")
			c.Sizes = []int{70}
		}, "a frame is at least 74 bytes"},
		{"oversized", func(c *raw.Config) { c.Sizes = []int{9601} }, "frames larger than 9600 bytes are refused"},
		{"no peer MAC", func(c *raw.Config) { c.Frame.DstMAC = [6]byte{} }, "the peer's MAC address is needed"},
		{"mixed IPs", func(c *raw.Config) { c.Frame.DstIP = netipAddr("fd00::2") }, "must be two IPv4 or two IPv6 addresses"},
		{"port 0", func(c *raw.Config) { c.Frame.SrcPort = 0 }, "port 0 is reserved"},
		{"flows", func(c *raw.Config) { c.Flows = 0 }, "flows must be 1 to 1024"},
		{"flows past 65535", func(c *raw.Config) { c.Frame.DstPort, c.Flows = 65535, 2 }, "within 65535"},
		{"duration on burst-lat", func(c *raw.Config) { c.Test, c.Duration = session.RawBurstLat, time.Second }, "raw-burst-lat runs a number of frames, not for a duration"},
		{"negative duration", func(c *raw.Config) { c.Duration = -time.Second }, "the duration cannot be negative"},
		{"timestamps on bw", func(c *raw.Config) { c.CompletionTimestamps = true }, "raw-lat only"},
		{"burst on bw without a rate", func(c *raw.Config) { c.BurstSize = 4 }, "raw-bw's bursts space a software rate; give RateMbps without HWPacing"},
		{"burst on bw with PP", func(c *raw.Config) { c.BurstSize, c.RateMbps, c.HWPacing = 4, 10, true }, "raw-bw's bursts space a software rate"},
		{"burst on lat", func(c *raw.Config) { c.Test, c.TxDepth, c.BurstSize = session.RawLat, 1, 1 }, "bursts belong to raw-burst-lat and raw-bw's software rate"},
		{"rate on lat", func(c *raw.Config) { c.Test, c.TxDepth, c.RateMbps, c.HWPacing = session.RawLat, 1, 10, true }, "a rate does not apply"},
		{"burst over depth", func(c *raw.Config) { c.Test, c.BurstSize = session.RawBurstLat, 129 }, "a burst is 1 to TxDepth 128 frames"},
		{"PP without a rate", func(c *raw.Config) { c.Test, c.HWPacing = session.RawBurstLat, true }, "hardware pacing needs a rate"},
		{"pcp", func(c *raw.Config) { c.Frame.VLAN, c.Frame.VLANPCP = true, 9 }, "a VLAN priority is 0 to 7, or 8"},
		{"ethertype length", func(c *raw.Config) { c.Frame.EtherType = 0x05dc }, "0x05dc is an 802.3 length"},
		{"reply every on bw", func(c *raw.Config) { c.ReplyEvery = 2 }, "only raw-burst-lat's server answers every N frames"},
		{"reply every negative", func(c *raw.Config) { c.ReplyEvery = -1 }, "a pong every 1 to"},
		{"ethertype tpid", func(c *raw.Config) { c.Frame.EtherType = 0x8100 }, "0x8100 is a VLAN tag's TPID"},
		{"not raw", func(c *raw.Config) { c.Test = session.SendBW }, "not one of rperf's raw tests"},
		{"rule type", func(c *raw.Config) { c.RuleType = verbsio.FlowMCDefault }, "the server's rule is normal, sniffer or all-default"},
		{"multicast on lat", func(c *raw.Config) { c.Test, c.TxDepth, c.Multicast = session.RawLat, 1, true }, "multicast is one-way traffic: raw-bw only"},
		{"multicast to a unicast IP", func(c *raw.Config) { c.Multicast = true }, "not an IPv4 multicast group (224.0.0.0/4)"},
		{"multicast to another MAC", func(c *raw.Config) { c.Multicast, c.Frame.DstIP = true, netipAddr("239.1.1.1") }, "not the group's"},
	} {
		cfg := good
		c.mod(&cfg)
		err := cfg.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func netipAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestFSRate(t *testing.T) {
	p := netns.Setup(t, netns.Options{})
	a := openEnd(t, p.A)
	for _, tcp := range []bool{false, true} {
		c := raw.Default(session.FSRate)
		c.Iterations, c.Warmup = 500, 20
		c.Frame.SrcMAC, c.Frame.SrcPort, c.Frame.TCP = a.mac, 20000, tcp
		r, err := raw.FSRate(context.Background(), a.dev, &c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Create.Test != "raw_ethernet_fs_rate" || r.Create.Samples != 500 || r.Create.RTTFactor != 1 || r.Create.TrueMinUs <= 0 ||
			r.CreatePerSecond <= 0 || r.DestroyPerSecond <= 0 {
			t.Errorf("tcp %v: %+v %+v", tcp, r, r.Create.Latency)
		}
		// Every rule is gone: the device takes the same rules again.
		if _, err := raw.FSRate(context.Background(), a.dev, &c); err != nil {
			t.Errorf("tcp %v: a second run: %v", tcp, err)
		}
		t.Logf("tcp %v: %.0f rules/s created, %.0f destroyed, p50 %.2f us", tcp, r.CreatePerSecond, r.DestroyPerSecond, r.Create.Percentiles["50"])
	}
	c := raw.Default(session.FSRate)
	c.Iterations, c.Frame.SrcPort = 100, 65500
	if _, err := raw.FSRate(context.Background(), a.dev, &c); err == nil || !strings.Contains(err.Error(), "within 65535") {
		t.Errorf("ports past 65535: %v", err)
	}
}

func TestRawBurstLat(t *testing.T) {
	// 2,000 frames of 64 bytes: 205 ms at 5 Mb/s. The server answers
	// every reply-th frame; the rate is one a loaded two-CPU machine's
	// receiver keeps up with (a ping the server's kernel ring drops, 2048
	// frames, is a pong the client never gets: the run fails, naming the
	// loss; at 5 Mb/s that takes a 200 ms starved receiver).
	const n = 2000
	for _, c := range []struct {
		name  string
		burst int
		mbps  float64
		hw    bool
		reply int
	}{
		{"SW 5 Mbps", 8, 5, false, 1},
		{"PP 5 Mbps reply 4", 8, 5, true, 4},
		{"SW 5 Mbps reply 16", 32, 5, false, 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			var pongs *sniffer // the client's link: what the server sent
			client, server := pairOver(t, netns.Options{}, session.RawBurstLat, func(cfg *raw.Config) {
				cfg.Iterations, cfg.RxDepth, cfg.ReplyEvery = n, 8192, c.reply
				if !cfg.Server {
					cfg.BurstSize, cfg.RateMbps, cfg.HWPacing = c.burst, c.mbps, c.hw
				}
			}, func(p *netns.Pair) { pongs = sniff(t, p.A, n+1) })
			el := time.Since(start)
			// The server answered every reply-th frame, no more: the
			// client matched n/reply pongs (below), and a sniffer on its
			// link saw no more than that (waiting a moment for more; it
			// may miss some when starved, never see extra).
			if got := len(pongs.frames(n/c.reply+1, 64, 200*time.Millisecond)); got == 0 || got > n/c.reply {
				t.Errorf("the client's link saw %d pongs for %d frames; want one per %d: %d", got, n, c.reply, n/c.reply)
			}
			if len(client) != 1 || client[0].Latency == nil || client[0].Samples != int64(n/c.reply) || client[0].RTTFactor != 2 || client[0].TrueMinUs <= 0 {
				t.Fatalf("client: %+v", client)
			}
			if len(server) != 1 || server[0].Iterations+server[0].Bandwidth.LostMessages != n {
				t.Fatalf("server: %+v", server)
			}
			// A paced run cannot be faster than its rate: 2,000 frames of
			// 64 bytes at 5 Mb/s take 200 ms at least.
			if min := time.Duration(float64((n-c.burst)*64*8) / c.mbps * 1e3); c.mbps > 0 && el < min {
				t.Errorf("%d frames in %v at %g Mb/s: faster than the rate allows (%v)", n, el, c.mbps, min)
			}
			// On the receiver's kernel stamps the stream never runs ahead
			// of the rate (a load can only slow it): 5% for the first
			// burst, which leaves at once (0.6%), and the stamps.
			if got := server[0].MsgRateMpps * 64 * 8; c.mbps > 0 && got > 1.05*c.mbps {
				t.Errorf("the server received %.1f Mb/s of a stream paced at %g Mb/s", got, c.mbps)
			}
			t.Logf("p50 %.2f us, p99 %.2f us; server %.3f Mpps, %d lost", client[0].Percentiles["50"], client[0].Percentiles["99"],
				server[0].MsgRateMpps, server[0].Bandwidth.LostMessages)
		})
	}
}

// TestRawDuration is perftest's -D on raw-bw and raw-lat: the client
// sends for the duration, the server counts (raw-bw) from its first
// arrival for the duration, or answers (raw-lat) until the client falls
// silent; the records are duration-mode ones over about the duration.
func TestRawDuration(t *testing.T) {
	const d = 700 * time.Millisecond
	for _, test := range []session.Test{session.RawBW, session.RawLat} {
		t.Run(test.Command(), func(t *testing.T) {
			start := time.Now()
			client, server := pair(t, test, func(c *raw.Config) {
				c.Duration, c.RxDepth = d, 4096
				c.StallTimeout = time.Second // the server's end of a raw-lat run: a second of silence
			})
			el := time.Since(start)
			if len(client) != 1 || client[0].Mode != reports.ModeDuration || client[0].Iterations < 10 {
				t.Fatalf("client: %+v", client)
			}
			if w := time.Duration(client[0].ElapsedNs); test == session.RawBW && (w < d*9/10 || w > d+time.Second) {
				t.Errorf("the client's window %v for a %v run", w, d)
			}
			if test == session.RawLat && client[0].Samples != client[0].Iterations {
				t.Errorf("raw-lat: %d samples, %d iterations", client[0].Samples, client[0].Iterations)
			}
			if test == session.RawBW {
				if len(server) != 1 || server[0].Mode != reports.ModeDuration || server[0].Iterations < 10 || server[0].Iterations > client[0].Iterations {
					t.Fatalf("server: %+v (client sent %d)", server, client[0].Iterations)
				}
				if w := time.Duration(server[0].ElapsedNs); w > d+time.Second {
					t.Errorf("the server's window %v for a %v run", w, d)
				}
			}
			if el > d+10*time.Second {
				t.Errorf("a %v run took %v", d, el)
			}
			t.Logf("%s: client %d frames in %v; %v in all", test.Command(), client[0].Iterations, time.Duration(client[0].ElapsedNs), el)
		})
	}
}
