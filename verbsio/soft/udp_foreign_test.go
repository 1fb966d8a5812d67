package soft_test

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/psn"
	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// foreign sends hand-built RoCEv2 packets to one side of a udp_lo pair
// from a socket of its own, as another RoCEv2 stack (Linux rxe) would.
type foreign struct {
	t    *testing.T
	conn *net.UDPConn
	to   *net.UDPAddr
	from netip.AddrPort
}

func newForeign(t *testing.T, src string, side *verbstest.Side) *foreign {
	t.Helper()
	ip := net.ParseIP(src)
	network, to := "udp4", net.IPv4(127, 0, 0, 1)
	if ip.To4() == nil {
		network, to = "udp6", net.IPv6loopback
	}
	conn, err := net.ListenUDP(network, &net.UDPAddr{IP: ip})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if network == "udp6" {
		// As Linux rxe: UDP checksum 0 over IPv6 too (RFC 6936).
		setZeroChecksum6(t, conn)
	}
	port := int(side.LID)
	if port == 0 {
		port = soft.RoCEPort
	}
	from := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	return &foreign{t: t, conn: conn, to: &net.UDPAddr{IP: to, Port: port},
		from: netip.AddrPortFrom(from.Addr().Unmap(), from.Port())}
}

// setZeroChecksum6 makes an IPv6 UDP socket send with UDP checksum 0
// (UDP_NO_CHECK6_TX).
func setZeroChecksum6(t *testing.T, conn *net.UDPConn) {
	t.Helper()
	rc, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_NO_CHECK6_TX, 1)
	}); err != nil || serr != nil {
		t.Fatalf("UDP_NO_CHECK6_TX: %v %v", err, serr)
	}
}

// send encodes p, seals its ICRC for this socket's path (unless bad) and
// sends it.
func (f *foreign) send(p roce.Packet, badICRC bool) {
	f.t.Helper()
	pkt := make([]byte, p.Len())
	if _, err := p.Encode(pkt); err != nil {
		f.t.Fatal(err)
	}
	var err error
	if dst := f.to.AddrPort(); f.from.Addr().Is4() {
		path := roce.IPv4Path{Src: f.from.Addr().As4(), Dst: dst.Addr().Unmap().As4(), SrcPort: f.from.Port(),
			DstPort: dst.Port(), DontFragment: true}
		err = path.Seal(0, pkt)
	} else {
		path := roce.IPv6Path{Src: f.from.Addr().As16(), Dst: dst.Addr().As16(), SrcPort: f.from.Port(), DstPort: dst.Port()}
		err = path.Seal(pkt)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	if badICRC {
		pkt[len(pkt)-1] ^= 0xff
	}
	if _, err := f.conn.WriteToUDP(pkt, f.to); err != nil {
		f.t.Fatal(err)
	}
}

// counters polls side until the counter name reaches want (or a second
// passes) and returns the counters.
func waitCounter(t *testing.T, side *verbstest.Side, name string, want uint64) map[string]uint64 {
	t.Helper()
	wcs := make([]verbsio.WC, 4)
	deadline := time.Now().Add(time.Second)
	for {
		side.CQ.Poll(wcs[:0])
		c := side.Ctx.Impl().(*soft.Context).Counters()
		if c[name] >= want || time.Now().After(deadline) {
			return c
		}
	}
}

// TestForeignPackets feeds a udp_lo QP packets from another stack's
// socket. A SEND from the peer's address but another source port (rxe
// sends from a port of its flow label, not from 4791) is received; a SEND
// from another address is dropped as wrong_peer, and packets with a bad
// ICRC, an unknown QPN, a bad P_Key or a malformed header are dropped and
// counted, the QP unharmed.
func TestForeignPackets(t *testing.T) {
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, NoProgress: true})
	b := p.B
	for i := 0; i < 4; i++ {
		if _, err := b.QP.PostRecv([]verbsio.RecvWR{{ID: uint64(i), SGL: []verbsio.SGE{b.MR.SGE(i*64, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	ePSN := b.Endpoint().PSN // what A starts with, so what B expects
	send := func(n uint32, payload string) roce.Packet {
		return roce.Packet{BTH: roce.BTH{Opcode: roce.RCSendOnly, PKey: roce.DefaultPKey, DestQP: b.QP.QPN(), AckReq: true, PSN: psn.PSN(n)},
			Payload: []byte(payload)}
	}
	before := b.Ctx.Impl().(*soft.Context).Counters()

	// From another address: dropped.
	other := newForeign(t, "127.0.0.2", b)
	other.send(send(ePSN, "intruder"), false)
	c := waitCounter(t, b, "wrong_peer", before["wrong_peer"]+1)
	if c["wrong_peer"] != before["wrong_peer"]+1 {
		t.Fatalf("a SEND from 127.0.0.2 to a QP connected to 127.0.0.1: wrong_peer %d -> %d", before["wrong_peer"], c["wrong_peer"])
	}

	// Damaged packets from the right address: dropped and counted.
	rx := newForeign(t, "127.0.0.1", b)
	bad := send(ePSN, "bad icrc")
	rx.send(bad, true)
	unknown := send(ePSN, "unknown qp")
	unknown.BTH.DestQP ^= 0x5a5a
	rx.send(unknown, false)
	pkey := send(ePSN, "bad pkey")
	pkey.BTH.PKey = 0x1234
	rx.send(pkey, false)
	c = waitCounter(t, b, "bad_pkey", before["bad_pkey"]+1)
	for _, name := range []string{"icrc_errors", "unknown_qp", "bad_pkey"} {
		if c[name] != before[name]+1 {
			t.Errorf("%s %d -> %d, want one more", name, before[name], c[name])
		}
	}
	if _, err := rx.conn.WriteToUDP([]byte{1, 2, 3}, rx.to); err != nil { // shorter than a BTH
		t.Fatal(err)
	}
	c = waitCounter(t, b, "malformed", before["malformed"]+1)
	if c["malformed"] != before["malformed"]+1 {
		t.Errorf("malformed %d -> %d for a 3-byte datagram", before["malformed"], c["malformed"])
	}

	// The SEND from another source port of the peer's address lands.
	if rx.from.Port() == p.A.LID {
		t.Fatal("the test socket got the peer's own port")
	}
	rx.send(send(ePSN, "hello from rxe"), false)
	waitRecv(t, b, rx, "hello from rxe")
	if a, err := b.QP.Query(); err != nil || a.State != verbsio.QPStateRTS {
		t.Fatalf("the QP is in %v (%v), want RTS", a.State, err)
	}
}

// waitRecv waits up to two seconds for side's receive completion of the
// SEND of want from f.
func waitRecv(t *testing.T, side *verbstest.Side, f *foreign, want string) {
	t.Helper()
	wcs := make([]verbsio.WC, 4)
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, err := side.CQ.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			wc := wcs[0]
			if wc.Status != verbsio.StatusSuccess || !wc.Opcode.IsRecv() || int(wc.ByteLen) != len(want) {
				t.Fatalf("completion %+v, want a %d-byte receive", wc, len(want))
			}
			if got := string(side.Buf[:len(want)]); got != want {
				t.Fatalf("received %q, want %q", got, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no receive completion for a SEND from %v; counters %v", f.from, side.Ctx.Impl().(*soft.Context).Counters())
		}
	}
}

// TestForeignPacketsIPv6 connects a udp_lo pair over its ::1 GID and
// feeds one side a SEND from another socket on ::1 that, like Linux rxe,
// leaves the UDP checksum 0: it must land. Before the engine's IPv6
// sockets set UDP_NO_CHECK6_RX, the kernel dropped every such datagram
// and rperf received nothing from rxe over an IPv6 GID.
func TestForeignPacketsIPv6(t *testing.T) {
	dev, err := verbsio.OpenWith("udp_lo", verbsio.OpenOptions{QueryOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := dev.QueryGIDTable(1)
	dev.Close()
	if err != nil {
		t.Fatal(err)
	}
	sgid := -1
	for _, g := range tbl {
		if g.GID.Addr() == netip.IPv6Loopback() {
			sgid = g.Index
		}
	}
	if sgid < 0 {
		t.Fatalf("udp_lo has no ::1 GID: %v", tbl)
	}
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, NoProgress: true,
		Connect: verbsio.ConnectOptions{SGIDIndex: uint8(sgid)}})
	b := p.B
	if _, err := b.QP.PostRecv([]verbsio.RecvWR{{ID: 1, SGL: []verbsio.SGE{b.MR.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	rx := newForeign(t, "::1", b)
	msg := "hello from rxe over IPv6"
	rx.send(roce.Packet{BTH: roce.BTH{Opcode: roce.RCSendOnly, PKey: roce.DefaultPKey, DestQP: b.QP.QPN(), AckReq: true,
		PSN: psn.PSN(b.Endpoint().PSN)}, Payload: []byte(msg)}, false)
	waitRecv(t, b, rx, msg)
	if c := b.Ctx.Impl().(*soft.Context).Counters(); c["icrc_errors"] != 0 {
		t.Errorf("icrc_errors %d for a packet sealed for its IPv6 path", c["icrc_errors"])
	}
}

// TestForeignRCResponder drives a udp_lo RC responder with hand-built
// requests from its peer's address, each RC rule on purpose: a PSN past
// the expected one is NAKed (sequence error) and not executed; a FETCH_ADD
// applies once, its duplicate is answered from the cache and not applied
// again; a duplicate READ is executed again (counted as a duplicate, the
// QP unharmed); a SEND with no receive posted gets an RNR NAK.
func TestForeignRCResponder(t *testing.T) {
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, NoProgress: true})
	b := p.B
	rx := newForeign(t, "127.0.0.1", b)
	e := psn.PSN(b.Endpoint().PSN)
	base := b.Ctx.Impl().(*soft.Context).Counters()
	delta := func(name string) uint64 {
		return b.Ctx.Impl().(*soft.Context).Counters()[name] - base[name]
	}
	hdr := func(op roce.Opcode, n psn.PSN) roce.BTH {
		return roce.BTH{Opcode: op, PKey: roce.DefaultPKey, DestQP: b.QP.QPN(), AckReq: true, PSN: n}
	}

	// A sequence error: the WRITE at e+5 is NAKed and its data not placed.
	b.Buf[100] = 0
	rx.send(roce.Packet{BTH: hdr(roce.RCWriteOnly, e.Add(5)), RETH: roce.RETH{VA: b.MR.Addr() + 100, RKey: b.MR.RKey(), DMALen: 4},
		Payload: []byte{1, 2, 3, 4}}, false)
	waitCounter(t, b, "nak_sent", base["nak_sent"]+1)
	if delta("out_of_seq_request") != 1 || delta("nak_sent") != 1 || b.Buf[100] != 0 {
		t.Errorf("WRITE past a gap: out_of_seq %d, nak_sent %d, byte %d; want 1, 1, untouched",
			delta("out_of_seq_request"), delta("nak_sent"), b.Buf[100])
	}

	// FETCH_ADD at e, then the same packet again.
	word := b.MR.Addr() + 512
	b.Buf[512] = 40
	fa := roce.Packet{BTH: hdr(roce.RCFetchAdd, e), AtomicETH: roce.AtomicETH{VA: word, RKey: b.MR.RKey(), SwapAdd: 2}}
	rx.send(fa, false)
	waitCounter(t, b, "rcvd_pkts", base["rcvd_pkts"]+2)
	rx.send(fa, false)
	waitCounter(t, b, "duplicate_request", base["duplicate_request"]+1)
	if b.Buf[512] != 42 || delta("duplicate_request") != 1 {
		t.Errorf("FETCH_ADD 2 to 40, then its duplicate: the word is %d, duplicates %d; want 42 and 1", b.Buf[512], delta("duplicate_request"))
	}

	// READ at e+1 (one response packet), then again.
	rd := roce.Packet{BTH: hdr(roce.RCReadRequest, e.Add(1)), RETH: roce.RETH{VA: b.MR.Addr(), RKey: b.MR.RKey(), DMALen: 64}}
	rx.send(rd, false)
	waitCounter(t, b, "sent_pkts", base["sent_pkts"]+4) // NAK, two atomic ACKs (the duplicate's from the cache), one READ response
	sent := delta("sent_pkts")
	rx.send(rd, false)
	waitCounter(t, b, "duplicate_request", base["duplicate_request"]+2)
	waitCounter(t, b, "sent_pkts", base["sent_pkts"]+sent+1)
	if delta("duplicate_request") != 2 || delta("sent_pkts") != sent+1 {
		t.Errorf("a duplicate READ: duplicates %d, packets sent %d then %d; want 2 and one more response", delta("duplicate_request"), sent, delta("sent_pkts"))
	}

	// A SEND at e+2 with no receive posted: RNR NAK.
	rx.send(roce.Packet{BTH: hdr(roce.RCSendOnly, e.Add(2)), Payload: []byte("no buffer")}, false)
	waitCounter(t, b, "rnr_nak_sent", base["rnr_nak_sent"]+1)
	if delta("rnr_nak_sent") != 1 {
		t.Errorf("SEND without a receive: rnr_nak_sent %d, want 1", delta("rnr_nak_sent"))
	}
	if a, err := b.QP.Query(); err != nil || a.State != verbsio.QPStateRTS {
		t.Fatalf("the QP is in %v (%v), want RTS", a.State, err)
	}
}

// TestForeignResponderReadLimit connects a udp_lo requester to a
// hand-driven responder (a plain socket) that offers 2 outstanding READs
// (max_dest_rd_atomic, perftest's -o): of 6 READs posted, exactly 2 go on
// the wire; when the responder answers the first, exactly one more goes,
// and its completion carries the responder's bytes.
func TestForeignResponderReadLimit(t *testing.T) {
	a := verbstest.NewSide(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}, NoProgress: true})
	r, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rport := r.LocalAddr().(*net.UDPAddr).Port
	const peerQPN, outReads = 0x4242, 2
	remote := verbsio.Endpoint{QPN: peerQPN, GID: a.GID, LID: uint16(rport), PSN: 0x100, OutReads: outReads, RKey: 0x77, VAddr: 0x10000}
	// A long ACK timeout (4.3 s): nothing is resent while the test waits.
	if err := a.QP.Connect(a.Endpoint(), remote, verbsio.ConnectOptions{Timeout: 20}); err != nil {
		t.Fatal(err)
	}
	wrs := make([]verbsio.SendWR, 6)
	for i := range wrs {
		wrs[i] = verbsio.SendWR{ID: uint64(i), Opcode: verbsio.OpRDMARead, Flags: verbsio.SendSignaled,
			SGL: []verbsio.SGE{a.MR.SGE(i*64, 64)}, Remote: verbsio.RemoteAddr{Addr: remote.VAddr + uint64(i*64), RKey: remote.RKey}}
	}
	if _, err := a.QP.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	// requests drives A for 100 ms and returns the READ requests that
	// reached the responder meanwhile.
	buf := make([]byte, 2048)
	wcs := make([]verbsio.WC, 8)
	var done []verbsio.WC
	requests := func() []roce.Packet {
		var got []roce.Packet
		end := time.Now().Add(100 * time.Millisecond)
		for time.Now().Before(end) {
			n, _ := a.CQ.Poll(wcs)
			done = append(done, wcs[:n]...)
			r.SetReadDeadline(time.Now().Add(time.Millisecond))
			m, _, err := r.ReadFromUDPAddrPort(buf)
			if err != nil {
				continue
			}
			var p roce.Packet
			if err := p.Decode(buf[:m]); err != nil {
				t.Fatalf("the requester sent an undecodable packet: %v", err)
			}
			if p.BTH.Opcode != roce.RCReadRequest || p.BTH.DestQP != peerQPN {
				t.Fatalf("the requester sent %s to QP %#x", p.BTH.Opcode, p.BTH.DestQP)
			}
			p.Payload = nil
			got = append(got, p)
		}
		return got
	}
	first := requests()
	if len(first) != outReads {
		t.Fatalf("%d READ requests on the wire with max_rd_atomic %d, want %d", len(first), outReads, outReads)
	}
	// Answer the first READ: one response packet with 64 bytes.
	req := first[0]
	data := bytes.Repeat([]byte{0xab}, 64)
	resp := roce.Packet{BTH: roce.BTH{Opcode: roce.RCReadResponseOnly, PKey: roce.DefaultPKey, DestQP: a.QP.QPN(), PSN: req.BTH.PSN},
		AETH: roce.AETH{Syndrome: roce.ACKSyndrome(0x1f), MSN: 1}, Payload: data}
	pkt := make([]byte, resp.Len())
	if _, err := resp.Encode(pkt); err != nil {
		t.Fatal(err)
	}
	path := roce.IPv4Path{Src: [4]byte{127, 0, 0, 1}, Dst: [4]byte{127, 0, 0, 1}, SrcPort: uint16(rport), DstPort: a.LID, DontFragment: true}
	if err := path.Seal(0, pkt); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteToUDP(pkt, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(a.LID)}); err != nil {
		t.Fatal(err)
	}
	next := requests()
	if len(next) != 1 {
		t.Fatalf("after one READ was answered, %d more requests went out, want 1", len(next))
	}
	if len(done) != 1 || done[0].ID != 0 || done[0].Status != verbsio.StatusSuccess || done[0].ByteLen != 64 {
		t.Fatalf("completions %+v, want READ 0 done with 64 bytes", done)
	}
	if !bytes.Equal(a.Buf[:64], data) {
		t.Fatal("the READ's buffer does not hold the responder's bytes")
	}
	if next[0].RETH.VA != remote.VAddr+2*64 {
		t.Errorf("the third request reads %#x, want the third WR's %#x", next[0].RETH.VA, remote.VAddr+2*64)
	}
}
