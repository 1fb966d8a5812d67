package soft_test

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm"
	"golang.org/x/sys/unix"
)

// cmPair is an RC connection made by the connection manager over the udp
// fabric's QP1: one udp_lo engine on a free port, the listener's and the
// client's identifiers on it, each QP with its own CQ.
type cmPair struct {
	ctx        *verbsio.Context
	port       uint16
	pd         *verbsio.PD
	cli, srv   *cm.ID
	cqp, sqp   *verbsio.QP
	ccq, scq   *verbsio.CQ
	cch, sch   *cm.EventChannel
	clientOpts func(*cm.ID)
}

func cmEvent(t *testing.T, ch *cm.EventChannel, want cm.EventType) *cm.Event {
	t.Helper()
	e, err := ch.GetEvent(10 * time.Second)
	if err != nil || e.Type != want {
		t.Fatalf("waiting for %s: %v %v", want, e, err)
	}
	return e
}

// connectCM connects the pair; setup, if not nil, runs on the client's
// identifier before it connects (options).
func connectCM(t *testing.T, retries uint8, setup func(*cm.ID)) *cmPair {
	t.Helper()
	ctx, err := verbsio.OpenWith("udp_lo", verbsio.OpenOptions{UDPPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Close() })
	pa, _ := ctx.QueryPort(1)
	dev, err := cm.Open(ctx, cm.Options{PeerMADPort: func(netip.Addr) uint16 { return pa.LID }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	p := &cmPair{ctx: ctx, port: pa.LID, cch: cm.NewEventChannel(), sch: cm.NewEventChannel()}
	p.pd, _ = ctx.AllocPD()
	p.ccq, _ = ctx.CreateCQ(16)
	p.scq, _ = ctx.CreateCQ(16)
	lo := netip.MustParseAddr("127.0.0.1")
	l, _ := p.sch.CreateID(nil, cm.PortSpaceTCP, verbsio.QPTypeRC)
	if err := l.BindAddr(netip.AddrPortFrom(lo, 7490)); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(1); err != nil {
		t.Fatal(err)
	}
	p.cli, _ = p.cch.CreateID(nil, cm.PortSpaceTCP, verbsio.QPTypeRC)
	if err := p.cli.ResolveAddr(lo, netip.AddrPortFrom(lo, 7490), time.Second); err != nil {
		t.Fatal(err)
	}
	cmEvent(t, p.cch, cm.EventAddrResolved)
	if err := p.cli.ResolveRoute(time.Second); err != nil {
		t.Fatal(err)
	}
	cmEvent(t, p.cch, cm.EventRouteResolved)
	if setup != nil {
		setup(p.cli)
	}
	qa := func(cq *verbsio.CQ) verbsio.QPInitAttr {
		return verbsio.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbsio.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}
	}
	if p.cqp, err = p.cli.CreateQP(p.pd, qa(p.ccq)); err != nil {
		t.Fatal(err)
	}
	if err := p.cli.Connect(&cm.ConnParam{RetryCount: retries, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	req := cmEvent(t, p.sch, cm.EventConnectRequest)
	p.srv = req.ID
	if p.sqp, err = p.srv.CreateQP(p.pd, qa(p.scq)); err != nil {
		t.Fatal(err)
	}
	if err := p.srv.Accept(&cm.ConnParam{RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	cmEvent(t, p.cch, cm.EventEstablished)
	cmEvent(t, p.sch, cm.EventEstablished)
	return p
}

// sent is an RC request packet the capture saw leave.
type sent struct {
	at    time.Time
	sport uint16
	bth   roce.BTH
}

// requestsTo returns the RC requests to QP qpn (on UDP port dport) the
// capture holds, with the kernel's time stamps, reading until the wire is
// quiet for 200 ms.
func (c *capture) requestsTo(dport uint16, qpn uint32) []sent {
	var out []sent
	buf := make([]byte, 1<<17)
	oob := make([]byte, 128)
	for {
		n, oobn, _, from, err := unix.Recvmsg(c.fd, buf, oob, 0)
		if err != nil {
			return out
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		f := buf[10:n] // after the virtio-net header
		if !ok || ll.Pkttype != unix.PACKET_OUTGOING || len(f) < 14+20+8+roce.BTHLen ||
			binary.BigEndian.Uint16(f[14+20+2:]) != dport {
			continue
		}
		var bth roce.BTH
		if bth.Unmarshal(f[14+20+8:]) != nil || bth.DestQP != qpn || bth.Opcode.IsResponse() {
			continue
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) == 0 || msgs[0].Header.Type != unix.SO_TIMESTAMPNS || len(msgs[0].Data) < 16 {
			continue
		}
		at := time.Unix(int64(binary.LittleEndian.Uint64(msgs[0].Data)), int64(binary.LittleEndian.Uint64(msgs[0].Data[8:])))
		out = append(out, sent{at: at, sport: binary.BigEndian.Uint16(f[14+20:]), bth: bth})
	}
}

// TestCMACKTimeoutRetransmission: rdma_set_option(ACK_TIMEOUT) as the
// wire shows it. The client sets ACK timeout 15 (4.096 us * 2^15 = 134 ms)
// instead of the 19 (2.1 s) the CM computes, and sends one message to a
// peer that has gone silent (its QP in ERR drops everything): the message
// leaves, is sent again retry_cnt = 3 times at the ACK timeout, then the
// work request fails with RETRY_EXC_ERR. Each interval between copies on
// the wire is at least the timeout (less than 1% early: the kernel's time
// stamps); the shortest is within a quarter of it (a loaded machine only
// adds delay: an exponent one off, 67 or 268 ms, fails either bound). The
// packets leave from the UDP source port of the CM's flow label
// (rdma_flow_label_to_udp_sport, as rxe).
func TestCMACKTimeoutRetransmission(t *testing.T) {
	const timeout, retries = 15, 3
	p := connectCM(t, retries, func(id *cm.ID) {
		if err := id.SetOption(cm.OptionACKTimeout, timeout); err != nil {
			t.Fatal(err)
		}
	})
	if a, _ := p.cqp.Query(); a.Timeout != timeout || a.RetryCnt != retries {
		t.Fatalf("the client QP's timeout %d retry_cnt %d, want %d and %d", a.Timeout, a.RetryCnt, timeout, retries)
	}
	if a, _ := p.sqp.Query(); a.Timeout != 19 {
		t.Errorf("the server QP's timeout %d, want the computed 19", a.Timeout)
	}
	if err := p.sqp.Modify(&verbsio.QPAttr{State: verbsio.QPStateErr}, verbsio.QPAttrState); err != nil {
		t.Fatal(err)
	}
	wire := openCapture(t, "lo")
	wire.stamp(t)
	wire.keepUDPTo(t, p.port)
	// The kernel turns time stamping on for the capture through a deferred
	// static key: packets sent at once may be stamped only when read.
	time.Sleep(100 * time.Millisecond)
	buf, _ := p.ctx.Alloc(4096)
	mr, _ := p.pd.RegMR(buf, verbsio.AccessLocalWrite)
	start := time.Now()
	if _, err := p.cqp.PostSend([]verbsio.SendWR{{ID: 9, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{mr.SGE(0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	wcs := make([]verbsio.WC, 1)
	for n := 0; n == 0; {
		if err := p.ccq.Wait(10 * time.Second); err != nil {
			t.Fatalf("no completion: %v", err)
		}
		n, _ = p.ccq.Poll(wcs)
	}
	took := time.Since(start)
	if wcs[0].Status != verbsio.StatusRetryExcErr {
		t.Fatalf("completion %s, want RETRY_EXC_ERR", wcs[0].Status)
	}
	T := time.Duration(verbsio.TimeoutDuration(timeout))
	out := wire.requestsTo(p.port, p.sqp.QPN())
	if len(out) != 1+retries {
		t.Fatalf("%d copies of the message on the wire, want %d (after %v)", len(out), 1+retries, took)
	}
	flow := p.cli.Route().FlowLabel
	want := roce.UDPSourcePort(flow, p.cqp.QPN(), p.sqp.QPN())
	shortest := time.Hour
	for i, s := range out {
		if s.sport != want || s.bth.PSN != out[0].bth.PSN {
			t.Errorf("copy %d: source port %d PSN %#x, want %d (flow label %#x) and PSN %#x", i, s.sport, s.bth.PSN, want, flow, out[0].bth.PSN)
		}
		if i == 0 {
			continue
		}
		d := s.at.Sub(out[i-1].at)
		t.Logf("retransmission %d after %v (timeout %v)", i, d, T)
		if d < T-T/100 {
			t.Errorf("retransmission %d came %v after the previous copy, before the ACK timeout %v", i, d, T)
		}
		shortest = min(shortest, d)
	}
	if shortest > T+T/4 {
		t.Errorf("the shortest retransmission interval was %v, want within a quarter of the ACK timeout %v", shortest, T)
	}
	if took < time.Duration(1+retries)*T-T/100 {
		t.Errorf("RETRY_EXC_ERR after %v, before (1 + %d retries) x %v", took, retries, T)
	}
}
