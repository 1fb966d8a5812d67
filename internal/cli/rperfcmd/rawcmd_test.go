package rperfcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/raw"
	"github.com/rperf/rperf/tests/session"
)

// runRaw runs rperf with args (a raw command) and returns its stdout and
// error.
func runRaw(ctx context.Context, args ...string) (string, string, error) {
	cmd := New()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func TestRawFlags(t *testing.T) {
	const mac = "02:00:00:00:00:02"
	base := []string{"-d", "raw_nosuch0", "-P", "-E", mac, "-J", "10.0.0.2"}
	for _, c := range []struct {
		cmd  string
		args []string
		want string
	}{
		{"raw-bw", []string{"-P", "-E", mac, "-J", "10.0.0.2"}, "-d: give the raw device, e.g. -d raw_eth0"},
		{"raw-bw", []string{"-d", "raw_x", "-E", mac, "-J", "10.0.0.2"}, "--server (-Z) or --client (-P), exactly one"},
		{"raw-bw", append(base, "-Z"), "--server (-Z) or --client (-P), exactly one"},
		{"raw-bw", []string{"-d", "raw_x", "-P", "-J", "10.0.0.2"}, "-E: give the peer's MAC address"},
		{"raw-bw", []string{"-d", "raw_x", "-P", "-E", mac}, "-J: give the server's IP address (-J/--dest_ip, perftest's server IP on both sides; or --remote_ip)"},
		{"raw-bw", []string{"-d", "raw_x", "-Z", "-E", mac, "-J", "10.0.0.1"}, "-j: give the client's IP address (-j/--source_ip, perftest's client IP on both sides; or --remote_ip)"},
		{"raw-bw", []string{"-d", "raw_x", "-Z", "--remote_mac", mac, "--local_ip", "10.0.0.1"}, "--remote_ip: give the peer's IP address"},
		{"raw-bw", []string{"-d", "raw_x", "-Z", "-E", mac, "-J", "10.0.0.1", "-j", "10.0.0.2", "-K", "0"}, "-K 0: not a UDP or TCP port"},
		{"raw-bw", []string{"-d", "raw_x", "-Z", "-E", mac, "-J", "10.0.0.1", "-j", "10.0.0.300"}, "-j 10.0.0.300: not an IP address"},
		{"raw-bw", []string{"-d", "raw_x", "-Z", "-E", mac, "-j", "10.0.0.2", "-J", "fd00::1"}, "-J fd00::1: an IPv6 address"},
		{"raw-bw", []string{"-d", "raw_x", "-P", "-E", "02:00:00:00:02", "-J", "10.0.0.2"}, "-E 02:00:00:00:02: not a MAC address; write it as XX:XX:XX:XX:XX:XX"},
		{"raw-bw", append(base, "-B", "zz:00:00:00:00:01"), "-B zz:00:00:00:00:01: not a MAC address"},
		{"raw-bw", []string{"-d", "raw_x", "-P", "-E", mac, "-J", "10.0.0.300"}, "-J 10.0.0.300: not an IP address; write it as X.X.X.X"},
		{"raw-bw", []string{"-d", "raw_x", "-P", "-E", mac, "-J", "fd00::2"}, "-J fd00::2: an IPv6 address; raw frames are IPv4 without --raw_ipv6"},
		{"raw-bw", append(base, "--raw_ipv6"), "-J 10.0.0.2: an IPv4 address; raw frames are IPv6 with --raw_ipv6"},
		{"raw-bw", append(base, "-k", "0"), "-k 0: not a UDP or TCP port"},
		{"raw-bw", append(base, "-K", "65536"), "-K 65536: not a UDP or TCP port"},
		{"raw-bw", append(base, "--tos", "256"), "--tos 256: a type of service is 0 to 255"},
		{"raw-lat", append(base, "-T", "-1"), "--tos -1: a type of service is 0 to 255"},
		{"raw-bw", []string{"-d", "raw_x", "-P", "--remote_mac", mac, "-J", "10.0.0.2"}, "-J and --remote_mac: give the addresses as -B/-E/-j/-J/-k/-K or as --local_*/--remote_*, not a mix"},
		{"raw-lat", []string{"-d", "raw_x", "-P", "--remote_mac", mac, "--remote_ip", "10.0.0.2", "--local_port", "0"}, "--local_port 0: not a UDP or TCP port"},
		{"raw-lat", []string{"-d", "raw_x", "-P", "--remote_mac", "02:00", "--remote_ip", "10.0.0.2"}, "--remote_mac 02:00: not a MAC address"},
		{"raw-burst-lat", []string{"-d", "raw_x", "-P", "--remote_mac", mac, "--remote_ip", "fd00::2"}, "--remote_ip fd00::2: an IPv6 address"},
		{"raw-burst-lat", append(base, "-L", "0"), "-L 0: a hop limit (TTL) is 1 to 255"},
		{"raw-bw", append(base, "--hop_limit", "256"), "-L 256: a hop limit (TTL) is 1 to 255"},
		{"raw-bw", append(base, "--flow_label", "5"), "--flow_label is an IPv6 field: add --raw_ipv6"},
		{"raw-bw", append(base, "--vlan_pcp", "3"), "--vlan_pcp is the tag's priority: add --vlan_en"},
		{"raw-burst-lat", append(base, "--reply_every", "0"), "--reply_every 0: the server answers every N-th frame, N at least 1"},
		{"raw-lat", append(base, "--reply_every", "2"), "unknown flag: --reply_every"},
		{"raw-bw", append(base, "-D", "-1"), "-D -1: a duration is a positive number of seconds"},
		{"raw-lat", append(base, "-D", "2", "-n", "100"), "-D and -n conflict"},
		{"raw-burst-lat", append(base, "--duration", "2"), "unknown flag: --duration"},
		{"raw-bw", append(base, "--mac_fwd"), "--mac_fwd makes the server forward what it receives: add --server (-Z)"},
		{"raw-lat", append(base, "--mac_fwd"), "unknown flag: --mac_fwd"},
		{"raw-bw", append(base, "--vlan_en", "--vlan_pcp", "9"), "--vlan_pcp 9: a VLAN priority is 0 to 7, or 8 for another per frame"},
		{"raw-lat", append(base, "--vlan_en", "--vlan_pcp", "-1"), "--vlan_pcp -1"},
		{"raw-bw", append(base, "-Y", "88b5"), "-Y 88b5: write the EtherType as 0xXXXX"},
		{"raw-bw", append(base, "-Y", "0x88b"), "-Y 0x88b: write the EtherType as 0xXXXX"},
		{"raw-lat", append(base, "--ethertype", "0x0000"), "-Y 0x0000: write the EtherType"},
		{"raw-bw", append(base, "-Y", "0xzzzz"), "-Y 0xzzzz"},
		{"raw-bw", append(base, "-Y", "0x05dc"), "0x05dc is an 802.3 length, not an EtherType"},
		{"raw-burst-lat", append(base, "-Y", "0x8100"), "0x8100 is a VLAN tag's TPID"},
		{"raw-lat", append(base, "--percentiles", "101"), "--percentiles 101"},
		{"raw-bw", append(base, "--completion-timestamps"), "unknown flag: --completion-timestamps"},
		{"raw-bw", append(base, "--timeout", "0s"), "--timeout 0s: must be positive"},
		{"raw-bw", append(base, "--json", "/nonexistent/dir/x.json"), "--json /nonexistent/dir/x.json: cannot create the file"},
		{"raw-bw", base, "raw_nosuch0"},
		{"raw-lat", append(base, "-a", "-s", "128"), "-a and -s conflict"},
		{"raw-burst-lat", append(base, "--rate_limit", "1", "--rate_units", "k"), "--rate_units k: use M (MiB/s), g (Gb/s) or p (frames per second), as perftest's"},
		{"raw-burst-lat", append(base, "--rate_limit", "1", "--rate_limit_type", "HW"), "--rate_limit_type HW: use SW (software spacing) or PP"},
		{"raw-burst-lat", append(base, "--rate_limit_type", "PP"), "--rate_limit_type PP paces at --rate_limit: give it"},
		{"raw-burst-lat", append(base, "--rate_limit", "-1"), "--rate_limit -1: a rate cannot be negative"},
		{"raw-bw", append(base, "--rate_limit", "NaN"), "--rate_limit NaN: give a number"},
		{"raw-burst-lat", append(base, "--rate_limit", "Inf"), "--rate_limit +Inf: give a number"},
		{"raw-bw", append(base, "--rate_limit", "1e300"), "--rate_limit 1e+300 --rate_units g: above 4294 Gb/s"},
		{"raw-burst-lat", append(base, "--rate_limit", "5000", "--rate_units", "g"), "--rate_limit 5000 --rate_units g: above 4294 Gb/s"},
		{"raw-lat", append(base, "--burst_size", "4"), "unknown flag: --burst_size"},
		{"raw-bw", append(base, "--burst_size", "8"), "--burst_size: raw-bw's bursts space a software rate: add --rate_limit R --rate_limit_type SW"},
		{"raw-bw", append(base, "--rate_limit", "1", "--burst_size", "8"), "--burst_size: raw-bw's bursts space a software rate"},
		{"raw-lat", append(base, "--rate_limit", "1"), "unknown flag: --rate_limit"},
		{"raw-bw", append(base, "--tclass", "4"), "--tclass is the IPv6 traffic class: add --raw_ipv6, or use --tos for IPv4"},
		{"raw-bw", []string{"-d", "raw_x", "-P", "-E", mac, "-J", "fd00::2", "--raw_ipv6", "--tclass", "4", "--tos", "4"}, "--tclass and --tos set the same field"},
		{"raw-bw", append(base, "--sniffer"), "--sniffer and --promiscuous choose the server's rule: add --server (-Z)"},
		{"raw-bw", []string{"-d", "raw_x", "-Z", "-E", mac, "-J", "10.0.0.1", "-j", "10.0.0.2", "--sniffer", "--promiscuous"}, "give one of them"},
		{"raw-bw", append(base, "--typical_pkt_size", "1000", "--rate_limit_type", "PP", "--rate_limit", "1", "--typical_pkt_size", "99999"), "--typical_pkt_size 99999: a frame size is 0 to 9600"},
		{"raw-burst-lat", append(base, "--typical_pkt_size", "1000", "--rate_limit", "1"), "--typical_pkt_size sets the packet pacing: add --rate_limit_type PP"},
		{"raw-bw", append(base, "--typical_pkt_size", "1000"), "--rate_units and --typical_pkt_size set how --rate_limit paces: give --rate_limit too"},
		{"raw-burst-lat", append(base, "--rate_units", "M"), "--rate_units and --typical_pkt_size set how --rate_limit paces: give --rate_limit too"},
		{"raw-bw", append(base, "--raw_mcast"), "--raw_mcast sends to the group's MAC, derived from -J: drop -E"},
		{"raw-bw", []string{"-d", "raw_x", "-P", "-J", "10.0.0.2", "--raw_mcast"}, "--raw_mcast: -J 10.0.0.2 is not an IPv4 multicast group; give one in 224.0.0.0/4"},
		{"raw-bw", []string{"-d", "raw_x", "-P", "-J", "ff02::1", "--raw_ipv6", "--raw_mcast"}, "--raw_mcast sends to an IPv4 group: drop --raw_ipv6"},
		{"raw-bw", []string{"-d", "raw_x", "-P", "--raw_mcast"}, "-J: give the multicast group"},
		{"raw-bw", []string{"-d", "raw_x", "-Z", "-j", "10.0.0.2", "--raw_mcast"}, "-J: give the multicast group"},
		{"raw-bw", []string{"-d", "raw_x", "-Z", "-J", "10.0.0.1", "--raw_mcast"}, "--raw_mcast: -J 10.0.0.1 is not an IPv4 multicast group"},
		{"raw-lat", []string{"-d", "raw_x", "-P", "-J", "239.1.1.1", "--raw_mcast"}, "unknown flag: --raw_mcast"},
		{"raw-bw", []string{"-d", "raw_nosuch0", "-P", "-J", "239.1.1.1", "--raw_mcast"}, "raw_nosuch0"},
		{"raw-lat", append(base, "--path", "burst"), "raw-lat sends one frame at a time: use raw-bw --path burst, or --path generic or inline"},
		{"raw-lat", append(base, "--path", "tso"), "raw-lat sends single frames: use raw-bw --tso"},
		{"raw-lat", append(base, "--tso", "1000"), "unknown flag: --tso"},
		{"raw-bw", append(base, "--path", "dm"), "--path dm: the raw commands send on generic, burst, inline and tso (raw-bw)"},
		{"raw-bw", append(base, "--path", "bogus"), "--path bogus:"},
		{"raw-bw", append(base, "--path", "tso"), "--path tso needs the segment size: add --tso MSS, e.g. --tso 1448"},
		{"raw-bw", append(base, "--tso", "1000", "--path", "inline"), "--tso sends on the tso path, --path inline is another: drop one of them"},
		{"raw-bw", append(base, "--tso", "0"), "--tso 0: give the MSS"},
		{"raw-bw", append(base, "--tso", "1000", "-a"), "-a and --tso conflict"},
		{"raw-burst-lat", append(base, "--path", "tso"), "raw-burst-lat's bursts are of single frames: use raw-bw --tso, or --path generic, burst or inline"},
		{"raw-burst-lat", append(base, "--tso", "1000"), "unknown flag: --tso"},
		{"raw-bw", append(base, "--hgrm", "x.hgrm"), "unknown flag: --hgrm"},
		{"raw-lat", []string{"-d", "raw_x", "-Z", "-E", mac, "-J", "10.0.0.1", "-j", "10.0.0.2", "--hgrm", "x.hgrm"}, "the server measures none: give --hgrm to the client (-P)"},
		{"raw-burst-lat", append(base, "--hgrm", "-", "--json", "-"), "--json - and --hgrm - both want stdout"},
		// -Q as the connected bandwidth tests take and word it
		{"raw-bw", append(base, "-Q", "0"), "-Q 0: CQ moderation must be between 1 and 1024"},
		{"raw-bw", append(base, "--cq-mod", "1025"), "-Q 1025: CQ moderation must be between 1 and 1024"},
		{"raw-bw", append(base, "-Q", "-3"), "-Q -3: CQ moderation must be between 1 and 1024"},
		{"send-bw", []string{"-Q", "0", "localhost"}, "-Q 0: CQ moderation must be between 1 and 1024"},
		{"paths", append(base, "-Q", "1025"), "-Q 1025: CQ moderation must be between 1 and 1024"},
		{"raw-lat", append(base, "-Q", "4"), "unknown shorthand flag: 'Q' in -Q"},
	} {
		_, _, err := runRaw(context.Background(), append([]string{c.cmd}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: %v, want %q", c.cmd, c.args, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %q: a multi-line error: %q", c.cmd, c.args, err)
		}
		var ue *cli.UsageError
		if !strings.Contains(c.want, "raw_nosuch0") && !strings.Contains(c.want, "unknown ") && !errors.As(err, &ue) {
			t.Errorf("%s %q: %v is not a usage error", c.cmd, c.args, err)
		}
	}
}

// rawSides are the two ends of a veth pair in namespaces the test creates,
// with their MACs.
type rawSides struct {
	pair   *netns.Pair
	ma, mb string
}

func newRawSides(t *testing.T) *rawSides {
	p := netns.Setup(t, netns.Options{})
	s := &rawSides{pair: p}
	for _, h := range []struct {
		host netns.Host
		mac  *string
	}{{p.A, &s.ma}, {p.B, &s.mb}} {
		err := h.host.Run(func() error {
			ifc, err := net.InterfaceByName(h.host.Link)
			if err == nil {
				*h.mac = ifc.HardwareAddr.String()
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// run runs the server command in B and, once it has printed its header,
// the client in A; each in its namespace's thread (the device opens
// there). The whole run is bounded by a minute.
func (s *rawSides) run(t *testing.T, cmd string, server, client []string) (srvOut, cliOut string) {
	t.Helper()
	// perftest's reading: -J is the server's IP and -j the client's on
	// both sides.
	ips := []string{"-J", s.pair.B.Addr4.Addr().String(), "-j", s.pair.A.Addr4.Addr().String()}
	return s.runAddrs(t, cmd, append([]string{"-E", s.ma}, ips...), append([]string{"-E", s.mb}, ips...), server, client)
}

// runAddrs is run with the server's and the client's address flags
// given.
func (s *rawSides) runAddrs(t *testing.T, cmd string, srvAddrs, cliAddrs, server, client []string) (srvOut, cliOut string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := s.pair
	type result struct {
		out string
		err error
	}
	srvDone := make(chan result, 1)
	dir := t.TempDir()
	srvJSON := filepath.Join(dir, "server.json")
	go func() {
		var out string
		err := p.B.Run(func() error {
			var err error
			args := append(append([]string{cmd, "-d", "raw_" + p.B.Link, "-Z", "--json", srvJSON, "--timeout", "5s"}, srvAddrs...), server...)
			out, _, err = runRaw(ctx, args...)
			return err
		})
		srvDone <- result{out, err}
	}()
	// The server is ready once its QP and rule exist: its JSON file is
	// created first, its rule a few milliseconds later. Give it time to
	// get there on a loaded machine, bounded.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(srvJSON); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not start in 20 s")
		}
	}
	time.Sleep(300 * time.Millisecond)
	var cout string
	err := p.A.Run(func() error {
		var err error
		args := append(append([]string{cmd, "-d", "raw_" + p.A.Link, "-P", "--timeout", "5s"}, cliAddrs...), client...)
		cout, _, err = runRaw(ctx, args...)
		return err
	})
	if err != nil {
		t.Fatalf("client: %v\n%s", err, cout)
	}
	r := <-srvDone
	if r.err != nil {
		t.Fatalf("server: %v\n%s", r.err, r.out)
	}
	return r.out, cout
}

func decodeDoc(t *testing.T, data []byte) reports.Document {
	t.Helper()
	var d reports.Document
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return d
}

// TestRawPerftestAddrFlags: a server and a client given perftest's
// address flags as perftest's users write them exchange frames: the same
// -j/-J/-k/-K on both sides (the client's and the server's IP and port),
// or each side's --local_*/--remote_*; the server's rule matches the
// IPs and both ports, two different ones here.
func TestRawPerftestAddrFlags(t *testing.T) {
	s := newRawSides(t)
	srvIP, cliIP := s.pair.B.Addr4.Addr().String(), s.pair.A.Addr4.Addr().String()
	same := []string{"-J", srvIP, "-j", cliIP, "-K", "6000", "-k", "5000"}
	for _, tc := range []struct {
		name               string
		srvAddrs, cliAddrs []string
	}{
		{"-j/-J/-k/-K", append([]string{"-E", s.ma}, same...), append([]string{"-E", s.mb}, same...)},
		{"--local_*/--remote_*",
			[]string{"--remote_mac", s.ma, "--local_ip", srvIP, "--remote_ip", cliIP, "--local_port", "6000", "--remote_port", "5000"},
			[]string{"--remote_mac", s.mb, "--local_ip", cliIP, "--remote_ip", srvIP, "--local_port", "5000", "--remote_port", "6000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := s.runAddrs(t, "raw-lat", tc.srvAddrs, tc.cliAddrs, []string{"-n", "200"}, []string{"-n", "200"})
			for _, want := range []string{
				"Source          : " + s.ma + " " + cliIP + " port 5000",
				"Destination     : " + s.mb + " " + srvIP + " port 6000",
				" 64      200 "} {
				if !strings.Contains(cli, want) {
					t.Errorf("client output lacks %q:\n%s", want, cli)
				}
			}
			for _, want := range []string{
				"Source          : " + s.mb + " " + srvIP + " port 6000",
				"Destination     : " + s.ma + " " + cliIP + " port 5000"} {
				if !strings.Contains(srv, want) {
					t.Errorf("server output lacks %q:\n%s", want, srv)
				}
			}
		})
	}
}

func TestRawBWCommand(t *testing.T) {
	s := newRawSides(t)
	jsonPath := filepath.Join(t.TempDir(), "client.json")
	srv, cli := s.run(t, "raw-bw", []string{"-n", "3000", "-r", "4096", "-s", "128"}, []string{"-n", "3000", "-s", "128", "--json", jsonPath})
	for _, want := range []string{"Raw Ethernet BW Test", "Role            : client", "CQ Moderation   : 100\n", " 128        3000 ", "engine raw_" + s.pair.A.Link + " frames: sent 3000, send errors 0"} {
		if !strings.Contains(cli, want) {
			t.Errorf("client output lacks %q:\n%s", want, cli)
		}
	}
	for _, want := range []string{"Role            : server", "measured on the receiving side"} {
		if !strings.Contains(srv, want) {
			t.Errorf("server output lacks %q:\n%s", want, srv)
		}
	}
	// The server times arrivals by the receive completions' stamps and
	// says whose they are: veth has no hardware clock, so the kernel's.
	stamps := regexp.MustCompile(`engine raw_\S+ receive stamps: hardware \(the NIC's clock\) (\d+), software \(the kernel's, the NIC gave none\) (\d+), ring`).FindStringSubmatch(srv)
	if stamps == nil || stamps[1] != "0" || stamps[2] == "0" {
		t.Errorf("server output: want its receive stamps, none hardware and some software (veth):\n%s", srv)
	}
	if strings.Contains(cli, "receive stamps") {
		t.Errorf("client output (no completion clock) names receive stamps:\n%s", cli)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	d := decodeDoc(t, data)
	if len(d.Results) != 1 || d.Results[0].Test != "raw_ethernet_bw" || d.Results[0].Bytes != 128 || d.Results[0].Iterations != 3000 ||
		d.Results[0].Bandwidth == nil || d.Results[0].MsgRateMpps <= 0 {
		t.Errorf("client document results %+v", d.Results)
	}
	if d.Env.Fabric != "raw" || d.Env.Extra["role"] != "client" || d.Env.Extra["cq_mod"] != "100" || d.Env.EngineCounters["tx_frames"] != 3000 {
		t.Errorf("client document env: fabric %q, extra %v, tx_frames %d", d.Env.Fabric, d.Env.Extra, d.Env.EngineCounters["tx_frames"])
	}
}

// TestRawIOFlag: --raw_io reaches the engine at both ends (the client's
// JSON names it and its frames all arrive through AF_XDP and a V3 ring),
// and a word the engine does not know is refused naming it.
func TestRawIOFlag(t *testing.T) {
	s := newRawSides(t)
	jsonPath := filepath.Join(t.TempDir(), "client.json")
	srv, _ := s.run(t, "raw-bw", []string{"-n", "2000", "-r", "4096", "-s", "128", "--raw_io", "v3"},
		[]string{"-n", "2000", "-s", "128", "--raw_io", "xdp,v3", "--json", jsonPath})
	if !strings.Contains(srv, "measured on the receiving side") {
		t.Errorf("server output:\n%s", srv)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	d := decodeDoc(t, data)
	if d.Env.Extra["raw_io"] != "xdp,v3" || d.Env.EngineCounters["tx_frames"] != 2000 {
		t.Errorf("client document: raw_io %q, tx_frames %d; want xdp,v3 and 2000", d.Env.Extra["raw_io"], d.Env.EngineCounters["tx_frames"])
	}
	err = s.pair.A.Run(func() error {
		_, _, err := runRaw(context.Background(), "raw-bw", "-d", "raw_"+s.pair.A.Link, "-P", "-E", s.mb, "-J", s.pair.B.Addr4.Addr().String(), "--raw_io", "turbo")
		return err
	})
	if err == nil || !strings.Contains(err.Error(), `unknown raw I/O word "turbo"`) {
		t.Errorf("--raw_io turbo: %v; want an error naming the word", err)
	}
}

// TestRawBWPacedCommand: a paced raw-bw client prints the requested and
// achieved rates and, when they differ by more than 1%, how far and why
// (the sending thread's waits for a CPU); the pacer never runs ahead.
//
// With --rate_limit_type SW (perftest's software limiter) the client
// posts bursts of --burst_size frames one burst's time apart: 100 bursts
// of 4 take 99 gaps, so an exact limiter reads 100/99 of the rate.
func TestRawBWPacedCommand(t *testing.T) {
	s := newRawSides(t)
	for _, tc := range []struct {
		name    string
		flags   []string
		ahead   float64 // the most the achieved rate may read above 10 Mb/s
		explain string  // what the shortfall line names
	}{
		{"PP", nil, 10 * 1.03, "waited"},
		{"SW", []string{"--rate_limit_type", "SW", "--burst_size", "4"}, 10.0 * 100 / 99 * 1.005, "spaced in software"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cli := s.run(t, "raw-bw", []string{"-n", "400", "-r", "4096", "-s", "1514"},
				append([]string{"-n", "400", "-s", "1514", "--rate_limit", "0.01"}, tc.flags...)) // 10 Mb/s in perftest's default unit, Gb/s
			m := regexp.MustCompile(`pacing: requested 10 Mb/s, achieved ([0-9.]+) Mb/s \(([-+][0-9.]+)%\)`).FindStringSubmatch(cli)
			if m == nil {
				t.Fatalf("no pacing line:\n%s", cli)
			}
			got, _ := strconv.ParseFloat(m[1], 64)
			e, _ := strconv.ParseFloat(m[2], 64)
			explained := strings.Contains(cli, "the rate is") && strings.Contains(cli, tc.explain)
			// Under half the rate is judged over the time the sender
			// could run (the report's CPU wait): a loaded machine
			// takes the rest; a sender that waited more than half the
			// run leaves too little to judge.
			waited, el, ok := PacingWait(cli)
			switch {
			case got > tc.ahead:
				t.Errorf("achieved %.3f Mb/s of 10: the limiter ran ahead", got)
			case got < 10*0.5 && (!ok || el-waited >= el/2 && got*float64(el)/float64(el-waited) < 10*0.5):
				t.Errorf("achieved %.3f Mb/s of 10, the sender waiting %v of %v for a CPU: not paced at the rate", got, waited, el)
			case (e < -1 || e > 1) != explained:
				t.Errorf("error %+.2f%%, explanation printed: %v:\n%s", e, explained, cli)
			}
			t.Logf("10 Mb/s paced (%s): achieved %.3f Mb/s (%+.2f%%)", tc.name, got, e)
		})
	}
}

// TestRawPacingLine: the pacing line's explanation follows the error as
// printed (two decimals): TestRawBWPacedCommand reads the printed figure,
// and a reader sees -1.00% as within the 1% tolerance.
func TestRawPacingLine(t *testing.T) {
	for _, c := range []struct {
		achieved float64 // Mb/s of 10 asked
		want     string
		explain  bool
	}{
		{10, "(+0.00%)", false},
		{9.8996, "(-1.00%)", false},  // -1.004%
		{10.1004, "(+1.00%)", false}, // +1.004%
		{9.8994, "(-1.01%)", true},   // -1.006%
		{10.1006, "(+1.01%)", true},
		{5, "(-50.00%)", true},
	} {
		var out strings.Builder
		p := &rawPrinter{errPrinter: errPrinter{w: &out}, o: &rawOptions{mbps: 10, rateType: "PP"}}
		p.pacing(reports.Result{Bytes: 1514, Bandwidth: &reports.Bandwidth{MsgRateMpps: c.achieved / (1514 * 8)}})
		if !strings.Contains(out.String(), c.want) || strings.Contains(out.String(), "the rate is") != c.explain {
			t.Errorf("%v Mb/s of 10: %q; want %s, explained: %v", c.achieved, out.String(), c.want, c.explain)
		}
	}
}

// TestPacingWait: what a paced client's report says of its sender's CPU
// wait (PP and SW) reads back with PacingWait.
func TestPacingWait(t *testing.T) {
	runtime.LockOSThread() // cpuWait reads this thread's
	defer runtime.UnlockOSThread()
	if _, ok := cpuWait(); !ok {
		t.Skip("the kernel keeps no schedstat (CONFIG_SCHED_INFO): reports say no CPU wait")
	}
	for _, rt := range []string{"PP", "SW"} {
		var out strings.Builder
		p := &rawPrinter{errPrinter: errPrinter{w: &out}, o: &rawOptions{mbps: 10, rateType: rt}}
		p.start(session.Progress{})
		p.sizeStart = p.sizeStart.Add(-time.Second)
		p.pacing(reports.Result{Bytes: 1514, Bandwidth: &reports.Bandwidth{MsgRateMpps: 5.0 / (1514 * 8)}})
		waited, run, ok := PacingWait(out.String())
		if !ok || waited < 0 || waited > run || run < time.Second || run > time.Minute {
			t.Errorf("%s: %q read as waited %v of %v (%v)", rt, out.String(), waited, run, ok)
		}
	}
	if _, _, ok := PacingWait(" pacing: requested 10 Mb/s, achieved 10.000 Mb/s (+0.00%)\n"); ok {
		t.Error("a report without a wait read as one")
	}
}

func TestRawLatCommand(t *testing.T) {
	s := newRawSides(t)
	// perftest's reading: both sides take the same -k (the client's
	// port) and -K (the server's).
	srv, cli := s.run(t, "raw-lat", []string{"-n", "200", "--tcp", "-k", "7002", "-K", "7001", "-a"},
		[]string{"-n", "200", "--tcp", "-k", "7002", "-K", "7001", "--completion-timestamps", "--json", "-", "-a"})
	if !strings.Contains(srv, "Answering pings: nothing to measure on this side") {
		t.Errorf("server output:\n%s", srv)
	}
	d := decodeDoc(t, []byte(cli))
	// -a: 64 to 1024 bytes on a 1500-byte MTU (a 1514-byte frame), two
	// records per size.
	sizes := []int64{64, 128, 256, 512, 1024}
	if len(d.Results) != 2*len(sizes) {
		t.Fatalf("%d results, want the software clock's and the completion timestamps' for each of %v", len(d.Results), sizes)
	}
	for i, size := range sizes {
		sw, ts := d.Results[2*i], d.Results[2*i+1]
		if sw.Bytes != size || ts.Bytes != size || sw.Clock != "" || ts.Clock != raw.ClockCompletion || sw.Latency == nil || ts.Latency == nil ||
			sw.Samples != 200 || ts.Samples != 200 {
			t.Fatalf("results %+v / %+v", sw, ts)
		}
		if ts.TrueMinUs <= 0 || ts.MeanUs > sw.MeanUs {
			t.Errorf("%d B: completion timestamps: min %.3f us, mean %.3f us; software clock mean %.3f us", size, ts.TrueMinUs, ts.MeanUs, sw.MeanUs)
		}
	}
}

func TestFSRateCommand(t *testing.T) {
	s := newRawSides(t)
	var out string
	err := s.pair.A.Run(func() error {
		var err error
		out, _, err = runRaw(context.Background(), "fs-rate", "-d", "raw_"+s.pair.A.Link, "-n", "300", "--json", "-")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	d := decodeDoc(t, []byte(out))
	if len(d.Results) != 1 || d.Results[0].Test != "raw_ethernet_fs_rate" || d.Results[0].Latency == nil || d.Results[0].Samples != 300 ||
		d.Env.Extra["rules"] != "300" || d.Env.Extra["create_per_second"] == "" {
		t.Errorf("document: %+v, extra %v", d.Results, d.Env.Extra)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fs-rate"}, "-d: give the raw device"},
		{[]string{"fs-rate", "-d", "raw_x", "-n", "2"}, "-n 2: at least 5 rules"},
		{[]string{"fs-rate", "-d", "raw_x", "-K", "65000", "-n", "1000"}, "-K 65000 with -n 1000: the rules' ports must stay within 1 to 65535"},
		{[]string{"fs-rate", "-d", "raw_x", "--local_port", "65000", "-n", "1000"}, "--local_port 65000 with -n 1000: the rules' ports must stay within 1 to 65535"},
		{[]string{"fs-rate", "-d", "raw_x", "-k", "5000"}, "-k is the client's port (perftest's client_port); the rules steer the server's destination port: give it as -K"},
		{[]string{"fs-rate", "-d", "raw_x", "-B", "nope"}, "-B nope: not a MAC address"},
	} {
		if _, _, err := runRaw(context.Background(), c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestRawPathCommands runs raw-bw on the burst and tso paths and raw-lat
// on the inline path with --hgrm over a veth pair: the header names the
// path, the server counts what the path moved (the TSO sends' segments),
// and the histogram parses with every round trip in it.
func TestRawPathCommands(t *testing.T) {
	s := newRawSides(t)
	const n = 600
	dir := t.TempDir()
	t.Run("burst", func(t *testing.T) {
		cliJSON := filepath.Join(dir, "burst.json")
		srv, cli := s.run(t, "raw-bw", []string{"-n", strconv.Itoa(n), "-r", "4096", "--path", "burst"},
			[]string{"-n", strconv.Itoa(n), "--path", "burst", "--json", cliJSON})
		if !strings.Contains(cli, "Send path       : burst") || !strings.Contains(srv, "Send path       : burst") {
			t.Errorf("the headers do not name the burst path:\n%s\n%s", cli, srv)
		}
		d := readDoc(t, cliJSON)
		if d.Env.SendPath != "burst" || len(d.Results) != 1 || d.Results[0].Path != "burst" || d.Results[0].Iterations != n || d.Env.EngineCounters["tx_frames"] != n {
			t.Errorf("client document: path %q, results %+v, tx_frames %d", d.Env.SendPath, d.Results, d.Env.EngineCounters["tx_frames"])
		}
	})
	t.Run("tso", func(t *testing.T) {
		// UDP: 42 bytes of headers and 4 segments of 1000 bytes.
		args := []string{"-n", strconv.Itoa(n), "-s", "4042", "--tso", "1000"}
		srvOut, cli := s.run(t, "raw-bw", append(args, "-r", "8192"), args)
		if !strings.Contains(cli, "Send path       : tso: 4042-byte sends cut into 4 segments of 1042 bytes (MSS 1000)") ||
			!regexp.MustCompile(`TSO sends: `+strconv.Itoa(n)+`, cut by the kernel \d+, by the engine \d+`).MatchString(cli) {
			t.Errorf("client output:\n%s", cli)
		}
		// The server's row: segments of 1042 bytes, all 4n of them or the
		// ones lost reported.
		m := regexp.MustCompile(`(?m)^ 1042\s+(\d+)\s`).FindStringSubmatch(srvOut)
		lost := regexp.MustCompile(`(\d+) frames of 1042 bytes lost`).FindStringSubmatch(srvOut)
		if m == nil {
			t.Fatalf("no 1042-byte row in the server's output:\n%s", srvOut)
		}
		got, _ := strconv.Atoi(m[1])
		if lost != nil {
			l, _ := strconv.Atoi(lost[1])
			got += l
		}
		if got != 4*n {
			t.Errorf("the server did not account for %d segments of 1042 bytes:\n%s", 4*n, srvOut)
		}
	})
	t.Run("lat inline hgrm", func(t *testing.T) {
		hgrm := filepath.Join(dir, "lat.hgrm")
		_, cli := s.run(t, "raw-lat", []string{"-n", "300", "--path", "inline"}, []string{"-n", "300", "--path", "inline", "--hgrm", hgrm})
		if !strings.Contains(cli, "Frames inline  : ON") || !strings.Contains(cli, "Send path       : inline") {
			t.Errorf("client output:\n%s", cli)
		}
		checkHGRM(t, hgrm, 300)
	})
	t.Run("burst-lat hgrm", func(t *testing.T) {
		hgrm := filepath.Join(dir, "burst.hgrm")
		s.run(t, "raw-burst-lat", []string{"-n", "256", "-r", "4096", "--reply_every", "4"}, []string{"-n", "256", "--burst_size", "16", "--reply_every", "4", "--hgrm", hgrm})
		checkHGRM(t, hgrm, 64)
	})
	for _, path := range []string{"burst", "inline"} {
		t.Run("burst-lat path "+path, func(t *testing.T) {
			hgrm := filepath.Join(dir, "burst-"+path+".hgrm")
			srv, cli := s.run(t, "raw-burst-lat", []string{"-n", "256", "-r", "4096", "--reply_every", "4", "--path", path},
				[]string{"-n", "256", "--burst_size", "16", "--reply_every", "4", "--path", path, "--hgrm", hgrm})
			if !strings.Contains(cli, "Send path       : "+path) || !strings.Contains(srv, "Send path       : "+path) {
				t.Errorf("no send path %s in the client's or the server's header:\n%s\n%s", path, cli, srv)
			}
			checkHGRM(t, hgrm, 64)
		})
	}
	t.Run("inline too large", func(t *testing.T) {
		err := s.pair.A.Run(func() error {
			_, _, err := runRaw(context.Background(), "raw-bw", "-d", "raw_"+s.pair.A.Link, "-P", "-E", s.mb, "-J", "10.0.0.2", "-s", "1500", "--path", "inline")
			return err
		})
		var ue *cli.UsageError
		if err == nil || !strings.Contains(err.Error(), "--path inline: 1500-byte frames do not fit") || !errors.As(err, &ue) {
			t.Errorf("raw-bw --path inline -s 1500: %v", err)
		}
	})
}

func readDoc(t *testing.T, path string) reports.Document {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeDoc(t, data)
}

// checkHGRM parses an .hgrm file: rows of value, percentile and count
// rising to percentile 1 with count samples, and the footer's total.
func checkHGRM(t *testing.T, path string, count int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var last []string
	total := false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "#["):
			if m := regexp.MustCompile(`Total count\s+=\s+(\d+)\]`).FindStringSubmatch(line); m != nil {
				total = m[1] == strconv.Itoa(count)
			}
		case len(f) == 4 && f[0] != "Value":
			if _, err := strconv.ParseFloat(f[0], 64); err != nil {
				t.Fatalf("%s: row %q", path, line)
			}
			last = f
		}
	}
	if last == nil || last[1] != "1.000000" || last[2] != strconv.Itoa(count) || !total {
		t.Errorf("%s: last row %q, total line found %v; want percentile 1 and %d samples:\n%s", path, last, total, count, data)
	}
}

// TestRawPathsCommand runs rperf paths on raw devices over a veth pair:
// the client runs the reference and every raw path --reps times, prints a
// row per path with its ratio to the reference, and records every run;
// the server counts the frames of all runs.
func TestRawPathsCommand(t *testing.T) {
	s := newRawSides(t)
	const n, reps, paths = 3200, 2, 5
	jsonPath := filepath.Join(t.TempDir(), "paths.json")
	args := []string{"-n", strconv.Itoa(n), "--reps", strconv.Itoa(reps)}
	srv, cli := s.run(t, "paths", args, append(args, "--json", jsonPath))
	for _, name := range []string{"afpacket", "generic", "burst", "inline", "tso"} {
		m := regexp.MustCompile(`(?m)^ ` + name + `\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)-([0-9.]+)$`).FindStringSubmatch(cli)
		if m == nil {
			t.Errorf("no %s row:\n%s", name, cli)
			continue
		}
		rate, _ := strconv.ParseFloat(m[1], 64)
		ratio, _ := strconv.ParseFloat(m[3], 64)
		lo, _ := strconv.ParseFloat(m[4], 64)
		hi, _ := strconv.ParseFloat(m[5], 64)
		if rate <= 0 || ratio <= 0 || lo > ratio || ratio > hi || name == "afpacket" && (m[3] != "1.00" || m[4] != "1.00") {
			t.Errorf("%s row %q", name, m[0])
		}
	}
	d := readDoc(t, jsonPath)
	if len(d.Results) != reps*paths || d.Env.SendPath != "paths" {
		t.Fatalf("%d results (want %d), send path %q", len(d.Results), reps*paths, d.Env.SendPath)
	}
	count := map[string]int{}
	for _, r := range d.Results {
		count[r.Path]++
	}
	for _, name := range []string{"afpacket", "generic", "burst", "inline", "tso"} {
		if count[name] != reps {
			t.Errorf("%d runs of %s, want %d: %v", count[name], name, reps, count)
		}
	}
	// Every frame of the run is counted or reported lost; the engine's
	// TSO sends are the tso runs' (n/16 each).
	m := regexp.MustCompile(`received (\d+) of the run's (\d+) frames of 64 bytes, (\d+) lost`).FindStringSubmatch(srv)
	if m == nil || m[2] != strconv.Itoa(reps*paths*n) {
		t.Fatalf("server output:\n%s", srv)
	}
	got, _ := strconv.Atoi(m[1])
	lost, _ := strconv.Atoi(m[3])
	if got+lost != reps*paths*n || got < n {
		t.Errorf("server: %d received, %d lost of %d", got, lost, reps*paths*n)
	}
	if tso := d.Env.EngineCounters["tx_tso_sends"]; tso != reps*n/16 {
		t.Errorf("%d TSO sends, want %d", tso, reps*n/16)
	}
	if sent := d.Env.EngineCounters["tx_frames"]; sent != (paths-1)*reps*n {
		t.Errorf("the engine sent %d frames, want %d (every path's but the reference's)", sent, (paths-1)*reps*n)
	}
}

func TestRawPathsFlags(t *testing.T) {
	const mac = "02:00:00:00:00:02"
	base := []string{"paths", "-d", "raw_nosuch0", "-P", "-E", mac, "-J", "10.0.0.2"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(base, "host"), "rperf paths on a raw device takes no host"},
		{append(base, "--loopback"), "--loopback: rperf paths on a raw device runs two sides over a link"},
		{append(base, "--test", "write-lat"), "on a raw device rperf paths runs raw-bw; drop --test"},
		{append(base, "--path", "burst"), "--path picks one path"},
		{append(base, "--reps", "0"), "--reps 0: at least one run per path"},
		{append(base, "-q", "2"), "-q does not apply to rperf paths on a raw device"},
		{append(base, "-n", "1000"), "-l 16 with -n 1000"},
		{[]string{"paths", "-d", "raw_x", "-E", mac, "-J", "10.0.0.2"}, "--server (-Z) or --client (-P), exactly one"},
		{[]string{"paths", "-d", "raw_x", "-P", "-J", "10.0.0.2"}, "-E: give the peer's MAC address"},
		{append(base, "-E", "zz"), "-E zz: not a MAC address"},
	} {
		_, _, err := runRaw(context.Background(), c.args...)
		var ue *cli.UsageError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error with %q", c.args, err, c.want)
		}
	}
}

// TestRawPathsTableMedian: rperf paths' per-path figures are medians over
// the repetitions; with an even count the median is the mean of the two
// middle values (with --reps 2 it was the higher run's), and the range
// is the lowest and highest ratio whatever order the runs came in.
func TestRawPathsTableMedian(t *testing.T) {
	runs := []rawPathRun{{name: raw.PathAFPacket, ref: true}, {name: "generic"}}
	res := func(path string, mpps float64) reports.Result {
		return reports.Result{Path: path, Bytes: 64, Bandwidth: &reports.Bandwidth{MsgRateMpps: mpps}}
	}
	tests := []struct {
		name    string
		results []reports.Result
		want    string // the generic row's rate, ratio and range
	}{
		{"two reps", []reports.Result{
			res(raw.PathAFPacket, 1), res("generic", 0.2),
			res(raw.PathAFPacket, 1), res("generic", 1.6),
		}, "0.9000 57.60 0.90 0.20-1.60"},
		{"three reps, best first", []reports.Result{
			res(raw.PathAFPacket, 1), res("generic", 1.5),
			res(raw.PathAFPacket, 2), res("generic", 1),
			res(raw.PathAFPacket, 1), res("generic", 0.9),
		}, "1.0000 64.00 0.90 0.50-1.50"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeRawPathsTable(&errPrinter{w: &b}, runs, tc.results, 16); err != nil {
				t.Fatal(err)
			}
			var row string
			for _, line := range strings.Split(b.String(), "\n") {
				if f := strings.Fields(line); len(f) == 5 && f[0] == "generic" {
					row = strings.Join(f[1:], " ")
				}
			}
			if row != tc.want {
				t.Errorf("generic row %q, want %q; table:\n%s", row, tc.want, b.String())
			}
		})
	}
}

// rawConfigOf is the test configuration a raw command's flags give (its
// client unless args has -Z, with the addresses given so that no netdev
// is read).
func rawConfigOf(t *testing.T, test session.Test, args ...string) raw.Config {
	t.Helper()
	o := &rawOptions{test: test}
	fs := pflag.NewFlagSet(test.Command(), pflag.ContinueOnError)
	o.register(fs)
	role := "-P"
	if slices.Contains(args, "-Z") {
		role = "-Z"
	}
	if err := fs.Parse(append([]string{"-d", "raw_x", role}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	c, err := o.config("")
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return c
}

// TestRawFrameFlags: each of perftest's frame and rate flags reaches the
// test's configuration as the field it names (the frames themselves are
// checked with tshark in tests/raw).
func TestRawFrameFlags(t *testing.T) {
	v4 := []string{"-B", "02:00:00:00:00:01", "-E", "02:00:00:00:00:02", "-j", "10.0.0.1", "-J", "10.0.0.2"}
	v6 := []string{"-B", "02:00:00:00:00:01", "-E", "02:00:00:00:00:02", "-j", "fd00::1", "-J", "fd00::2", "--raw_ipv6"}
	for _, tc := range []struct {
		test  session.Test
		args  []string
		check func(c raw.Config) bool
	}{
		{session.RawBW, append(v4, "-T", "0x28"), func(c raw.Config) bool { return c.Frame.TOS == 0x28 }},
		{session.RawLat, append(v4, "--tos", "184", "-L", "9"), func(c raw.Config) bool { return c.Frame.TOS == 184 && c.Frame.HopLimit == 9 }},
		{session.RawBW, v4, func(c raw.Config) bool { return c.Frame.HopLimit == 64 && c.Frame.TOS == 0 && !c.Frame.TCP }},
		{session.RawBW, append(v6, "--tclass", "7", "--flow_label", "0xbeef", "--hop_limit", "3"), func(c raw.Config) bool {
			return c.Frame.TOS == 7 && c.Frame.FlowLabel == 0xbeef && c.Frame.HopLimit == 3 && c.Frame.SrcIP.Is6()
		}},
		{session.RawBW, append(v4, "--tcp", "--vlan_en", "--vlan_pcp", "8", "-Y", "0x88b5"), func(c raw.Config) bool {
			return c.Frame.TCP && c.Frame.VLAN && c.Frame.VLANID == 1 && c.Frame.VLANPCP == raw.VLANPCPRotate && c.Frame.EtherType == 0x88b5
		}},
		{session.RawBW, append(v4, "--flows", "4", "--flows_burst", "3"), func(c raw.Config) bool { return c.Flows == 4 && c.FlowsBurst == 3 }},
		{session.RawBW, append(v4, "--rate_limit", "100", "--rate_units", "M", "--typical_pkt_size", "1000"), func(c raw.Config) bool {
			return c.RateMbps == 838.8608 && c.HWPacing && c.TypicalPktSize == 1000 // 100 MiB/s
		}},
		{session.RawBurstLat, append(v4, "--rate_limit", "2", "--burst_size", "16", "--reply_every", "4"), func(c raw.Config) bool {
			return c.RateMbps == 2000 && !c.HWPacing && c.BurstSize == 16 && c.ReplyEvery == 4
		}},
		{session.RawBurstLat, append(v4, "--rate_limit", "1000", "--rate_units", "p", "-s", "125"), func(c raw.Config) bool { return c.RateMbps == 1 }},
	} {
		if c := rawConfigOf(t, tc.test, tc.args...); !tc.check(c) {
			t.Errorf("%s %v: frame %+v, flows %d/%d, rate %g Mb/s (PP %v, typical %d), burst %d, reply every %d",
				tc.test.Command(), tc.args, c.Frame, c.Flows, c.FlowsBurst, c.RateMbps, c.HWPacing, c.TypicalPktSize, c.BurstSize, c.ReplyEvery)
		}
	}
}

// TestRawAddrSpellings: as in perftest, -j/-k are the client's IP and
// port and -J/-K the server's on both sides, while -B/-E and the
// --local_*/--remote_* spellings are this side's and the peer's; each
// side's frames go from its own addresses to the peer's.
func TestRawAddrSpellings(t *testing.T) {
	const (
		srvMAC, cliMAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
		srvIP, cliIP   = "10.0.0.1", "10.0.0.2"
	)
	perftest := []string{"-J", srvIP, "-j", cliIP, "-K", "6000", "-k", "5000"} // the same on both sides
	for _, tc := range []struct {
		name             string
		args             []string
		srcIP, dstIP     string
		srcPort, dstPort uint16
	}{
		{"client -j/-J/-k/-K", append([]string{"-P", "-B", cliMAC, "-E", srvMAC}, perftest...), cliIP, srvIP, 5000, 6000},
		{"server -j/-J/-k/-K", append([]string{"-Z", "-B", srvMAC, "-E", cliMAC}, perftest...), srvIP, cliIP, 6000, 5000},
		{"client --local_*/--remote_*", []string{"-P", "--local_mac", cliMAC, "--remote_mac", srvMAC, "--local_ip", cliIP, "--remote_ip", srvIP,
			"--local_port", "5000", "--remote_port", "6000"}, cliIP, srvIP, 5000, 6000},
		{"server --local_*/--remote_*", []string{"-Z", "--local_mac", srvMAC, "--remote_mac", cliMAC, "--local_ip", srvIP, "--remote_ip", cliIP,
			"--local_port", "6000", "--remote_port", "5000"}, srvIP, cliIP, 6000, 5000},
		{"server, default ports", []string{"-Z", "-B", srvMAC, "-E", cliMAC, "-J", srvIP, "-j", cliIP}, srvIP, cliIP, DefaultRawPort, DefaultRawPort},
	} {
		f := rawConfigOf(t, session.RawBW, tc.args...).Frame
		srcMAC, dstMAC := cliMAC, srvMAC
		if slices.Contains(tc.args, "-Z") {
			srcMAC, dstMAC = srvMAC, cliMAC
		}
		if f.SrcIP.String() != tc.srcIP || f.DstIP.String() != tc.dstIP || f.SrcPort != tc.srcPort || f.DstPort != tc.dstPort ||
			net.HardwareAddr(f.SrcMAC[:]).String() != srcMAC || net.HardwareAddr(f.DstMAC[:]).String() != dstMAC {
			t.Errorf("%s: frames from %v %s:%d to %v %s:%d, want from %s %s:%d to %s %s:%d", tc.name,
				net.HardwareAddr(f.SrcMAC[:]), f.SrcIP, f.SrcPort, net.HardwareAddr(f.DstMAC[:]), f.DstIP, f.DstPort,
				srcMAC, tc.srcIP, tc.srcPort, dstMAC, tc.dstIP, tc.dstPort)
		}
	}
	// --raw_mcast: the group is -J, the server's IP, on both sides.
	for _, role := range []string{"-P", "-Z"} {
		args := []string{role, "-B", srvMAC, "-J", "239.1.1.1", "-j", cliIP, "--raw_mcast"}
		if c := rawConfigOf(t, session.RawBW, args...); !c.Multicast || c.Frame.DstIP.String() != "239.1.1.1" || c.Frame.DstMAC != raw.MulticastMAC(c.Frame.DstIP) {
			t.Errorf("%v: multicast %v to %v %s", args, c.Multicast, net.HardwareAddr(c.Frame.DstMAC[:]), c.Frame.DstIP)
		}
	}
}
