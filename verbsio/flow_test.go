package verbsio

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

var allFlowCaps = FlowCaps{Features: 1<<19 - 1, MaxPriority: 15, MaxTag: 1<<24 - 1, Ports: 1}

func full16() uint16 { return 0xffff }

func TestFlowValidate(t *testing.T) {
	noPartial := allFlowCaps
	noPartial.Features &^= FlowCanPartialMask
	basicIPv4 := allFlowCaps
	basicIPv4.Features &^= FlowCanIPv4Ext
	noVXLAN := allFlowCaps
	noVXLAN.Features &^= FlowCanVXLAN | FlowCanInner
	noInner := allFlowCaps
	noInner.Features &^= FlowCanInner
	noSniffer := allFlowCaps
	noSniffer.Features &^= FlowCanSniffer
	noDrop := allFlowCaps
	noDrop.Features &^= FlowCanDrop

	ethDst := FlowETH{Val: ETHFilter{Dst: MAC{2, 0, 0, 0, 0, 1}}, Mask: ETHFilter{Dst: MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}}
	tos := FlowIPv4{Val: IPv4Filter{TOS: 0x28}, Mask: IPv4Filter{TOS: 0xff}}
	vni := FlowVXLAN{Val: TunnelFilter{TunnelID: 42}, Mask: TunnelFilter{TunnelID: 0xffffff}}
	tests := []struct {
		name  string
		caps  FlowCaps
		attr  FlowAttr
		errno unix.Errno // 0: valid
		want  string     // part of the detail
	}{
		{"eth dst", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{ethDst}}, 0, ""},
		{"no specs catch-all", allFlowCaps, FlowAttr{Port: 1}, 0, ""},
		{"tos and tag", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{tos, FlowTag{Tag: 7}}}, 0, ""},
		{"vxlan with inner", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{
			FlowUDP{Val: PortFilter{Dst: 4789}, Mask: PortFilter{Dst: full16()}}, vni,
			FlowIPv4{Inner: true, Val: IPv4Filter{Dst: [4]byte{10, 0, 0, 1}}, Mask: IPv4Filter{Dst: [4]byte{255, 255, 255, 255}}},
			FlowTCP{Inner: true, Val: PortFilter{Dst: 80}, Mask: PortFilter{Dst: full16()}}, FlowTag{Tag: 42}}}, 0, ""},
		{"unordered specs", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowUDP{}, tos, ethDst}}, 0, ""},
		{"sniffer", allFlowCaps, FlowAttr{Type: FlowSniffer, Port: 1}, 0, ""},
		{"partial mask allowed", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowIPv4{Val: IPv4Filter{Dst: [4]byte{10}}, Mask: IPv4Filter{Dst: [4]byte{255}}}}}, 0, ""},
		{"dscp partial mask", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowIPv4{Val: IPv4Filter{TOS: 0x28}, Mask: IPv4Filter{TOS: 0xfc}}}}, 0, ""},
		{"ipv6 all fields", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowIPv6{Val: IPv6Filter{FlowLabel: 0xfffff, NextHdr: 17, TrafficClass: 3}, Mask: IPv6Filter{FlowLabel: 0xfffff, NextHdr: 0xff, TrafficClass: 0xff}}, FlowUDP{}}}, 0, ""},
		{"dont trap", allFlowCaps, FlowAttr{Port: 1, Flags: FlowDontTrap, Specs: []FlowSpec{ethDst}}, 0, ""},

		{"bad type", allFlowCaps, FlowAttr{Type: 9, Port: 1}, unix.EINVAL, "unknown flow type"},
		{"port 0", allFlowCaps, FlowAttr{}, unix.EINVAL, "port 0"},
		{"port 2", allFlowCaps, FlowAttr{Port: 2}, unix.EINVAL, "port 2"},
		{"unknown flag", allFlowCaps, FlowAttr{Port: 1, Flags: 1}, unix.EINVAL, "unknown flow flags"},
		{"priority", allFlowCaps, FlowAttr{Port: 1, Priority: 16}, unix.EINVAL, "priority 16"},
		{"sniffer with specs", allFlowCaps, FlowAttr{Type: FlowSniffer, Port: 1, Specs: []FlowSpec{ethDst}}, unix.EINVAL, "takes no specs"},
		{"dont trap on default", allFlowCaps, FlowAttr{Type: FlowAllDefault, Port: 1, Flags: FlowDontTrap}, unix.EINVAL, "NORMAL rules only"},
		{"nil spec", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{nil}}, unix.EINVAL, "nil spec"},
		{"value outside mask", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowIPv4{Val: IPv4Filter{TOS: 0x29}, Mask: IPv4Filter{TOS: 0xfc}}}}, unix.EINVAL, "IPV4 tos value 0x29 has bits outside its mask 0xfc"},
		{"mac outside mask", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowETH{Val: ETHFilter{Src: MAC{1}}}}}, unix.EINVAL, "ETH src_mac"},
		{"vni wider than 24 bits", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowVXLAN{Val: TunnelFilter{TunnelID: 1 << 24}, Mask: TunnelFilter{TunnelID: 1<<25 - 1}}}}, unix.EINVAL, "wider than the field's 24 bits"},
		{"flow label wider", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowIPv6{Mask: IPv6Filter{FlowLabel: 0x1fffff}}}}, unix.EINVAL, "flow_label mask"},
		{"ipv4 flags wider", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowIPv4{Mask: IPv4Filter{Flags: 8}}}}, unix.EINVAL, "IPV4 flags mask"},
		{"two eth", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{ethDst, ethDst}}, unix.EINVAL, "second ETH"},
		{"ipv4 and ipv6", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{tos, FlowIPv6{}}}, unix.EINVAL, "second L3"},
		{"tcp and udp", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowTCP{}, FlowUDP{}}}, unix.EINVAL, "second L4"},
		{"ethertype contradicts", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowETH{Val: ETHFilter{EtherType: 0x86dd}, Mask: ETHFilter{EtherType: 0xffff}}, tos}}, unix.EINVAL, "contradicts its L3"},
		{"proto contradicts", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowIPv4{Val: IPv4Filter{Proto: 17}, Mask: IPv4Filter{Proto: 0xff}}, FlowTCP{}}}, unix.EINVAL, "protocol 17 contradicts the TCP"},
		{"next header contradicts", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowIPv6{Val: IPv6Filter{NextHdr: 6}, Mask: IPv6Filter{NextHdr: 0xff}}, FlowUDP{}}}, unix.EINVAL, "next header 6"},
		{"inner without tunnel", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowTCP{Inner: true}}}, unix.EINVAL, "needs a tunnel spec"},
		{"vxlan over tcp", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{vni, FlowTCP{}}}, unix.EINVAL, "VXLAN runs over UDP"},
		{"vxlan wrong port", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{vni, FlowUDP{Val: PortFilter{Dst: 4790}, Mask: PortFilter{Dst: full16()}}}}, unix.EINVAL, "port 4789"},
		{"two tunnels", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{vni, vni}}, unix.EINVAL, "second tunnel"},
		{"two tags", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowTag{1}, FlowTag{2}}}, unix.EINVAL, "second flow tag"},
		{"tag too big", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowTag{1 << 24}}}, unix.EINVAL, "flow tag 0x1000000"},
		{"tag and drop", allFlowCaps, FlowAttr{Port: 1, Specs: []FlowSpec{FlowTag{1}, FlowDrop{}}}, unix.EINVAL, "both tag and drop"},

		{"partial mask unsupported", noPartial, FlowAttr{Port: 1, Specs: []FlowSpec{FlowIPv4{Val: IPv4Filter{TOS: 0x28}, Mask: IPv4Filter{TOS: 0xfc}}}}, unix.EOPNOTSUPP, "partial"},
		{"partial prefix unsupported", noPartial, FlowAttr{Port: 1, Specs: []FlowSpec{FlowIPv4{Val: IPv4Filter{Dst: [4]byte{10}}, Mask: IPv4Filter{Dst: [4]byte{255}}}}}, unix.EOPNOTSUPP, "partial"},
		{"full masks fine without partial", noPartial, FlowAttr{Port: 1, Specs: []FlowSpec{ethDst, tos}}, 0, ""},
		{"ipv4 ext unsupported", basicIPv4, FlowAttr{Port: 1, Specs: []FlowSpec{tos}}, unix.EOPNOTSUPP, "IPV4_EXT"},
		{"ipv4 basic fine", basicIPv4, FlowAttr{Port: 1, Specs: []FlowSpec{FlowIPv4{Val: IPv4Filter{Src: [4]byte{1, 2, 3, 4}}, Mask: IPv4Filter{Src: [4]byte{255, 255, 255, 255}}}}}, 0, ""},
		{"vxlan unsupported", noVXLAN, FlowAttr{Port: 1, Specs: []FlowSpec{vni}}, unix.EOPNOTSUPP, "VXLAN"},
		{"inner unsupported", noInner, FlowAttr{Port: 1, Specs: []FlowSpec{vni, FlowTCP{Inner: true}}}, unix.EOPNOTSUPP, "inner"},
		{"sniffer unsupported", noSniffer, FlowAttr{Type: FlowSniffer, Port: 1}, unix.EOPNOTSUPP, "SNIFFER"},
		{"drop unsupported", noDrop, FlowAttr{Port: 1, Specs: []FlowSpec{FlowDrop{}}}, unix.EOPNOTSUPP, "drop"},
		{"gre unsupported", FlowCaps{Features: FlowCanETH, Ports: 1}, FlowAttr{Port: 1, Specs: []FlowSpec{FlowGRE{}}}, unix.EOPNOTSUPP, "GRE"},
		{"no steering at all", FlowCaps{Ports: 1}, FlowAttr{Port: 1, Specs: []FlowSpec{ethDst}}, unix.EOPNOTSUPP, "ETH specs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.attr.Validate(tc.caps)
			if tc.errno == 0 {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.errno) {
				t.Fatalf("Validate: %v, want %s", err, unix.ErrnoName(tc.errno))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestFlowEgressUnsupported(t *testing.T) {
	caps := allFlowCaps
	caps.Features &^= FlowCanEgress
	err := (&FlowAttr{Port: 1, Flags: FlowEgress}).Validate(caps)
	if !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatalf("Validate: %v, want EOPNOTSUPP", err)
	}
}

type fakeFlowQP struct {
	QPImpl
	caps      FlowCaps
	created   []*FlowAttr
	destroyed int
}

func (q *fakeFlowQP) FlowCaps() FlowCaps { return q.caps }
func (q *fakeFlowQP) CreateFlow(a *FlowAttr) (FlowImpl, error) {
	q.created = append(q.created, a)
	return fakeFlow{q}, nil
}

type fakeFlow struct{ q *fakeFlowQP }

func (f fakeFlow) Destroy() error { f.q.destroyed++; return nil }

type plainQP struct{ QPImpl }

func TestCreateFlow(t *testing.T) {
	impl := &fakeFlowQP{caps: allFlowCaps}
	raw := &QP{impl: impl, typ: QPTypeRawPacket}
	specs := []FlowSpec{FlowTag{Tag: 3}}
	f, err := raw.CreateFlow(FlowAttr{Port: 1, Specs: specs})
	if err != nil {
		t.Fatalf("CreateFlow: %v", err)
	}
	specs[0] = FlowDrop{} // the provider got a copy
	if got := impl.created[0].Specs[0]; got != (FlowTag{Tag: 3}) {
		t.Errorf("provider saw %v after the caller changed its slice", got)
	}
	if f.QP() != raw {
		t.Error("Flow.QP is not the QP")
	}
	if err := f.Destroy(); err != nil || impl.destroyed != 1 {
		t.Fatalf("Destroy: %v, provider destroys %d", err, impl.destroyed)
	}
	if err := f.Destroy(); !errors.Is(err, unix.EINVAL) || impl.destroyed != 1 {
		t.Errorf("second Destroy: %v (provider destroys %d), want EINVAL", err, impl.destroyed)
	}
	if _, err := raw.CreateFlow(FlowAttr{Port: 1, Priority: 99}); !errors.Is(err, unix.EINVAL) || len(impl.created) != 1 {
		t.Errorf("invalid rule: %v, provider called %d times; want EINVAL before the provider", err, len(impl.created))
	}
	rc := &QP{impl: impl, typ: QPTypeRC}
	if _, err := rc.CreateFlow(FlowAttr{Port: 1}); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "UD or RAW_PACKET") {
		t.Errorf("RC QP: %v, want EINVAL naming the QP types", err)
	}
	none := &QP{impl: plainQP{}, typ: QPTypeUD}
	if _, err := none.CreateFlow(FlowAttr{Port: 1}); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("provider without steering: %v, want EOPNOTSUPP", err)
	}
}

func TestFlowNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{FlowSniffer.String(), "SNIFFER"},
		{FlowType(7).String(), "FlowType(7)"},
		{(FlowDontTrap | FlowEgress).String(), "DONT_TRAP|EGRESS"},
		{FlowTCP{Inner: true}.SpecType().String(), "INNER|TCP"},
		{FlowIPv4{Mask: IPv4Filter{Src: [4]byte{255}}}.SpecType().String(), "IPV4"},
		{FlowIPv4{Mask: IPv4Filter{TOS: 0xfc}}.SpecType().String(), "IPV4_EXT"},
		{FlowVXLAN{}.SpecType().String(), "VXLAN_TUNNEL"},
		{FlowDrop{}.SpecType().String(), "ACTION_DROP"},
		{FlowSpecType(0x77).String(), "FlowSpecType(0x77)"},
		{MAC{2, 0xab, 0, 0, 0, 1}.String(), "02:ab:00:00:00:01"},
		{OpTSO.String(), "TSO"},
		{(SendSignaled | SendIPCsum).String(), "SIGNALED|IP_CSUM"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestFlowFeatureNames(t *testing.T) {
	for _, c := range []struct {
		f    FlowFeature
		want string
	}{
		{0, ""},
		{FlowCanETH, "ETH"},
		{FlowCanETH | FlowCanTag | FlowCanMCDefault, "ETH TAG MC_DEFAULT"},
		{FlowCanIPv4Ext | 1<<31, "IPV4_EXT"},
	} {
		if got := strings.Join(c.f.Names(), " "); got != c.want {
			t.Errorf("%#x.Names() = %q, want %q", uint32(c.f), got, c.want)
		}
	}
}
