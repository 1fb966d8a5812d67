package netns

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Prefix starts the name of every namespace this package creates. The full
// name is Prefix, the creating process's pid, a per-process counter and a
// role letter: "rperf-4242-3-a".
const Prefix = "rperf-"

// RunDir is where "ip netns" keeps its named namespaces.
const RunDir = "/run/netns"

// Interface names inside the namespaces. They only have to be unique within
// one namespace, so every pair uses the same ones.
const (
	LinkA       = "rpa0"  // A's end of its veth pair
	LinkB       = "rpb0"  // B's end of its veth pair
	MidLinkA    = "rpm-a" // Mid's end of the veth pair towards A
	MidLinkB    = "rpm-b" // Mid's end of the veth pair towards B
	MidBridgeIf = "rpbr0" // the bridge joining MidLinkA and MidLinkB (Options.Bridge)
)

// Errors that Available wraps.
var (
	// ErrNotRoot means the process lacks the privilege to create namespaces.
	ErrNotRoot = errors.New("not running as root")
	// ErrNoIP means the iproute2 "ip" command is not installed.
	ErrNoIP = errors.New(`iproute2 "ip" command not found`)
)

// Options shapes a Pair.
type Options struct {
	// MTU is set on every veth end when non-zero; the kernel default is 1500.
	MTU int
	// Qdisc, when non-empty, is a tc qdisc specification installed as the
	// root qdisc of LinkA and LinkB, e.g. {"tbf", "rate", "1gbit", "burst",
	// "64k", "latency", "10ms"} or {"fq"}. It needs the "tc" command and a
	// kernel built with that qdisc; NewPair fails with tc's message if not.
	Qdisc []string
	// Middle puts a third namespace between A and B: A's veth peers with
	// MidLinkA and B's with MidLinkB, and A and B share one subnet. Nothing
	// crosses Mid until something forwards frames between its two links.
	Middle bool
	// Bridge, with Middle, joins Mid's two links in a kernel bridge so that A
	// and B reach each other with no user-space forwarder.
	Bridge bool
	// DynamicNeighbors leaves address resolution (ARP, IPv6 neighbour
	// discovery) to run as usual. By default A and B get permanent
	// neighbour entries for each other's addresses instead, because a
	// burst sent while resolution is pending waits in a small queue, which
	// drops what overflows it (net.ipv4.neigh.*.unres_qlen_bytes) and, once
	// resolved, can be overtaken by datagrams sent meanwhile: first-burst
	// loss and reordering that a transport test would otherwise have to
	// tell from the faults it injects.
	DynamicNeighbors bool
}

// Host is one end of a Pair: a namespace with one veth link and addresses.
type Host struct {
	NS    string       // namespace name, under RunDir
	Link  string       // the veth interface inside NS
	Addr4 netip.Prefix // IPv4 address of Link, with its prefix length
	Addr6 netip.Prefix // IPv6 address of Link (ULA, no DAD), with its prefix length
}

// Middle is the namespace between A and B in a Pair made with Options.Middle.
type Middle struct {
	NS     string // namespace name, under RunDir
	LinkA  string // veth end facing A
	LinkB  string // veth end facing B
	Bridge string // bridge joining LinkA and LinkB, or "" without Options.Bridge
}

// Pair is two test hosts, optionally with a middle namespace on the wire.
type Pair struct {
	A, B Host
	Mid  *Middle // nil unless Options.Middle

	closeOnce sync.Once
	closeErr  error
}

var pairSeq atomic.Uint32

var cleanStaleOnce sync.Once

// Available reports whether this process can create namespaces: it returns
// nil, or an error wrapping ErrNotRoot or ErrNoIP.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("netns: %w", ErrNotRoot)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("netns: %w", ErrNoIP)
	}
	return nil
}

// NewPair creates two namespaces joined by veth (or three, with
// opts.Middle), addresses them, brings every link up and applies opts. On
// error everything it had created is removed. The first call in a process
// also runs CleanupStale.
func NewPair(opts Options) (*Pair, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if opts.MTU < 0 {
		return nil, fmt.Errorf("netns: new pair: negative mtu %d", opts.MTU)
	}
	if opts.Bridge && !opts.Middle {
		return nil, errors.New("netns: new pair: Bridge needs Middle")
	}
	cleanStaleOnce.Do(func() { _, _ = CleanupStale() })

	pid := os.Getpid()
	n := pairSeq.Add(1)
	base := fmt.Sprintf("%s%d-%d-", Prefix, pid, n)
	p := &Pair{
		A: Host{NS: base + "a", Link: LinkA},
		B: Host{NS: base + "b", Link: LinkB},
	}
	p.A.Addr4, p.B.Addr4, p.A.Addr6, p.B.Addr6 = subnets(pid, n)
	if opts.Middle {
		p.Mid = &Middle{NS: base + "m", LinkA: MidLinkA, LinkB: MidLinkB}
		if opts.Bridge {
			p.Mid.Bridge = MidBridgeIf
		}
	}
	if err := p.build(opts); err != nil {
		if cerr := p.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return p, nil
}

// subnets derives a /24 and a /64 from the pid and counter.
func subnets(pid int, n uint32) (a4, b4, a6, b6 netip.Prefix) {
	k := uint32(pid)*7919 + n*104729
	k ^= k >> 14
	k &= 1<<14 - 1 // 14 bits: 10.192.0.0/10 holds 2^14 /24s
	o2, o3 := byte(192+k>>8), byte(k)
	a4 = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, o2, o3, 1}), 24)
	b4 = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, o2, o3, 2}), 24)
	v6 := [16]byte{0xfd, 0x72, 0x70, 0x66, 0, 0, byte(k >> 8), byte(k)}
	v6[15] = 1
	a6 = netip.PrefixFrom(netip.AddrFrom16(v6), 64)
	v6[15] = 2
	b6 = netip.PrefixFrom(netip.AddrFrom16(v6), 64)
	return a4, b4, a6, b6
}

func (p *Pair) build(opts Options) error {
	for _, ns := range p.Namespaces() {
		if err := ip("netns", "add", ns); err != nil {
			return err
		}
	}
	a, b := p.A, p.B
	if m := p.Mid; m == nil {
		if err := ip("link", "add", a.Link, "index", indexA, "netns", a.NS, "type", "veth", "peer", "name", b.Link, "index", indexB, "netns", b.NS); err != nil {
			return err
		}
	} else {
		if err := ip("link", "add", a.Link, "index", indexA, "netns", a.NS, "type", "veth", "peer", "name", m.LinkA, "index", indexMidA, "netns", m.NS); err != nil {
			return err
		}
		if err := ip("link", "add", b.Link, "index", indexB, "netns", b.NS, "type", "veth", "peer", "name", m.LinkB, "index", indexMidB, "netns", m.NS); err != nil {
			return err
		}
		// Mid stays silent: no link-local addresses, so no neighbour
		// discovery or router solicitations of its own on the wire.
		for _, l := range []string{m.LinkA, m.LinkB} {
			if err := ip("-n", m.NS, "link", "set", "dev", l, "addrgenmode", "none"); err != nil {
				return err
			}
		}
		if m.Bridge != "" {
			if err := ip("-n", m.NS, "link", "add", m.Bridge, "type", "bridge", "forward_delay", "0", "stp_state", "0"); err != nil {
				return err
			}
			if err := ip("-n", m.NS, "link", "set", "dev", m.Bridge, "addrgenmode", "none"); err != nil {
				return err
			}
			for _, l := range []string{m.LinkA, m.LinkB} {
				if err := ip("-n", m.NS, "link", "set", "dev", l, "master", m.Bridge); err != nil {
					return err
				}
			}
		}
	}
	if opts.MTU > 0 {
		mtu := strconv.Itoa(opts.MTU)
		for _, nl := range p.links() {
			if err := ip("-n", nl[0], "link", "set", "dev", nl[1], "mtu", mtu); err != nil {
				return err
			}
		}
	}
	for _, h := range []Host{a, b} {
		if err := ip("-n", h.NS, "addr", "add", h.Addr4.String(), "dev", h.Link); err != nil {
			return err
		}
		if err := ip("-n", h.NS, "addr", "add", h.Addr6.String(), "dev", h.Link, "nodad"); err != nil {
			return err
		}
	}
	for _, ns := range p.Namespaces() {
		if err := ip("-n", ns, "link", "set", "dev", "lo", "up"); err != nil {
			return err
		}
	}
	for _, nl := range p.links() {
		if err := ip("-n", nl[0], "link", "set", "dev", nl[1], "up"); err != nil {
			return err
		}
	}
	if len(opts.Qdisc) > 0 {
		for _, h := range []Host{a, b} {
			if err := SetQdisc(h.NS, h.Link, opts.Qdisc...); err != nil {
				return err
			}
		}
	}
	if !opts.DynamicNeighbors {
		if err := p.staticNeighbors(); err != nil {
			return err
		}
	}
	return p.waitRunning()
}

// staticNeighbors gives A and B permanent neighbour entries for each
// other's IPv4 and IPv6 addresses.
func (p *Pair) staticNeighbors() error {
	macs := map[string]string{}
	for _, h := range []Host{p.A, p.B} {
		err := h.Run(func() error {
			ifc, err := net.InterfaceByName(h.Link)
			if err != nil {
				return err
			}
			macs[h.NS] = ifc.HardwareAddr.String()
			return nil
		})
		if err != nil {
			return fmt.Errorf("netns: static neighbours: %w", err)
		}
	}
	for _, hp := range [][2]Host{{p.A, p.B}, {p.B, p.A}} {
		h, peer := hp[0], hp[1]
		for _, addr := range []netip.Prefix{peer.Addr4, peer.Addr6} {
			if err := ip("-n", h.NS, "neigh", "replace", addr.Addr().String(), "lladdr", macs[peer.NS], "dev", h.Link, "nud", "permanent"); err != nil {
				return err
			}
		}
	}
	return nil
}

// Interface indexes of the veth ends. Both ends of a veth pair must differ:
// the kernel treats a carrier change as urgent, and applies it at once, only
// when a link's index differs from its peer's, and fresh namespaces would
// otherwise number both ends 2. Otherwise the link stays operationally down
// (IPv6 drops everything on it) for up to a second after "up".
const (
	indexA    = "10"
	indexMidA = "11"
	indexB    = "20"
	indexMidB = "21"
)

// runningTimeout bounds the wait for links to become operational.
const runningTimeout = 5 * time.Second

// waitRunning waits until every veth link of the pair is up and running
// (operationally up), so traffic can flow as soon as NewPair returns. The
// bridge is not waited for: its ports forward before its own carrier event
// (rate-limited to one a second) is applied.
func (p *Pair) waitRunning() error {
	deadline := time.Now().Add(runningTimeout)
	byNS := map[string][]string{}
	for _, nl := range p.links() {
		if p.Mid != nil && nl[1] == p.Mid.Bridge {
			continue
		}
		byNS[nl[0]] = append(byNS[nl[0]], nl[1])
	}
	for ns, links := range byNS {
		err := Run(ns, func() error {
			for _, l := range links {
				for {
					ifc, err := net.InterfaceByName(l)
					if err != nil {
						return err
					}
					if ifc.Flags&net.FlagUp != 0 && ifc.Flags&net.FlagRunning != 0 {
						break
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("link %s not running after %v (flags %v)", l, runningTimeout, ifc.Flags)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("netns: wait for links: %w", err)
		}
	}
	return nil
}

// links lists every (namespace, interface) the pair owns except loopback.
func (p *Pair) links() [][2]string {
	l := [][2]string{{p.A.NS, p.A.Link}, {p.B.NS, p.B.Link}}
	if m := p.Mid; m != nil {
		l = append(l, [2]string{m.NS, m.LinkA}, [2]string{m.NS, m.LinkB})
		if m.Bridge != "" {
			l = append(l, [2]string{m.NS, m.Bridge})
		}
	}
	return l
}

// Namespaces returns the names of the pair's namespaces: A, B and, with a
// middle, Mid.
func (p *Pair) Namespaces() []string {
	ns := []string{p.A.NS, p.B.NS}
	if p.Mid != nil {
		ns = append(ns, p.Mid.NS)
	}
	return ns
}

// Close deletes the pair's namespaces, which takes their veth links with
// them. It is safe to call more than once; later calls return the first
// result. Processes still running inside a namespace (see Command) keep it
// alive, nameless, until they exit: stop them first.
func (p *Pair) Close() error {
	p.closeOnce.Do(func() {
		var errs []error
		for _, ns := range p.Namespaces() {
			if _, err := os.Stat(NSPath(ns)); errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err := ip("netns", "delete", ns); err != nil {
				errs = append(errs, err)
			}
		}
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// SetQdisc installs spec as the root qdisc of link in namespace ns,
// replacing any there: SetQdisc(ns, "rpa0", "tbf", "rate", "100mbit",
// "burst", "32k", "latency", "20ms").
func SetQdisc(ns, link string, spec ...string) error {
	if len(spec) == 0 {
		return errors.New("netns: set qdisc: empty spec")
	}
	if _, err := exec.LookPath("tc"); err != nil {
		return fmt.Errorf("netns: set qdisc: tc command not found: %w", err)
	}
	args := append([]string{"-n", ns, "qdisc", "replace", "dev", link, "root"}, spec...)
	return run("tc", args...)
}

// NSPath returns the file that names namespace ns: RunDir/ns, or ns itself
// when it contains a slash (such as "/proc/1234/ns/net").
func NSPath(ns string) string {
	if strings.ContainsRune(ns, '/') {
		return ns
	}
	return filepath.Join(RunDir, ns)
}

// List returns the names of the namespaces under RunDir that start with
// Prefix.
func List() ([]string, error) {
	ents, err := os.ReadDir(RunDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netns: list: %w", err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), Prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// CleanupStale deletes the namespaces named with Prefix whose creating
// process (the pid in the name) no longer runs: leftovers of crashed runs.
// It returns the names it deleted.
func CleanupStale() ([]string, error) {
	names, err := List()
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, name := range names {
		pidStr, _, ok := strings.Cut(strings.TrimPrefix(name, Prefix), "-")
		pid, perr := strconv.Atoi(pidStr)
		if !ok || perr != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		if err := ip("netns", "delete", name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

func processAlive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

func ip(args ...string) error { return run("ip", args...) }

func run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		return fmt.Errorf("netns: %s %s: %s: %w", name, strings.Join(args, " "), msg, err)
	}
	return nil
}
