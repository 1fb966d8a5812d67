package soft_test

import (
	"encoding/binary"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
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
	tv := unix.Timeval{Usec: 200_000}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	t.Cleanup(func() { unix.Close(fd) })
	return &capture{fd: fd}
}

// frames reads outgoing frames until the wire is quiet for 200 ms.
func (c *capture) frames() [][]byte {
	var out [][]byte
	buf := make([]byte, 1<<16)
	for {
		n, from, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			return out
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			out = append(out, append([]byte(nil), buf[:n]...))
		}
	}
}

// TestWireICRC runs traffic of every kind over the loopback device and
// checks each packet as the kernel actually sent it: it decodes as RoCEv2
// and its ICRC verifies against the real IP and UDP headers (the IP
// identification included, which the engine must predict).
func TestWireICRC(t *testing.T) {
	cap := openCapture(t, "lo")
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, BufSize: 1 << 16})
	ports := map[uint16]bool{p.A.LID: true, p.B.LID: true}
	remote := verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}
	wrs := []verbsio.SendWR{
		{ID: 1, Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{p.A.MR.SGE(0, 10000)}, Remote: remote},
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
	if wc := verbstest.PollOne(t, p.A.CQ); wc.Status != verbsio.StatusSuccess || wc.ID != 6 {
		t.Fatalf("completion %+v", wc)
	}
	time.Sleep(50 * time.Millisecond)
	seen := map[roce.Opcode]int{}
	checked := 0
	for _, f := range cap.frames() {
		if len(f) < 14+20+8 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
			continue
		}
		ip := f[14:]
		ihl := int(ip[0]&0xf) * 4
		if ip[9] != unix.IPPROTO_UDP || ihl != 20 {
			continue
		}
		udp := ip[ihl:]
		if !ports[binary.BigEndian.Uint16(udp[2:])] || !ports[binary.BigEndian.Uint16(udp[0:])] {
			continue
		}
		pkt := udp[8:binary.BigEndian.Uint16(udp[4:])]
		var rp roce.Packet
		if err := rp.Decode(pkt); err != nil {
			t.Errorf("packet %d does not decode: %v", checked, err)
			continue
		}
		crc, err := roce.ICRCRaw(ip[:ihl], udp[:8], pkt)
		if err != nil || crc != roce.StoredICRC(pkt) {
			t.Errorf("%s PSN %d: ICRC %08x, the real headers give %08x (IP id %d)", rp.BTH.Opcode, rp.BTH.PSN, roce.StoredICRC(pkt), crc, binary.BigEndian.Uint16(ip[4:]))
		}
		if ip[6]&0x40 == 0 {
			t.Errorf("%s: DF not set", rp.BTH.Opcode)
		}
		seen[rp.BTH.Opcode]++
		checked++
	}
	for _, op := range []roce.Opcode{roce.RCWriteFirst, roce.RCWriteMiddle, roce.RCWriteLast, roce.RCWriteLastImm, roce.RCSendFirst, roce.RCSendMiddle,
		roce.RCSendLast, roce.RCReadRequest, roce.RCReadResponseFirst, roce.RCReadResponseLast, roce.RCFetchAdd,
		roce.RCCompareSwap, roce.RCAtomicAck, roce.RCAck} {
		if seen[op] == 0 {
			t.Errorf("no %s packet seen on the wire (saw %v)", op, seen)
		}
	}
	t.Logf("%d packets verified: %v", checked, seen)
}
