package soft

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/rperf/rperf/internal/pcap"
	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"github.com/rperf/rperf/verbsio/soft/internal/udp"
)

// Fuzzing what the network sends the udp fabric: packets that pass the
// ICRC (anyone can compute it) from a spoofable source address, into the
// stateful responder and requester of connected RC and UC QPs and a UD QP.
//
// The rig is one udp_lo context with one QP of each type, connected to a
// peer that is the fuzzer: it never answers, and every packet the QPs
// receive is made by the harness from the input. Each input starts from
// fresh QPs (reset and reconnected) with work posted on them (RDMA WRITE,
// READ, atomic and SEND requests waiting for their answers, receives
// waiting for messages), then feeds its packets straight to the fabric's
// input (the socket's own path after recvmmsg) and drains the CQ. It
// checks that nothing panics; that no byte outside the registered regions
// changes (each has a guard page on either side) nor the sources of the
// posted requests (a response must land in the buffer of the request it
// answers); that every completion is of work posted in this input, each
// once, a receive never longer than its buffer; and that every datagram
// is counted: as received, or as malformed, an ICRC error, a bad P_Key or
// an unknown QP.
//
// Two regions: the local one (two pages, LOCAL_WRITE only) holds the
// requests' sources, the READ and atomic results and the receive
// buffers; the remote one (a page, every remote right) is where the
// fuzzer's RDMA WRITEs, READs and atomics are rebased.
//
// An input is a list of records: two control bytes, a big-endian length
// and that many bytes of transport packet (BTH through ICRC), as a
// capture holds them. Control byte 0: bits 0-1 the QP (RC, UC, UD, or the
// BTH's own destination QP), bit 2 send from another address than the
// peer's, bit 3 corrupt the ICRC, bit 4 keep the PSN (else it is
// rebased), bit 5 keep the RETH's and AtomicETH's rkey and address (else
// they are rebased), bit 6 keep the P_Key (else the default), bit 7 keep
// the Q_Key (else the UD QP's). Control byte 1 is the signed offset of a
// rebased PSN from the responder's expected PSN (requests) or the oldest
// PSN the requester waits on (responses). A rebased address is the remote
// region's start plus the address's low 16 bits, signed, modulo a page
// (from the guard page before the region to its end; the DMA length, as
// given, may run past it), with the region's rkey; with bit 16 of the
// address set, the local region's, whose key grants no remote access.
// Packets that do not decode are fed as they are (with a valid ICRC): the
// malformed path.

const (
	rigPage    = 4096
	rigPeerQPN = 0x0101 // the fuzzer's QPs, as the rig's QPs are connected to them
	rigQKey    = 0x11111111
)

// rig is the fixture every fuzz input runs on.
type rig struct {
	vctx *verbsio.Context
	c    *Context
	f    *udpFabric
	conn *udp.Conn
	cq   *verbsio.CQ
	pd   *verbsio.PD
	qps  [3]*verbsio.QP // RC, UC, UD
	ah   *verbsio.AH
	lbuf []byte // four pages: the local region is the middle two
	rbuf []byte // three pages: the remote region is the middle one
	lmr  *verbsio.MR
	rmr  *verbsio.MR
	sink *net.UDPConn // the peer's address: the QPs' packets end here
	peer netip.AddrPort
	path roce.IPv4Path // the fuzzer's packets to the rig (the ICRC's headers)

	sends, recvs map[[2]uint64]int // outstanding work of this input by (QPN, ID): capacity of a receive
	pkt          []byte
}

var (
	rigOnce sync.Once
	theRig  *rig
	rigErr  error
)

func getRig() (*rig, error) {
	rigOnce.Do(func() { theRig, rigErr = newRig() })
	return theRig, rigErr
}

func newRig() (*rig, error) {
	r := &rig{pkt: make([]byte, 1<<16)}
	sink, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	r.sink = sink
	r.peer = sink.LocalAddr().(*net.UDPAddr).AddrPort()
	if r.vctx, err = verbsio.OpenWith("udp_lo", verbsio.OpenOptions{UDPPort: -1}); err != nil {
		return nil, err
	}
	r.c = r.vctx.Impl().(*Context)
	r.f = r.c.fab.(*udpFabric)
	r.conn = r.f.conns[r.f.def]
	if !r.conn.LocalAddr().Addr().Unmap().Is4() {
		return nil, fmt.Errorf("udp_lo's default GID is %v, not IPv4", r.conn.LocalAddr())
	}
	local := r.conn.LocalAddr()
	r.path = roce.IPv4Path{Src: r.peer.Addr().As4(), Dst: local.Addr().Unmap().As4(), SrcPort: r.peer.Port(), DstPort: local.Port(), DontFragment: true}
	if r.pd, err = r.vctx.AllocPD(); err != nil {
		return nil, err
	}
	if r.cq, err = r.vctx.CreateCQ(256); err != nil {
		return nil, err
	}
	for i, typ := range []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD} {
		if r.qps[i], err = r.pd.CreateQP(verbsio.QPInitAttr{Type: typ, SendCQ: r.cq, RecvCQ: r.cq,
			Cap: verbsio.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2}}); err != nil {
			return nil, err
		}
	}
	if r.lbuf, err = r.vctx.Alloc(4 * rigPage); err != nil {
		return nil, err
	}
	if r.rbuf, err = r.vctx.Alloc(3 * rigPage); err != nil {
		return nil, err
	}
	if r.lmr, err = r.pd.RegMR(r.lbuf[rigPage:3*rigPage], verbsio.AccessLocalWrite); err != nil {
		return nil, err
	}
	all := verbsio.AccessLocalWrite | verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead | verbsio.AccessRemoteAtomic
	if r.rmr, err = r.pd.RegMR(r.rbuf[rigPage:2*rigPage], all); err != nil {
		return nil, err
	}
	r.ah, err = r.pd.CreateAH(verbsio.AHAttr{DLID: r.peer.Port(), PortNum: 1, IsGlobal: true, DGID: verbsio.GIDFromAddr(r.peer.Addr()), HopLimit: 64})
	return r, err
}

// connect moves every QP from RESET to RTS towards the fuzzer, PSNs 0.
// The rig never runs the fabric's timers (they run in its progress, which
// the rig does not call), so nothing here depends on the clock.
func (r *rig) connect() error {
	dgid := verbsio.GIDFromAddr(r.peer.Addr())
	for i, q := range r.qps {
		if err := q.Modify(&verbsio.QPAttr{State: verbsio.QPStateReset}, verbsio.QPAttrState); err != nil {
			return err
		}
		o := verbsio.ConnectOptions{Access: verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead | verbsio.AccessRemoteAtomic,
			PathMTU: verbsio.MTU1024, QKey: rigQKey, MinRNRTimer: 1}
		local := verbsio.Endpoint{QPN: q.QPN()}
		remote := verbsio.Endpoint{QPN: rigPeerQPN + uint32(i), GID: dgid, LID: r.peer.Port()}
		if err := q.Connect(local, remote, o); err != nil {
			return err
		}
	}
	return nil
}

func (r *rig) post(q *verbsio.QP, wr verbsio.SendWR) {
	if n, _ := q.PostSend([]verbsio.SendWR{wr}); n == 1 {
		r.sends[[2]uint64{uint64(q.QPN()), wr.ID}] = 0
	}
}

func (r *rig) postRecv(q *verbsio.QP, id uint64, sgl ...verbsio.SGE) {
	if n, _ := q.PostRecv([]verbsio.RecvWR{{ID: id, SGL: sgl}}); n == 1 {
		c := 0
		for _, s := range sgl {
			c += int(s.Length)
		}
		r.recvs[[2]uint64{uint64(q.QPN()), id}] = c
	}
}

// start resets the rig for an input: guards filled, QPs reconnected, work
// posted.
func (r *rig) start() error {
	for _, g := range r.fixed() {
		for i := range g {
			g[i] = 0xA5
		}
	}
	r.drain(nil) // what an earlier input left
	if err := r.connect(); err != nil {
		return err
	}
	r.sends, r.recvs = map[[2]uint64]int{}, map[[2]uint64]int{}
	rc, uc, ud := r.qps[0], r.qps[1], r.qps[2]
	sge := func(off, n int) verbsio.SGE { return r.lmr.SGE(off, n) }
	far := verbsio.RemoteAddr{Addr: 0x7000_0000, RKey: 0x1234}
	r.post(rc, verbsio.SendWR{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(0, 1500)}, Remote: far})
	r.post(rc, verbsio.SendWR{ID: 2, Opcode: verbsio.OpRDMARead, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(2048, 1000), sge(3072, 1000)}, Remote: far})
	r.post(rc, verbsio.SendWR{ID: 3, Opcode: verbsio.OpAtomicFetchAdd, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(4096, 8)}, Remote: far,
		Atomic: verbsio.AtomicArgs{CompareAdd: 1}})
	r.post(rc, verbsio.SendWR{ID: 4, Opcode: verbsio.OpSend, SGL: []verbsio.SGE{sge(0, 100)}})
	r.post(rc, verbsio.SendWR{ID: 5, Opcode: verbsio.OpAtomicCmpSwp, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(4104, 8)}, Remote: far,
		Atomic: verbsio.AtomicArgs{CompareAdd: 0, Swap: 9}})
	r.post(rc, verbsio.SendWR{ID: 6, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(0, 8)}, Remote: far})
	r.post(uc, verbsio.SendWR{ID: 11, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(0, 64)}, Remote: far})
	r.post(ud, verbsio.SendWR{ID: 21, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(0, 64)},
		UD: verbsio.UDAddr{AH: r.ah, RemoteQPN: rigPeerQPN + 2, RemoteQKey: rigQKey}})
	for i, q := range r.qps {
		base := uint64(100 + 10*i)
		r.postRecv(q, base, sge(4608, 2048))
		r.postRecv(q, base+1, sge(6656, 1024), sge(7680, 512))
		r.postRecv(q, base+2, sge(4112, 16))
	}
	return nil
}

// feed turns a record into a datagram and hands it to the fabric as its
// socket would. It reports whether it fed one (not when the record is for
// the other target: responses for the responder, requests for the
// requester) and whether that was no packet at all (it does not decode).
func (r *rig) feed(ctl0, ctl1 byte, raw []byte, responses bool) (fed, undecodable bool) {
	if len(raw) < roce.MinPacketLen || len(raw) > len(r.pkt) {
		return false, false
	}
	b := r.pkt[:len(raw)]
	copy(b, raw)
	var p roce.Packet
	if p.Decode(b) == nil {
		if p.BTH.Opcode.IsResponse() != responses {
			return false, false
		}
		r.rewrite(&p, ctl0, ctl1)
		n, err := p.Encode(r.pkt)
		if err != nil {
			return false, false
		}
		b = r.pkt[:n]
	} else {
		undecodable = true
	}
	from := r.peer
	if ctl0&4 != 0 {
		from = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 2}), r.peer.Port())
	}
	path := r.path
	path.Src = from.Addr().As4()
	path.Seal(0, b)
	if ctl0&8 != 0 {
		b[len(b)-1] ^= 0x5a
	}
	c := r.c
	c.lock()
	r.f.input(r.conn, b, from)
	r.f.sendAcks()
	r.f.flush()
	c.unlock()
	return true, undecodable
}

// rewrite points a decoded packet at the rig, as the control bytes say.
func (r *rig) rewrite(p *roce.Packet, ctl0, ctl1 byte) {
	var q *qp
	if sel := ctl0 & 3; sel < 3 {
		q = r.qps[sel].Impl().(*qp)
		p.BTH.DestQP = q.qpn
	} else if qq := r.c.qps[qpIndex(p.BTH.DestQP)].Load(); qq != nil && qq.qpn == p.BTH.DestQP {
		q = qq
	}
	if ctl0&0x40 == 0 {
		p.BTH.PKey = roce.DefaultPKey
	}
	if ctl0&0x10 == 0 && q != nil {
		u := q.t.(*udpQP)
		base := u.ePSN
		if p.BTH.Opcode.IsResponse() {
			base = u.unaPSN()
		}
		p.BTH.PSN = base.Add(int(int8(ctl1)))
	}
	l := p.BTH.Opcode.Layout()
	if ctl0&0x20 == 0 {
		if l.Has(roce.ExtRETH) {
			p.RETH.VA, p.RETH.RKey = r.rebase(p.RETH.VA)
		}
		if l.Has(roce.ExtAtomicETH) {
			p.AtomicETH.VA, p.AtomicETH.RKey = r.rebase(p.AtomicETH.VA)
		}
	}
	if ctl0&0x80 == 0 && l.Has(roce.ExtDETH) {
		p.DETH.QKey = rigQKey
	}
}

// rebase maps an address onto a region, returning it with the region's
// key: the start plus the address's low 16 bits, signed, modulo a page;
// bit 16 picks the local region.
func (r *rig) rebase(va uint64) (uint64, uint32) {
	mr := r.rmr
	if va&0x10000 != 0 {
		mr = r.lmr
	}
	return uint64(int64(mr.Addr()) + int64(int16(uint16(va)))%rigPage), mr.RKey()
}

// fixed are the bytes no input may change: the guard pages around both
// regions, and the requests' sources (the first 2048 bytes of the local
// region), which the harness fills with 0xA5 too.
func (r *rig) fixed() [][]byte {
	return [][]byte{r.lbuf[:rigPage], r.lbuf[3*rigPage:], r.rbuf[:rigPage], r.rbuf[2*rigPage:], r.lbuf[rigPage : rigPage+2048]}
}

// drain consumes every completion in the CQ, as Poll would (without the
// fabric's progress, which runs the clock's timers), and checks each
// against the work outstanding when check is set.
func (r *rig) drain(t *testing.T) {
	cq := r.cq.Impl().(*cq)
	var e ring.CQE
	var wc verbsio.WC
	for {
		st, _ := cq.cons.Poll(&e)
		if st != ring.Ready {
			break
		}
		cq.deliver(&e, &wc)
		if t == nil {
			continue
		}
		key := [2]uint64{uint64(wc.QPN), wc.ID}
		set := r.sends
		if wc.Opcode.IsRecv() {
			set = r.recvs
		}
		c, ok := set[key]
		if !ok {
			t.Fatalf("completion %+v of work not posted (or completed already)", wc)
		}
		delete(set, key)
		if wc.Opcode.IsRecv() && wc.Status == verbsio.StatusSuccess && int(wc.ByteLen) > c {
			t.Fatalf("receive %d completed with %d bytes into %d", wc.ID, wc.ByteLen, c)
		}
	}
}

// counted is every datagram the fabric has counted as received, an ICRC
// error, a bad P_Key or an unknown QP (malformed, one of these fates,
// also counts packets of a QP that do not fit it, which were received).
func (r *rig) counted() (reached, malformed uint64) {
	c := r.f.cnt
	return c.received.Load() + c.icrcErrors.Load() + c.badPKey.Load() + c.unknownQP.Load(), c.malformed.Load()
}

func (r *rig) run(t *testing.T, data []byte, responses bool) {
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	reached0, malformed0 := r.counted()
	var fed, bad uint64
	for n := 0; len(data) >= 4 && n < 32; n++ {
		ctl0, ctl1, l := data[0], data[1], int(binary.BigEndian.Uint16(data[2:]))
		data = data[4:]
		l = min(l, len(data))
		if ok, undecodable := r.feed(ctl0, ctl1, data[:l], responses); ok {
			fed++
			if undecodable {
				bad++
			}
		}
		data = data[l:]
	}
	// Every datagram is counted once: as malformed if it does not decode,
	// else as received, an ICRC error, a bad P_Key or an unknown QP.
	reached, malformed := r.counted()
	if reached-reached0 != fed-bad || malformed-malformed0 < bad {
		t.Fatalf("%d datagrams fed, %d of them no packet: %d counted received, ICRC error, bad P_Key or unknown QP, %d malformed: %v",
			fed, bad, reached-reached0, malformed-malformed0, r.c.Counters())
	}
	r.drain(t)
	for k, g := range r.fixed() {
		for i, c := range g {
			if c != 0xA5 {
				what := [...]string{"the guard before the local region", "the guard after the local region", "the guard before the remote region",
					"the guard after the remote region", "a request's source"}[k]
				t.Fatalf("%s changed (offset %d: %#x)", what, i, c)
			}
		}
	}
}

// captureRecords returns the transport packets of the Soft-RoCE capture,
// as records for the RC QP with rebased PSNs: the requests of each flow
// (responses false) or its responses.
func captureRecords(tb testing.TB, responses bool) map[uint32][]byte {
	f, err := os.Open("../../internal/pcap/testdata/rxe-rc.pcap")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	pr, err := pcap.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	flows := map[uint32][]byte{}
	for {
		pk, err := pr.Next()
		if err == io.EOF {
			return flows
		}
		if err != nil {
			tb.Fatal(err)
		}
		var fr roce.Frame
		if fr.DecodeEthernet(pk.Data) != nil || fr.Packet.BTH.Opcode.IsResponse() != responses {
			continue
		}
		// The rig's RC requests wait at PSN 0 (a two-packet WRITE), 2
		// (a READ) and 3 (a FETCH_ADD): point each kind of response at
		// the first request it can answer.
		rec := []byte{0, 0, 0, 0}
		switch op := fr.Packet.BTH.Opcode; {
		case op == roce.RCAck:
			rec[1] = 1
		case op == roce.RCAtomicAck:
			rec[1] = 3
		case op.IsResponse():
			rec[1] = 2
		}
		binary.BigEndian.PutUint16(rec[2:], uint16(len(fr.Transport)))
		flows[fr.Packet.BTH.DestQP] = append(append(flows[fr.Packet.BTH.DestQP], rec...), fr.Transport...)
	}
}

func fuzzUDP(f *testing.F, responses bool) {
	for _, seed := range captureRecords(f, responses) {
		f.Add(seed)
	}
	// Each QP type, each flag, malformed bytes.
	send := roce.Packet{BTH: roce.BTH{Opcode: roce.RCSendOnly, PKey: roce.DefaultPKey}, Payload: bytes.Repeat([]byte{7}, 64)}
	if responses {
		send = roce.Packet{BTH: roce.BTH{Opcode: roce.RCAck, PKey: roce.DefaultPKey}}
	}
	for _, ctl := range [][2]byte{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {8, 0}, {0x10, 0}, {0x40, 0}, {0, 0xff}, {0, 1}} {
		p := send
		if ctl[0]&3 == 1 && !responses {
			p.BTH.Opcode |= 0x20 // UC
		}
		if ctl[0]&3 == 2 && !responses {
			p.BTH.Opcode = roce.UDSendOnly
		}
		b := make([]byte, p.Len())
		if _, err := p.Encode(b); err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte{ctl[0], ctl[1], 0, byte(len(b))}, b...))
	}
	if responses {
		// An atomic ACK and a READ response naming the two-packet WRITE
		// at PSN 0: no answer to it, and no data for its buffer.
		for _, p := range []roce.Packet{
			{BTH: roce.BTH{Opcode: roce.RCAtomicAck, PKey: roce.DefaultPKey}, AtomicAckETH: roce.AtomicAckETH{OrigData: 0x1122334455667788}},
			{BTH: roce.BTH{Opcode: roce.RCReadResponseOnly, PKey: roce.DefaultPKey}, Payload: bytes.Repeat([]byte{0x77}, 64)},
		} {
			b := make([]byte, p.Len())
			if _, err := p.Encode(b); err != nil {
				f.Fatal(err)
			}
			f.Add(append([]byte{0, 0, 0, byte(len(b))}, b...))
		}
	}
	f.Add([]byte{0, 0, 0, 16, 0xff, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 0, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := getRig()
		if err != nil {
			t.Fatal(err)
		}
		r.run(t, data, responses)
	})
}

// FuzzUDPResponder feeds requests (and bytes that are no packet) to the
// responders of the rig's RC, UC and UD QPs.
func FuzzUDPResponder(f *testing.F) { fuzzUDP(f, false) }

// FuzzUDPRequester feeds responses (ACKs, NAKs, RNR NAKs, READ responses,
// atomic ACKs) to the requesters of the rig's QPs, whose RDMA WRITE, READ,
// atomic and SEND requests wait for them.
func FuzzUDPRequester(f *testing.F) { fuzzUDP(f, true) }
