package soft_test

import (
	"encoding/binary"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// capture is an AF_PACKET socket on one interface.
type capture struct{ fd int }

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openCapture(t *testing.T, ifname string) *capture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("capturing packets needs root (CAP_NET_RAW); run the tests as root to check the engine's packets on the wire")
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		t.Fatalf("AF_PACKET socket: %v", err)
	}
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 16<<20)
	// A virtio-net header before each frame says how a GSO super-packet
	// will be cut, so the test can check every segment as it will leave.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		t.Fatalf("PACKET_VNET_HDR: %v", err)
	}
	tv := unix.Timeval{Usec: 200_000}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	t.Cleanup(func() { unix.Close(fd) })
	return &capture{fd: fd}
}

// frame is a captured frame and, for a GSO super-packet, its segment size.
type frame struct {
	b       []byte
	gsoSize int
}

// frames reads outgoing frames until the wire is quiet for 200 ms.
func (c *capture) frames() []frame {
	var out []frame
	buf := make([]byte, 1<<17)
	for {
		n, from, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil || n < 10 {
			return out
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			gso := 0
			if buf[1] != 0 { // virtio_net_hdr.gso_type
				gso = int(binary.LittleEndian.Uint16(buf[4:]))
			}
			out = append(out, frame{b: append([]byte(nil), buf[10:n]...), gsoSize: gso})
		}
	}
}

// departures returns the kernel's send time of every outgoing RoCEv2 packet
// (GSO segments counted one by one) to UDP port dport on 127.0.0.1 that
// the capture holds, reading until the wire is quiet for 200 ms. The
// capture must have been opened with timestamps (stamp).
func (c *capture) departures(dport uint16) []time.Time {
	var out []time.Time
	buf := make([]byte, 1<<17)
	oob := make([]byte, 128)
	for {
		n, oobn, _, from, err := unix.Recvmsg(c.fd, buf, oob, 0)
		if err != nil || n < 10+14+20+8 {
			return out
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		if !ok || ll.Pkttype != unix.PACKET_OUTGOING {
			continue
		}
		f := frame{b: buf[10:n]}
		if buf[1] != 0 { // virtio_net_hdr.gso_type
			f.gsoSize = int(binary.LittleEndian.Uint16(buf[4:]))
		}
		if binary.BigEndian.Uint16(f.b[12:]) != 0x0800 || f.b[14+9] != unix.IPPROTO_UDP || binary.BigEndian.Uint16(f.b[14+20+2:]) != dport {
			continue
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) == 0 || msgs[0].Header.Type != unix.SO_TIMESTAMPNS || len(msgs[0].Data) < 16 {
			continue
		}
		at := time.Unix(int64(binary.LittleEndian.Uint64(msgs[0].Data)), int64(binary.LittleEndian.Uint64(msgs[0].Data[8:])))
		_, _, pkts := segments(f)
		for range pkts {
			out = append(out, at)
		}
	}
}

// stamp makes the kernel timestamp every captured frame (SO_TIMESTAMPNS),
// with room for a stream of them (64 MiB).
func (c *capture) stamp(t *testing.T) {
	t.Helper()
	if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		t.Fatalf("SO_TIMESTAMPNS: %v", err)
	}
	if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20); err != nil {
		t.Fatalf("SO_RCVBUFFORCE: %v", err)
	}
}

// keepUDPTo makes the kernel queue only the outgoing IPv4 UDP frames to
// the ports dports (a classic BPF filter), so other traffic on the
// interface (other tests) cannot fill the capture's buffer, and drops what
// the capture queued before.
func (c *capture) keepUDPTo(t *testing.T, dports ...uint16) {
	t.Helper()
	const (
		ldh, ldb, ldw = unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		ldhx          = unix.BPF_LD | unix.BPF_H | unix.BPF_IND
		ldxmsh        = unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH
		jeq, jset     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret           = unix.BPF_RET | unix.BPF_K
		pktType       = 0xfffff000 + 4 // SKF_AD_OFF + SKF_AD_PKTTYPE
	)
	n := uint8(len(dports))
	drop := 11 + n // the last instruction
	prog := []unix.SockFilter{
		{Code: ldh, K: 12},                             // 0: EtherType
		{Code: jeq, K: 0x0800, Jf: drop - 2},           // 1: IPv4, else drop
		{Code: ldb, K: 14 + 9},                         // 2: IP protocol
		{Code: jeq, K: unix.IPPROTO_UDP, Jf: drop - 4}, // 3: UDP, else drop
		{Code: ldh, K: 14 + 6},                         // 4: flags and fragment offset
		{Code: jset, K: 0x1fff, Jt: drop - 6},          // 5: a fragment: drop
		{Code: ldxmsh, K: 14},                          // 6: X = IP header length
		{Code: ldhx, K: 14 + 2},                        // 7: UDP destination port
	}
	for i, p := range dports { // 8..7+n: one of dports, else drop
		f := unix.SockFilter{Code: jeq, K: uint32(p), Jt: n - 1 - uint8(i)}
		if i == len(dports)-1 {
			f.Jf = 3
		}
		prog = append(prog, f)
	}
	prog = append(prog,
		unix.SockFilter{Code: ldw, K: pktType},                     // 8+n: packet type
		unix.SockFilter{Code: jeq, K: unix.PACKET_OUTGOING, Jf: 1}, // 9+n: outgoing, else drop
		unix.SockFilter{Code: ret, K: 1 << 18},                     // 10+n: keep
		unix.SockFilter{Code: ret, K: 0},                           // 11+n: drop
	)
	if err := unix.SetsockoptSockFprog(c.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		t.Fatalf("SO_ATTACH_FILTER: %v", err)
	}
	buf := make([]byte, 1<<17)
	for {
		if _, _, err := unix.Recvfrom(c.fd, buf, unix.MSG_DONTWAIT); err != nil {
			return
		}
	}
}

// segments cuts a captured IPv4/UDP frame into the datagrams the kernel
// sends: for a GSO super-packet, each segment with its own IP and UDP
// lengths and an IP identification counting up from the super-packet's.
func segments(f frame) (ips, udps, pkts [][]byte) {
	ip := f.b[14:]
	udp := ip[20:]
	payload := udp[8:binary.BigEndian.Uint16(udp[4:])]
	if f.gsoSize == 0 {
		return [][]byte{ip[:20]}, [][]byte{udp[:8]}, [][]byte{payload}
	}
	id := binary.BigEndian.Uint16(ip[4:])
	for i := 0; len(payload) > 0; i++ {
		n := min(f.gsoSize, len(payload))
		h := append([]byte(nil), ip[:20]...)
		binary.BigEndian.PutUint16(h[2:], uint16(28+n))
		binary.BigEndian.PutUint16(h[4:], id+uint16(i))
		u := append([]byte(nil), udp[:8]...)
		binary.BigEndian.PutUint16(u[4:], uint16(8+n))
		ips, udps, pkts = append(ips, h), append(udps, u), append(pkts, payload[:n])
		payload = payload[n:]
	}
	return ips, udps, pkts
}

// TestWireICRC runs traffic of every kind over the loopback device and
// checks each packet as the kernel actually sent it: it decodes as RoCEv2,
// its ICRC verifies against the real IP and UDP headers (the IP
// identification included, which the engine must predict), and it leaves
// from the flow's UDP source port.
func TestWireICRC(t *testing.T) {
	cap := openCapture(t, "lo")
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, BufSize: 1 << 16})
	// Only this pair's packets: other tests' traffic on lo overflowed the
	// capture's buffer under load, and B's answers went missing from it.
	cap.keepUDPTo(t, p.A.LID, p.B.LID)
	ports := map[uint16]bool{p.A.LID: true, p.B.LID: true}
	sport := roce.UDPSourcePort(0, p.A.QP.QPN(), p.B.QP.QPN())
	if sport != roce.UDPSourcePort(0, p.B.QP.QPN(), p.A.QP.QPN()) {
		t.Fatal("the flow's source port depends on the direction")
	}
	remote := verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}
	wrs := []verbsio.SendWR{
		{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 10000)}, Remote: remote},
		{ID: 2, Opcode: verbsio.OpRDMAWriteImm, Imm: 7, SGL: []verbsio.SGE{p.A.MR.SGE(0, 5000)}, Remote: remote},
		{ID: 3, Opcode: verbsio.OpSend, SGL: []verbsio.SGE{p.A.MR.SGE(0, 9000)}},
		{ID: 4, Opcode: verbsio.OpRDMARead, SGL: []verbsio.SGE{p.A.MR.SGE(20000, 9000)}, Remote: remote},
		{ID: 5, Opcode: verbsio.OpAtomicFetchAdd, SGL: []verbsio.SGE{p.A.MR.SGE(40000, 8)}, Remote: remote, Atomic: verbsio.AtomicArgs{CompareAdd: 1}},
		{ID: 6, Opcode: verbsio.OpAtomicCmpSwp, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(40008, 8)}, Remote: remote},
	}
	if _, err := p.B.QP.PostRecv([]verbsio.RecvWR{{ID: 1, SGL: []verbsio.SGE{p.B.MR.SGE(0, 5000)}}, {ID: 2, SGL: []verbsio.SGE{p.B.MR.SGE(10000, 9000)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.A.QP.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, 6} {
		if wc := verbstest.PollOne(t, p.A.CQ); wc.Status != verbsio.StatusSuccess || wc.ID != id {
			t.Fatalf("completion %+v", wc)
		}
	}
	time.Sleep(50 * time.Millisecond)
	seen := map[roce.Opcode]int{}
	checked, gso := 0, 0
	for _, f := range cap.frames() {
		if len(f.b) < 14+20+8 || binary.BigEndian.Uint16(f.b[12:]) != 0x0800 {
			continue
		}
		ip := f.b[14:]
		if ip[9] != unix.IPPROTO_UDP || ip[0]&0xf != 5 {
			continue
		}
		udp := ip[20:]
		if !ports[binary.BigEndian.Uint16(udp[2:])] {
			continue
		}
		// Both directions send from the flow's port, as rxe does:
		// rdma_get_udp_sport of the QP numbers' flow label.
		if sp := binary.BigEndian.Uint16(udp[0:]); sp != sport {
			t.Errorf("a datagram to port %d from port %d, want the flow's source port %d", binary.BigEndian.Uint16(udp[2:]), sp, sport)
		}
		if f.gsoSize != 0 {
			gso++
		}
		ips, udps, pkts := segments(f)
		for i, pkt := range pkts {
			var rp roce.Packet
			if err := rp.Decode(pkt); err != nil {
				t.Errorf("packet %d does not decode: %v", checked, err)
				continue
			}
			crc, err := roce.ICRCRaw(ips[i], udps[i], pkt)
			if err != nil || crc != roce.StoredICRC(pkt) {
				t.Errorf("%s PSN %d: ICRC %08x, the real headers give %08x (IP id %d)", rp.BTH.Opcode, rp.BTH.PSN,
					roce.StoredICRC(pkt), crc, binary.BigEndian.Uint16(ips[i][4:]))
			}
			if ips[i][6]&0x40 == 0 {
				t.Errorf("%s: DF not set", rp.BTH.Opcode)
			}
			seen[rp.BTH.Opcode]++
			checked++
		}
	}
	for _, op := range []roce.Opcode{roce.RCWriteFirst, roce.RCWriteMiddle, roce.RCWriteLast, roce.RCWriteLastImm, roce.RCSendFirst, roce.RCSendMiddle,
		roce.RCSendLast, roce.RCReadRequest, roce.RCReadResponseFirst, roce.RCReadResponseLast, roce.RCFetchAdd,
		roce.RCCompareSwap, roce.RCAtomicAck, roce.RCAck} {
		if seen[op] == 0 {
			t.Errorf("no %s packet seen on the wire (saw %v)", op, seen)
		}
	}
	t.Logf("%d packets verified (%d GSO sends): %v", checked, gso, seen)
	for name, side := range map[string]*verbstest.Side{"A": p.A, "B": p.B} {
		c := side.Ctx.Impl().(*soft.Context).Counters()
		if c["icrc_errors"] != 0 || c["retransmitted"] != 0 || c["out_of_seq_request"] != 0 {
			t.Errorf("%s: a clean loopback run needed recovery: %v", name, c)
		}
	}
}
