package netpkt

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// runBPF interprets a classic BPF socket filter over a frame the way the
// kernel runs it on a received packet whose outer tag was taken out
// (tag): a load beyond the frame ends the program with 0.
func runBPF(prog []unix.SockFilter, frame []byte, tag Tag) (uint32, error) {
	var a, x uint32
	var mem [16]uint32
	load := func(off uint32, size uint16) (uint32, bool) {
		if off >= skfAdOff {
			switch off - skfAdOff {
			case skfAdVLANTag:
				return uint32(tag.TCI), true
			case skfAdVLANTagPresent:
				if tag.Present {
					return 1, true
				}
				return 0, true
			}
			return 0, false
		}
		n := map[uint16]uint32{unix.BPF_W: 4, unix.BPF_H: 2, unix.BPF_B: 1}[size]
		if uint64(off)+uint64(n) > uint64(len(frame)) {
			return 0, false
		}
		switch n {
		case 4:
			return binary.BigEndian.Uint32(frame[off:]), true
		case 2:
			return uint32(binary.BigEndian.Uint16(frame[off:])), true
		}
		return uint32(frame[off]), true
	}
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		cls := in.Code & 0x07
		src := func() uint32 {
			if in.Code&unix.BPF_X != 0 {
				return x
			}
			return in.K
		}
		switch cls {
		case unix.BPF_LD:
			switch in.Code & 0xe0 {
			case unix.BPF_IMM:
				a = in.K
			case unix.BPF_MEM:
				a = mem[in.K]
			case unix.BPF_LEN:
				a = uint32(len(frame))
			case unix.BPF_ABS, unix.BPF_IND:
				off := in.K
				if in.Code&0xe0 == unix.BPF_IND {
					off += x
				}
				v, ok := load(off, in.Code&0x18)
				if !ok {
					return 0, nil
				}
				a = v
			default:
				return 0, fmt.Errorf("pc %d: ld mode %#x", pc, in.Code)
			}
		case unix.BPF_LDX:
			switch in.Code & 0xe0 {
			case unix.BPF_IMM:
				x = in.K
			case unix.BPF_MEM:
				x = mem[in.K]
			case unix.BPF_LEN:
				x = uint32(len(frame))
			default:
				return 0, fmt.Errorf("pc %d: ldx mode %#x", pc, in.Code)
			}
		case unix.BPF_ST:
			mem[in.K] = a
		case unix.BPF_STX:
			mem[in.K] = x
		case unix.BPF_ALU:
			switch in.Code & 0xf0 {
			case unix.BPF_ADD:
				a += src()
			case unix.BPF_SUB:
				a -= src()
			case unix.BPF_AND:
				a &= src()
			case unix.BPF_OR:
				a |= src()
			case unix.BPF_LSH:
				a <<= src()
			case unix.BPF_RSH:
				a >>= src()
			default:
				return 0, fmt.Errorf("pc %d: alu op %#x", pc, in.Code)
			}
		case unix.BPF_JMP:
			if in.Code&0xf0 == unix.BPF_JA {
				pc += int(in.K)
				continue
			}
			var c bool
			switch in.Code & 0xf0 {
			case unix.BPF_JEQ:
				c = a == src()
			case unix.BPF_JGT:
				c = a > src()
			case unix.BPF_JGE:
				c = a >= src()
			case unix.BPF_JSET:
				c = a&src() != 0
			default:
				return 0, fmt.Errorf("pc %d: jmp op %#x", pc, in.Code)
			}
			if c {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET:
			if in.Code&0x18 == unix.BPF_A {
				return a, nil
			}
			return in.K, nil
		case unix.BPF_MISC:
			if in.Code&0xf8 == unix.BPF_TAX {
				x = a
			} else {
				a = x
			}
		}
	}
	return 0, fmt.Errorf("fell off the end of the program")
}

// refMatches says whether a frame matches a rule's specs, read field by
// field from the parsed headers (independently of the byte compiler).
func refMatches(a *verbsio.FlowAttr, f []byte, tag Tag) bool {
	if len(f) < EthLen {
		return false
	}
	var l Layers
	Parse(f, tag, &l)
	eq := func(val, mask, got []byte) bool {
		for i := range mask {
			if got[i]&mask[i] != val[i] {
				return false
			}
		}
		return true
	}
	u16 := func(off uint16) uint16 { return binary.BigEndian.Uint16(f[off:]) }
	need := func(b uint16) bool { return l.Has&b == b }
	if !need(refRequired(a)) {
		return false
	}
	for _, s := range a.Specs {
		in := s.SpecType()&verbsio.FlowSpecInner != 0
		l2, l3, l4, et, vlan, hasVLAN := uint16(0), l.L3, l.L4, l.EtherType, l.VLAN, HasVLAN
		if in {
			l2, l3, l4, et, vlan, hasVLAN = l.InnerL2, l.InnerL3, l.InnerL4, l.InnerEtherType, l.InnerVLAN, HasInnerVLAN
		}
		switch s := s.(type) {
		case verbsio.FlowETH:
			if !eq(s.Val.Dst[:], s.Mask.Dst[:], f[l2:]) || !eq(s.Val.Src[:], s.Mask.Src[:], f[l2+6:]) ||
				et&s.Mask.EtherType != s.Val.EtherType || (s.Mask.VLANTag != 0 && (!need(hasVLAN) || vlan&s.Mask.VLANTag != s.Val.VLANTag)) {
				return false
			}
		case verbsio.FlowIPv4:
			h := f[l3:]
			if !eq(s.Val.Src[:], s.Mask.Src[:], h[12:]) || !eq(s.Val.Dst[:], s.Mask.Dst[:], h[16:]) ||
				h[9]&s.Mask.Proto != s.Val.Proto || h[1]&s.Mask.TOS != s.Val.TOS || h[8]&s.Mask.TTL != s.Val.TTL || (h[6]>>5)&s.Mask.Flags != s.Val.Flags {
				return false
			}
		case verbsio.FlowIPv6:
			h := f[l3:]
			w := binary.BigEndian.Uint32(h)
			if !eq(s.Val.Src[:], s.Mask.Src[:], h[8:]) || !eq(s.Val.Dst[:], s.Mask.Dst[:], h[24:]) ||
				w&0xfffff&s.Mask.FlowLabel != s.Val.FlowLabel || uint8(w>>20)&s.Mask.TrafficClass != s.Val.TrafficClass ||
				h[6]&s.Mask.NextHdr != s.Val.NextHdr || h[7]&s.Mask.HopLimit != s.Val.HopLimit {
				return false
			}
		case verbsio.FlowTCP:
			if u16(l4)&s.Mask.Src != s.Val.Src || u16(l4+2)&s.Mask.Dst != s.Val.Dst {
				return false
			}
		case verbsio.FlowUDP:
			if u16(l4)&s.Mask.Src != s.Val.Src || u16(l4+2)&s.Mask.Dst != s.Val.Dst {
				return false
			}
		case verbsio.FlowVXLAN:
			if binary.BigEndian.Uint32(f[l.Tunnel+4:])>>8&s.Mask.TunnelID != s.Val.TunnelID {
				return false
			}
		}
	}
	return true
}

// refRequired is the headers a frame must have for a rule's specs.
func refRequired(a *verbsio.FlowAttr) uint16 {
	var req uint16
	for _, s := range a.Specs {
		in := s.SpecType()&verbsio.FlowSpecInner != 0
		var b uint16
		switch s.(type) {
		case verbsio.FlowIPv4:
			b = HasIPv4
		case verbsio.FlowIPv6:
			b = HasIPv6
		case verbsio.FlowTCP:
			b = HasTCP
		case verbsio.FlowUDP:
			b = HasUDP
		case verbsio.FlowVXLAN:
			req |= HasVXLAN
		}
		if in {
			req |= HasVXLAN | HasInnerETH | b<<innerShift
		} else {
			req |= b
		}
	}
	return req
}

// randomRule draws a rule over fields of the frames randomFrame makes.
func randomRule(r *rand.Rand) verbsio.FlowAttr {
	var specs []verbsio.FlowSpec
	pick := func() bool { return r.IntN(3) == 0 }
	maskOf := func(full uint32) uint32 {
		switch r.IntN(3) {
		case 0:
			return full
		case 1:
			return 0
		}
		return uint32(r.Uint64()) & full
	}
	for _, in := range []bool{false, true} {
		if in && (len(specs) == 0 || !pick()) {
			break
		}
		if in {
			specs = append(specs, verbsio.FlowVXLAN{})
		}
		if pick() {
			m := verbsio.ETHFilter{EtherType: uint16(maskOf(0xffff)), VLANTag: uint16(maskOf(0xffff))}
			v := verbsio.ETHFilter{EtherType: []uint16{EtherTypeIPv4, EtherTypeIPv6, 0x0806}[r.IntN(3)] & m.EtherType, VLANTag: uint16(r.IntN(4)) & m.VLANTag}
			if pick() {
				m.Dst = ones6
				v.Dst = verbsio.MAC(macB)
			}
			specs = append(specs, verbsio.FlowETH{Inner: in, Val: v, Mask: m})
		}
		switch r.IntN(3) {
		case 0:
			m := verbsio.IPv4Filter{TOS: uint8(maskOf(0xff)), Proto: uint8(maskOf(0xff)), Flags: uint8(maskOf(7))}
			if pick() {
				m.Dst = ones4
			}
			v := verbsio.IPv4Filter{TOS: uint8(r.IntN(2)*0x28) & m.TOS, Proto: []uint8{6, 17}[r.IntN(2)] & m.Proto, Flags: uint8(r.IntN(3)) & m.Flags}
			dst := ip4B.As4()
			for i := range dst {
				v.Dst[i] = dst[i] & m.Dst[i]
			}
			specs = append(specs, verbsio.FlowIPv4{Inner: in, Val: v, Mask: m})
		case 1:
			m := verbsio.IPv6Filter{TrafficClass: uint8(maskOf(0xff)), FlowLabel: maskOf(0xfffff), NextHdr: uint8(maskOf(0xff))}
			v := verbsio.IPv6Filter{TrafficClass: uint8(r.IntN(2)*0xb8) & m.TrafficClass, FlowLabel: uint32(r.IntN(2)*0x12345) & m.FlowLabel, NextHdr: []uint8{6, 17}[r.IntN(2)] & m.NextHdr}
			specs = append(specs, verbsio.FlowIPv6{Inner: in, Val: v, Mask: m})
		}
		if pick() {
			m := verbsio.PortFilter{Dst: uint16(maskOf(0xffff)), Src: uint16(maskOf(0xffff))}
			v := verbsio.PortFilter{Dst: uint16(5000+r.IntN(2)) & m.Dst, Src: uint16(1000+r.IntN(2)) & m.Src}
			if r.IntN(2) == 0 {
				specs = append(specs, verbsio.FlowTCP{Inner: in, Val: v, Mask: m})
			} else {
				specs = append(specs, verbsio.FlowUDP{Inner: in, Val: v, Mask: m})
			}
		}
	}
	if pick() {
		m := uint32(0xffffff)
		specs = append(specs, verbsio.FlowVXLAN{Val: verbsio.TunnelFilter{TunnelID: uint32(40 + r.IntN(3))}, Mask: verbsio.TunnelFilter{TunnelID: m}})
	}
	return verbsio.FlowAttr{Port: 1, Priority: uint16(r.IntN(3)), Specs: specs}
}

func randomFrame(r *rand.Rand) ([]byte, Tag) {
	var h Headers
	layer := func(h *Headers) {
		h.Dst, h.Src = macB, macA
		if r.IntN(4) == 0 {
			h.Dst[0] |= 1
		}
		if r.IntN(3) == 0 {
			h.VLAN = Tag{Present: true, TCI: uint16(r.IntN(4))}
		}
		switch r.IntN(4) {
		case 0:
			h.SrcIP, h.DstIP = ip4A, ip4B
			h.TOS = uint8(r.IntN(2) * 0x28)
			h.DF = r.IntN(2) == 0
		case 1:
			h.SrcIP, h.DstIP = ip6A, ip6B
			h.TOS, h.FlowLabel = uint8(r.IntN(2)*0xb8), uint32(r.IntN(2)*0x12345)
		case 2:
			h.SrcIP, h.DstIP = netip.MustParseAddr("10.9.9.9"), ip4A
		default:
			h.EtherType = 0x0806
		}
		h.Proto = []uint8{ProtoTCP, ProtoUDP, 47}[r.IntN(3)]
		h.SrcPort, h.DstPort = uint16(1000+r.IntN(2)), uint16(5000+r.IntN(2))
	}
	layer(&h)
	if h.SrcIP.IsValid() && r.IntN(3) == 0 {
		h.Proto, h.DstPort, h.VNI = ProtoUDP, 0, uint32(40+r.IntN(3))
		h.Inner = &Headers{}
		layer(h.Inner)
	}
	f, err := h.Append(nil, payloadOf(r.IntN(40)))
	if err != nil {
		panic(err)
	}
	if h.SrcIP.Is4() && r.IntN(8) == 0 { // a later fragment
		f[EthLen+len(tagBytes(h))+6] |= 0x01
	}
	if h.VLAN.Present && r.IntN(2) == 0 {
		g, tag := stripTag(f)
		return g, tag
	}
	if n := r.IntN(10); n == 0 {
		f = f[:r.IntN(len(f))] // truncated
	}
	return f, Tag{}
}

func tagBytes(h Headers) []byte {
	if h.VLAN.Present {
		return make([]byte, VLANLen)
	}
	return nil
}

// TestFilterMatchesReference: over random rules and frames, the exact
// filter passes a frame exactly when some rule's specs match it (read
// field by field), and Match delivers only frames some rule of the
// target matches.
func TestFilterMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var frames, wanted int
	defer func() {
		t.Logf("%d frames, %d wanted by some rule", frames, wanted)
		if wanted < frames/20 || wanted > frames*19/20 {
			t.Errorf("%d of %d frames wanted: the random rules and frames test too little", wanted, frames)
		}
	}()
	for round := range 200 {
		tab := NewTable()
		var attrs []verbsio.FlowAttr
		for range 1 + r.IntN(6) {
			a := randomRule(r)
			if err := a.Validate(Caps); err != nil {
				continue // contradictions the generator made
			}
			if _, err := tab.Add(&a, uint32(len(attrs))); err != nil {
				t.Fatalf("Add: %v", err)
			}
			attrs = append(attrs, a)
		}
		if len(attrs) == 0 {
			continue
		}
		if r.IntN(5) == 0 {
			a := verbsio.FlowAttr{Type: verbsio.FlowMCDefault, Port: 1}
			tab.Add(&a, 99)
		}
		prog, mode := tab.Filter()
		if mode != FilterExact {
			t.Fatalf("round %d: mode %s for %d rules", round, mode, len(attrs))
		}
		hits := make([]Hit, 8)
		for range 100 {
			f, tag := randomFrame(r)
			want := false
			for _, a := range attrs {
				want = want || refMatches(&a, f, tag)
			}
			mc := len(f) >= EthLen && f[0]&1 != 0 && tab.snap.Load().mcDefault != nil
			frames++
			if want {
				wanted++
			}
			got, err := runBPF(prog, f, tag)
			if err != nil {
				t.Fatal(err)
			}
			if (got != 0) != (want || mc) {
				t.Fatalf("round %d: filter %d, reference %v (mc default %v)\nrules %+v\nframe % x tag %+v", round, got, want, mc, attrs, f, tag)
			}
			n, _ := tab.Match(f, tag, hits)
			for _, h := range hits[:n] {
				if h.Target == 99 {
					continue
				}
				if !refMatches(&attrs[h.Target], f, tag) {
					t.Fatalf("round %d: delivered to %d, whose rule %+v does not match % x", round, h.Target, attrs[h.Target], f)
				}
			}
			if want && n == 0 {
				t.Fatalf("round %d: a rule matches but nothing was delivered\nrules %+v\nframe % x", round, attrs, f)
			}
		}
	}
}
