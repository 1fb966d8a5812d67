package cm

import (
	"net/netip"
	"testing"

	"github.com/rperf/rperf/verbsio"
)

// udpSide opens udp_lo on a free UDP port with its CM on the context's own
// QP1 (the fabric's MAD port: RoCEv2 packets to QP 1 over loopback).
func udpSide(t *testing.T, o Options) *side {
	t.Helper()
	ctx, err := verbsio.OpenWith("udp_lo", verbsio.OpenOptions{UDPPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	pa, err := ctx.QueryPort(1)
	if err != nil || pa.LID == 0 {
		t.Fatalf("udp_lo on a free port: LID %d %v", pa.LID, err)
	}
	if o.PeerMADPort == nil {
		// Its own port: the tests' peers are on this engine.
		o.PeerMADPort = func(netip.Addr) uint16 { return pa.LID }
	}
	dev, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	s := &side{ctx: ctx, dev: dev, addr: netip.MustParseAddr("127.0.0.1"), pd: pd, cq: cq, ch: NewEventChannel()}
	t.Cleanup(func() {
		s.ch.Close()
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
		_ = ctx.Close()
	})
	return s
}

// TestUDPConnectRC: the whole RC sequence over the udp fabric's QP1 on
// loopback, the listener and the client on one engine.
func TestUDPConnectRC(t *testing.T) {
	s := udpSide(t, Options{})
	srv := &side{ctx: s.ctx, dev: s.dev, addr: s.addr, pd: s.pd, cq: s.cq, ch: NewEventChannel()}
	defer srv.ch.Close()
	cq2, _ := s.ctx.CreateCQ(64)
	cli := &side{ctx: s.ctx, dev: s.dev, addr: s.addr, pd: s.pd, cq: cq2, ch: NewEventChannel()}
	defer cli.ch.Close()
	srv.listen(t, PortSpaceTCP, verbsio.QPTypeRC, 7471)
	id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.AddrPortFrom(srv.addr, 7471))
	cqp, err := id.CreateQP(cli.pd, cli.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(&ConnParam{PrivateData: []byte("hello"), RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	req := srv.event(t, EventConnectRequest)
	sqp, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(&ConnParam{RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	cli.event(t, EventEstablished)
	srv.event(t, EventEstablished)
	exchange(t, cli, cqp, srv, sqp)
	exchange(t, srv, sqp, cli, cqp)
	disconnect(t, cli, id, srv, req.ID)
	t.Logf("counters %+v ctx %v", s.dev.Counters(), s.ctx.Impl().(interface{ Counters() map[string]uint64 }).Counters())
}
