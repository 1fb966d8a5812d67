package raw_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/internal/testsupport/tshark"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/raw"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// sniffer copies every frame that reaches h's link, as it was on the
// wire (a tag the kernel stripped put back), through a sniffer rule on a
// raw QP of its own, driven by the context's background progress;
// frames returns what it has after the run.
type sniffer struct {
	dev  *verbsio.Context
	cq   *verbsio.CQ
	buf  []byte
	slot int
}

const sniffSlot = 2048

func sniff(t *testing.T, h netns.Host, n int) *sniffer {
	t.Helper()
	s := &sniffer{slot: sniffSlot}
	if err := h.Run(func() (err error) { s.dev, err = verbsio.Open("raw_" + h.Link); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.dev.Close() })
	pd, err := s.dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if s.cq, err = s.dev.CreateCQ(n + 1); err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRawPacket, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: verbsio.QPCap{MaxSendWR: 1, MaxRecvWR: n, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Connect(verbsio.Endpoint{}, verbsio.Endpoint{}, verbsio.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	if s.buf, err = s.dev.Alloc(n * s.slot); err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(s.buf, verbsio.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	wrs := make([]verbsio.RecvWR, n)
	for i := range wrs {
		wrs[i] = verbsio.RecvWR{ID: uint64(i), SGL: []verbsio.SGE{mr.SGE(i*s.slot, s.slot)}}
	}
	if k, err := qp.PostRecv(wrs); err != nil || k != n {
		t.Fatalf("post %d receives: %d, %v", n, k, err)
	}
	if _, err := qp.CreateFlow(verbsio.FlowAttr{Type: verbsio.FlowSniffer, Port: 1}); err != nil {
		t.Fatal(err)
	}
	// The engine receives when polled: background progress keeps the
	// kernel's ring from overflowing while the test's sides run.
	t.Cleanup(s.dev.StartProgress())
	return s
}

// frames polls what arrived, until want frames of size bytes came or
// wait passed, and returns the frames of that size in order.
func (s *sniffer) frames(want, size int, wait time.Duration) [][]byte {
	var out [][]byte
	wcs := make([]verbsio.WC, 64)
	deadline := time.Now().Add(wait)
	for len(out) < want && time.Now().Before(deadline) {
		k, _ := s.cq.Poll(wcs)
		for _, wc := range wcs[:k] {
			if wc.Status == verbsio.StatusSuccess && int(wc.ByteLen) == size {
				out = append(out, s.buf[int(wc.ID)*s.slot:][:wc.ByteLen])
			}
		}
		if k == 0 {
			s.cq.Wait(10 * time.Millisecond)
		}
	}
	return out
}

// TestRawWireFrames runs raw-bw and raw-lat with perftest's frame
// options that concern the wire and checks the frames a sniffer on the
// server's link saw with tshark: --vlan_pcp 8 (priorities 1, 2, ..., 7,
// 0, 1, ... in the order the frames are sent, on both sides of raw-lat)
// and -Y (the EtherType replaced; the server's rule matches it and
// still takes every frame).
func TestRawWireFrames(t *testing.T) {
	tshark.Skip(t)
	const n, size = 24, 128
	for _, tc := range []struct {
		name      string
		test      session.Test
		vlan      bool
		pcp       uint8
		etherType uint16
		want      func(i int) []string // tshark's vlan.priority, eth.type of the i-th frame from the client
	}{
		{"bw pcp rotate", session.RawBW, true, raw.VLANPCPRotate, 0,
			func(i int) []string { return []string{strconv.Itoa((i + 1) & 7), "0x0800"} }},
		{"lat pcp rotate", session.RawLat, true, raw.VLANPCPRotate, 0,
			func(i int) []string { return []string{strconv.Itoa((i + 1) & 7), "0x0800"} }},
		{"bw pcp 5", session.RawBW, true, 5, 0, func(int) []string { return []string{"5", "0x0800"} }},
		{"bw ethertype", session.RawBW, false, 0, 0x88b5, func(int) []string { return []string{"", "0x88b5"} }},
		{"lat ethertype", session.RawLat, false, 0, 0x88b5, func(int) []string { return []string{"", "0x88b5"} }},
		{"bw ethertype vlan", session.RawBW, true, 3, 0x88b6, func(int) []string { return []string{"3", "0x88b6"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s *sniffer
			client, server := pairOver(t, netns.Options{}, tc.test, func(c *raw.Config) {
				c.Sizes, c.Iterations, c.Warmup, c.RxDepth = []int{size}, n, 0, 512
				c.Frame.VLAN, c.Frame.VLANPCP, c.Frame.EtherType = tc.vlan, tc.pcp, tc.etherType
			}, func(p *netns.Pair) { s = sniff(t, p.B, 4*n) })
			checkRan(t, tc.test, client, server, n)
			wire := s.frames(n, size, 10*time.Second)
			if tc.test == session.RawLat {
				// B's link sees the pings and, leaving, the pongs: the
				// sniffer's copies of frames this host sends are not
				// taken (PACKET_IGNORE_OUTGOING), so these are the pings.
				wire = wire[:min(len(wire), n)]
			}
			if len(wire) != n {
				t.Fatalf("the sniffer saw %d of the client's %d frames", len(wire), n)
			}
			rows := tshark.Fields(t, wire, "vlan.priority", "eth.type", "vlan.etype")
			for i, r := range rows {
				want := tc.want(i)
				etype := r[1]
				if tc.vlan {
					etype = r[2] // behind the tag
				}
				if r[0] != want[0] || etype != want[1] {
					t.Errorf("frame %d: priority %q, EtherType %q; want %q, %q", i, r[0], etype, want[0], want[1])
				}
			}
		})
	}
}

// checkRan checks that a run moved n frames: raw-bw's server received
// every one, raw-lat's client measured n round trips.
func checkRan(t *testing.T, test session.Test, client, server []reports.Result, n int) {
	t.Helper()
	var err error
	switch {
	case test == session.RawLat && (len(client) != 1 || client[0].Samples != int64(n)):
		err = fmt.Errorf("client %+v", client)
	case test == session.RawBW && (len(server) != 1 || server[0].Iterations != int64(n)):
		err = fmt.Errorf("server %+v", server)
	}
	if err != nil {
		t.Fatalf("%s did not move its %d frames: %v", test, n, err)
	}
}

// TestRawMacFwd is perftest's --mac_fwd on raw-bw's server: every frame
// it receives goes back out with its MAC addresses swapped, which a
// sniffer on the client's link sees (tshark: from the server's MAC to
// the client's, the IP addresses and ports untouched, checksums good).
func TestRawMacFwd(t *testing.T) {
	tshark.Skip(t)
	const n, size = 500, 256
	var s *sniffer
	var ma, mb string
	client, server := pairOver(t, netns.Options{}, session.RawBW, func(c *raw.Config) {
		c.Sizes, c.Iterations, c.RxDepth = []int{size}, n, 1024
		c.MacFwd = c.Server
		if c.Server {
			mb, ma = macString(c.Frame.SrcMAC), macString(c.Frame.DstMAC)
		}
	}, func(p *netns.Pair) { s = sniff(t, p.A, 2*n) })
	checkRan(t, session.RawBW, client, server, n)
	back := s.frames(n, size, 10*time.Second)
	// The sniffer may miss frames when starved, never invent them; the
	// server received every frame (checkRan) and forwarded each.
	if len(back) < n/2 || len(back) > n {
		t.Fatalf("the client's link saw %d forwarded frames of %d", len(back), n)
	}
	for i, r := range tshark.Fields(t, back, "eth.src", "eth.dst", "udp.srcport", "udp.dstport", "ip.checksum.status", "udp.checksum.status") {
		if r[0] != mb || r[1] != ma || r[2] != "6000" || r[3] != "7000" || r[4] != tshark.Good || r[5] != tshark.Good {
			t.Fatalf("forwarded frame %d: %q; want from %s to %s, ports 6000 > 7000 as the client sent them, good checksums", i, r, mb, ma)
		}
	}
	t.Logf("%d frames forwarded, %d seen on the client's link", server[0].Iterations, len(back))
}

func macString(m [6]byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}
