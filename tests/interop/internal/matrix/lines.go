package matrix

import (
	"strings"
	"time"
)

// Setup says where rperf runs and on which device.
type Setup int

// The setups.
const (
	// HostUDP runs rperf on the host, on the udp fabric device of the
	// link's bridge (udp_br0), against a peer on rxe0 in the VM.
	HostUDP Setup = iota
	// VMIbverbs runs rperf built with the ibverbs provider inside the VM
	// on rxe0, against a peer on the same rxe0.
	VMIbverbs
)

func (s Setup) String() string {
	if s == HostUDP {
		return "host udp_br0"
	}
	return "vm rxe0 (ibverbs)"
}

// PeerKind says what runs on the other side.
type PeerKind int

// The kinds of peers.
const (
	PerftestPeer PeerKind = iota
	RperfPeer
	// RpingPeer is rdma-core's rping, against rperf rping.
	RpingPeer
)

// Rping is the rping peer: rdma-core's (Debian's rdmacm-utils) in the VM.
var Rping = Peer{Name: "rping rdma-core", Kind: RpingPeer, Dir: "/usr/bin"}

// RpingCase is the rping exchange: rperf rping against rping, the flags
// on both sides (-s/-c and -a are added by role).
var RpingCase = Case{Test: "rping", Flags: "-C 3 -v -V"}

// RpingCases are the rping exchanges: RpingCase, and the same with -q on
// both sides (each creates its QP itself and moves it with
// rdma_init_qp_attr; the client completes with rdma_establish).
var RpingCases = []Case{RpingCase, {Test: "rping", Flags: "-C 3 -v -V -q"}}

// RpingPort is rping's default rdma_cm port.
const RpingPort = 7174

// Peer is the program on the other side of a line.
type Peer struct {
	Name string // "perftest 6.06", "perftest 6.29", "rperf"
	Kind PeerKind
	// Dir is where the perftest binaries are in the VM.
	Dir string
}

// Expect is what a line must do to pass.
type Expect int

// The expectations.
const (
	// Pass: both sides exit 0.
	Pass Expect = iota
	// Disagree: the sides were started with different flags; rperf must
	// end by itself, non-zero, with an error naming the problem (an rperf
	// peer too: both say "peers disagree"). A perftest peer may have to be
	// killed: it has no timeouts.
	Disagree
	// Unsupported: a single rperf command the device cannot run must end
	// with exit code 4 and say why (rxe has no device memory and no
	// packet pacing).
	Unsupported
	// Refused: perftest itself refuses the flags (Case.Why, in its
	// words); both sides must end by themselves, non-zero, rperf with an
	// error naming the flag.
	Refused
)

// Case is one test and its flags, to be run in the setups, against the
// peers and in the roles the matrix gives it.
type Case struct {
	Test string // rperf command, e.g. "write-lat"; the peer runs the matching ib_ program
	// Flags go to both sides, in perftest's spelling; {gid4} and {gid6}
	// become each side's own GID index of the IPv4-mapped and the IPv6
	// (fd00:77::/64) address.
	Flags string
	// PeerFlags, when set, replace Flags on the peer's side (mismatches).
	PeerFlags string
	// RperfFlags are added on rperf's side only.
	RperfFlags string
	Expect     Expect
	// Why is perftest's refusal of a Refused case.
	Why string
	// Limit bounds the whole line; 0 means DefaultLimit.
	Limit time.Duration
	// ServerOnly, when set, says why the case runs with rperf as the
	// server only (host setup): the other role tests the link, not rperf.
	ServerOnly string
}

// Line is one row of the table: a case in a setup against a peer in one
// role, or a single command (Single) run alone.
type Line struct {
	N int
	Case
	Setup       Setup
	Peer        Peer
	RperfServer bool
	// Single is a command run alone with --loopback (paths, dm-lat,
	// pacing): no peer, no roles.
	Single bool
}

// Roles describes who serves.
func (l Line) Roles() string {
	switch {
	case l.Single:
		return "loopback"
	case l.RperfServer:
		return "rperf=server"
	}
	return "rperf=client"
}

// Port is the port every perftest line's server listens on (TCP, or
// rdma_cm with -R): perftest's default.
const Port = 18515

// DefaultLimit bounds a line without its own limit.
const DefaultLimit = 120 * time.Second

// Program returns the perftest program name of the line's test ("rping"
// for the rping case).
func (c Case) Program() string {
	if c.Test == "rping" {
		return "rping"
	}
	return "ib_" + strings.ReplaceAll(c.Test, "-", "_")
}

// Listener is where a line's server listens: a TCP port (perftest's
// exchange), or with CM an rdma_cm port (-R, rping).
type Listener struct {
	Port int
	CM   bool
}

// Listener returns where the case's server listens.
func (c Case) Listener() Listener {
	if c.Test == "rping" {
		return Listener{Port: RpingPort, CM: true}
	}
	for _, f := range strings.Fields(c.Flags) {
		if f == "-R" || f == "--rdma_cm" {
			return Listener{Port: Port, CM: true}
		}
	}
	return Listener{Port: Port}
}

var (
	latTests = []string{"send-lat", "write-lat", "read-lat", "atomic-lat"}
	bwTests  = []string{"send-bw", "write-bw", "read-bw", "atomic-bw"}
	allTests = append(append([]string{}, latTests...), bwTests...)
)

// iters gives each test a small iteration count: a TCG VM moves a few
// MB/s and turns a ping-pong around in about a millisecond.
func iters(string) string { return "-n 200" }

// HostCases is the matrix of rperf on the udp fabric against a peer on
// rxe0, issue 9 item 3; each case runs in both roles against every
// perftest peer.
func HostCases() []Case {
	var cs []Case
	add := func(c Case) { cs = append(cs, c) }
	for _, t := range allTests {
		add(Case{Test: t, Flags: iters(t)})
	}
	// -a: perftest runs 2 B to 8 MiB and cannot be capped, so few
	// iterations; atomic tests have one size (perftest refuses -a).
	for _, t := range []string{"send-lat", "write-lat", "read-lat", "send-bw", "write-bw", "read-bw"} {
		add(Case{Test: t, Flags: "-a -n 5", Limit: 300 * time.Second})
	}
	for _, t := range []string{"send-lat", "write-lat", "read-lat", "send-bw", "write-bw", "read-bw"} {
		add(Case{Test: t, Flags: "-s 1M -n 10", Limit: 180 * time.Second})
	}
	for _, t := range bwTests {
		add(Case{Test: t, Flags: "-q 4 -n 100"})
		add(Case{Test: t, Flags: "-b -n 100"})
		add(Case{Test: t, Flags: "--report_gbits -n 100"})
	}
	for _, t := range allTests {
		add(Case{Test: t, Flags: "-D 3"})
	}
	for _, t := range []string{"send-lat", "write-lat", "send-bw", "write-bw"} {
		c := Case{Test: t, Flags: "-c UC " + iters(t)}
		if t == "send-bw" {
			// An unpaced sender on the host outruns rxe under TCG; the
			// lost messages are never resent and perftest's receiver
			// waits 60-120 s for them, then exits 17 (docs/interop.md,
			// the run at d1e9f69). That measures the emulated VM, not
			// rperf: rperf as a UC client runs in the paced case below.
			c.ServerOnly = "an unpaced UC sender on the host outruns rxe under TCG (see the paced case)"
		}
		add(c)
	}
	// UC has neither acknowledgements nor flow control: a sender faster
	// than its receiver loses messages, and send_bw's receiver waits for
	// every one (perftest's own client does the same against a slow
	// peer). perftest's answer is its rate limiter; rperf's is
	// --rate_limit (the QP's packet pacing), here below what rxe under
	// TCG takes even on a loaded host, whose VM stops for a few hundred
	// milliseconds at times (at 10 Mb/s the tap's queue holds 0.4 s; at
	// 50 Mb/s one run of two lost messages with make test beside it).
	// The peer is not paced: it sends at rxe's speed. 0.01 in perftest's
	// default unit, Gb/s, is 10 Mb/s (--rate_units M is MiB/s, as in
	// perftest: 10 M would be 83.9 Mb/s).
	add(Case{Test: "send-bw", Flags: "-c UC -n 200 --rate_limit 0.01", PeerFlags: "-c UC -n 200"})
	for _, t := range []string{"send-lat", "send-bw"} {
		add(Case{Test: t, Flags: "-c UD " + iters(t)})
	}
	// Queue depth, post lists, CQ moderation, inline.
	for _, c := range []Case{
		{Test: "write-bw", Flags: "-t 16 -Q 4 -n 200"},
		{Test: "send-bw", Flags: "-l 4 -n 200"},
		{Test: "read-bw", Flags: "-t 32 -o 4 -n 200"},
		{Test: "send-bw", Flags: "-s 64 -I 64 -n 200"},
		{Test: "send-lat", Flags: "-s 64 -I 0 -n 200"},
		{Test: "write-lat", Flags: "-s 256 -I 128 -n 200"},
	} {
		add(c)
	}
	// GID choices: an explicit IPv4-mapped index, an explicit IPv6 one,
	// and perftest's pick among IPv6 GIDs.
	for _, t := range []string{"write-lat", "send-bw"} {
		add(Case{Test: t, Flags: "-x {gid4} " + iters(t)})
		add(Case{Test: t, Flags: "-x {gid6} " + iters(t)})
		add(Case{Test: t, Flags: "--ipv6 " + iters(t)})
	}
	// Flags perftest refuses (oob.Check has its words): rperf refuses
	// them too.
	for _, c := range []Case{
		{Test: "atomic-lat", Flags: "-a", Why: "Message size cannot be changed for Atomic tests"},
		{Test: "read-lat", Flags: "-c UC " + iters("read-lat"), Why: "UC connection not possible in READ/ATOMIC verbs"},
		{Test: "write-bw", Flags: "-c UD " + iters("write-bw"), Why: "UD connection only possible in SEND verb"},
		{Test: "send-lat", Flags: "-q 4 " + iters("send-lat"), Why: "Multiple QPs only available on bw tests"},
		{Test: "write-lat", Flags: "-b " + iters("write-lat"), Why: "Bidirectional is only available in BW test"},
	} {
		c.Expect = Refused
		add(c)
	}
	// -R (issue 12): every program over rdma_cm instead of the TCP
	// exchange, UD through SIDR, and several QPs.
	for _, t := range allTests {
		add(Case{Test: t, Flags: "-R " + iters(t)})
	}
	add(Case{Test: "send-lat", Flags: "-R -c UD -s 1024 -n 200"})
	add(Case{Test: "send-bw", Flags: "-R -c UD -s 1024 -n 200"})
	add(Case{Test: "write-bw", Flags: "-R -q 4 -n 100"})
	// -m with -R: the client's REQ carries the MTU to both sides' QPs
	// (rxe answers a multi-packet RDMA WRITE whose first packet is not
	// its QP's MTU with a length error, so 4 KiB writes both ways pass
	// only when both QPs have 512); perftest's client leaves its CM's
	// MTU, and so both sides have it when rperf serves.
	add(Case{Test: "write-lat", Flags: "-R -m 512 -s 4096 -n 200"})
	// Mismatched flags: rperf must end with a clear error, nothing hangs.
	for _, c := range []Case{
		{Test: "write-lat", Flags: "-s 64 -n 200", PeerFlags: "-s 128 -n 200"},
		{Test: "write-bw", Flags: "-q 2 -n 100", PeerFlags: "-q 1 -n 100"},
		{Test: "send-bw", Flags: "-c UC -n 100", PeerFlags: "-c RC -n 100"},
		{Test: "send-lat", Flags: "-n 200", PeerFlags: "-n 300"},
	} {
		c.Expect = Disagree
		add(c)
	}
	return cs
}

// VMCases is the matrix of rperf with the ibverbs provider inside the VM:
// every test against rperf and against perftest in both roles.
func VMCases() []Case {
	var cs []Case
	for _, t := range allTests {
		cs = append(cs, Case{Test: t, Flags: iters(t)})
	}
	return cs
}

// VMCMCases are the -R cases of rperf with the ibverbs provider inside
// the VM, where the kernel's CM (through librdmacm) connects rperf's QPs:
// every program, UD through SIDR for both send tests, and several QPs.
// They run in both roles against perftest 4.5 (Debian's), the first peer.
func VMCMCases() []Case {
	var cs []Case
	for _, t := range allTests {
		cs = append(cs, Case{Test: t, Flags: "-R " + iters(t)})
	}
	for _, t := range []string{"send-lat", "send-bw"} {
		cs = append(cs, Case{Test: t, Flags: "-R -c UD " + iters(t)})
		cs = append(cs, Case{Test: t, Flags: "-R -c UD -s 1024 " + iters(t)})
	}
	return append(cs, Case{Test: "write-bw", Flags: "-R -q 4 -n 100"}, Case{Test: "write-lat", Flags: "-R -m 512 -s 4096 -n 200"})
}

// VMRperfOnly are cases run rperf-to-rperf in the VM only: mismatches
// both rperf sides must detect.
func VMRperfOnly() []Case {
	return []Case{
		{Test: "write-lat", Flags: "-s 64 -n 200", PeerFlags: "-s 128 -n 200", Expect: Disagree},
		{Test: "send-bw", Flags: "-q 2 -n 100", PeerFlags: "-q 1 -n 100", Expect: Disagree},
	}
}

// SingleCases are the commands run alone in the VM with --loopback.
func SingleCases() []Case {
	return []Case{
		{Test: "paths", Flags: "-n 2000 --reps 1", Limit: 300 * time.Second},
		{Test: "paths", Flags: "--test write-lat -n 500 --reps 1", Limit: 300 * time.Second},
		{Test: "dm-lat", Flags: "-s 64 -n 200 --reps 1", Expect: Unsupported},
		{Test: "pacing", Flags: "--rates 10,100 --rate-duration 500ms", Expect: Unsupported},
	}
}

// Build expands the cases into the numbered lines of the matrix: the host
// cases against every perftest peer in both roles, the rping exchange in
// both roles, the VM cases against
// rperf and every perftest peer in both roles, the VM-only rperf cases,
// the -R cases in the VM against the first perftest peer and rping in
// the VM, both in both roles, then the single commands.
func Build(perftests []Peer) []Line {
	var ls []Line
	add := func(l Line) {
		l.N = len(ls) + 1
		ls = append(ls, l)
	}
	rperf := Peer{Name: "rperf", Kind: RperfPeer}
	for _, p := range perftests {
		for _, c := range HostCases() {
			for _, srv := range []bool{false, true} {
				if c.ServerOnly != "" && !srv {
					continue
				}
				add(Line{Case: c, Setup: HostUDP, Peer: p, RperfServer: srv})
			}
		}
	}
	for _, c := range RpingCases {
		for _, srv := range []bool{false, true} {
			add(Line{Case: c, Setup: HostUDP, Peer: Rping, RperfServer: srv})
		}
	}
	for _, p := range append([]Peer{rperf}, perftests...) {
		for _, c := range VMCases() {
			for _, srv := range []bool{false, true} {
				if p.Kind == RperfPeer && srv {
					continue // rperf to rperf: one role is both roles
				}
				add(Line{Case: c, Setup: VMIbverbs, Peer: p, RperfServer: srv})
			}
		}
	}
	for _, c := range VMRperfOnly() {
		add(Line{Case: c, Setup: VMIbverbs, Peer: rperf})
	}
	if len(perftests) > 0 {
		for _, c := range VMCMCases() {
			for _, srv := range []bool{false, true} {
				add(Line{Case: c, Setup: VMIbverbs, Peer: perftests[0], RperfServer: srv})
			}
		}
	}
	for _, c := range RpingCases {
		for _, srv := range []bool{false, true} {
			add(Line{Case: c, Setup: VMIbverbs, Peer: Rping, RperfServer: srv})
		}
	}
	for _, c := range SingleCases() {
		add(Line{Case: c, Setup: VMIbverbs, Single: true})
	}
	return ls
}
