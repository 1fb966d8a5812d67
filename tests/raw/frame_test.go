package raw

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/testsupport/tshark"
)

func testAddrs(v6 bool) Addresses {
	a := Addresses{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), SrcPort: 5000, DstPort: 6000}
	if v6 {
		a.SrcIP, a.DstIP = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	}
	return a
}

// TestBuildTshark builds every frame shape the raw tests send and has
// tshark, an independent dissector, check every header and checksum.
func TestBuildTshark(t *testing.T) {
	type shape struct {
		name string
		spec FrameSpec
		size int
	}
	var shapes []shape
	for _, v6 := range []bool{false, true} {
		for _, tcp := range []bool{false, true} {
			for _, vlan := range []bool{false, true} {
				for _, size := range []int{78, 79, 1514} {
					s := FrameSpec{Addresses: testAddrs(v6), TCP: tcp, TOS: 0x28, VLAN: vlan, VLANID: 7, VLANPCP: 5, FlowLabel: 0xbeef}
					if vlan {
						s.HopLimit = 9 // -L; otherwise perftest's 64
					}
					shapes = append(shapes, shape{fmt.Sprintf("v6=%v/tcp=%v/vlan=%v/%d", v6, tcp, vlan, size), s, size})
				}
			}
		}
	}
	frames := make([][]byte, len(shapes))
	for i, s := range shapes {
		frames[i] = make([]byte, s.size)
		if err := s.spec.Build(frames[i], 9); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	rows := tshark.Fields(t, frames, "eth.src", "eth.dst", "vlan.id", "vlan.priority", "ip.src", "ipv6.src", "ip.dsfield",
		"ipv6.tclass", "ipv6.flow", "ip.checksum.status", "udp.checksum.status", "tcp.checksum.status", "udp.dstport", "tcp.dstport", "frame.len", "ip.ttl", "ipv6.hlim")
	for i, s := range shapes {
		r := rows[i]
		want := map[int]string{0: "02:00:00:00:00:01", 1: "02:00:00:00:00:02", 14: fmt.Sprint(s.size)}
		hops := "64"
		if s.spec.HopLimit != 0 {
			hops = fmt.Sprint(s.spec.HopLimit)
		}
		if s.spec.VLAN {
			want[2], want[3] = "7", "5"
		}
		if s.spec.SrcIP.Is4() {
			want[4], want[6], want[9], want[15] = "10.0.0.1", "0x28", tshark.Good, hops
		} else {
			want[5], want[7], want[8], want[16] = "fd00::1", "0x00000028", "0x00beef", hops
		}
		if s.spec.TCP {
			want[11], want[13] = tshark.Good, "6000"
		} else {
			want[10], want[12] = tshark.Good, "6000"
		}
		for col, v := range want {
			if r[col] != v {
				t.Errorf("%s: field %d = %q, want %q (row %q)", s.name, col, r[col], v, strings.Join(r, ","))
			}
		}
	}
}

func TestBuildErrors(t *testing.T) {
	a := testAddrs(false)
	mixed := a
	mixed.DstIP = netip.MustParseAddr("fd00::2")
	for _, c := range []struct {
		spec FrameSpec
		size int
		want string
	}{
		{FrameSpec{Addresses: a}, 41, "a 41-byte frame cannot hold its 42 bytes of headers"},
		{FrameSpec{Addresses: a, TCP: true, VLAN: true}, 57, "cannot hold its 58 bytes"},
		{FrameSpec{Addresses: mixed}, 64, "not two addresses of one IP version"},
	} {
		err := c.spec.Build(make([]byte, c.size), 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v size %d: %v, want %q", c.spec, c.size, err, c.want)
		}
	}
}

func TestReply(t *testing.T) {
	s := FrameSpec{Addresses: testAddrs(false), TOS: 4}
	r := s.Reply()
	if r.SrcMAC != s.DstMAC || r.DstMAC != s.SrcMAC || r.SrcIP != s.DstIP || r.SrcPort != s.DstPort || r.DstPort != s.SrcPort || r.TOS != 4 {
		t.Errorf("Reply %+v of %+v", r, s)
	}
}
