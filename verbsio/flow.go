package verbsio

import (
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Flow steering (ibv_create_flow): a rule is a list of header specs, each a
// value and a mask, attached to a UD or RAW_PACKET QP with a priority. A
// received frame that matches every spec of a rule is delivered to the
// rule's QP (or dropped, or tagged). Values and masks are in host byte
// order here (libibverbs takes them in network order); addresses are byte
// arrays in wire order. A mask bit set means "this bit of the value must
// match"; a value bit outside its mask is malformed (EINVAL), as mlx5
// refuses a match value with bits outside its match criteria.

// FlowType is a rule's kind (enum ibv_flow_attr_type).
type FlowType uint8

// Flow rule kinds, with libibverbs' values.
const (
	FlowNormal     FlowType = 0 // IBV_FLOW_ATTR_NORMAL: steer what the specs match
	FlowAllDefault FlowType = 1 // IBV_FLOW_ATTR_ALL_DEFAULT: every frame no normal rule took
	FlowMCDefault  FlowType = 2 // IBV_FLOW_ATTR_MC_DEFAULT: every multicast frame no normal rule took
	FlowSniffer    FlowType = 3 // IBV_FLOW_ATTR_SNIFFER: a copy of every frame of the port
	flowTypeCount  FlowType = 4
)

var flowTypeNames = [...]string{"NORMAL", "ALL_DEFAULT", "MC_DEFAULT", "SNIFFER"}

// String returns the libibverbs name without IBV_FLOW_ATTR_, e.g. "SNIFFER".
func (t FlowType) String() string {
	if t < flowTypeCount {
		return flowTypeNames[t]
	}
	return "FlowType(" + strconv.Itoa(int(t)) + ")"
}

// FlowFlags are rule flags (enum ibv_flow_flags).
type FlowFlags uint32

// Flow rule flags, with libibverbs' values.
const (
	// FlowDontTrap delivers a matched frame and lets it go on to match
	// rules of lower priority too (normal rules only).
	FlowDontTrap FlowFlags = 1 << 1
	// FlowEgress matches sent frames instead of received ones.
	FlowEgress     FlowFlags = 1 << 2
	flowFlagsKnown           = FlowDontTrap | FlowEgress
)

// String lists the flags, e.g. "DONT_TRAP".
func (f FlowFlags) String() string {
	return flagString(uint64(f), []flagName{{uint64(FlowDontTrap), "DONT_TRAP"}, {uint64(FlowEgress), "EGRESS"}})
}

// FlowSpecType is the kind of a spec (enum ibv_flow_spec_type), with
// FlowSpecInner or'ed in for the inner headers of a tunnel.
type FlowSpecType uint16

// Flow spec kinds, with libibverbs' values.
const (
	FlowSpecETH       FlowSpecType = 0x20   // IBV_FLOW_SPEC_ETH
	FlowSpecIPv4      FlowSpecType = 0x30   // IBV_FLOW_SPEC_IPV4: addresses only
	FlowSpecIPv6      FlowSpecType = 0x31   // IBV_FLOW_SPEC_IPV6
	FlowSpecIPv4Ext   FlowSpecType = 0x32   // IBV_FLOW_SPEC_IPV4_EXT: addresses, protocol, ToS, TTL, flags
	FlowSpecESP       FlowSpecType = 0x34   // IBV_FLOW_SPEC_ESP
	FlowSpecTCP       FlowSpecType = 0x40   // IBV_FLOW_SPEC_TCP
	FlowSpecUDP       FlowSpecType = 0x41   // IBV_FLOW_SPEC_UDP
	FlowSpecVXLAN     FlowSpecType = 0x50   // IBV_FLOW_SPEC_VXLAN_TUNNEL
	FlowSpecGRE       FlowSpecType = 0x51   // IBV_FLOW_SPEC_GRE
	FlowSpecMPLS      FlowSpecType = 0x60   // IBV_FLOW_SPEC_MPLS
	FlowSpecInner     FlowSpecType = 0x100  // IBV_FLOW_SPEC_INNER: the spec applies to the inner headers
	FlowSpecActionTag FlowSpecType = 0x1000 // IBV_FLOW_SPEC_ACTION_TAG
	FlowSpecDrop      FlowSpecType = 0x1001 // IBV_FLOW_SPEC_ACTION_DROP
)

// String returns the libibverbs name without IBV_FLOW_SPEC_, e.g.
// "INNER|TCP".
func (t FlowSpecType) String() string {
	s := ""
	if t&FlowSpecInner != 0 && t < FlowSpecActionTag {
		s, t = "INNER|", t&^FlowSpecInner
	}
	switch t {
	case FlowSpecETH:
		return s + "ETH"
	case FlowSpecIPv4:
		return s + "IPV4"
	case FlowSpecIPv6:
		return s + "IPV6"
	case FlowSpecIPv4Ext:
		return s + "IPV4_EXT"
	case FlowSpecESP:
		return s + "ESP"
	case FlowSpecTCP:
		return s + "TCP"
	case FlowSpecUDP:
		return s + "UDP"
	case FlowSpecVXLAN:
		return s + "VXLAN_TUNNEL"
	case FlowSpecGRE:
		return s + "GRE"
	case FlowSpecMPLS:
		return s + "MPLS"
	case FlowSpecActionTag:
		return "ACTION_TAG"
	case FlowSpecDrop:
		return "ACTION_DROP"
	}
	return s + "FlowSpecType(0x" + strconv.FormatUint(uint64(t), 16) + ")"
}

// FlowSpec is one element of a rule: a header spec (FlowETH, FlowIPv4,
// FlowIPv6, FlowTCP, FlowUDP, FlowVXLAN, FlowGRE, FlowMPLS, FlowESP) or an
// action (FlowTag, FlowDrop).
type FlowSpec interface {
	// SpecType is the libibverbs spec type, FlowSpecInner included.
	SpecType() FlowSpecType
}

// MAC is an Ethernet address in wire order.
type MAC [6]byte

// String returns e.g. "02:00:00:00:00:01".
func (m MAC) String() string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 17)
	for i, x := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hex[x>>4], hex[x&15])
	}
	return string(b)
}

// ETHFilter is the L2 part of a rule (struct ibv_flow_eth_filter).
// EtherType is the type after the last VLAN tag; VLANTag is the 802.1Q
// TCI (priority 3 bits, DEI 1, VLAN ID 12) of the outer tag.
type ETHFilter struct {
	Dst, Src  MAC
	EtherType uint16
	VLANTag   uint16
}

// FlowETH matches the Ethernet header (IBV_FLOW_SPEC_ETH).
type FlowETH struct {
	Inner     bool // match the tunnel's inner frame
	Val, Mask ETHFilter
}

// SpecType implements FlowSpec.
func (s FlowETH) SpecType() FlowSpecType { return FlowSpecETH | inner(s.Inner) }

// IPv4Filter is the IPv4 part of a rule (struct ibv_flow_ipv4_ext_filter).
// TOS is the whole byte (DSCP << 2 | ECN); Flags are the 3 header flag bits
// (reserved, DF, MF).
type IPv4Filter struct {
	Src, Dst [4]byte
	Proto    uint8
	TOS      uint8
	TTL      uint8
	Flags    uint8
}

// FlowIPv4 matches the IPv4 header. Its SpecType is IPV4 when only the
// addresses are masked, IPV4_EXT otherwise.
type FlowIPv4 struct {
	Inner     bool
	Val, Mask IPv4Filter
}

// SpecType implements FlowSpec.
func (s FlowIPv4) SpecType() FlowSpecType {
	m := s.Mask
	if m.Proto|m.TOS|m.TTL|m.Flags == 0 {
		return FlowSpecIPv4 | inner(s.Inner)
	}
	return FlowSpecIPv4Ext | inner(s.Inner)
}

// IPv6Filter is the IPv6 part of a rule (struct ibv_flow_ipv6_filter).
// FlowLabel is 20 bits.
type IPv6Filter struct {
	Src, Dst     [16]byte
	FlowLabel    uint32
	NextHdr      uint8
	TrafficClass uint8
	HopLimit     uint8
}

// FlowIPv6 matches the IPv6 header (IBV_FLOW_SPEC_IPV6).
type FlowIPv6 struct {
	Inner     bool
	Val, Mask IPv6Filter
}

// SpecType implements FlowSpec.
func (s FlowIPv6) SpecType() FlowSpecType { return FlowSpecIPv6 | inner(s.Inner) }

// PortFilter is the L4 part of a rule (struct ibv_flow_tcp_udp_filter).
type PortFilter struct {
	Dst, Src uint16
}

// FlowTCP matches a TCP header (IBV_FLOW_SPEC_TCP); it implies IP protocol 6.
type FlowTCP struct {
	Inner     bool
	Val, Mask PortFilter
}

// SpecType implements FlowSpec.
func (s FlowTCP) SpecType() FlowSpecType { return FlowSpecTCP | inner(s.Inner) }

// FlowUDP matches a UDP header (IBV_FLOW_SPEC_UDP); it implies IP protocol 17.
type FlowUDP struct {
	Inner     bool
	Val, Mask PortFilter
}

// SpecType implements FlowSpec.
func (s FlowUDP) SpecType() FlowSpecType { return FlowSpecUDP | inner(s.Inner) }

// FlowVXLAN matches a VXLAN header (IBV_FLOW_SPEC_VXLAN_TUNNEL): UDP
// destination port 4789 and the 24-bit VNI in TunnelID. The inner frame is
// matched by specs with Inner set.
type FlowVXLAN struct {
	Val, Mask TunnelFilter
}

// TunnelFilter is a tunnel's identifier (struct ibv_flow_tunnel_filter).
type TunnelFilter struct {
	TunnelID uint32
}

// SpecType implements FlowSpec.
func (s FlowVXLAN) SpecType() FlowSpecType { return FlowSpecVXLAN }

// FlowGRE matches a GRE header (IBV_FLOW_SPEC_GRE).
type FlowGRE struct {
	Val, Mask GREFilter
}

// GREFilter is struct ibv_flow_gre_filter: the first 16 bits (C, K, S
// bits and version), the protocol and the key.
type GREFilter struct {
	CKSResVer uint16
	Protocol  uint16
	Key       uint32
}

// SpecType implements FlowSpec.
func (s FlowGRE) SpecType() FlowSpecType { return FlowSpecGRE }

// FlowMPLS matches an MPLS label stack entry (IBV_FLOW_SPEC_MPLS).
type FlowMPLS struct {
	Inner     bool
	Val, Mask uint32 // label 20 bits, TC 3, bottom of stack 1, TTL 8
}

// SpecType implements FlowSpec.
func (s FlowMPLS) SpecType() FlowSpecType { return FlowSpecMPLS | inner(s.Inner) }

// FlowESP matches an IPsec ESP header (IBV_FLOW_SPEC_ESP).
type FlowESP struct {
	Inner     bool
	Val, Mask ESPFilter
}

// ESPFilter is struct ibv_flow_esp_filter.
type ESPFilter struct {
	SPI, Seq uint32
}

// SpecType implements FlowSpec.
func (s FlowESP) SpecType() FlowSpecType { return FlowSpecESP | inner(s.Inner) }

// FlowTag tags matched frames: their receive completions carry Tag in
// WC.FlowTag (IBV_FLOW_SPEC_ACTION_TAG).
type FlowTag struct {
	Tag uint32
}

// SpecType implements FlowSpec.
func (FlowTag) SpecType() FlowSpecType { return FlowSpecActionTag }

// FlowDrop drops matched frames (IBV_FLOW_SPEC_ACTION_DROP).
type FlowDrop struct{}

// SpecType implements FlowSpec.
func (FlowDrop) SpecType() FlowSpecType { return FlowSpecDrop }

func inner(b bool) FlowSpecType {
	if b {
		return FlowSpecInner
	}
	return 0
}

// FlowAttr describes a rule (struct ibv_flow_attr with its specs).
// Lower Priority values take precedence; among rules of one priority whose
// matches overlap, the provider decides (the built-in engine: the rule
// created first, and every rule with the identical match gets a copy).
type FlowAttr struct {
	Type     FlowType
	Priority uint16
	Port     uint8 // the port whose traffic is steered: 1
	Flags    FlowFlags
	Specs    []FlowSpec
}

// FlowFeature is a set of what a provider's steering can do.
type FlowFeature uint32

// Flow steering features.
const (
	FlowCanETH         FlowFeature = 1 << iota // ETH specs
	FlowCanIPv4                                // IPV4 specs (addresses)
	FlowCanIPv4Ext                             // IPV4_EXT specs (protocol, ToS, TTL, flags)
	FlowCanIPv6                                // IPV6 specs
	FlowCanTCP                                 // TCP specs
	FlowCanUDP                                 // UDP specs
	FlowCanVXLAN                               // VXLAN tunnel specs
	FlowCanGRE                                 // GRE specs
	FlowCanMPLS                                // MPLS specs
	FlowCanESP                                 // ESP specs
	FlowCanInner                               // specs on a tunnel's inner headers
	FlowCanTag                                 // the flow tag action
	FlowCanDrop                                // the drop action
	FlowCanPartialMask                         // masks other than all ones or all zeros per field
	FlowCanDontTrap                            // FlowDontTrap
	FlowCanEgress                              // FlowEgress
	FlowCanSniffer                             // SNIFFER rules
	FlowCanAllDefault                          // ALL_DEFAULT rules
	FlowCanMCDefault                           // MC_DEFAULT rules
)

var flowFeatureNames = []string{"ETH", "IPV4", "IPV4_EXT", "IPV6", "TCP", "UDP", "VXLAN", "GRE", "MPLS", "ESP",
	"INNER", "TAG", "DROP", "PARTIAL_MASK", "DONT_TRAP", "EGRESS", "SNIFFER", "ALL_DEFAULT", "MC_DEFAULT"}

// Names lists the features, e.g. ["ETH", "IPV4", "TAG"], in the order of
// their bits; unknown bits are left out.
func (f FlowFeature) Names() []string {
	var out []string
	for i, n := range flowFeatureNames {
		if f&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// FlowCaps are what a provider's flow steering accepts. A rule asking for
// something outside them fails with EOPNOTSUPP, as hardware answers.
type FlowCaps struct {
	Features    FlowFeature
	MaxPriority uint16 // highest Priority value accepted
	MaxTag      uint32 // highest flow tag (mlx5: 2^24-1)
	Ports       uint8  // ports of the device (Port must be 1..Ports)
}

// Has reports whether every feature of f is in c.
func (c FlowCaps) Has(f FlowFeature) bool { return c.Features&f == f }

// FlowSteerer is implemented by provider QPs that steer flows. The QP's
// CreateFlow validates the rule against FlowCaps before calling it.
type FlowSteerer interface {
	FlowCaps() FlowCaps
	CreateFlow(attr *FlowAttr) (FlowImpl, error)
}

// FlowImpl is a provider's installed rule.
type FlowImpl interface {
	// Destroy removes the rule; delivery through it stops before it returns.
	Destroy() error
}

// Flow is an installed steering rule (struct ibv_flow).
type Flow struct {
	qp   *QP
	impl FlowImpl
	mu   sync.Mutex
	done bool
}

// QP returns the QP the rule delivers to.
func (f *Flow) QP() *QP { return f.qp }

// Impl returns the provider's rule.
func (f *Flow) Impl() FlowImpl { return f.impl }

// Destroy removes the rule (ibv_destroy_flow); frames stop arriving through
// it before Destroy returns. Destroying it again is EINVAL.
func (f *Flow) Destroy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return Errorf("destroy_flow", unix.EINVAL, "the flow was already destroyed")
	}
	if err := f.impl.Destroy(); err != nil {
		return err
	}
	f.done = true
	return nil
}

// CreateFlow attaches a steering rule to the QP (ibv_create_flow). The QP
// must be UD or RAW_PACKET (EINVAL otherwise); a malformed rule is EINVAL;
// a rule the provider cannot steer is EOPNOTSUPP (see FlowCaps).
func (qp *QP) CreateFlow(attr FlowAttr) (*Flow, error) {
	if qp.typ != QPTypeUD && qp.typ != QPTypeRawPacket {
		return nil, Errorf("create_flow", unix.EINVAL, "flow steering needs a UD or RAW_PACKET QP, not %s", qp.typ)
	}
	fs, ok := qp.impl.(FlowSteerer)
	if !ok || fs.FlowCaps().Features == 0 {
		return nil, &UnsupportedError{Feature: "flow steering on " + qp.typ.String() + " QPs",
			Reason: "this device steers no flows", Fix: "use a raw_<netdev> device of the built-in engine or a NIC with managed flow steering"}
	}
	if err := attr.Validate(fs.FlowCaps()); err != nil {
		return nil, err
	}
	attr.Specs = append([]FlowSpec(nil), attr.Specs...)
	impl, err := fs.CreateFlow(&attr)
	if err != nil {
		return nil, err
	}
	return &Flow{qp: qp, impl: impl}, nil
}
