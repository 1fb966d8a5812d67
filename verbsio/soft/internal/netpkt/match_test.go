package netpkt

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

func mustFrame(t testing.TB, h Headers, payload int) []byte {
	t.Helper()
	f, err := h.Append(nil, payloadOf(payload))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// stripTag removes the frame's first tag, as the kernel does on receive.
func stripTag(f []byte) ([]byte, Tag) {
	tag := Tag{Present: true, TCI: uint16(f[14])<<8 | uint16(f[15])}
	return append(append([]byte(nil), f[:12]...), f[16:]...), tag
}

var (
	ones4  = [4]byte{255, 255, 255, 255}
	ones16 = [16]byte{255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255}
	ones6  = verbsio.MAC{255, 255, 255, 255, 255, 255}
)

func udpDst(port uint16) verbsio.FlowUDP {
	return verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: port}, Mask: verbsio.PortFilter{Dst: 0xffff}}
}

func normal(prio uint16, specs ...verbsio.FlowSpec) verbsio.FlowAttr {
	return verbsio.FlowAttr{Port: 1, Priority: prio, Specs: specs}
}

type testFrames struct {
	tos28, tos0, tos29, vx42, vx7, arp, mcast, v6, vlan100, frag, udp6000 []byte
}

func makeFrames(t testing.TB) testFrames {
	base := Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, Proto: ProtoUDP, SrcPort: 1000, DstPort: 5000}
	var fs testFrames
	h := base
	h.TOS = 0x28
	fs.tos28 = mustFrame(t, h, 20)
	h.TOS = 0x29
	fs.tos29 = mustFrame(t, h, 20)
	fs.tos0 = mustFrame(t, base, 20)
	h = base
	h.DstPort = 6000
	fs.udp6000 = mustFrame(t, h, 20)
	inner := &Headers{Dst: [6]byte{2, 9, 9, 9, 9, 9}, Src: [6]byte{2, 8, 8, 8, 8, 8}, SrcIP: netip.MustParseAddr("192.168.1.1"), DstIP: netip.MustParseAddr("192.168.1.2"), Proto: ProtoTCP, SrcPort: 1, DstPort: 8443}
	h = Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, Proto: ProtoUDP, SrcPort: 50000, VNI: 42, Inner: inner}
	fs.vx42 = mustFrame(t, h, 20)
	h.VNI = 7
	fs.vx7 = mustFrame(t, h, 20)
	fs.arp = mustFrame(t, Headers{Dst: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Src: macA, EtherType: 0x0806}, 28)
	h = base
	h.Dst = [6]byte{0x01, 0x00, 0x5e, 0, 0, 1}
	fs.mcast = mustFrame(t, h, 20)
	fs.v6 = mustFrame(t, Headers{Dst: macB, Src: macA, SrcIP: ip6A, DstIP: ip6B, TOS: 0xb8, FlowLabel: 0x12345, Proto: ProtoUDP, SrcPort: 1, DstPort: 5000}, 20)
	h = base
	h.VLAN = Tag{Present: true, TCI: 3<<13 | 100}
	fs.vlan100 = mustFrame(t, h, 20)
	fs.frag = append([]byte(nil), fs.tos0...)
	fs.frag[EthLen+7] = 0x10 // fragment offset 16 (x8 bytes)
	ipv4HeaderChecksum(fs.frag[EthLen : EthLen+IPv4Len])
	return fs
}

type delivery struct {
	frame   []byte
	tag     Tag
	hits    []Hit
	verdict Verdict
}

func TestMatch(t *testing.T) {
	fs := makeFrames(t)
	vlanStripped, stripped := stripTag(fs.vlan100)
	tos := func(v, m uint8) verbsio.FlowIPv4 {
		return verbsio.FlowIPv4{Val: verbsio.IPv4Filter{TOS: v}, Mask: verbsio.IPv4Filter{TOS: m}}
	}
	vni := func(v uint32) verbsio.FlowVXLAN {
		return verbsio.FlowVXLAN{Val: verbsio.TunnelFilter{TunnelID: v}, Mask: verbsio.TunnelFilter{TunnelID: 0xffffff}}
	}
	type rule struct {
		attr   verbsio.FlowAttr
		target uint32
	}
	tests := []struct {
		name  string
		rules []rule
		want  []delivery
	}{
		{"tos 0x28 to A, other tos to B", []rule{{normal(0, tos(0x28, 0xff)), 1}, {normal(1, verbsio.FlowIPv4{}), 2}}, []delivery{
			{fs.tos28, Tag{}, []Hit{{1, 0}}, Steered},
			{fs.tos0, Tag{}, []Hit{{2, 0}}, Steered},
			{fs.tos29, Tag{}, []Hit{{2, 0}}, Steered},
			{fs.v6, Tag{}, nil, Unmatched},
			{fs.arp, Tag{}, nil, Unmatched},
		}},
		{"dscp with a partial mask ignores ECN", []rule{{normal(0, tos(0x28, 0xfc)), 1}}, []delivery{
			{fs.tos28, Tag{}, []Hit{{1, 0}}, Steered},
			{fs.tos29, Tag{}, []Hit{{1, 0}}, Steered},
			{fs.tos0, Tag{}, nil, Unmatched},
		}},
		{"vxlan vni 42 with its tag", []rule{{normal(0, vni(42), verbsio.FlowTag{Tag: 42}), 3}}, []delivery{
			{fs.vx42, Tag{}, []Hit{{3, 42}}, Steered},
			{fs.vx7, Tag{}, nil, Unmatched},
			{fs.tos0, Tag{}, nil, Unmatched},
		}},
		{"inner specs", []rule{{normal(0, verbsio.FlowVXLAN{}, verbsio.FlowTCP{Inner: true, Val: verbsio.PortFilter{Dst: 8443}, Mask: verbsio.PortFilter{Dst: 0xffff}},
			verbsio.FlowIPv4{Inner: true, Val: verbsio.IPv4Filter{Dst: [4]byte{192, 168, 1, 2}}, Mask: verbsio.IPv4Filter{Dst: ones4}}), 4}}, []delivery{
			{fs.vx42, Tag{}, []Hit{{4, 0}}, Steered},
			{fs.vx7, Tag{}, []Hit{{4, 0}}, Steered},
			{fs.tos0, Tag{}, nil, Unmatched},
		}},
		{"inner ETH alone needs a VXLAN frame", []rule{{normal(0, verbsio.FlowVXLAN{}, verbsio.FlowETH{Inner: true}), 4}}, []delivery{
			{fs.vx42, Tag{}, []Hit{{4, 0}}, Steered},
			{fs.tos0, Tag{}, nil, Unmatched},
		}},
		{"lower priority value wins", []rule{{normal(5, verbsio.FlowUDP{}), 1}, {normal(2, udpDst(5000)), 2}}, []delivery{
			{fs.tos0, Tag{}, []Hit{{2, 0}}, Steered},
			{fs.udp6000, Tag{}, []Hit{{1, 0}}, Steered},
		}},
		{"identical rules of one priority each get a copy", []rule{{normal(0, udpDst(5000), verbsio.FlowTag{Tag: 1}), 1}, {normal(0, udpDst(5000), verbsio.FlowTag{Tag: 2}), 2}}, []delivery{
			{fs.tos0, Tag{}, []Hit{{1, 1}, {2, 2}}, Steered},
		}},
		{"same priority, other masks: the first group wins", []rule{{normal(0, udpDst(5000)), 1}, {normal(0, tos(0, 0xff)), 2}}, []delivery{
			{fs.tos0, Tag{}, []Hit{{1, 0}}, Steered},
			{fs.udp6000, Tag{}, []Hit{{2, 0}}, Steered},
		}},
		{"dont trap goes on to lower priorities", []rule{{verbsio.FlowAttr{Port: 1, Flags: verbsio.FlowDontTrap, Specs: []verbsio.FlowSpec{verbsio.FlowIPv4{}}}, 1}, {normal(1, verbsio.FlowUDP{}), 2}}, []delivery{
			{fs.tos0, Tag{}, []Hit{{1, 0}, {2, 0}}, Steered},
			{fs.frag, Tag{}, []Hit{{1, 0}}, Steered},
		}},
		{"a target is delivered to once", []rule{{verbsio.FlowAttr{Port: 1, Flags: verbsio.FlowDontTrap, Specs: []verbsio.FlowSpec{verbsio.FlowIPv4{}, verbsio.FlowTag{Tag: 5}}}, 1}, {normal(1, verbsio.FlowUDP{}, verbsio.FlowTag{Tag: 6}), 1}}, []delivery{
			{fs.tos0, Tag{}, []Hit{{1, 5}}, Steered},
		}},
		{"drop", []rule{{normal(0, udpDst(5000), verbsio.FlowDrop{}), 1}, {normal(1, verbsio.FlowIPv4{}), 2}}, []delivery{
			{fs.tos0, Tag{}, nil, Dropped},
			{fs.udp6000, Tag{}, []Hit{{2, 0}}, Steered},
		}},
		{"sniffer sees everything, dropped frames too", []rule{{verbsio.FlowAttr{Type: verbsio.FlowSniffer, Port: 1}, 9}, {normal(0, udpDst(5000)), 1}, {normal(0, udpDst(6000), verbsio.FlowDrop{}), 2}}, []delivery{
			{fs.tos0, Tag{}, []Hit{{9, 0}, {1, 0}}, Steered},
			{fs.arp, Tag{}, []Hit{{9, 0}}, Unmatched},
			{fs.udp6000, Tag{}, []Hit{{9, 0}}, Dropped},
			{fs.tos0[:10], Tag{}, []Hit{{9, 0}}, Unmatched},
		}},
		{"default rules", []rule{{verbsio.FlowAttr{Type: verbsio.FlowAllDefault, Port: 1}, 7}, {verbsio.FlowAttr{Type: verbsio.FlowMCDefault, Port: 1}, 8}, {normal(0, udpDst(5000)), 1}}, []delivery{
			{fs.tos0, Tag{}, []Hit{{1, 0}}, Steered},
			{fs.mcast, Tag{}, []Hit{{1, 0}}, Steered},
			{fs.arp, Tag{}, []Hit{{8, 0}}, Defaulted},
			{fs.udp6000, Tag{}, []Hit{{7, 0}}, Defaulted},
		}},
		{"all default takes multicast without an mc default", []rule{{verbsio.FlowAttr{Type: verbsio.FlowAllDefault, Port: 1}, 7}}, []delivery{
			{fs.arp, Tag{}, []Hit{{7, 0}}, Defaulted},
		}},
		{"vlan id, in the frame or stripped", []rule{{normal(0, verbsio.FlowETH{Val: verbsio.ETHFilter{VLANTag: 100, EtherType: EtherTypeIPv4}, Mask: verbsio.ETHFilter{VLANTag: 0x0fff, EtherType: 0xffff}}), 1}}, []delivery{
			{fs.vlan100, Tag{}, []Hit{{1, 0}}, Steered},
			{vlanStripped, stripped, []Hit{{1, 0}}, Steered},
			{vlanStripped, Tag{}, nil, Unmatched},
			{fs.tos0, Tag{}, nil, Unmatched},
		}},
		{"vlan priority bits", []rule{{normal(0, verbsio.FlowETH{Val: verbsio.ETHFilter{VLANTag: 3 << 13}, Mask: verbsio.ETHFilter{VLANTag: 7 << 13}}), 1}}, []delivery{
			{fs.vlan100, Tag{}, []Hit{{1, 0}}, Steered},
		}},
		{"a later fragment has no ports", []rule{{normal(0, verbsio.FlowUDP{}), 1}, {normal(1, verbsio.FlowIPv4{Val: verbsio.IPv4Filter{Proto: 17}, Mask: verbsio.IPv4Filter{Proto: 0xff}}), 2}}, []delivery{
			{fs.frag, Tag{}, []Hit{{2, 0}}, Steered},
			{fs.tos0, Tag{}, []Hit{{1, 0}}, Steered},
		}},
		{"ipv6 fields", []rule{{normal(0, verbsio.FlowIPv6{Val: verbsio.IPv6Filter{FlowLabel: 0x12345, TrafficClass: 0xb8, NextHdr: 17, Dst: ip6B.As16()},
			Mask: verbsio.IPv6Filter{FlowLabel: 0xfffff, TrafficClass: 0xff, NextHdr: 0xff, Dst: ones16}}), 1}, {normal(1, verbsio.FlowIPv6{}), 2}}, []delivery{
			{fs.v6, Tag{}, []Hit{{1, 0}}, Steered},
			{fs.tos0, Tag{}, nil, Unmatched},
		}},
		{"ipv6 traffic class alone", []rule{{normal(0, verbsio.FlowIPv6{Val: verbsio.IPv6Filter{TrafficClass: 0xb8}, Mask: verbsio.IPv6Filter{TrafficClass: 0xff}}), 1},
			{normal(0, verbsio.FlowIPv6{Val: verbsio.IPv6Filter{TrafficClass: 0xb0}, Mask: verbsio.IPv6Filter{TrafficClass: 0xff}}), 2}}, []delivery{
			{fs.v6, Tag{}, []Hit{{1, 0}}, Steered},
		}},
		{"mac and addresses", []rule{{normal(0, verbsio.FlowETH{Val: verbsio.ETHFilter{Dst: macB, Src: macA}, Mask: verbsio.ETHFilter{Dst: ones6, Src: ones6}},
			verbsio.FlowIPv4{Val: verbsio.IPv4Filter{Src: ip4A.As4(), Dst: ip4B.As4()}, Mask: verbsio.IPv4Filter{Src: ones4, Dst: ones4}}), 1}}, []delivery{
			{fs.tos0, Tag{}, []Hit{{1, 0}}, Steered},
			{fs.mcast, Tag{}, nil, Unmatched},
			{fs.vx42, Tag{}, []Hit{{1, 0}}, Steered},
		}},
		{"a rule without specs takes everything", []rule{{normal(3), 1}}, []delivery{
			{fs.arp, Tag{}, []Hit{{1, 0}}, Steered},
			{fs.v6, Tag{}, []Hit{{1, 0}}, Steered},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab := NewTable()
			for _, r := range tc.rules {
				if _, err := tab.Add(&r.attr, r.target); err != nil {
					t.Fatalf("Add: %v", err)
				}
			}
			if tab.Len() != len(tc.rules) {
				t.Errorf("Len = %d, want %d", tab.Len(), len(tc.rules))
			}
			prog, mode := tab.Filter()
			hits := make([]Hit, 8)
			for i, d := range tc.want {
				n, v := tab.Match(d.frame, d.tag, hits)
				if v != d.verdict || !slices.Equal(hits[:n], d.hits) {
					t.Errorf("frame %d: Match = %v %v, want %v %v", i, hits[:n], v, d.hits, d.verdict)
				}
				// The kernel filter passes every frame a rule delivers.
				accept, err := runBPF(prog, d.frame, d.tag)
				if err != nil {
					t.Fatalf("filter: %v", err)
				}
				if delivered := n > 0; delivered && accept == 0 {
					t.Errorf("frame %d: delivered to %v, but the %s filter drops it", i, hits[:n], mode)
				}
				if mode == FilterExact && v == Unmatched && n == 0 && accept != 0 {
					t.Errorf("frame %d: no rule wants it, but the exact filter passes it", i)
				}
			}
		})
	}
}

func TestRemove(t *testing.T) {
	fs := makeFrames(t)
	tab := NewTable()
	a1 := normal(0, udpDst(5000))
	r1, _ := tab.Add(&a1, 1)
	r2, _ := tab.Add(&a1, 2)
	a3 := normal(1, verbsio.FlowIPv4{})
	r3, _ := tab.Add(&a3, 3)
	sn := verbsio.FlowAttr{Type: verbsio.FlowSniffer, Port: 1}
	r4, _ := tab.Add(&sn, 4)
	hits := make([]Hit, 4)
	steps := []struct {
		remove *Rule
		want   []Hit
	}{
		{nil, []Hit{{4, 0}, {1, 0}, {2, 0}}},
		{r1, []Hit{{4, 0}, {2, 0}}},
		{r2, []Hit{{4, 0}, {3, 0}}},
		{r4, []Hit{{3, 0}}},
		{r3, nil},
	}
	for i, s := range steps {
		if s.remove != nil {
			if err := tab.Remove(s.remove); err != nil {
				t.Fatalf("step %d: Remove: %v", i, err)
			}
		}
		n, _ := tab.Match(fs.tos0, Tag{}, hits)
		if !slices.Equal(hits[:n], s.want) {
			t.Errorf("step %d: %v, want %v", i, hits[:n], s.want)
		}
	}
	if tab.Len() != 0 || len(tab.bySig) != 0 || len(tab.snap.Load().groups) != 0 {
		t.Errorf("empty table keeps %d rules, %d groups", tab.Len(), len(tab.snap.Load().groups))
	}
	if err := tab.Remove(r1); !errors.Is(err, ErrRemoved) {
		t.Errorf("second Remove: %v, want ErrRemoved", err)
	}
	if prog, _ := tab.Filter(); len(prog) == 0 {
		t.Error("empty filter program")
	} else if acc, _ := runBPF(prog, fs.tos0, Tag{}); acc != 0 {
		t.Error("a table without rules passes frames")
	}
}

func TestAddRejects(t *testing.T) {
	tab := NewTable()
	for _, tc := range []struct {
		attr  verbsio.FlowAttr
		errno unix.Errno
	}{
		{normal(0, verbsio.FlowGRE{}), unix.EOPNOTSUPP},
		{verbsio.FlowAttr{Port: 1, Flags: verbsio.FlowEgress}, unix.EOPNOTSUPP},
		{normal(0, verbsio.FlowTag{Tag: 1 << 24}), unix.EINVAL},
		{verbsio.FlowAttr{Port: 0}, unix.EINVAL},
	} {
		if _, err := tab.Add(&tc.attr, 1); !errors.Is(err, tc.errno) {
			t.Errorf("Add(%+v) = %v, want %v", tc.attr, err, unix.ErrnoName(tc.errno))
		}
	}
	if tab.Len() != 0 {
		t.Errorf("rejected rules were installed: %d", tab.Len())
	}
}

// TestManyRules grows a group's hash table through several rehashes,
// removes rules in between (tombstones) and checks every key still maps.
func TestManyRules(t *testing.T) {
	tab := NewTable()
	const n = 3000
	rules := make([]*Rule, n)
	for i := range n {
		a := normal(0, udpDst(uint16(10000+i)))
		r, err := tab.Add(&a, uint32(i))
		if err != nil {
			t.Fatal(err)
		}
		rules[i] = r
		if i%3 == 2 {
			if err := tab.Remove(rules[i-1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(tab.snap.Load().groups) != 1 {
		t.Fatalf("%d groups for rules that differ only in value", len(tab.snap.Load().groups))
	}
	hits := make([]Hit, 2)
	for i := range n {
		f := mustFrame(t, Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, Proto: ProtoUDP, DstPort: uint16(10000 + i)}, 0)
		n, _ := tab.Match(f, Tag{}, hits)
		removed := i%3 == 1
		if removed && n != 0 || !removed && (n != 1 || hits[0].Target != uint32(i)) {
			t.Fatalf("port %d (removed %v): %v", 10000+i, removed, hits[:n])
		}
	}
	prog, mode := tab.Filter()
	if mode != FilterLayers {
		t.Errorf("%d rules: filter mode %s, want layers", tab.Len(), mode)
	}
	f := mustFrame(t, Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, Proto: ProtoTCP}, 0)
	if acc, _ := runBPF(prog, f, Tag{}); acc != 0 {
		t.Error("the layers filter passes TCP when only UDP rules exist")
	}
}

func TestMatchAllocs(t *testing.T) {
	fs := makeFrames(t)
	tab := NewTable()
	for i := range 100 {
		a := normal(uint16(i%3), udpDst(uint16(i)), verbsio.FlowTag{Tag: uint32(i)})
		tab.Add(&a, uint32(i))
	}
	a := verbsio.FlowAttr{Port: 1, Specs: []verbsio.FlowSpec{verbsio.FlowVXLAN{}, verbsio.FlowTCP{Inner: true}}}
	tab.Add(&a, 1000)
	hits := make([]Hit, 4)
	for _, f := range [][]byte{fs.tos0, fs.vx42, fs.v6, fs.arp} {
		if n := testing.AllocsPerRun(100, func() { tab.Match(f, Tag{}, hits) }); n != 0 {
			t.Errorf("Match allocates %v times per frame", n)
		}
	}
}

// TestMatchConcurrent runs Match against Add and Remove (go test -race):
// a rule is seen whole or not at all, and after Remove returns, no Match
// that starts later delivers through it.
func TestMatchConcurrent(t *testing.T) {
	fs := makeFrames(t)
	tab := NewTable()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		hits := make([]Hit, 4)
		for !stop.Load() {
			n, _ := tab.Match(fs.tos0, Tag{}, hits)
			for _, h := range hits[:n] {
				if h.Tag != h.Target+100 {
					bad.Store(fmt.Sprintf("hit %+v: tag of another rule", h))
				}
			}
		}
	}()
	for i := range 2000 {
		a := normal(uint16(i%4), udpDst(5000), verbsio.FlowTag{Tag: uint32(i%50) + 100})
		r, err := tab.Add(&a, uint32(i%50))
		if err != nil {
			t.Fatal(err)
		}
		if err := tab.Remove(r); err != nil {
			t.Fatal(err)
		}
		hits := make([]Hit, 4)
		if n, _ := tab.Match(fs.tos0, Tag{}, hits); n != 0 {
			t.Fatalf("a removed rule still delivers: %v", hits[:n])
		}
	}
	stop.Store(true)
	wg.Wait()
	if s := bad.Load(); s != nil {
		t.Fatal(s)
	}
}
