package netpkt

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// fuzzTable holds a few rules of every kind for the frame fuzzer.
func fuzzTable(tb testing.TB) *Table {
	tab := NewTable()
	fs := []verbsio.FlowAttr{
		normal(0, verbsio.FlowIPv4{Val: verbsio.IPv4Filter{TOS: 0x28}, Mask: verbsio.IPv4Filter{TOS: 0xfc}}),
		normal(1, verbsio.FlowVXLAN{Val: verbsio.TunnelFilter{TunnelID: 42}, Mask: verbsio.TunnelFilter{TunnelID: 0xffffff}}, verbsio.FlowTCP{Inner: true}, verbsio.FlowTag{Tag: 42}),
		normal(2, verbsio.FlowIPv6{Val: verbsio.IPv6Filter{FlowLabel: 5}, Mask: verbsio.IPv6Filter{FlowLabel: 0xfffff}}, udpDst(5000)),
		normal(2, verbsio.FlowETH{Val: verbsio.ETHFilter{VLANTag: 100}, Mask: verbsio.ETHFilter{VLANTag: 0xfff}}, verbsio.FlowDrop{}),
		{Type: verbsio.FlowMCDefault, Port: 1},
	}
	for i := range fs {
		if _, err := tab.Add(&fs[i], uint32(i)); err != nil {
			tb.Fatal(err)
		}
	}
	return tab
}

func seedFrames(f *testing.F) {
	for _, tc := range frameCases {
		fr, err := tc.h.Append(nil, payloadOf(30))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(fr, uint16(0), false)
		f.Add(fr, uint16(100), true)
	}
}

// FuzzFrame: Parse, FillChecksums, TSO, Match and the filter take any
// bytes without panicking; what Parse reports lies inside the frame; the
// filter passes every frame Match delivers.
func FuzzFrame(f *testing.F) {
	seedFrames(f)
	tab := fuzzTable(f)
	prog, _ := tab.Filter()
	f.Fuzz(func(t *testing.T, frame []byte, tci uint16, tagged bool) {
		tag := Tag{TCI: tci, Present: tagged}
		var l Layers
		Parse(frame, tag, &l)
		for _, end := range []uint16{l.L4End, l.InnerL4End} {
			if int(end) > len(frame) {
				t.Fatalf("L4 ends at %d, beyond the %d-byte frame", end, len(frame))
			}
		}
		c := append([]byte(nil), frame...)
		if err := FillChecksums(c, tag); err == nil && l.Has&HasIPv4 != 0 && Checksum(c[l.L3:l.L4]) != 0 {
			t.Fatal("FillChecksums left a bad IPv4 header checksum")
		}
		hits := make([]Hit, 8)
		n, _ := tab.Match(frame, tag, hits)
		acc, err := runBPF(prog, frame, tag)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 && acc == 0 {
			t.Fatalf("delivered to %v but filtered out", hits[:n])
		}
		// The frame's headers as a TSO template.
		var tso TSO
		hdr := frame
		if int(l.L4End) <= len(frame) && l.L4End > 0 {
			hdr = frame[:l.L4End]
			if l.Has&HasInnerETH != 0 && l.InnerL4End > 0 {
				hdr = frame[:l.InnerL4End]
			}
		}
		if tso.Init(hdr, 3000, 1000) != nil {
			return
		}
		Parse(hdr, tag, &l)
		payload := payloadOf(3000)
		buf := make([]byte, len(hdr)+1000)
		for i := range tso.Frames() {
			off, n := tso.Chunk(i)
			fl := tso.Frame(buf, i, payload[off:off+n])
			var sl Layers
			Parse(buf[:fl], tag, &sl)
			// The payload may look like more headers (a UDP datagram to the
			// VXLAN port); the template's own headers must stay.
			if sl.Has&l.Has&^HasFragment != l.Has&^HasFragment {
				t.Fatalf("segment %d has layers %#x, the template %#x", i, sl.Has, l.Has)
			}
		}
	})
}

// flowFromBytes decodes a rule from fuzz input: every field of every spec
// kind is reachable, valid or not.
func flowFromBytes(b []byte) verbsio.FlowAttr {
	next := func(n int) []byte {
		out := make([]byte, n)
		k := copy(out, b)
		b = b[k:]
		return out
	}
	u8 := func() uint8 { return next(1)[0] }
	u16 := func() uint16 { return binary.BigEndian.Uint16(next(2)) }
	u32 := func() uint32 { return binary.BigEndian.Uint32(next(4)) }
	a := verbsio.FlowAttr{Type: verbsio.FlowType(u8() % 5), Priority: u16() % 20, Port: u8() % 3, Flags: verbsio.FlowFlags(u8() & 7)}
	nspec := int(u8() % 7)
	for range nspec {
		kind := u8()
		in := kind&0x80 != 0
		var s verbsio.FlowSpec
		switch kind % 12 {
		case 0:
			var v, m verbsio.ETHFilter
			copy(v.Dst[:], next(6))
			copy(m.Dst[:], next(6))
			v.EtherType, m.EtherType, v.VLANTag, m.VLANTag = u16(), u16(), u16(), u16()
			s = verbsio.FlowETH{Inner: in, Val: v, Mask: m}
		case 1:
			var v, m verbsio.IPv4Filter
			copy(v.Src[:], next(4))
			copy(m.Src[:], next(4))
			v.TOS, m.TOS, v.Proto, m.Proto, v.Flags, m.Flags, v.TTL, m.TTL = u8(), u8(), u8(), u8(), u8(), u8(), u8(), u8()
			s = verbsio.FlowIPv4{Inner: in, Val: v, Mask: m}
		case 2:
			var v, m verbsio.IPv6Filter
			copy(v.Dst[:], next(16))
			copy(m.Dst[:], next(16))
			v.FlowLabel, m.FlowLabel, v.TrafficClass, m.TrafficClass, v.NextHdr, m.NextHdr = u32(), u32(), u8(), u8(), u8(), u8()
			s = verbsio.FlowIPv6{Inner: in, Val: v, Mask: m}
		case 3:
			s = verbsio.FlowTCP{Inner: in, Val: verbsio.PortFilter{Dst: u16(), Src: u16()}, Mask: verbsio.PortFilter{Dst: u16(), Src: u16()}}
		case 4:
			s = verbsio.FlowUDP{Inner: in, Val: verbsio.PortFilter{Dst: u16(), Src: u16()}, Mask: verbsio.PortFilter{Dst: u16(), Src: u16()}}
		case 5:
			s = verbsio.FlowVXLAN{Val: verbsio.TunnelFilter{TunnelID: u32() >> (u8() % 9)}, Mask: verbsio.TunnelFilter{TunnelID: u32() >> (u8() % 9)}}
		case 6:
			s = verbsio.FlowTag{Tag: u32() >> (u8() % 9)}
		case 7:
			s = verbsio.FlowDrop{}
		case 8:
			s = verbsio.FlowGRE{}
		case 9:
			s = verbsio.FlowMPLS{Inner: in}
		case 10:
			s = verbsio.FlowESP{}
		default:
			s = nil
		}
		a.Specs = append(a.Specs, s)
	}
	return a
}

// FuzzFlow: any rule is accepted or refused with EINVAL or EOPNOTSUPP,
// never a panic; an accepted rule steers only frames its specs match, the
// filter passes what it delivers, and removing it leaves nothing behind.
func FuzzFlow(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 1, 0, 0, 0, 0, 0x28, 0xfc})
	f.Add([]byte{0, 0, 1, 1, 0, 3, 5, 0, 0, 0, 42, 0, 0xff, 0xff, 0xff, 0, 0x83, 0, 0, 0x20, 0xfb, 0, 0, 0xff, 0xff})
	f.Add([]byte{3, 0, 0, 1, 0, 0})
	f.Add([]byte{0, 0, 0, 1, 2, 2, 0, 6})
	var frames [][]byte
	for _, tc := range frameCases {
		fr, _ := tc.h.Append(nil, payloadOf(30))
		frames = append(frames, fr)
	}
	fs := makeFrames(f)
	frames = append(frames, fs.tos28, fs.vx42, fs.v6, fs.vlan100, fs.frag, fs.mcast)
	f.Fuzz(func(t *testing.T, b []byte) {
		a := flowFromBytes(b)
		err := a.Validate(Caps)
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatalf("Validate: %v is neither EINVAL nor EOPNOTSUPP", err)
		}
		tab := NewTable()
		r, aerr := tab.Add(&a, 7)
		if (err == nil) != (aerr == nil) {
			t.Fatalf("Validate %v but Add %v", err, aerr)
		}
		if aerr != nil {
			return
		}
		prog, _ := tab.Filter()
		hits := make([]Hit, 2)
		for _, fr := range frames {
			n, v := tab.Match(fr, Tag{}, hits)
			acc, err := runBPF(prog, fr, Tag{})
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 && acc == 0 {
				t.Fatalf("delivered (%v) but filtered out: % x", v, fr)
			}
			if a.Type == verbsio.FlowNormal && n > 0 && !refMatches(&a, fr, Tag{}) {
				t.Fatalf("delivered a frame the rule's specs do not match: % x", fr)
			}
			if a.Type == verbsio.FlowNormal && n == 0 && v != Dropped && refMatches(&a, fr, Tag{}) {
				t.Fatalf("the rule's specs match but nothing was delivered (%v): % x", v, fr)
			}
		}
		if err := tab.Remove(r); err != nil {
			t.Fatal(err)
		}
		if tab.Len() != 0 || len(tab.bySig) != 0 {
			t.Fatal("the table is not empty after Remove")
		}
	})
}
