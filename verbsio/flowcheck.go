package verbsio

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// VXLANPort is the IANA UDP port of VXLAN, which FlowVXLAN implies.
const VXLANPort = 4789

// IP protocol numbers that specs imply.
const (
	ipProtoTCP = 6
	ipProtoUDP = 17
	ipProtoGRE = 47
	ipProtoESP = 50
)

// EtherTypes that specs imply.
const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeMPLS = 0x8847
)

// Validate checks a rule as ibv_create_flow does: a malformed rule (an
// unknown type, flag or spec, a value bit outside its mask, a field wider
// than the header's, two specs for one header, specs that contradict each
// other, inner specs without a tunnel, two tags, a tag with drop, a port
// or priority out of range) is EINVAL; a rule the caps do not cover (a
// spec kind, partial masks, an action or flag the provider cannot do) is
// EOPNOTSUPP. The error names the spec, the field and the fix.
func (a *FlowAttr) Validate(caps FlowCaps) error {
	v := flowValidator{caps: caps}
	v.attr(a)
	return v.err
}

type flowValidator struct {
	caps FlowCaps
	err  error
	idx  int // spec being checked, -1 for the attr
}

func (v *flowValidator) fail(errno unix.Errno, format string, args ...any) {
	if v.err != nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if v.idx >= 0 {
		msg = fmt.Sprintf("spec %d: %s", v.idx, msg)
	}
	if errno == unix.EOPNOTSUPP {
		v.err = &Error{Op: "create_flow", Errno: errno, Detail: msg + " (this device cannot steer it)"}
		return
	}
	v.err = &Error{Op: "create_flow", Errno: errno, Detail: msg}
}

func (v *flowValidator) need(f FlowFeature, what string) bool {
	if v.caps.Has(f) {
		return true
	}
	v.fail(unix.EOPNOTSUPP, "%s", what)
	return false
}

// layers seen, per side (outer, inner).
type flowLayers struct {
	eth  *FlowETH
	ip4  *FlowIPv4
	ip6  *FlowIPv6
	tcp  *FlowTCP
	udp  *FlowUDP
	mpls bool
	esp  bool
}

func (v *flowValidator) attr(a *FlowAttr) {
	v.idx = -1
	if a.Type >= flowTypeCount {
		v.fail(unix.EINVAL, "unknown flow type %d (want NORMAL, ALL_DEFAULT, MC_DEFAULT or SNIFFER)", a.Type)
		return
	}
	ports := v.caps.Ports
	if ports == 0 {
		ports = 1
	}
	if a.Port < 1 || a.Port > ports {
		v.fail(unix.EINVAL, "port %d does not exist (the device has port 1..%d)", a.Port, ports)
		return
	}
	if a.Flags&^flowFlagsKnown != 0 {
		v.fail(unix.EINVAL, "unknown flow flags %#x (known: DONT_TRAP, EGRESS)", uint32(a.Flags&^flowFlagsKnown))
		return
	}
	if a.Priority > v.caps.MaxPriority {
		v.fail(unix.EINVAL, "priority %d is above the device's highest, %d", a.Priority, v.caps.MaxPriority)
		return
	}
	switch a.Type {
	case FlowSniffer:
		v.need(FlowCanSniffer, "SNIFFER rules")
	case FlowAllDefault:
		v.need(FlowCanAllDefault, "ALL_DEFAULT rules")
	case FlowMCDefault:
		v.need(FlowCanMCDefault, "MC_DEFAULT rules")
	}
	if a.Type != FlowNormal {
		if a.Flags != 0 {
			v.fail(unix.EINVAL, "flags %s are for NORMAL rules only, not %s", a.Flags, a.Type)
		}
		if len(a.Specs) != 0 {
			v.fail(unix.EINVAL, "a %s rule takes no specs (it has %d)", a.Type, len(a.Specs))
		}
		return
	}
	if a.Flags&FlowDontTrap != 0 {
		v.need(FlowCanDontTrap, "DONT_TRAP rules")
	}
	if a.Flags&FlowEgress != 0 {
		v.need(FlowCanEgress, "EGRESS rules")
	}
	if v.err != nil {
		return
	}
	var outer, in flowLayers
	var vxlan *FlowVXLAN
	var gre *FlowGRE
	var tag *FlowTag
	drop := false
	firstInner := -1
	for i, s := range a.Specs {
		v.idx = i
		if s == nil {
			v.fail(unix.EINVAL, "nil spec")
			return
		}
		l := &outer
		if t := s.SpecType(); t&FlowSpecInner != 0 && t < FlowSpecActionTag {
			l = &in
			if firstInner < 0 {
				firstInner = i
			}
			if !v.need(FlowCanInner, "inner (tunnel) specs") {
				return
			}
		}
		switch s := s.(type) {
		case FlowETH:
			v.eth(&s, l)
		case FlowIPv4:
			v.ipv4(&s, l)
		case FlowIPv6:
			v.ipv6(&s, l)
		case FlowTCP:
			v.ports(&s.Val, &s.Mask, "TCP", FlowCanTCP)
			v.l4(l, l.tcp != nil || l.udp != nil, "TCP")
			l.tcp = &s
		case FlowUDP:
			v.ports(&s.Val, &s.Mask, "UDP", FlowCanUDP)
			v.l4(l, l.tcp != nil || l.udp != nil, "UDP")
			l.udp = &s
		case FlowVXLAN:
			if !v.need(FlowCanVXLAN, "VXLAN specs") {
				return
			}
			if vxlan != nil || gre != nil {
				v.fail(unix.EINVAL, "a second tunnel spec; a rule matches one tunnel")
				return
			}
			v.mask("VXLAN tunnel_id (VNI)", uint64(s.Val.TunnelID), uint64(s.Mask.TunnelID), 24)
			vxlan = &s
		case FlowGRE:
			if !v.need(FlowCanGRE, "GRE specs") {
				return
			}
			if vxlan != nil || gre != nil {
				v.fail(unix.EINVAL, "a second tunnel spec; a rule matches one tunnel")
				return
			}
			v.mask("GRE c_ks_res0_ver", uint64(s.Val.CKSResVer), uint64(s.Mask.CKSResVer), 16)
			v.mask("GRE protocol", uint64(s.Val.Protocol), uint64(s.Mask.Protocol), 16)
			v.mask("GRE key", uint64(s.Val.Key), uint64(s.Mask.Key), 32)
			gre = &s
		case FlowMPLS:
			if !v.need(FlowCanMPLS, "MPLS specs") {
				return
			}
			if l.mpls {
				v.fail(unix.EINVAL, "a second MPLS spec")
			}
			v.mask("MPLS label", uint64(s.Val), uint64(s.Mask), 32)
			l.mpls = true
		case FlowESP:
			if !v.need(FlowCanESP, "ESP specs") {
				return
			}
			if l.esp {
				v.fail(unix.EINVAL, "a second ESP spec")
			}
			v.mask("ESP spi", uint64(s.Val.SPI), uint64(s.Mask.SPI), 32)
			v.mask("ESP seq", uint64(s.Val.Seq), uint64(s.Mask.Seq), 32)
			l.esp = true
		case FlowTag:
			if !v.need(FlowCanTag, "the flow tag action") {
				return
			}
			if tag != nil {
				v.fail(unix.EINVAL, "a second flow tag; a rule has one")
			}
			if s.Tag > v.caps.MaxTag {
				v.fail(unix.EINVAL, "flow tag %#x is above the device's highest, %#x", s.Tag, v.caps.MaxTag)
			}
			tag = &s
		case FlowDrop:
			if !v.need(FlowCanDrop, "the drop action") {
				return
			}
			if drop {
				v.fail(unix.EINVAL, "a second drop action")
			}
			drop = true
		default:
			v.fail(unix.EINVAL, "unknown spec %T (type %s)", s, s.SpecType())
		}
		if v.err != nil {
			return
		}
	}
	v.idx = -1
	if tag != nil && drop {
		v.fail(unix.EINVAL, "a rule cannot both tag and drop; drop the tag or the drop action")
		return
	}
	if firstInner >= 0 && vxlan == nil && gre == nil {
		v.idx = firstInner
		v.fail(unix.EINVAL, "an inner spec needs a tunnel spec (VXLAN_TUNNEL) in the rule")
		return
	}
	v.consistent(&outer, "")
	v.consistent(&in, "inner ")
	if vxlan != nil {
		if outer.tcp != nil {
			v.fail(unix.EINVAL, "VXLAN runs over UDP, but the rule matches TCP")
		}
		if u := outer.udp; u != nil && u.Mask.Dst != 0 && u.Val.Dst != VXLANPort&u.Mask.Dst {
			v.fail(unix.EINVAL, "VXLAN is UDP destination port %d, but the rule matches port %d", VXLANPort, u.Val.Dst)
		}
	}
	if gre != nil && (outer.tcp != nil || outer.udp != nil) {
		v.fail(unix.EINVAL, "GRE runs over IP, but the rule matches an outer TCP or UDP header")
	}
	if gre != nil {
		v.implied(&outer, ipProtoGRE, "GRE")
	}
}

func (v *flowValidator) l4(l *flowLayers, dup bool, name string) {
	if dup {
		v.fail(unix.EINVAL, "a second L4 spec (%s); a rule matches one TCP or UDP header per level", name)
	}
}

// consistent refuses rules that can never match: an EtherType, IP
// protocol or next header that contradicts the specs after it.
func (v *flowValidator) consistent(l *flowLayers, side string) {
	if v.err != nil {
		return
	}
	if e := l.eth; e != nil && e.Mask.EtherType != 0 {
		want := -1
		switch {
		case l.ip4 != nil:
			want = etherTypeIPv4
		case l.ip6 != nil:
			want = etherTypeIPv6
		case l.mpls:
			want = etherTypeMPLS
		}
		if want >= 0 && e.Val.EtherType != uint16(want)&e.Mask.EtherType {
			v.fail(unix.EINVAL, "the %sETH spec's ether_type %#04x contradicts its L3 spec (%#04x)", side, e.Val.EtherType, want)
			return
		}
	}
	switch {
	case l.tcp != nil:
		v.implied(l, ipProtoTCP, side+"TCP")
	case l.udp != nil:
		v.implied(l, ipProtoUDP, side+"UDP")
	case l.esp:
		v.implied(l, ipProtoESP, side+"ESP")
	}
}

func (v *flowValidator) implied(l *flowLayers, proto uint8, name string) {
	if v.err != nil {
		return
	}
	if p := l.ip4; p != nil && p.Mask.Proto != 0 && p.Val.Proto != proto&p.Mask.Proto {
		v.fail(unix.EINVAL, "the IPv4 spec's protocol %d contradicts the %s spec (protocol %d)", p.Val.Proto, name, proto)
	}
	if p := l.ip6; p != nil && p.Mask.NextHdr != 0 && p.Val.NextHdr != proto&p.Mask.NextHdr {
		v.fail(unix.EINVAL, "the IPv6 spec's next header %d contradicts the %s spec (protocol %d)", p.Val.NextHdr, name, proto)
	}
}

func (v *flowValidator) eth(s *FlowETH, l *flowLayers) {
	if !v.need(FlowCanETH, "ETH specs") {
		return
	}
	if l.eth != nil {
		v.fail(unix.EINVAL, "a second ETH spec; a rule matches one L2 header per level")
		return
	}
	v.bytes("ETH dst_mac", s.Val.Dst[:], s.Mask.Dst[:])
	v.bytes("ETH src_mac", s.Val.Src[:], s.Mask.Src[:])
	v.mask("ETH ether_type", uint64(s.Val.EtherType), uint64(s.Mask.EtherType), 16)
	v.mask("ETH vlan_tag", uint64(s.Val.VLANTag), uint64(s.Mask.VLANTag), 16)
	l.eth = s
}

func (v *flowValidator) ipv4(s *FlowIPv4, l *flowLayers) {
	if !v.need(FlowCanIPv4, "IPV4 specs") {
		return
	}
	if s.SpecType()&^FlowSpecInner == FlowSpecIPv4Ext && !v.need(FlowCanIPv4Ext, "IPV4_EXT specs (protocol, ToS, TTL or flags)") {
		return
	}
	if l.ip4 != nil || l.ip6 != nil {
		v.fail(unix.EINVAL, "a second L3 spec (IPV4); a rule matches one IP header per level")
		return
	}
	v.bytes("IPV4 src_ip", s.Val.Src[:], s.Mask.Src[:])
	v.bytes("IPV4 dst_ip", s.Val.Dst[:], s.Mask.Dst[:])
	v.mask("IPV4 proto", uint64(s.Val.Proto), uint64(s.Mask.Proto), 8)
	v.mask("IPV4 tos", uint64(s.Val.TOS), uint64(s.Mask.TOS), 8)
	v.mask("IPV4 ttl", uint64(s.Val.TTL), uint64(s.Mask.TTL), 8)
	v.mask("IPV4 flags", uint64(s.Val.Flags), uint64(s.Mask.Flags), 3)
	l.ip4 = s
}

func (v *flowValidator) ipv6(s *FlowIPv6, l *flowLayers) {
	if !v.need(FlowCanIPv6, "IPV6 specs") {
		return
	}
	if l.ip4 != nil || l.ip6 != nil {
		v.fail(unix.EINVAL, "a second L3 spec (IPV6); a rule matches one IP header per level")
		return
	}
	v.bytes("IPV6 src_ip", s.Val.Src[:], s.Mask.Src[:])
	v.bytes("IPV6 dst_ip", s.Val.Dst[:], s.Mask.Dst[:])
	v.mask("IPV6 flow_label", uint64(s.Val.FlowLabel), uint64(s.Mask.FlowLabel), 20)
	v.mask("IPV6 next_hdr", uint64(s.Val.NextHdr), uint64(s.Mask.NextHdr), 8)
	v.mask("IPV6 traffic_class", uint64(s.Val.TrafficClass), uint64(s.Mask.TrafficClass), 8)
	v.mask("IPV6 hop_limit", uint64(s.Val.HopLimit), uint64(s.Mask.HopLimit), 8)
	l.ip6 = s
}

func (v *flowValidator) ports(val, mask *PortFilter, name string, f FlowFeature) {
	if !v.need(f, name+" specs") {
		return
	}
	v.mask(name+" dst_port", uint64(val.Dst), uint64(mask.Dst), 16)
	v.mask(name+" src_port", uint64(val.Src), uint64(mask.Src), 16)
}

// mask checks one field of bits width.
func (v *flowValidator) mask(name string, val, mask uint64, bits uint) {
	if v.err != nil {
		return
	}
	full := uint64(1)<<bits - 1
	switch {
	case mask&^full != 0:
		v.fail(unix.EINVAL, "%s mask %#x is wider than the field's %d bits", name, mask, bits)
	case val&^full != 0:
		v.fail(unix.EINVAL, "%s value %#x is wider than the field's %d bits", name, val, bits)
	case val&^mask != 0:
		v.fail(unix.EINVAL, "%s value %#x has bits outside its mask %#x; set them in the mask or clear them in the value", name, val, mask)
	case mask != 0 && mask != full && !v.caps.Has(FlowCanPartialMask):
		v.fail(unix.EOPNOTSUPP, "%s mask %#x is partial; only all-ones or zero masks", name, mask)
	}
}

// bytes checks an address field.
func (v *flowValidator) bytes(name string, val, mask []byte) {
	if v.err != nil {
		return
	}
	zero, ones := true, true
	for i := range val {
		if val[i]&^mask[i] != 0 {
			v.fail(unix.EINVAL, "%s value % x has bits outside its mask % x; set them in the mask or clear them in the value", name, val, mask)
			return
		}
		zero = zero && mask[i] == 0
		ones = ones && mask[i] == 0xff
	}
	if !zero && !ones && !v.caps.Has(FlowCanPartialMask) {
		v.fail(unix.EOPNOTSUPP, "%s mask % x is partial; only all-ones or zero masks", name, mask)
	}
}
