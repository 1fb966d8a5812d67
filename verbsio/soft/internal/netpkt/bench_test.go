package netpkt

import (
	"fmt"
	"testing"

	"github.com/rperf/rperf/verbsio"
)

// BenchmarkFlowInsert is the rate of creating and destroying steering
// rules (perftest's raw_ethernet_fs_rate, on the engine's table) with
// installed rules already there: one op is one Add and one Remove, each
// rule a UDP 5-tuple match with a flow tag.
func BenchmarkFlowInsert(b *testing.B) {
	for _, installed := range []int{0, 1000, 100000} {
		b.Run(fmt.Sprintf("installed=%d", installed), func(b *testing.B) {
			tab := NewTable()
			attr := func(i int) verbsio.FlowAttr {
				return verbsio.FlowAttr{Port: 1, Specs: []verbsio.FlowSpec{
					verbsio.FlowIPv4{Val: verbsio.IPv4Filter{Src: [4]byte{10, 0, byte(i >> 8), byte(i)}, Dst: [4]byte{10, 1, 0, 1}}, Mask: verbsio.IPv4Filter{Src: ones4, Dst: ones4}},
					verbsio.FlowUDP{Val: verbsio.PortFilter{Src: uint16(i >> 16), Dst: 5000}, Mask: verbsio.PortFilter{Src: 0xffff, Dst: 0xffff}},
					verbsio.FlowTag{Tag: uint32(i) & 0xffffff}}}
			}
			for i := range installed {
				a := attr(i)
				if _, err := tab.Add(&a, 1); err != nil {
					b.Fatal(err)
				}
			}
			attrs := make([]verbsio.FlowAttr, 1024)
			for i := range attrs {
				attrs[i] = attr(installed + i)
			}
			b.ResetTimer()
			for i := range b.N {
				r, err := tab.Add(&attrs[i%len(attrs)], 2)
				if err != nil {
					b.Fatal(err)
				}
				if err := tab.Remove(r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rules/s")
		})
	}
}

// BenchmarkFilter is the cost of compiling the kernel filter for the
// installed rules, which the engine does when a rule is added.
func BenchmarkFilter(b *testing.B) {
	for _, installed := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("installed=%d", installed), func(b *testing.B) {
			tab := NewTable()
			for i := range installed {
				a := normal(0, udpDst(uint16(i)))
				tab.Add(&a, 1)
			}
			var mode FilterMode
			for range b.N {
				_, mode = tab.Filter()
			}
			b.ReportMetric(float64(mode), "mode")
		})
	}
}

// BenchmarkMatch is the per-frame steering cost with rules installed in
// one group (the fs_rate shape) and in several priorities.
func BenchmarkMatch(b *testing.B) {
	fs := makeFrames(b)
	for _, tc := range []struct {
		name  string
		rules int
		prios int
	}{{"rules=1", 1, 1}, {"rules=10000", 10000, 1}, {"rules=100/prios=4", 100, 4}} {
		b.Run(tc.name, func(b *testing.B) {
			tab := NewTable()
			for i := range tc.rules {
				a := normal(uint16(i%tc.prios), udpDst(uint16(5000+i)))
				tab.Add(&a, uint32(i))
			}
			hits := make([]Hit, 4)
			b.ResetTimer()
			for range b.N {
				if n, _ := tab.Match(fs.tos0, Tag{}, hits); n != 1 {
					b.Fatal("no hit")
				}
			}
		})
	}
}

// BenchmarkTSOFrames is the engine's share of a 64 KiB TSO send: cutting
// it into 1448-byte frames with headers and checksums.
func BenchmarkTSOFrames(b *testing.B) {
	h := Headers{Dst: macB, Src: macA, SrcIP: ip4A, DstIP: ip4B, Proto: ProtoTCP, TCPFlags: TCPAck}
	hdr, _ := h.AppendHeader(nil, 0)
	payload := make([]byte, 0xffff-(len(hdr)-EthLen))
	buf := make([]byte, len(hdr)+1448)
	b.SetBytes(int64(len(payload)))
	for range b.N {
		var t TSO
		t.Init(hdr, len(payload), 1448)
		for i := range t.Frames() {
			off, n := t.Chunk(i)
			t.Frame(buf, i, payload[off:off+n])
		}
	}
}

func BenchmarkChecksum(b *testing.B) {
	p := make([]byte, 1500)
	b.SetBytes(int64(len(p)))
	for range b.N {
		Checksum(p)
	}
}
