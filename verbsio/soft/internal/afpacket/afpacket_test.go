package afpacket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/internal/testsupport/tshark"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
	"golang.org/x/sys/unix"
)

// wire is a veth pair between two namespaces: A sends, B receives.
type wire struct {
	pair       *netns.Pair
	macA, macB [6]byte
	ipA, ipB   netip.Addr
	ip6A, ip6B netip.Addr
}

func newWire(t testing.TB) *wire {
	t.Helper()
	p := netns.Setup(t, netns.Options{})
	w := &wire{pair: p, ipA: p.A.Addr4.Addr(), ipB: p.B.Addr4.Addr(), ip6A: p.A.Addr6.Addr(), ip6B: p.B.Addr6.Addr()}
	for _, h := range []struct {
		host netns.Host
		mac  *[6]byte
	}{{p.A, &w.macA}, {p.B, &w.macB}} {
		err := h.host.Run(func() error {
			ifc, err := net.InterfaceByName(h.host.Link)
			if err != nil {
				return err
			}
			copy(h.mac[:], ifc.HardwareAddr)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *wire) tx(t testing.TB, o TXOptions) *TX {
	t.Helper()
	var tx *TX
	open := func() error {
		return w.pair.A.Run(func() (err error) { tx, err = OpenTX(w.pair.A.Link, o); return err })
	}
	err := open()
	// The kernel frees a closed AF_XDP socket's hold on its queue from a
	// work queue (the buffer pool's deferred release), so a socket opened
	// right after another on the same queue was closed can find it still
	// busy for as long as the machine keeps that worker off the CPUs.
	for deadline := time.Now().Add(5 * time.Second); o.Mode == TXXDP && errors.Is(err, unix.EBUSY) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		err = open()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Close() })
	return tx
}

func (w *wire) rx(t testing.TB, o RXOptions) *RX {
	t.Helper()
	var rx *RX
	if err := w.pair.B.Run(func() (err error) { rx, err = OpenRX(w.pair.B.Link, o); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rx.Close() })
	return rx
}

// fromA is a filter passing only TCP and UDP frames with A's source MAC
// (the tests' frames, not the neighbour discovery A sends on its own),
// compiled by netpkt from steering rules.
func (w *wire) fromA(t testing.TB) []unix.SockFilter {
	tab := netpkt.NewTable()
	eth := verbsio.FlowETH{Val: verbsio.ETHFilter{Src: w.macA}, Mask: verbsio.ETHFilter{Src: verbsio.MAC{255, 255, 255, 255, 255, 255}}}
	for _, l4 := range []verbsio.FlowSpec{verbsio.FlowTCP{}, verbsio.FlowUDP{}} {
		a := verbsio.FlowAttr{Port: 1, Specs: []verbsio.FlowSpec{eth, l4}}
		if _, err := tab.Add(&a, 1); err != nil {
			t.Fatal(err)
		}
	}
	prog, mode := tab.Filter()
	if mode != netpkt.FilterExact {
		t.Fatalf("filter mode %s", mode)
	}
	return prog
}

type rxFrame struct {
	data   []byte // as on the wire (tag put back)
	ts     int64
	tsKind TSKind
	tagged bool
}

// collect reads frames until it has n or a second passes without any.
func collect(t testing.TB, rx *RX, n int) []rxFrame {
	t.Helper()
	var out []rxFrame
	deadline := time.Now().Add(5 * time.Second)
	idle := time.Now()
	for len(out) < n && time.Now().Before(deadline) && time.Since(idle) < time.Second {
		f, ok := rx.Next()
		if !ok {
			if _, err := rx.Wait(20 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			continue
		}
		idle = time.Now()
		b := make([]byte, len(f.Data)+netpkt.VLANLen)
		k := netpkt.InsertTag(b, f.Data, f.Tag)
		out = append(out, rxFrame{data: b[:k], ts: f.TS, tsKind: f.TSKind, tagged: f.Tag.Present})
	}
	return out
}

// softwareStamps keeps a receive socket open for the test, so the kernel
// keeps stamping frames on arrival (it turns that on from a work queue
// when the first socket asks, and off when the last closes), and waits
// until a probe frame comes stamped.
func (w *wire) softwareStamps(t testing.TB) {
	rx := w.rx(t, RXOptions{Version: RingV2})
	if err := rx.SetFilter(w.fromA(t)); err != nil {
		t.Fatal(err)
	}
	tx := w.tx(t, TXOptions{})
	probe := w.frames(t)[:1]
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		if _, err := tx.Send(probe); err != nil {
			t.Fatal(err)
		}
		if got := collect(t, rx, 1); len(got) == 1 && got[0].tsKind == TSSoftware {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("received frames carry no software timestamps after 2s")
}

func (w *wire) frames(t testing.TB) [][]byte {
	udp := netpkt.Headers{Dst: w.macB, Src: w.macA, SrcIP: w.ipA, DstIP: w.ipB, TOS: 0x28, Proto: netpkt.ProtoUDP, SrcPort: 4000, DstPort: 5000}
	vlan := udp
	vlan.VLAN = netpkt.Tag{Present: true, TCI: 5<<13 | 100}
	v6 := netpkt.Headers{Dst: w.macB, Src: w.macA, SrcIP: w.ip6A, DstIP: w.ip6B, TOS: 0xb8, FlowLabel: 0x54321, Proto: netpkt.ProtoTCP, SrcPort: 4000, DstPort: 5001, Seq: 77, TCPFlags: netpkt.TCPAck}
	vx := netpkt.Headers{Dst: w.macB, Src: w.macA, SrcIP: w.ipA, DstIP: w.ipB, Proto: netpkt.ProtoUDP, SrcPort: 49999, VNI: 42,
		Inner: &netpkt.Headers{Dst: [6]byte{2, 0, 0, 0, 0, 2}, Src: [6]byte{2, 0, 0, 0, 0, 1}, SrcIP: netip.MustParseAddr("192.168.7.1"), DstIP: netip.MustParseAddr("192.168.7.2"), Proto: netpkt.ProtoTCP, SrcPort: 1, DstPort: 2, TCPFlags: netpkt.TCPSyn}}
	var out [][]byte
	for i, h := range []netpkt.Headers{udp, vlan, v6, vx} {
		for j := range 4 {
			h.ID = uint16(100*i + j)
			f, err := h.Append(nil, bytes.Repeat([]byte{byte(i), byte(j)}, 20+10*j))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, f)
		}
	}
	return out
}

// TestRoundTrip sends frames of every shape from A with each transmit
// path and receives them on B with each ring: same bytes, same order,
// kernel timestamps; then tshark checks what crossed the wire.
func TestRoundTrip(t *testing.T) {
	w := newWire(t)
	want := w.frames(t)
	w.softwareStamps(t)
	var checked [][]byte
	for _, rv := range []RingVersion{RingV3, RingV2} {
		for _, mode := range []TXMode{TXSendmmsg, TXRing, TXXDP} {
			for _, bypass := range []bool{false, true} {
				if mode == TXXDP && bypass {
					continue // AF_XDP always bypasses the qdisc
				}
				name := fmt.Sprintf("rx=v%d/tx=%s/bypass=%v", rv, mode, bypass)
				t.Run(name, func(t *testing.T) {
					rx := w.rx(t, RXOptions{Version: rv})
					if err := rx.SetFilter(w.fromA(t)); err != nil {
						t.Fatal(err)
					}
					tx := w.tx(t, TXOptions{Mode: mode, QdiscBypass: bypass, Batch: 5})
					start := time.Now().UnixNano()
					if n, err := tx.Send(want); err != nil || n != len(want) {
						t.Fatalf("Send = %d, %v", n, err)
					}
					got := collect(t, rx, len(want))
					end := time.Now().UnixNano()
					if len(got) != len(want) {
						t.Fatalf("received %d frames, sent %d", len(got), len(want))
					}
					for i := range want {
						if !bytes.Equal(got[i].data, want[i]) {
							t.Fatalf("frame %d:\n got % x\nwant % x", i, got[i].data, want[i])
						}
						if got[i].tsKind != TSSoftware || got[i].ts < start || got[i].ts > end {
							t.Errorf("frame %d: %s timestamp %d outside [%d, %d]", i, got[i].tsKind, got[i].ts, start, end)
						}
					}
					if !got[4].tagged {
						t.Error("the kernel did not take the VLAN tag out of the frame")
					}
					if rx.Version() == RingV3 && len(checked) == 0 {
						for _, f := range got {
							checked = append(checked, f.data)
						}
					}
				})
			}
		}
	}
	rows := tshark.Fields(t, checked, "vlan.id", "ip.checksum.status", "tcp.checksum.status", "udp.checksum.status", "vxlan.vni", "ip.dsfield", "ipv6.flow")
	for i, row := range rows {
		want := []string{"", tshark.Good, "", tshark.Good, "", "0x28", ""}
		switch i / 4 {
		case 1:
			want[0] = "100"
		case 2:
			want = []string{"", "", tshark.Good, "", "", "", "0x054321"}
		case 3:
			want = []string{"", tshark.Good + ";" + tshark.Good, tshark.Good, tshark.NotPresent, "42", "0x00;0x00", ""}
		}
		if strings.Join(row, ",") != strings.Join(want, ",") {
			t.Errorf("frame %d: tshark %q, want %q", i, row, want)
		}
	}
}

// TestKernelFilter: the filter compiled from the rules runs in the kernel
// (which accepts it) and lets in exactly the frames the rules want,
// including a VLAN match on the tag the kernel took out of the frame.
func TestKernelFilter(t *testing.T) {
	w := newWire(t)
	base := netpkt.Headers{Dst: w.macB, Src: w.macA, SrcIP: w.ipA, DstIP: w.ipB, Proto: netpkt.ProtoUDP, SrcPort: 4000, DstPort: 5000}
	mk := func(tos uint8, vlan uint16, port uint16) []byte {
		h := base
		h.TOS, h.DstPort = tos, port
		if vlan != 0 {
			h.VLAN = netpkt.Tag{Present: true, TCI: vlan}
		}
		f, err := h.Append(nil, make([]byte, 30))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	frames := [][]byte{mk(0x28, 0, 1), mk(0, 0, 2), mk(0x28, 100, 3), mk(0, 200, 4), mk(0, 100, 5), mk(0x2b, 0, 6)}
	tests := []struct {
		name  string
		specs []verbsio.FlowSpec
		ports []int // destination ports that must arrive
	}{
		{"dscp 10", []verbsio.FlowSpec{verbsio.FlowIPv4{Val: verbsio.IPv4Filter{TOS: 0x28}, Mask: verbsio.IPv4Filter{TOS: 0xfc}}}, []int{1, 3, 6}},
		{"vlan 100", []verbsio.FlowSpec{verbsio.FlowETH{Val: verbsio.ETHFilter{VLANTag: 100}, Mask: verbsio.ETHFilter{VLANTag: 0xfff}}}, []int{3, 5}},
		{"port 4", []verbsio.FlowSpec{verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: 4}, Mask: verbsio.PortFilter{Dst: 0xffff}}}, []int{4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab := netpkt.NewTable()
			a := verbsio.FlowAttr{Port: 1, Specs: tc.specs}
			if _, err := tab.Add(&a, 1); err != nil {
				t.Fatal(err)
			}
			prog, _ := tab.Filter()
			rx := w.rx(t, RXOptions{Version: RingV2})
			if err := rx.SetFilter(prog); err != nil {
				t.Fatal(err)
			}
			tx := w.tx(t, TXOptions{})
			if _, err := tx.Send(frames); err != nil {
				t.Fatal(err)
			}
			got := collect(t, rx, len(tc.ports)+1) // one more: nothing else may come
			var ports []int
			for _, f := range got {
				var l netpkt.Layers
				netpkt.Parse(f.data, netpkt.Tag{}, &l)
				ports = append(ports, int(binary.BigEndian.Uint16(f.data[l.L4+2:])))
			}
			if fmt.Sprint(ports) != fmt.Sprint(tc.ports) {
				t.Errorf("received ports %v, want %v", ports, tc.ports)
			}
		})
	}
	// A filter past BPF_MAXINSNS falls back to testing headers only; the
	// kernel takes it and it still keeps TCP out when only UDP is steered.
	t.Run("many rules", func(t *testing.T) {
		tab := netpkt.NewTable()
		for p := range 1500 {
			a := verbsio.FlowAttr{Port: 1, Specs: []verbsio.FlowSpec{verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: uint16(p)}, Mask: verbsio.PortFilter{Dst: 0xffff}}}}
			tab.Add(&a, 1)
		}
		prog, mode := tab.Filter()
		if mode != netpkt.FilterLayers {
			t.Fatalf("mode %s", mode)
		}
		rx := w.rx(t, RXOptions{})
		if err := rx.SetFilter(prog); err != nil {
			t.Fatal(err)
		}
		h := base
		h.Proto = netpkt.ProtoTCP
		tcp, _ := h.Append(nil, make([]byte, 10))
		tx := w.tx(t, TXOptions{})
		tx.Send([][]byte{tcp, frames[1]})
		got := collect(t, rx, 2)
		if len(got) != 1 || !bytes.Equal(got[0].data, frames[1]) {
			t.Errorf("received %d frames, want the UDP one only", len(got))
		}
	})
}

// TestGSO sends 64 KiB TCP (IPv4, IPv6) and UDP sends through the
// kernel's GSO and cuts the same sends with netpkt.TSO: the frames on the
// wire are byte for byte the same, and tshark finds them valid and in
// order.
func TestGSO(t *testing.T) {
	w := newWire(t)
	// With checksum offload off the sending veth cannot take the large
	// frame: the kernel segments it in software before the wire.
	if err := w.pair.A.Run(func() error { return SetFeature(w.pair.A.Link, OffloadTxCsum, false) }); err != nil {
		t.Fatal(err)
	}
	var tso bool
	w.pair.A.Run(func() (err error) { tso, err = Feature(w.pair.A.Link, OffloadTSO); return err })
	if tso {
		t.Fatal("TSO is still on with checksum offload off")
	}
	tcp4 := netpkt.Headers{Dst: w.macB, Src: w.macA, SrcIP: w.ipA, DstIP: w.ipB, ID: 0xfff0, DF: true, Proto: netpkt.ProtoTCP, SrcPort: 4000, DstPort: 5000,
		Seq: 0xfffff000, Ack: 1, TCPFlags: netpkt.TCPAck | netpkt.TCPPsh | netpkt.TCPFin | netpkt.TCPCwr}
	tcp6 := netpkt.Headers{Dst: w.macB, Src: w.macA, SrcIP: w.ip6A, DstIP: w.ip6B, FlowLabel: 9, Proto: netpkt.ProtoTCP, SrcPort: 4000, DstPort: 5000, Seq: 5, TCPFlags: netpkt.TCPAck | netpkt.TCPPsh}
	udp4 := netpkt.Headers{Dst: w.macB, Src: w.macA, SrcIP: w.ipA, DstIP: w.ipB, ID: 7, Proto: netpkt.ProtoUDP, SrcPort: 4000, DstPort: 5000}
	for _, tc := range []struct {
		name    string
		h       netpkt.Headers
		payload int
		mss     int
	}{
		{"tcp4", tcp4, 65536 - 54 - 20, 1448},
		{"tcp6", tcp6, 60000, 1428},
		{"udp4", udp4, 30000, 1472},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := make([]byte, tc.payload)
			for i := range payload {
				payload[i] = byte(i * 13)
			}
			hdr, err := tc.h.AppendHeader(nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			var cut netpkt.TSO
			if err := cut.Init(hdr, len(payload), tc.mss); err != nil {
				t.Fatal(err)
			}
			var engine [][]byte
			for i := range cut.Frames() {
				off, n := cut.Chunk(i)
				f := make([]byte, len(hdr)+n)
				cut.Frame(f, i, payload[off:off+n])
				engine = append(engine, f)
			}
			rx := w.rx(t, RXOptions{})
			if err := rx.SetFilter(w.fromA(t)); err != nil {
				t.Fatal(err)
			}
			tx := w.tx(t, TXOptions{VnetHdr: true})
			frame := append(append([]byte(nil), hdr...), payload...)
			g, err := PrepareGSO(frame, tc.mss)
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.SendGSO(frame, g); err != nil {
				if tc.name == "udp4" && errors.Is(err, unix.EINVAL) {
					t.Skipf("this kernel takes no UDP_L4 GSO from packet sockets: %v", err)
				}
				t.Fatal(err)
			}
			got := collect(t, rx, len(engine)+1)
			if len(got) != len(engine) {
				t.Fatalf("the kernel sent %d segments, the engine cut %d", len(got), len(engine))
			}
			var wire [][]byte
			for i := range got {
				wire = append(wire, got[i].data)
				if !bytes.Equal(got[i].data, engine[i]) {
					t.Errorf("segment %d differs:\nkernel % x\nengine % x", i, head(got[i].data), head(engine[i]))
				}
			}
			fields := []string{"ip.checksum.status", "tcp.checksum.status", "udp.checksum.status", "tcp.seq_raw", "ip.id"}
			rows := tshark.Fields(t, wire, fields...)
			seq := tc.h.Seq
			for i, row := range rows {
				if tc.h.SrcIP.Is4() && (row[0] != tshark.Good || row[4] != fmt.Sprintf("0x%04x", tc.h.ID+uint16(i))) {
					t.Errorf("segment %d: ip checksum %s, id %s", i, row[0], row[4])
				}
				if tc.h.Proto == netpkt.ProtoTCP {
					if row[1] != tshark.Good || row[3] != strconv.FormatUint(uint64(seq), 10) {
						t.Errorf("segment %d: tcp checksum %s, seq %s (want %d)", i, row[1], row[3], seq)
					}
					_, n := cut.Chunk(i)
					seq += uint32(n)
				} else if row[2] != tshark.Good {
					t.Errorf("segment %d: udp checksum %s", i, row[2])
				}
			}
		})
	}
}

func head(b []byte) []byte { return b[:min(len(b), 80)] }

// TestNoCapNetRaw drops CAP_NET_RAW from one thread: opening a socket
// fails with a one-line error that names the capability.
func TestNoCapNetRaw(t *testing.T) {
	netns.Skip(t)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the thread is discarded, not unlocked: it lost a capability
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		data[0].Effective &^= 1 << unix.CAP_NET_RAW
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		_, rxErr := OpenRX("lo", RXOptions{})
		_, txErr := OpenTX("lo", TXOptions{})
		done <- errors.Join(check(rxErr), check(txErr))
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func check(err error) error {
	if !errors.Is(err, ErrNoCapNetRaw) {
		return fmt.Errorf("error %v does not wrap ErrNoCapNetRaw", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "CAP_NET_RAW") || strings.Contains(msg, "\n") {
		return fmt.Errorf("error %q is not one line naming CAP_NET_RAW", msg)
	}
	return nil
}

func TestOptionErrors(t *testing.T) {
	netns.Skip(t)
	if _, err := OpenRX("lo", RXOptions{BlockSize: 1000}); err == nil || !strings.Contains(err.Error(), "page size") {
		t.Errorf("odd block size: %v", err)
	}
	if _, err := OpenRX("lo", RXOptions{Version: 7}); err == nil {
		t.Error("ring version 7 accepted")
	}
	if _, err := OpenTX("no-such-dev0", TXOptions{}); err == nil {
		t.Error("a missing device was accepted")
	}
	tx, err := OpenTX("lo", TXOptions{Mode: TXRing})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if _, err := tx.Send([][]byte{make([]byte, 3000)}); !errors.Is(err, ErrFrameSize) {
		t.Errorf("oversized frame: %v, want ErrFrameSize", err)
	}
	if err := tx.SendGSO(make([]byte, 100), GSO{}); !errors.Is(err, ErrNoVnetHdr) {
		t.Errorf("GSO without VnetHdr: %v", err)
	}
	if _, err := OpenTX("lo", TXOptions{Mode: TXXDP, Frames: 1000}); err == nil || !strings.Contains(err.Error(), "power-of-two") {
		t.Errorf("AF_XDP with 1000 frames: %v", err)
	}
	if _, err := OpenTX("lo", TXOptions{Mode: TXXDP, VnetHdr: true}); err == nil {
		t.Error("AF_XDP with a virtio-net header was accepted")
	}
	x, err := OpenTX("lo", TXOptions{Mode: TXXDP})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, err := x.Send([][]byte{make([]byte, 3000)}); !errors.Is(err, ErrFrameSize) {
		t.Errorf("oversized AF_XDP frame: %v, want ErrFrameSize", err)
	}
}

// TestNoAllocs: sending and receiving do not allocate.
func TestNoAllocs(t *testing.T) {
	w := newWire(t)
	f := w.frames(t)[0]
	batch := [][]byte{f, f, f, f}
	for _, mode := range []TXMode{TXSendmmsg, TXRing, TXXDP} {
		for _, rv := range []RingVersion{RingV2, RingV3} {
			rx := w.rx(t, RXOptions{Version: rv})
			if err := rx.SetFilter(w.fromA(t)); err != nil {
				t.Fatal(err)
			}
			tx := w.tx(t, TXOptions{Mode: mode})
			if n := testing.AllocsPerRun(50, func() { tx.Send(batch) }); n != 0 {
				t.Errorf("%s: Send allocates %v times", mode, n)
			}
			if n := testing.AllocsPerRun(50, func() { tx.Send(batch[:1]) }); n != 0 {
				t.Errorf("%s: Send of one frame allocates %v times", mode, n)
			}
			if got := collect(t, rx, 60); len(got) < 60 {
				t.Fatalf("v%d: received %d frames", rv, len(got))
			}
			tx.Send(batch)
			tx.Send(batch)
			time.Sleep(20 * time.Millisecond) // v3: let the block timer hand them over
			if n := testing.AllocsPerRun(5, func() { rx.Next() }); n != 0 {
				t.Errorf("v%d: Next allocates %v times", rv, n)
			}
			tx.Close() // one AF_XDP socket per queue: the next would get EBUSY
		}
	}
}

// TestXDPQueueExclusive: a device queue takes one AF_XDP socket; a second
// (in any process) gets EBUSY, which the engine must answer by sending
// through a packet socket instead.
func TestXDPQueueExclusive(t *testing.T) {
	w := newWire(t)
	w.tx(t, TXOptions{Mode: TXXDP})
	err := w.pair.A.Run(func() error { _, err := OpenTX(w.pair.A.Link, TXOptions{Mode: TXXDP}); return err })
	if !errors.Is(err, unix.EBUSY) {
		t.Fatalf("second AF_XDP socket on the queue: %v, want EBUSY", err)
	}
}

// TestFrameSize: frames longer than the MTU and the Ethernet header (a tag
// more when tagged) or shorter than the header are refused before any is
// sent, in every mode (AF_XDP and the TX ring would otherwise drop them
// silently or leave them in the ring).
func TestFrameSize(t *testing.T) {
	w := newWire(t)
	rx := w.rx(t, RXOptions{Version: RingV2})
	if err := rx.SetFilter(w.fromA(t)); err != nil {
		t.Fatal(err)
	}
	mk := func(n int, tagged bool) []byte {
		h := netpkt.Headers{Dst: w.macB, Src: w.macA, SrcIP: w.ipA, DstIP: w.ipB, Proto: netpkt.ProtoUDP, SrcPort: 1, DstPort: 2}
		if tagged {
			h.VLAN = netpkt.Tag{Present: true, TCI: 7}
		}
		f, err := h.Append(nil, make([]byte, n-h.Len()))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	full, fullTagged := mk(1514, false), mk(1518, true)
	for _, mode := range []TXMode{TXSendmmsg, TXRing, TXXDP} {
		tx := w.tx(t, TXOptions{Mode: mode})
		for _, bad := range [][]byte{mk(1515, false), mk(1519, true), full[:13]} {
			if n, err := tx.Send([][]byte{full, bad}); n != 0 || !errors.Is(err, ErrFrameSize) {
				t.Errorf("%s: a %d-byte frame: Send = %d, %v; want 0, ErrFrameSize", mode, len(bad), n, err)
			}
		}
		if n, err := tx.Send([][]byte{full, fullTagged}); n != 2 || err != nil {
			t.Fatalf("%s: MTU-sized frames: %d, %v", mode, n, err)
		}
		if got := collect(t, rx, 3); len(got) != 2 {
			t.Errorf("%s: received %d frames, want the 2 that fit", mode, len(got))
		}
		tx.Close()
	}
	tx := w.tx(t, TXOptions{VnetHdr: true})
	big := append(mk(1514, false), make([]byte, 5000)...)
	if err := tx.SendGSO(big, GSO{Type: unix.VIRTIO_NET_HDR_GSO_UDP_L4, HdrLen: 42, Size: 1473}); !errors.Is(err, ErrFrameSize) {
		t.Errorf("GSO segments above the MTU: %v", err)
	}
}

// TestDriver reads the driver of a veth end, and fails for a device that
// does not exist.
func TestDriver(t *testing.T) {
	w := newWire(t)
	err := w.pair.A.Run(func() error {
		if got, err := Driver(w.pair.A.Link); err != nil || got != "veth" {
			return fmt.Errorf("Driver(%s) = %q, %v; want veth", w.pair.A.Link, got, err)
		}
		if _, err := Driver("rperf-none0"); err == nil {
			return fmt.Errorf("Driver of a missing device succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGSOBypassRefused: past the qdisc (PACKET_QDISC_BYPASS) the kernel
// refuses a GSO send on veth with ENOBUFS every time while the socket
// reports room; SendGSO must give up with an error after its bounded
// retries, not spin (it did, until the raw fabric's bypass mode hung).
func TestGSOBypassRefused(t *testing.T) {
	w := newWire(t)
	if err := w.pair.A.Run(func() error { return SetFeature(w.pair.A.Link, OffloadTxCsum, false) }); err != nil {
		t.Fatal(err)
	}
	tx := w.tx(t, TXOptions{VnetHdr: true, QdiscBypass: true})
	h := netpkt.Headers{Dst: w.macB, Src: w.macA, SrcIP: w.ipA, DstIP: w.ipB, DF: true, Proto: netpkt.ProtoTCP, SrcPort: 4000, DstPort: 5000, Seq: 1, TCPFlags: netpkt.TCPAck}
	frame, err := h.Append(nil, make([]byte, 30000))
	if err != nil {
		t.Fatal(err)
	}
	g, err := PrepareGSO(frame, 1448)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = tx.SendGSO(frame, g)
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("SendGSO took %v", el)
	}
	if err == nil {
		t.Skip("this kernel takes GSO sends past the qdisc on veth: the refusal this test checks does not happen")
	}
	if !strings.Contains(err.Error(), "refused the send") {
		t.Errorf("SendGSO past the qdisc: %v; want the bounded-retry error", err)
	}
}
