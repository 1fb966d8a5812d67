package rperfcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/table"
	"github.com/rperf/rperf/tests/raw"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// The raw Ethernet commands, raw-bw and raw-lat: perftest's
// raw_ethernet_bw and raw_ethernet_lat with perftest's raw flags. Both
// sides are configured from the command line; there is no out-of-band
// connection (package tests/raw).

// DefaultRawPort is the UDP/TCP port of the raw tests' frames on both
// sides when -k/-K are not given.
const DefaultRawPort = 18515

// rawOptions holds the flags of a raw command.
type rawOptions struct {
	test        session.Test
	fs          *pflag.FlagSet
	device      string
	size        int
	iters       int
	txDepth     int
	rxDepth     int
	warmup      int
	srcMAC      string
	dstMAC      string
	clientIP    string // -j/--source_ip: the client's IP, on both sides (perftest)
	serverIP    string // -J/--dest_ip: the server's IP, on both sides
	clientPort  int    // -k/--source_port: the client's port, on both sides
	serverPort  int    // -K/--dest_port: the server's port, on both sides
	localIP     string // --local_ip: this side's IP (perftest's newer spelling)
	remoteIP    string // --remote_ip: the peer's IP
	localPort   int    // --local_port: this side's port
	remotePort  int    // --remote_port: the peer's port
	srcIP       string // resolved (resolveAddrs): this side's IP, "" for the netdev's
	dstIP       string // resolved: the peer's IP (--raw_mcast: group() is the group)
	srcPort     int    // resolved: this side's port
	dstPort     int    // resolved: the peer's port
	server      bool
	client      bool
	tcp         bool
	flows       int
	flowsBurst  int
	tos         int
	flowLabel   int
	hopLimit    int
	ipv6        bool
	vlan        bool
	vlanPCP     int
	etherType   string
	timestamps  bool
	percentiles string
	jsonPath    string
	timeout     time.Duration
	gbits       bool
	burstSize   int
	replyEvery  int
	macFwd      bool
	duration    int
	rateLimit   float64
	rateUnits   string
	rateType    string
	all         bool
	tclass      int
	sniffer     bool
	promisc     bool
	typicalPkt  int
	mcast       bool
	pathName    string
	mss         int
	hgrmPath    string
	cqMod       int
	rawIO       string

	path sendpath.Path
	pcts []float64
	mbps float64 // --rate_limit in Mb/s
}

// latTable reports whether this side prints latency rows: the raw-lat
// client and the raw-burst-lat client.
func (o *rawOptions) latTable() bool {
	return !o.server && (o.test == session.RawLat || o.test == session.RawBurstLat)
}

// rawFlagFields maps tests/raw's configuration fields to the flags that
// set them, for the problems Check reports.
var rawFlagFields = map[string]string{
	"Sizes": "size", "Iterations": "iters", "TxDepth": "tx-depth", "RxDepth": "rx-depth", "Warmup": "warmup",
	"DstMAC": "dest_mac", "Flows": "flows", "FlowsBurst": "flows_burst", "VLANPCP": "vlan_pcp", "EtherType": "ethertype",
	"CompletionTimestamps": "completion-timestamps", "Percentiles": "percentiles", "BurstSize": "burst_size", "ReplyEvery": "reply_every", "MacFwd": "mac_fwd",
	"RateMbps": "rate_limit", "HWPacing": "rate_limit_type", "Multicast": "raw_mcast",
	"Path": pathFlag, "MSS": "tso", "CQMod": "cq-mod",
}

func newRawCommand(t session.Test) *cobra.Command {
	o := &rawOptions{test: t}
	what := map[session.Test]string{session.RawBW: "bandwidth", session.RawLat: "latency", session.RawBurstLat: "latency under a burst load"}[t]
	cmd := &cobra.Command{
		Use:   t.Command(),
		Short: "raw Ethernet " + what + " on a RAW_PACKET QP (perftest's " + t.Name() + ")",
		Long: fmt.Sprintf(`Raw Ethernet %[1]s: whole frames (Ethernet, IPv4 or IPv6, UDP or TCP)
on a RAW_PACKET QP, perftest's %[2]s. As in perftest there is no
out-of-band connection: each side is told its role (--server/-Z or
--client/-P) and the addresses on the command line, and the server must
be started first. As in perftest, -B is this side's MAC and -E the
peer's, while -j/-k are the client's IP and port and -J/-K the server's
on both sides (both sides take the same -j, -J, -k, -K); perftest's
--local_*/--remote_* give this side's and the peer's instead. The
server steers the client's frames to its QP with a flow rule on its
MAC, the two IPs and ports (and --tos, --flow_label when given). -B and
this side's IP default to the netdev's; -s is the whole frame without
the FCS (64 bytes up to the MTU). The built-in engine's raw_<netdev>
devices need CAP_NET_RAW.

Examples (server 10.0.0.1, 02:00:00:00:00:01; client 10.0.0.2, 02:00:00:00:00:02):
  rperf %[3]s -d raw_eth0 -Z -E 02:00:00:00:00:02 -J 10.0.0.1 -j 10.0.0.2
  rperf %[3]s -d raw_eth0 -P -E 02:00:00:00:00:01 -J 10.0.0.1 -j 10.0.0.2 -s 64 -n 100000`, what, t.Name(), t.Command()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return oneLine(o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	o.register(cmd.Flags())
	return cmd
}

func (o *rawOptions) register(fs *pflag.FlagSet) {
	o.fs = fs
	fs.SortFlags = false
	t := o.test
	fs.StringVarP(&o.device, "ib-dev", "d", "", "raw device: the built-in engine's raw_<netdev>, or a kernel device with RAW_PACKET QPs")
	fs.IntVarP(&o.size, "size", "s", t.DefaultSize(), "frame size in bytes, headers included, FCS excluded")
	fs.BoolVarP(&o.all, "all", "a", false, "every frame size from 64 bytes, doubling, up to the netdev's MTU (both sides)")
	fs.IntVarP(&o.iters, "iters", "n", t.DefaultIterations(), "frames (raw-bw) or round trips (raw-lat) per size")
	if t == session.RawBW || t == session.RawLat {
		fs.IntVarP(&o.duration, "duration", "D", 0, "run each size for this many seconds instead of -n (the server: from its first frame, and until the client falls silent for --timeout)")
	}
	fs.IntVarP(&o.txDepth, "tx-depth", "t", t.DefaultTxDepth(), "send queue depth: frames outstanding")
	fs.IntVarP(&o.rxDepth, "rx-depth", "r", session.DefaultRxDepth, "receives kept posted")
	fs.IntVar(&o.warmup, "warmup", 0, "unmeasured frames or round trips before each size")
	fs.StringVarP(&o.srcMAC, "source_mac", "B", "", "this side's MAC address (default: the netdev's)")
	fs.StringVarP(&o.dstMAC, "dest_mac", "E", "", "the peer's MAC address (required)")
	registerIPPortFlags(fs, o, "")
	fs.BoolVarP(&o.server, "server", "Z", false, "the server side: receives (raw-bw) or answers pings (raw-lat)")
	fs.BoolVarP(&o.client, "client", "P", false, "the client side: sends and measures")
	fs.BoolVar(&o.tcp, "tcp", false, "TCP headers instead of UDP")
	fs.IntVar(&o.flows, "flows", 1, "flows the client sends: client port -k+i to server port -K+i for flow i")
	fs.IntVar(&o.flowsBurst, "flows_burst", 1, "frames to one flow before the next")
	fs.IntVarP(&o.tos, "tos", "T", 0, "IPv4 type of service (IPv6: traffic class), 0 to 255")
	fs.IntVar(&o.tclass, "tclass", 0, "IPv6 traffic class, 0 to 255 (with --raw_ipv6; --tos sets the same field)")
	fs.IntVar(&o.flowLabel, "flow_label", 0, "IPv6 flow label, 0 to 1048575")
	fs.IntVarP(&o.hopLimit, "hop_limit", "L", 64, "the frames' IPv4 TTL (IPv6: hop limit), 1 to 255")
	fs.BoolVar(&o.ipv6, "raw_ipv6", false, "IPv6 headers (with -j/-J IPv6 addresses)")
	fs.BoolVar(&o.vlan, "vlan_en", false, "add an 802.1Q tag (VLAN 1)")
	fs.IntVar(&o.vlanPCP, "vlan_pcp", 0, "with --vlan_en: the tag's priority, 0 to 7; 8: another per frame (1, 2, ..., 7, 0, ...)")
	fs.StringVarP(&o.etherType, "ethertype", "Y", "", "the frames' EtherType, 0xXXXX, instead of IPv4's or IPv6's (the server's rule then matches it)")
	fs.BoolVar(&o.sniffer, "sniffer", false, "the server's rule is a sniffer: a copy of every frame of the port")
	fs.BoolVar(&o.promisc, "promiscuous", false, "the server's rule takes every frame no other rule took (all-default)")
	fs.StringVar(&o.rawIO, "raw_io", "", "the built-in engine's raw port I/O (raw_<netdev>): comma-separated v2 or v3 (receive ring), sendmmsg, txring or xdp (transmit; xdp: AF_XDP copy mode, engine-cut TSO), bypass or nobypass (PACKET_QDISC_BYPASS); default v2,sendmmsg,nobypass (docs/raw.md)")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as an rperf/v1 JSON document to FILE (- for stdout)")
	if t == session.RawLat || t == session.RawBurstLat {
		fs.StringVar(&o.hgrmPath, "hgrm", "", "the client: write each size's latency histogram as HdrHistogram .hgrm text to FILE (several sizes: FILE-<size>.hgrm; - for stdout)")
	}
	switch t {
	case session.RawBW:
		fs.StringVar(&o.pathName, pathFlag, "generic", "send path: generic (PostSend from the buffer), burst (qp_burst: SendPending per frame, SendFlush per batch), inline (every frame inline), tso (--tso: each frame one TSO send the device cuts); the server takes the same --path and --tso")
		fs.IntVar(&o.mss, "tso", 0, "send each frame as a TSO send cut into segments of this many payload bytes (the MSS; selects --path tso); -s is the whole send, its headers and a multiple of the MSS; give the server the same -s and --tso")
	case session.RawLat:
		fs.StringVar(&o.pathName, pathFlag, "generic", "send path of the pings and pongs: generic (PostSend from the buffer) or inline (every frame inline); both sides")
	case session.RawBurstLat:
		fs.StringVar(&o.pathName, pathFlag, "generic", "send path of the bursts: generic (PostSend from the buffer), burst (qp_burst: SendPending per frame, SendFlush per burst) or inline (every frame inline); the server takes the same --path (its pongs: inline with inline, else generic)")
	default:
		o.pathName = "generic"
	}
	fs.DurationVar(&o.timeout, "timeout", DefaultTimeout, "longest silence mid-run (a server waits 10x this for the first frame)")
	if t == session.RawLat {
		fs.BoolVar(&o.timestamps, "completion-timestamps", false, "also time each round trip from the completion timestamps (device clock), printed beside the software clock")
		fs.StringVar(&o.percentiles, "percentiles", "", "percentiles of the true statistics (default 50,90,99,99.9,99.99)")
	} else {
		fs.BoolVar(&o.gbits, "report_gbits", false, "report bandwidth in Gb/s (10^9 bits) instead of MiB/s")
	}
	if t == session.RawBW {
		fs.BoolVar(&o.mcast, "raw_mcast", false, "send to the IPv4 multicast group -J (the server's IP, on both sides) at its MAC (no -E); the server takes the group's frames")
		fs.BoolVarP(&o.macFwd, "mac_fwd", "v", false, "the server sends every frame it receives back out, MAC addresses swapped")
		registerCQMod(fs, &o.cqMod)
	}
	if t != session.RawLat {
		fs.IntVar(&o.burstSize, "burst_size", 0, "frames posted at once (raw-bw: with --rate_limit_type SW; default: the tx depth)")
	}
	if t == session.RawBurstLat {
		fs.StringVar(&o.percentiles, "percentiles", "", "percentiles of the true statistics (default 50,90,99,99.9,99.99)")
		fs.IntVar(&o.replyEvery, "reply_every", 1, "the server answers every N-th frame with a pong, which the client times (both sides)")
	}
	if t != session.RawLat {
		def := map[bool]string{true: "SW", false: "PP"}[t == session.RawBurstLat]
		fs.Float64Var(&o.rateLimit, "rate_limit", 0, "pace the client's frames to this rate (--rate_units); 0: as fast as the queue allows")
		fs.StringVar(&o.rateUnits, "rate_units", "g", rateUnitsHelp("frames"))
		fs.StringVar(&o.rateType, "rate_limit_type", def, "SW: bursts of --burst_size frames spaced in software; PP: the QP's packet pacing (rate_limit)")
		fs.IntVar(&o.typicalPkt, "typical_pkt_size", 0, "with PP: the typical frame size the pacing is set for (default -s)")
	}
}

// registerIPPortFlags adds perftest's raw IP and port flags. As in
// perftest, -j/-J and -k/-K are the client's and the server's IP and
// port on both sides (perftest's client_ip/server_ip, client_port/
// server_port), so both sides are given the same four; its newer
// --local_*/--remote_* spellings are this side's and the peer's. -B/-E
// (--local_mac/--remote_mac) are this side's MAC and the peer's.
func registerIPPortFlags(fs *pflag.FlagSet, o *rawOptions, lead string) {
	fs.StringVarP(&o.clientIP, "source_ip", "j", "", lead+"the client's IP address, on both sides, as in perftest (a client's default: its netdev's)")
	fs.StringVarP(&o.serverIP, "dest_ip", "J", "", lead+"the server's IP address, on both sides, as in perftest (a server's default: its netdev's)")
	fs.IntVarP(&o.clientPort, "source_port", "k", DefaultRawPort, lead+"the client's UDP or TCP port, on both sides, as in perftest")
	fs.IntVarP(&o.serverPort, "dest_port", "K", DefaultRawPort, lead+"the server's UDP or TCP port, on both sides, as in perftest")
	fs.StringVar(&o.srcMAC, "local_mac", "", lead+"the same as -B (perftest's newer spelling)")
	fs.StringVar(&o.dstMAC, "remote_mac", "", lead+"the same as -E (perftest's newer spelling)")
	fs.StringVar(&o.localIP, "local_ip", "", lead+"this side's IP address: -j on a client, -J on a server (perftest's newer spelling)")
	fs.StringVar(&o.remoteIP, "remote_ip", "", lead+"the peer's IP address: -J on a client, -j on a server (perftest's newer spelling)")
	fs.IntVar(&o.localPort, "local_port", DefaultRawPort, lead+"this side's port: -k on a client, -K on a server (perftest's newer spelling)")
	fs.IntVar(&o.remotePort, "remote_port", DefaultRawPort, lead+"the peer's port: -K on a client, -k on a server (perftest's newer spelling)")
}

// rawAddrFlags pairs each of perftest's address flags with its newer
// spelling (--local_*/--remote_*); perftest refuses a mix of the two.
var rawAddrFlags = []struct{ old, new string }{
	{"source_mac", "local_mac"}, {"dest_mac", "remote_mac"},
	{"source_ip", "local_ip"}, {"dest_ip", "remote_ip"},
	{"source_port", "local_port"}, {"dest_port", "remote_port"},
}

// newSpelling reports whether the addresses were given as
// --local_*/--remote_*.
func (o *rawOptions) newSpelling() bool {
	for _, f := range rawAddrFlags {
		if o.fs.Lookup(f.new) != nil && o.fs.Changed(f.new) {
			return true
		}
	}
	return false
}

// addrFlag names the flag that gives this side's (peer false) or the
// peer's (peer true) address of kind "mac", "ip" or "port", as the user
// spelled it: -B/-E are this side's MAC and the peer's, -j/-k the
// client's IP and port, -J/-K the server's.
func (o *rawOptions) addrFlag(kind string, peer bool) string {
	if o.newSpelling() {
		return map[bool]string{false: "--local_", true: "--remote_"}[peer] + kind
	}
	flags := map[string][2]string{"mac": {"-B", "-E"}, "ip": {"-j", "-J"}, "port": {"-k", "-K"}}[kind]
	if kind == "mac" && !peer || kind != "mac" && o.server == peer {
		return flags[0]
	}
	return flags[1]
}

// resolveAddrs turns the IP and port flags into this side's and the
// peer's (srcIP, dstIP, srcPort, dstPort) for the side's role.
func (o *rawOptions) resolveAddrs() {
	switch {
	case o.newSpelling():
		o.srcIP, o.dstIP, o.srcPort, o.dstPort = o.localIP, o.remoteIP, o.localPort, o.remotePort
	case o.server:
		o.srcIP, o.dstIP, o.srcPort, o.dstPort = o.serverIP, o.clientIP, o.serverPort, o.clientPort
	default:
		o.srcIP, o.dstIP, o.srcPort, o.dstPort = o.clientIP, o.serverIP, o.clientPort, o.serverPort
	}
}

// group is --raw_mcast's group: the server's IP on both sides.
func (o *rawOptions) group() string {
	if o.server {
		return o.srcIP
	}
	return o.dstIP
}

// validate checks the flags' spelling and roles before any device opens.
func (o *rawOptions) validate() error {
	var oldF, newF string
	for _, f := range rawAddrFlags {
		if oldF == "" && o.fs.Changed(f.old) {
			oldF = flagLead(o.fs.Lookup(f.old))
		}
		if newF == "" && o.fs.Lookup(f.new) != nil && o.fs.Changed(f.new) {
			newF = "--" + f.new
		}
	}
	if oldF != "" && newF != "" {
		return cli.Usagef("%s and %s: give the addresses as -B/-E/-j/-J/-k/-K or as --local_*/--remote_*, not a mix (perftest refuses it too)", oldF, newF)
	}
	switch {
	case o.device == "":
		return cli.Usagef("-d: give the raw device, e.g. -d raw_eth0 (the built-in engine's raw device over eth0)")
	case o.server == o.client:
		return cli.Usagef("give the side's role: --server (-Z) or --client (-P), exactly one")
	}
	o.resolveAddrs()
	peerIP := map[bool]string{true: "the client's IP address (-j/--source_ip, perftest's client IP on both sides", false: "the server's IP address (-J/--dest_ip, perftest's server IP on both sides"}[o.server]
	switch {
	case o.mcast && o.dstMAC != "":
		return cli.Usagef("--raw_mcast sends to the group's MAC, derived from %s: drop %s", o.addrFlag("ip", !o.server), o.addrFlag("mac", true))
	case o.mcast && o.ipv6:
		return cli.Usagef("--raw_mcast sends to an IPv4 group: drop --raw_ipv6")
	case o.mcast && o.group() == "":
		return cli.Usagef("%s: give the multicast group (--raw_mcast sends to it; the same on both sides)", o.addrFlag("ip", !o.server))
	case o.dstMAC == "" && !o.mcast:
		return cli.Usagef("%s: give the peer's MAC address (-E/--dest_mac or --remote_mac): raw frames carry it", o.addrFlag("mac", true))
	case o.dstIP == "" && !o.mcast && o.newSpelling():
		return cli.Usagef("--remote_ip: give the peer's IP address: raw frames carry it and the server's rule matches it")
	case o.dstIP == "" && !o.mcast:
		return cli.Usagef("%s: give %s; or --remote_ip): raw frames carry it and the server's rule matches it", o.addrFlag("ip", true), peerIP)
	case o.timeout <= 0:
		return cli.Usagef("--timeout %v: must be positive, e.g. 30s", o.timeout)
	case o.all && o.fs.Changed("size"):
		return cli.Usagef("-a and -s conflict: -a runs every size from 64 bytes to the MTU; drop one of them")
	case o.srcPort < 1 || o.srcPort > 65535:
		return cli.Usagef("%s %d: not a UDP or TCP port (1 to 65535)", o.addrFlag("port", false), o.srcPort)
	case o.dstPort < 1 || o.dstPort > 65535:
		return cli.Usagef("%s %d: not a UDP or TCP port (1 to 65535)", o.addrFlag("port", true), o.dstPort)
	case o.tos < 0 || o.tos > 255:
		return cli.Usagef("--tos %d: a type of service is 0 to 255", o.tos)
	case o.hopLimit < 1 || o.hopLimit > 255:
		return cli.Usagef("-L %d: a hop limit (TTL) is 1 to 255", o.hopLimit)
	case o.flowLabel < 0 || o.flowLabel > 0xfffff:
		return cli.Usagef("--flow_label %d: a flow label is 0 to 1048575", o.flowLabel)
	case o.flowLabel != 0 && !o.ipv6:
		return cli.Usagef("--flow_label is an IPv6 field: add --raw_ipv6")
	case o.fs.Changed("tclass") && !o.ipv6:
		return cli.Usagef("--tclass is the IPv6 traffic class: add --raw_ipv6, or use --tos for IPv4")
	case o.fs.Changed("tclass") && o.fs.Changed("tos"):
		return cli.Usagef("--tclass and --tos set the same field: give one of them")
	case o.tclass < 0 || o.tclass > 255:
		return cli.Usagef("--tclass %d: a traffic class is 0 to 255", o.tclass)
	case o.sniffer && o.promisc:
		return cli.Usagef("--sniffer and --promiscuous are two kinds of the server's one rule: give one of them")
	case (o.sniffer || o.promisc) && !o.server:
		return cli.Usagef("--sniffer and --promiscuous choose the server's rule: add --server (-Z)")
	case o.fs.Changed("vlan_pcp") && !o.vlan:
		return cli.Usagef("--vlan_pcp is the tag's priority: add --vlan_en")
	case o.duration < 0:
		return cli.Usagef("-D %d: a duration is a positive number of seconds", o.duration)
	case o.duration > 0 && o.fs.Changed("iters"):
		return cli.Usagef("-D and -n conflict: a size runs for a duration or a number of iterations; drop one of them")
	case o.macFwd && !o.server:
		return cli.Usagef("--mac_fwd makes the server forward what it receives: add --server (-Z)")
	case o.test == session.RawBurstLat && o.replyEvery < 1:
		return cli.Usagef("--reply_every %d: the server answers every N-th frame, N at least 1", o.replyEvery)
	case o.vlanPCP < 0 || o.vlanPCP > raw.VLANPCPRotate:
		return cli.Usagef("--vlan_pcp %d: a VLAN priority is 0 to 7, or 8 for another per frame", o.vlanPCP)
	}
	if o.etherType != "" {
		if _, err := parseEtherType(o.etherType); err != nil {
			return err
		}
	}
	if err := o.validatePath(); err != nil {
		return err
	}
	if err := checkCQModFlag(o.fs, o.cqMod, o.usage); err != nil {
		return err
	}
	if o.hgrmPath != "" && o.server {
		return cli.Usagef("--hgrm writes the client's latency histogram; the server measures none: give --hgrm to the client (-P)")
	}
	if o.hgrmPath == "-" && o.jsonPath == "-" {
		return cli.Usagef("--json - and --hgrm - both want stdout; send one of them to a file")
	}
	if o.mcast {
		if ip, err := netip.ParseAddr(o.group()); err == nil && (!ip.Is4() || !ip.IsMulticast()) {
			return cli.Usagef("--raw_mcast: %s %s is not an IPv4 multicast group; give one in 224.0.0.0/4 (e.g. 239.1.1.1), the same on both sides", o.addrFlag("ip", !o.server), o.group())
		}
	} else if _, err := parseMAC(o.addrFlag("mac", true), o.dstMAC); err != nil {
		return err
	}
	if o.srcMAC != "" {
		if _, err := parseMAC(o.addrFlag("mac", false), o.srcMAC); err != nil {
			return err
		}
	}
	for _, a := range []struct{ flag, v string }{{o.addrFlag("ip", true), o.dstIP}, {o.addrFlag("ip", false), o.srcIP}} {
		if a.v == "" {
			continue
		}
		ip, err := netip.ParseAddr(a.v)
		if err != nil || ip.Zone() != "" {
			return cli.Usagef("%s %s: not an IP address; write it as X.X.X.X (IPv4) or, with --raw_ipv6, as an IPv6 address", a.flag, a.v)
		}
		if ip.Is6() != o.ipv6 {
			return cli.Usagef("%s %s: an IPv%d address; raw frames are IPv%d%s", a.flag, a.v, map[bool]int{true: 6, false: 4}[ip.Is6()],
				map[bool]int{true: 6, false: 4}[o.ipv6], map[bool]string{true: " with --raw_ipv6", false: " without --raw_ipv6"}[o.ipv6])
		}
	}
	if o.percentiles != "" {
		ps, err := parsePercentiles(o.percentiles)
		if err != nil {
			return err
		}
		o.pcts = ps
	}
	if o.test != session.RawLat {
		return o.parseRate()
	}
	return nil
}

// validatePath parses --path and --tso: --tso selects the tso path and
// is its MSS.
func (o *rawOptions) validatePath() error {
	p, err := sendpath.Parse(o.pathName)
	if err != nil {
		return cli.Usagef("--path %s: %v", o.pathName, err)
	}
	tso := o.fs.Changed("tso")
	switch {
	case p == sendpath.DM || p == sendpath.DV:
		return cli.Usagef("--path %s: the raw commands send on generic, burst, inline and tso (raw-bw); use one of them", p)
	case o.test == session.RawLat && p == sendpath.Burst:
		return cli.Usagef("--path burst stages a batch of frames and flushes it once; raw-lat sends one frame at a time: use raw-bw --path burst, or --path generic or inline")
	case o.test == session.RawLat && p == sendpath.TSO:
		return cli.Usagef("--path tso cuts a stream of large sends; raw-lat sends single frames: use raw-bw --tso")
	case o.test == session.RawBurstLat && p == sendpath.TSO:
		return cli.Usagef("--path tso cuts a stream of large sends; raw-burst-lat's bursts are of single frames: use raw-bw --tso, or --path generic, burst or inline")
	case tso && o.fs.Changed(pathFlag) && p != sendpath.TSO:
		return cli.Usagef("--tso sends on the tso path, --path %s is another: drop one of them", p)
	case tso && o.mss < 1:
		return cli.Usagef("--tso %d: give the MSS, the payload bytes of each segment, e.g. --tso 1448", o.mss)
	case p == sendpath.TSO && !tso:
		return cli.Usagef("--path tso needs the segment size: add --tso MSS, e.g. --tso 1448")
	case tso && o.all:
		return cli.Usagef("-a and --tso conflict: every size would arrive as segments of one size; give one -s")
	case tso:
		p = sendpath.TSO
	}
	o.path = p
	return nil
}

// parseRate turns --rate_limit and --rate_units into Mb/s (10^6 bits per
// second) of frames.
func (o *rawOptions) parseRate() error {
	switch {
	case o.rateLimit < 0:
		return cli.Usagef("--rate_limit %g: a rate cannot be negative", o.rateLimit)
	case math.IsNaN(o.rateLimit) || math.IsInf(o.rateLimit, 0):
		return cli.Usagef("--rate_limit %g: give a number, e.g. --rate_limit 0.1 (Gb/s)", o.rateLimit)
	case o.rateType != "SW" && o.rateType != "PP":
		return cli.Usagef("--rate_limit_type %s: use SW (software spacing) or PP (packet pacing); HW is a static rate in the QP's address vector (perftest sets ah_attr.static_rate), which a raw packet QP does not have", o.rateType)
	case o.rateType == "PP" && o.rateLimit == 0 && o.fs.Changed("rate_limit_type"):
		return cli.Usagef("--rate_limit_type PP paces at --rate_limit: give it")
	case o.test == session.RawBW && o.burstSize != 0 && (o.rateType != "SW" || o.rateLimit == 0):
		return cli.Usagef("--burst_size: raw-bw's bursts space a software rate: add --rate_limit R --rate_limit_type SW")
	case o.rateLimit == 0 && (o.fs.Changed("rate_units") || o.fs.Changed("typical_pkt_size")):
		// Nothing paces without a rate: say so rather than run unpaced.
		return cli.Usagef("--rate_units and --typical_pkt_size set how --rate_limit paces: give --rate_limit too")
	case o.typicalPkt != 0 && o.rateType != "PP":
		return cli.Usagef("--typical_pkt_size sets the packet pacing: add --rate_limit_type PP")
	case o.typicalPkt < 0 || o.typicalPkt > raw.MaxFrame:
		return cli.Usagef("--typical_pkt_size %d: a frame size is 0 to %d", o.typicalPkt, raw.MaxFrame)
	}
	mbps, err := rateMbps(o.rateLimit, o.rateUnits, o.size, "frames")
	if err != nil {
		return err
	}
	o.mbps = mbps
	if o.mbps*1000 > math.MaxUint32 {
		// A QP's rate limit is a 32-bit kbit/s count (ibv_qp_attr.rate_limit).
		return cli.Usagef("--rate_limit %g --rate_units %s: above %d Gb/s, the most a QP's rate limit (kbit/s, 32 bits) holds; rdiag info shows the device's packet_pacing range", o.rateLimit, o.rateUnits, uint64(math.MaxUint32)/1e6)
	}
	return nil
}

// parseMAC parses a MAC address as XX:XX:XX:XX:XX:XX.
func parseMAC(flag, s string) ([6]byte, error) {
	var m [6]byte
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return m, cli.Usagef("%s %s: not a MAC address; write it as XX:XX:XX:XX:XX:XX", flag, s)
	}
	copy(m[:], hw)
	return m, nil
}

// config builds the test's configuration with the netdev's addresses as
// this side's defaults.
func (o *rawOptions) config(netdev string) (raw.Config, error) {
	c := raw.Default(o.test)
	c.Sizes, c.Iterations, c.Warmup = []int{o.size}, o.iters, o.warmup
	c.TxDepth, c.RxDepth = o.txDepth, o.rxDepth
	c.StallTimeout = o.timeout
	c.Server = o.server
	c.Flows, c.FlowsBurst = o.flows, o.flowsBurst
	c.CompletionTimestamps, c.Percentiles = o.timestamps, o.pcts
	c.ReplyEvery, c.MacFwd = o.replyEvery, o.macFwd
	c.Duration = time.Duration(o.duration) * time.Second
	c.Path, c.MSS = o.path, o.mss
	if o.test != session.RawLat && !o.server {
		c.BurstSize, c.RateMbps, c.HWPacing = o.burstSize, o.mbps, o.rateType == "PP" && o.mbps > 0
		c.TypicalPktSize = o.typicalPkt
	}
	if o.test == session.RawBW && !o.server {
		c.CQMod = o.cqMod // the server takes -Q, as perftest's, and has no sends to moderate
	}
	f := &c.Frame
	f.DstIP, _ = netip.ParseAddr(o.dstIP)
	srcIP := o.srcIP
	if o.mcast {
		// The group is the server's IP on both sides (a multicast
		// server's own IP: it sends nothing).
		f.DstIP, _ = netip.ParseAddr(o.group())
		c.Multicast, f.DstMAC = true, raw.MulticastMAC(f.DstIP)
	} else {
		f.DstMAC, _ = parseMAC("-E", o.dstMAC)
	}
	f.SrcPort, f.DstPort = uint16(o.srcPort), uint16(o.dstPort)
	f.TCP, f.TOS, f.FlowLabel, f.HopLimit = o.tcp, uint8(o.tos), uint32(o.flowLabel), uint8(o.hopLimit)
	if o.fs.Changed("tclass") {
		f.TOS = uint8(o.tclass)
	}
	switch {
	case o.sniffer:
		c.RuleType = verbsio.FlowSniffer
	case o.promisc:
		c.RuleType = verbsio.FlowAllDefault
	}
	f.VLAN, f.VLANID, f.VLANPCP = o.vlan, 1, uint8(o.vlanPCP)
	if o.etherType != "" {
		f.EtherType, _ = parseEtherType(o.etherType)
	}
	var ifc *net.Interface
	if o.srcMAC == "" || srcIP == "" {
		var err error
		if netdev == "" {
			return c, cli.Usagef("-d %s has no netdev to take this side's addresses from; give %s and %s", o.device, o.addrFlag("mac", false), o.addrFlag("ip", false))
		}
		if ifc, err = net.InterfaceByName(netdev); err != nil {
			return c, fmt.Errorf("-d %s: netdev %s: %w", o.device, netdev, err)
		}
	}
	if o.srcMAC != "" {
		f.SrcMAC, _ = parseMAC("-B", o.srcMAC)
	} else {
		copy(f.SrcMAC[:], ifc.HardwareAddr)
	}
	if srcIP != "" {
		f.SrcIP, _ = netip.ParseAddr(srcIP)
	} else {
		ip, err := netdevAddr(ifc, o.ipv6, o.addrFlag("ip", false))
		if err != nil {
			return c, err
		}
		f.SrcIP = ip
	}
	return c, nil
}

// netdevAddr is ifc's first global address of the family asked for.
// flag is the flag that gives this side's IP instead.
func netdevAddr(ifc *net.Interface, v6 bool, flag string) (netip.Addr, error) {
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("netdev %s: %w", ifc.Name, err)
	}
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if ip := p.Addr(); ip.Is6() == v6 && !ip.IsLinkLocalUnicast() {
			return ip, nil
		}
	}
	fam := map[bool]string{true: "IPv6", false: "IPv4"}[v6]
	return netip.Addr{}, cli.Usagef("%s: netdev %s has no %s address to send from; give %s", flag, ifc.Name, fam, flag)
}

// usage spells the first problem of a Check as the command's flags.
func (o *rawOptions) usage(err error) error {
	var ps session.Problems
	var fe *session.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ps) && len(ps) > 0:
		fe = ps[0]
	case errors.As(err, &fe):
	default:
		return err
	}
	return cli.Usagef("%s", fe.Text(func(field string, withValue bool) string {
		name, ok := rawFlagFields[field]
		f := o.fs.Lookup(name)
		if !ok || f == nil {
			if withValue {
				return strings.TrimSpace(field + " " + fe.ValueOf(field))
			}
			return field
		}
		if withValue {
			return flagLead(f) + " " + fe.ValueOf(field)
		}
		return flagLead(f)
	}))
}

// openConfigured opens the side and builds its configuration; the
// caller closes the side, also on an error.
func (o *rawOptions) openConfigured() (*rawSide, raw.Config, error) {
	side, err := o.open()
	if err != nil {
		return side, raw.Config{}, err
	}
	c, err := o.config(side.port.Netdev)
	return side, c, err
}

func (o *rawOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	side, c, err := o.openConfigured()
	defer side.close()
	if err != nil {
		return err
	}
	dev, port := side.dev, side.port
	mtu := rawMTU(port)
	if o.all {
		if mtu == 0 {
			return cli.Usagef("-a: %s has no netdev MTU to stop at; give sizes with -s", o.device)
		}
		c.Sizes = nil
		for n := session.MinRawSize; n <= mtu; n *= 2 {
			c.Sizes = append(c.Sizes, n)
		}
	}
	if err := o.usage(c.Check()); err != nil {
		return err
	}
	if mtu > 0 {
		if seg, _ := c.Segments(o.size); o.path == sendpath.TSO && seg > mtu {
			return cli.Usagef("--tso %d: segments of %d bytes exceed %s's MTU (%d bytes of frame, headers included); use --tso %d or less", o.mss, seg, o.device, mtu, o.mss-(seg-mtu))
		} else if o.path != sendpath.TSO && o.size > mtu {
			return cli.Usagef("-s %d: the frame exceeds %s's MTU (%d bytes of frame, headers included); use -s %d or less", o.size, o.device, mtu, mtu)
		}
		c.RecvSize = mtu + 4 // a tag the kernel puts back
	}
	if err := o.checkPathDevice(dev, c.MaxSize()); err != nil {
		return err
	}
	if side.hgrm, err = createHGRMFiles(o.hgrmPath, c.Sizes); err != nil {
		return err
	}
	env := reports.GatherEnv(reports.System{})
	env.Provider, env.Fabric, env.Device, env.SendPath = dev.Device.Provider, fabricOf(dev.Device, port), dev.Device.Name, o.path.String()
	env.Extra = map[string]string{"role": roleOf(o.server), "tx_depth": strconv.Itoa(c.TxDepth), "rx_depth": strconv.Itoa(c.RxDepth),
		"flows": strconv.Itoa(c.Flows), "source_mac": net.HardwareAddr(c.Frame.SrcMAC[:]).String(), "dest_mac": net.HardwareAddr(c.Frame.DstMAC[:]).String(),
		"source_ip": c.Frame.SrcIP.String(), "dest_ip": c.Frame.DstIP.String()}
	if o.path == sendpath.TSO {
		env.Extra["mss"] = strconv.Itoa(o.mss)
	}
	if o.rawIO != "" {
		env.Extra["raw_io"] = o.rawIO
	}
	if c.RateMbps > 0 {
		env.Extra["rate_limit_mbps"] = strconv.FormatFloat(c.RateMbps, 'f', -1, 64) // 10^6 bits per second
	}
	out := stdout
	if o.jsonPath == "-" || o.hgrmPath == "-" {
		out = stderr
	}
	p := &rawPrinter{errPrinter: errPrinter{w: out}, o: o, clk: env.Clock}
	if o.test == session.RawBW && !o.server {
		p.cqMod = rawCQModText(&c)
		env.Extra["cq_mod"] = p.cqMod
	}
	c.OnResult = p.row
	if o.test == session.RawBW && !o.server && o.mbps > 0 {
		// The sender's own waits for a CPU explain a rate that falls
		// short: keep it on one thread, whose waits the kernel counts.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c.OnProgress = p.start
	}
	results, err := raw.Run(ctx, dev, &c, p.ready)
	if err != nil {
		return runError(err)
	}
	if err := p.finish(results); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if counters := dev.Counters(); counters != nil {
		env.EngineCounters = counters
		if err := writeRawCounters(out, o.device, counters); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
		if n := counters["tx_tso_sends"]; n > 0 {
			k := counters["tx_tso_kernel"]
			fmt.Fprintf(out, " engine %s TSO sends: %d, cut by the kernel %d, by the engine %d\n", o.device, n, k, n-k)
		}
		if p.stamped {
			if err := writeRawStamps(out, o.device, counters); err != nil {
				return fmt.Errorf("write the report: %w", err)
			}
		}
	}
	if err := side.writeDoc(o, env, results, stdout); err != nil {
		return err
	}
	// The histograms of the software clock: completion-timestamp results
	// have the same sizes and are in the JSON document.
	var sw []reports.Result
	for _, r := range results {
		if r.Latency != nil && r.Clock != raw.ClockCompletion {
			sw = append(sw, r)
		}
	}
	return writeHGRM(o.hgrmPath, side.hgrm, sw, stdout, out)
}

// checkPathDevice checks that the device offers the send path, and that
// the inline path's frames fit its inline limit.
func (o *rawOptions) checkPathDevice(dev *verbsio.Context, largest int) error {
	if o.path == sendpath.Generic {
		return nil
	}
	attr, err := dev.QueryDevice()
	if err != nil {
		return fmt.Errorf("query device %s: %w", o.device, err)
	}
	if err := sendpath.CheckDevice(o.path, attr, o.device); err != nil {
		return &cli.EnvironmentError{Err: fmt.Errorf("--path %s: %v", o.path, err)}
	}
	switch {
	case o.path == sendpath.Inline && attr.MaxInlineData == 0:
		return &cli.EnvironmentError{Err: fmt.Errorf("--path inline: %s grants no inline data (max_inline_data 0); use --path generic", o.device)}
	case o.path == sendpath.Inline && largest > attr.MaxInlineData:
		return cli.Usagef("--path inline: %d-byte frames do not fit %s's max_inline_data %d; use -s %d or less, or --path generic", largest, o.device, attr.MaxInlineData, attr.MaxInlineData)
	case o.path == sendpath.TSO && !o.server && attr.TSO.MaxTSO == 0:
		return &cli.EnvironmentError{Err: fmt.Errorf("--tso: %s offers no TSO (tso_caps max_tso 0); use another --path", o.device)}
	}
	return nil
}

// pathText is the header's send-path line.
func (o *rawOptions) pathText(f raw.FrameSpec) string {
	switch {
	case o.path == sendpath.TSO:
		h := f.HeaderLen()
		return fmt.Sprintf("tso: %d-byte sends cut into %d segments of %d bytes (MSS %d)", o.size, (o.size-h)/o.mss, h+o.mss, o.mss)
	case o.path == sendpath.Generic && !o.fs.Changed(pathFlag):
		return "generic (--path for the others)"
	}
	return o.path.String()
}

// rawMTU is the largest frame the port's netdev sends, without the FCS:
// its MTU plus the Ethernet header; 0 when unknown.
func rawMTU(p verbsio.PortAttr) int {
	if p.Netdev == "" {
		return 0
	}
	ifc, err := net.InterfaceByName(p.Netdev)
	if err != nil || ifc.MTU <= 0 {
		return 0
	}
	return ifc.MTU + 14
}

// rawPrinter writes a raw side's report: perftest's header, a row per
// result as it comes (the completion-timestamp rows in their own block),
// then the true statistics or the notes.
type rawPrinter struct {
	errPrinter
	o       *rawOptions
	clk     clock.Info
	tsBlock bool
	// A paced raw-bw client's size: when it started, and the sending
	// thread's CPU wait then (cpuWait), to say why a rate fell short.
	sizeStart time.Time
	waitStart time.Duration
	waitOK    bool
	// cqMod is a raw-bw client's CQ moderation line (rawCQModText).
	cqMod string
	// stamped: the CQ stamps completions (the header's Completion clock,
	// clockKHz), so the report says which clock stamped the frames
	// received.
	stamped  bool
	clockKHz uint64
}

// rawCQModText is the header's CQ moderation of a raw-bw client: one
// number, or the sizes' first and the 1 of those above
// session.CQModSizeLimit (-a with a jumbo MTU).
func rawCQModText(c *raw.Config) string {
	first := c.CQModFor(c.Sizes[0])
	if last := c.CQModFor(c.MaxSize()); last != first {
		return fmt.Sprintf("%d (%d above %d[B])", first, last, session.CQModSizeLimit)
	}
	return strconv.Itoa(first)
}

// paceTolerance is how far, in percent, a paced raw-bw client's achieved
// rate may be from the request before its report explains the shortfall
// (issue 11's goal: under 1%).
const paceTolerance = 1.0

// start records a size's start (Config.OnProgress).
func (p *rawPrinter) start(session.Progress) {
	p.sizeStart = time.Now()
	p.waitStart, p.waitOK = cpuWait()
}

// pacing is a paced raw-bw client's line under a result: the requested
// and achieved rates, and, when they differ by more than paceTolerance,
// how long this process waited for a CPU during the size's run: the
// engine paces when it runs, and a sender descheduled for longer than
// the catch-up it keeps (10 ms of lateness) loses the rest.
func (p *rawPrinter) pacing(r reports.Result) {
	req := p.o.mbps
	got := r.MsgRateMpps * float64(r.Bytes) * 8
	// The error as printed (two decimals) decides the explanation, so
	// that -1.00% never comes with one and -1.01% always does.
	e := math.Round(reports.ErrorPct(req, got)*100) / 100
	p.printf(" pacing: requested %g Mb/s, achieved %.3f Mb/s (%+.2f%%)\n", req, got, e)
	if e >= -paceTolerance && e <= paceTolerance {
		return
	}
	el := time.Since(p.sizeStart)
	w, ok := cpuWait()
	ok = ok && p.waitOK
	if p.o.rateType == "SW" {
		p.printf(" the rate is %.1f%% off: bursts of --burst_size frames are spaced in software, one burst's time apart from the first post to the last\n"+
			" completion (the last burst has no gap after it: a short run reads high), and a late burst keeps at most one gap of its lateness\n", -e)
		if ok {
			p.printf(" the sending thread "+pacingWaitFormat+" (other work on this machine's CPUs)\n", (w - p.waitStart).Round(time.Millisecond), el.Round(time.Millisecond))
		}
		return
	}
	if ok {
		p.printf(" the rate is %.1f%% off: the sending thread "+pacingWaitFormat+" (other work on this machine's CPUs);\n"+
			" the engine paces when its sender runs and catches up at most 10 ms of a late sender's lateness at a time (uptime shows the load)\n",
			-e, (w - p.waitStart).Round(time.Millisecond), el.Round(time.Millisecond))
	} else {
		p.printf(" the rate is %.1f%% off: the engine paces when its sender runs, and a descheduled sender sends late\n", -e)
	}
}

// pacingWaitFormat is how a paced raw-bw client's report says how long
// its sending thread waited for a CPU during the run (PacingWait reads
// it back).
const pacingWaitFormat = "waited %v for a CPU during the %v run"

var pacingWaitRE = regexp.MustCompile(`waited (\S+) for a CPU during the (\S+) run`)

// PacingWait reads a paced raw-bw client's report (rperf raw-bw's
// output): how long its sending thread waited for a CPU and how long the
// run took, when the report says so (a rate more than 1% off, and the
// kernel keeps schedstat). Tests judge a shortfall by the time the sender
// could run.
func PacingWait(out string) (waited, run time.Duration, ok bool) {
	m := pacingWaitRE.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, false
	}
	waited, err1 := time.ParseDuration(m[1])
	run, err2 := time.ParseDuration(m[2])
	if err1 != nil || err2 != nil || run <= 0 {
		return 0, 0, false
	}
	return waited, run, true
}

func (p *rawPrinter) ready(in raw.Info) {
	o, f := p.o, in.Frame
	p.banner(o.test.Title())
	p.pair("Device", o.device, "QPN", fmt.Sprintf("0x%04x", in.QPN))
	p.pair("Role", roleOf(o.server), "Frames inline", map[bool]string{true: "ON", false: "OFF"}[in.Inline])
	p.one("Source", fmt.Sprintf("%s %s port %d", net.HardwareAddr(f.SrcMAC[:]), f.SrcIP, f.SrcPort))
	p.one("Destination", fmt.Sprintf("%s %s port %d", net.HardwareAddr(f.DstMAC[:]), f.DstIP, f.DstPort))
	proto := "UDP"
	if f.TCP {
		proto = "TCP"
	}
	p.pair("Protocol", proto, "Flows", strconv.Itoa(o.flows))
	p.one("Send path", o.pathText(in.Frame))
	if p.cqMod != "" {
		p.one("CQ Moderation", p.cqMod)
	}
	if in.ClockKHz > 0 {
		p.stamped, p.clockKHz = true, in.ClockKHz
		p.one("Completion clock", fmt.Sprintf("%d kHz (completion timestamps)", in.ClockKHz))
	}
	p.one("Clock", clockText(p.clk))
	if o.server && o.test == session.RawLat {
		p.printf(" Answering pings: nothing to measure on this side\n")
		return
	}
	if o.test == session.RawBurstLat && !o.server {
		burst, rate := o.burstSize, "none: each burst when the previous one completed"
		if burst == 0 {
			burst = o.txDepth
		}
		if o.mbps > 0 {
			rate = rateText(o.mbps, o.rateLimit, o.rateUnits) + ", " + map[string]string{"SW": "bursts spaced in software", "PP": "the QP's packet pacing"}[o.rateType]
		}
		p.pair("Burst size", strconv.Itoa(burst), "Rate limit", rate)
		p.printf(" Latency: a pong's arrival less the post of the frame that asked for it (every %d frames), halved\n", o.replyEvery)
	}
	if o.test == session.RawBW && !o.server && o.mbps > 0 {
		p.one("Rate limit", rateText(o.mbps, o.rateLimit, o.rateUnits)+", the QP's packet pacing")
	}
	if o.macFwd {
		p.printf(" Forwarding: every frame received goes back out, MAC addresses swapped\n")
	}
	if err := table.WriteResultLine(p.w); err != nil {
		p.err = err
		return
	}
	if o.latTable() {
		mode := reports.ModeIterations
		if o.duration > 0 {
			mode = reports.ModeDuration
		}
		p.err = table.WriteLatencyHeader(p.w, mode)
	} else {
		p.err = table.WriteBandwidthHeader(p.w, o.gbits)
	}
}

func (p *rawPrinter) row(r reports.Result) {
	if p.err != nil {
		return
	}
	if r.Latency == nil {
		p.err = table.WriteBandwidthRow(p.w, r, p.o.gbits)
		if p.err == nil && r.Bandwidth.LostMessages > 0 {
			p.printf(" %d frames of %d bytes lost (sent, never delivered to this QP)\n", r.Bandwidth.LostMessages, r.Bytes)
		}
		if p.err == nil && p.o.test == session.RawBW && !p.o.server && p.o.mbps > 0 {
			p.pacing(r)
		}
		return
	}
	if r.Clock == raw.ClockCompletion {
		p.printf(" from completion timestamps (the ping's send completion to the pong's receive completion, device clock):\n")
	}
	p.err = table.WriteLatencyRow(p.w, r)
}

func (p *rawPrinter) finish(results []reports.Result) error {
	if p.err != nil {
		return p.err
	}
	if p.o.server && p.o.test == session.RawLat {
		return nil
	}
	if err := table.WriteResultLine(p.w); err != nil {
		return err
	}
	if p.o.test == session.FSRate || p.o.test == session.RawBurstLat && !p.o.server {
		if err := table.WriteTrueLatency(p.w, results, p.clk); err != nil {
			return err
		}
	} else if p.o.test == session.RawLat {
		var sw, ts []reports.Result
		for _, r := range results {
			if r.Clock == raw.ClockCompletion {
				ts = append(ts, r)
			} else {
				sw = append(sw, r)
			}
		}
		if err := table.WriteTrueLatency(p.w, sw, p.clk); err != nil {
			return err
		}
		if len(ts) > 0 {
			p.printf(" The same round trips from completion timestamps:\n")
			// Their clock is the device's, read by nobody on the path.
			dev := clock.Info{Name: fmt.Sprintf("the device's completion clock, %d kHz (stamped by the device, no read on the measured path)", p.clockKHz)}
			if p.clockKHz > 0 {
				dev.ResolutionNs = int64(max(1, 1e9/(p.clockKHz*1000)))
			}
			if err := table.WriteTrueLatency(p.w, ts, dev); err != nil {
				return err
			}
		}
	} else if err := table.WriteBandwidthNotes(p.w, results, p.clk); err != nil {
		return err
	}
	if p.err != nil {
		return p.err
	}
	return table.WriteResultLine(p.w)
}

// rawCounterLine is what a raw side prints of the engine's counters: where
// frames went, and the reasons a frame sent was not delivered.
var rawCounterLine = []struct{ name, label string }{
	{"tx_frames", "sent"}, {"tx_errors", "send errors"}, {"rx_frames", "received"}, {"rx_delivered", "delivered"},
	{"rx_no_wqe", "no receive posted"}, {"rx_ring_drops", "ring drops"}, {"rx_unmatched", "no rule"},
	{"rx_steer_dropped", "drop rule"}, {"rx_truncated", "truncated"},
}

// writeRawCounters prints the raw fabric's frame counters on one line.
func writeRawCounters(w io.Writer, device string, c map[string]uint64) error {
	var parts []string
	for _, f := range rawCounterLine {
		parts = append(parts, fmt.Sprintf("%s %d", f.label, c[f.name]))
	}
	_, err := fmt.Fprintf(w, " engine %s frames: %s\n", device, strings.Join(parts, ", "))
	return err
}

// writeRawStamps says which clock stamped the frames a raw side received
// (their receive completions' timestamps): the NIC's, the kernel's
// software stamp where the NIC has none (veth), or the time the frame
// was written into the ring when the kernel had not stamped it yet.
// Nothing when no frame arrived.
func writeRawStamps(w io.Writer, device string, c map[string]uint64) error {
	hw, sw, ring := c["rx_ts_hardware"], c["rx_ts_software"], c["rx_ts_ring"]
	if hw+sw+ring == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, " engine %s receive stamps: hardware (the NIC's clock) %d, software (the kernel's, the NIC gave none) %d, ring (written to the ring, not stamped by the kernel) %d\n",
		device, hw, sw, ring)
	return err
}

// newFSRateCommand is rperf fs-rate, perftest's raw_ethernet_fs_rate:
// the flow-steering rule insertion rate of a raw device, on one side.
func newFSRateCommand() *cobra.Command {
	o := &rawOptions{test: session.FSRate, server: true} // perftest's fs_rate runs as a server
	cmd := &cobra.Command{
		Use:   "fs-rate",
		Short: "flow-steering rule insertion rate of a raw device (perftest's raw_ethernet_fs_rate)",
		Long: `Flow-steering rule insertion rate (perftest's raw_ethernet_fs_rate): create
-n rules on one RAW_PACKET QP, each steering this side's MAC (-B, default
the netdev's) and a UDP destination port of its own (-K, -K+1, ...: the
server's port, as perftest's fs_rate runs as a server; TCP with --tcp),
timing every creation, then destroy them all. Prints the
creation times as a latency table (one-sided), and the rules created
and destroyed per second. No frame is sent and no peer is needed.

Examples:
  rperf fs-rate -d raw_eth0 -n 10000
  rperf fs-rate -d raw_eth0 -n 1000 --tcp --json fs.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return oneLine(o.runFSRate(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	fs := cmd.Flags()
	o.fs = fs
	fs.SortFlags = false
	fs.StringVarP(&o.device, "ib-dev", "d", "", "raw device: the built-in engine's raw_<netdev>, or a kernel device with RAW_PACKET QPs")
	fs.IntVarP(&o.iters, "iters", "n", session.FSRate.DefaultIterations(), "rules to create")
	fs.IntVar(&o.warmup, "warmup", 0, "rules created and destroyed first, unmeasured")
	fs.StringVarP(&o.srcMAC, "source_mac", "B", "", "the MAC address the rules steer (default: the netdev's)")
	fs.IntVarP(&o.srcPort, "dest_port", "K", DefaultRawPort, "the first rule's destination port (the server's port, as in perftest)")
	fs.IntVar(&o.srcPort, "local_port", DefaultRawPort, "the same as -K (perftest's newer spelling: fs_rate is a server)")
	fs.IntVarP(&o.clientPort, "source_port", "k", DefaultRawPort, "the client's port: the rules steer the server's, give -K")
	fs.BoolVar(&o.tcp, "tcp", false, "TCP port rules instead of UDP")
	fs.StringVar(&o.percentiles, "percentiles", "", "percentiles of the creation times (default 50,90,99,99.9,99.99)")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as an rperf/v1 JSON document to FILE (- for stdout)")
	return cmd
}

func (o *rawOptions) runFSRate(ctx context.Context, stdout, stderr io.Writer) error {
	switch {
	case o.device == "":
		return cli.Usagef("-d: give the raw device, e.g. -d raw_eth0 (the built-in engine's raw device over eth0)")
	case o.iters < session.MinIterations:
		return cli.Usagef("-n %d: at least %d rules", o.iters, session.MinIterations)
	case o.fs.Changed("source_port"):
		return cli.Usagef("-k is the client's port (perftest's client_port); the rules steer the server's destination port: give it as -K (--dest_port or --local_port)")
	case o.fs.Changed("dest_port") && o.fs.Changed("local_port"):
		return cli.Usagef("-K and --local_port: give the first rule's port once")
	case o.srcPort < 1 || o.srcPort+o.iters > 0x10000:
		return cli.Usagef("%s %d with -n %d: the rules' ports must stay within 1 to 65535; use a smaller port or -n", o.addrFlag("port", false), o.srcPort, o.iters)
	case o.warmup < 0:
		return cli.Usagef("--warmup %d: cannot be negative", o.warmup)
	}
	var mac [6]byte
	if o.srcMAC != "" {
		var err error
		if mac, err = parseMAC("-B", o.srcMAC); err != nil {
			return err
		}
	}
	if o.percentiles != "" {
		ps, err := parsePercentiles(o.percentiles)
		if err != nil {
			return err
		}
		o.pcts = ps
	}
	side, err := o.open()
	if err != nil {
		return err
	}
	defer side.close()
	dev, port := side.dev, side.port
	if o.srcMAC == "" {
		ifc, err := net.InterfaceByName(port.Netdev)
		if err != nil {
			return fmt.Errorf("-d %s: netdev %q: %w; give -B", o.device, port.Netdev, err)
		}
		copy(mac[:], ifc.HardwareAddr)
	}
	c := raw.Default(session.FSRate)
	c.Iterations, c.Warmup, c.Percentiles = o.iters, o.warmup, o.pcts
	c.Frame.SrcMAC, c.Frame.SrcPort, c.Frame.TCP = mac, uint16(o.srcPort), o.tcp
	out := stdout
	if o.jsonPath == "-" {
		out = stderr
	}
	env := reports.GatherEnv(reports.System{})
	env.Provider, env.Fabric, env.Device, env.SendPath = dev.Device.Provider, fabricOf(dev.Device, port), dev.Device.Name, "generic"
	r, err := raw.FSRate(ctx, dev, &c)
	if err != nil {
		return runError(err)
	}
	p := &rawPrinter{errPrinter: errPrinter{w: out}, o: o, clk: env.Clock}
	p.banner(session.FSRate.Title())
	p.pair("Device", o.device, "Rules", strconv.Itoa(o.iters))
	proto := map[bool]string{true: "TCP", false: "UDP"}[o.tcp]
	p.one("Each rule", fmt.Sprintf("ETH dst %s, %s dst port %d + i", net.HardwareAddr(mac[:]), proto, o.srcPort))
	p.one("Clock", clockText(p.clk))
	if p.err == nil {
		p.err = table.WriteResultLine(out)
	}
	if p.err == nil {
		p.err = table.WriteLatencyHeader(out, reports.ModeIterations)
	}
	if p.err == nil {
		p.err = table.WriteLatencyRow(out, r.Create)
	}
	p.printf(" rules per second: created %.0f, destroyed %.0f\n", r.CreatePerSecond, r.DestroyPerSecond)
	if err := p.finish([]reports.Result{r.Create}); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	env.Extra = map[string]string{"rules": strconv.Itoa(o.iters), "create_per_second": strconv.FormatFloat(r.CreatePerSecond, 'f', 0, 64),
		"destroy_per_second": strconv.FormatFloat(r.DestroyPerSecond, 'f', 0, 64)}
	return side.writeDoc(o, env, []reports.Result{r.Create}, stdout)
}

// rawSide is what a raw command holds while it runs: the --json file,
// created before anything else and removed unless written, and the open
// device with its port 1.
type rawSide struct {
	jsonFile *os.File
	hgrm     map[int64]*os.File // --hgrm's files by frame size, not yet written
	dev      *verbsio.Context
	port     verbsio.PortAttr
	written  bool
}

// open creates the --json file and opens the device.
func (o *rawOptions) open() (s *rawSide, err error) {
	s = &rawSide{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.jsonFile, err = createOutput(o.jsonPath, "--json"); err != nil {
		return s, err
	}
	if s.dev, err = openDevice(o.device, verbsio.OpenOptions{RawIO: o.rawIO}); err != nil {
		return s, err
	}
	if s.port, err = s.dev.QueryPort(1); err != nil {
		return s, fmt.Errorf("query port 1 of %s: %w", o.device, err)
	}
	return s, nil
}

func (s *rawSide) close() {
	removeHGRM(s.hgrm)
	if s.jsonFile != nil {
		s.jsonFile.Close()
		if !s.written {
			os.Remove(s.jsonFile.Name())
		}
		s.jsonFile = nil
	}
	if s.dev != nil {
		s.dev.Close()
		s.dev = nil
	}
}

// writeDoc writes the rperf/v1 document of results to --json's file, or
// to stdout for --json -.
func (s *rawSide) writeDoc(o *rawOptions, env reports.Env, results []reports.Result, stdout io.Writer) error {
	doc := reports.NewDocument(env)
	doc.Results = append(doc.Results, results...)
	switch {
	case s.jsonFile != nil:
		if err := doc.Write(s.jsonFile); err != nil {
			return fmt.Errorf("--json %s: %w", o.jsonPath, err)
		}
	case o.jsonPath == "-":
		if err := doc.Write(stdout); err != nil {
			return err
		}
	}
	s.written = true
	return nil
}

// parseEtherType reads -Y as perftest writes it: 0x and four hex digits,
// not zero.
func parseEtherType(v string) (uint16, error) {
	bad := cli.Usagef("-Y %s: write the EtherType as 0xXXXX (four hex digits, e.g. 0x88b5)", v)
	if len(v) != 6 || (v[:2] != "0x" && v[:2] != "0X") {
		return 0, bad
	}
	n, err := strconv.ParseUint(v[2:], 16, 16)
	if err != nil || n == 0 {
		return 0, bad
	}
	if msg, fix := raw.EtherTypeProblem(uint16(n)); msg != "" {
		return 0, cli.Usagef("-Y %s: %s; %s", v, msg, fix)
	}
	return uint16(n), nil
}
