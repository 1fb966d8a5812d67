package raw

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/rperf/rperf/verbsio"
)

// TestRule: the server's steering rule is perftest's server's: its MAC,
// its IP from the client's, its port from the client's port, and the
// TOS (IPv6: traffic class) and flow label when given; a client's rule
// (raw-lat's pongs) takes its MAC and port only.
func TestRule(t *testing.T) {
	srvMAC, cliMAC := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
	all := verbsio.MAC{255, 255, 255, 255, 255, 255}
	ones4 := [4]byte{255, 255, 255, 255}
	var ones16 [16]byte
	for i := range ones16 {
		ones16[i] = 255
	}
	srv4 := Addresses{SrcMAC: srvMAC, DstMAC: cliMAC, SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), SrcPort: 6000, DstPort: 5000}
	srv6 := srv4
	srv6.SrcIP, srv6.DstIP = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	eth := verbsio.FlowETH{Val: verbsio.ETHFilter{Dst: verbsio.MAC(srvMAC)}, Mask: verbsio.ETHFilter{Dst: all}}
	ip4 := verbsio.IPv4Filter{Dst: [4]byte{10, 0, 0, 1}, Src: [4]byte{10, 0, 0, 2}}
	udp := verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: 6000, Src: 5000}, Mask: verbsio.PortFilter{Dst: 0xffff, Src: 0xffff}}
	group := netip.MustParseAddr("239.1.1.1")
	for _, tc := range []struct {
		name string
		c    Config
		want []verbsio.FlowSpec
	}{
		{"server", Config{Server: true, Flows: 1, Frame: FrameSpec{Addresses: srv4}},
			[]verbsio.FlowSpec{eth, verbsio.FlowIPv4{Val: ip4, Mask: verbsio.IPv4Filter{Dst: ones4, Src: ones4}}, udp}},
		{"server --tos 0x28 --tcp", Config{Server: true, Flows: 1, Frame: FrameSpec{Addresses: srv4, TOS: 0x28, TCP: true}},
			[]verbsio.FlowSpec{eth, verbsio.FlowIPv4{Val: verbsio.IPv4Filter{Dst: ip4.Dst, Src: ip4.Src, TOS: 0x28}, Mask: verbsio.IPv4Filter{Dst: ones4, Src: ones4, TOS: 0xff}},
				verbsio.FlowTCP{Val: udp.Val, Mask: udp.Mask}}},
		{"server IPv6 --tclass 7 --flow_label 0xbeef", Config{Server: true, Flows: 1, Frame: FrameSpec{Addresses: srv6, TOS: 7, FlowLabel: 0xbeef}},
			[]verbsio.FlowSpec{eth, verbsio.FlowIPv6{
				Val:  verbsio.IPv6Filter{Dst: srv6.SrcIP.As16(), Src: srv6.DstIP.As16(), TrafficClass: 7, FlowLabel: 0xbeef},
				Mask: verbsio.IPv6Filter{Dst: ones16, Src: ones16, TrafficClass: 0xff, FlowLabel: 0xfffff}}, udp}},
		{"server --flows 4", Config{Server: true, Flows: 4, Frame: FrameSpec{Addresses: Addresses{SrcMAC: srvMAC, SrcIP: srv4.SrcIP, DstIP: srv4.DstIP, SrcPort: 6000, DstPort: 5000}}},
			[]verbsio.FlowSpec{eth, verbsio.FlowIPv4{Val: ip4, Mask: verbsio.IPv4Filter{Dst: ones4, Src: ones4}},
				verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: 6000, Src: 5000}, Mask: verbsio.PortFilter{Dst: 0xfffc, Src: 0xfffc}}}},
		{"server --flows 4, client port not aligned", Config{Server: true, Flows: 4, Frame: FrameSpec{Addresses: Addresses{SrcMAC: srvMAC, SrcIP: srv4.SrcIP, DstIP: srv4.DstIP, SrcPort: 6000, DstPort: 5001}}},
			[]verbsio.FlowSpec{eth, verbsio.FlowIPv4{Val: ip4, Mask: verbsio.IPv4Filter{Dst: ones4, Src: ones4}},
				verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: 6000}, Mask: verbsio.PortFilter{Dst: 0xfffc}}}},
		{"multicast server", Config{Server: true, Multicast: true, Flows: 1, Frame: FrameSpec{Addresses: Addresses{SrcMAC: srvMAC, DstMAC: MulticastMAC(group), SrcIP: group, DstIP: group, SrcPort: 6000, DstPort: 5000}}},
			[]verbsio.FlowSpec{verbsio.FlowETH{Val: verbsio.ETHFilter{Dst: verbsio.MAC(MulticastMAC(group))}, Mask: verbsio.ETHFilter{Dst: all}},
				verbsio.FlowIPv4{Val: verbsio.IPv4Filter{Dst: group.As4()}, Mask: verbsio.IPv4Filter{Dst: ones4}},
				verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: 6000}, Mask: verbsio.PortFilter{Dst: 0xffff}}}},
		{"client", Config{Flows: 1, Frame: FrameSpec{Addresses: Addresses{SrcMAC: cliMAC, DstMAC: srvMAC, SrcIP: srv4.DstIP, DstIP: srv4.SrcIP, SrcPort: 5000, DstPort: 6000}}},
			[]verbsio.FlowSpec{verbsio.FlowETH{Val: verbsio.ETHFilter{Dst: verbsio.MAC(cliMAC)}, Mask: verbsio.ETHFilter{Dst: all}},
				verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: 5000}, Mask: verbsio.PortFilter{Dst: 0xffff}}}},
		{"server -Y 0x88b5", Config{Server: true, Flows: 1, Frame: FrameSpec{Addresses: srv4, EtherType: 0x88b5}},
			[]verbsio.FlowSpec{verbsio.FlowETH{Val: verbsio.ETHFilter{Dst: verbsio.MAC(srvMAC), EtherType: 0x88b5}, Mask: verbsio.ETHFilter{Dst: all, EtherType: 0xffff}}}},
	} {
		r := &runner{c: &tc.c}
		got := r.rule()
		if got.Port != 1 || !reflect.DeepEqual(got.Specs, tc.want) {
			t.Errorf("%s: rule %+v\nwant specs %+v", tc.name, got, tc.want)
		}
	}
}
