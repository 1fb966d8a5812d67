package rdmacm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm"
	"github.com/rperf/rperf/verbsio/cm/mad"
	_ "github.com/rperf/rperf/verbsio/soft" // shm0
)

// pair opens two shm0 contexts, each with its CM on Unix sockets: the
// server answering for 127.0.0.1, the client for 127.0.0.2 (two devices
// of one process must not claim the same address), and connects a
// channel between them on port.
func pair(t *testing.T, port uint16) (srv, cli *Channel) {
	t.Helper()
	return pairRefused(t, port, false)
}

// pairRefused is pair; with refused, the client dials first and the
// server listens only once the client's CM received a REJ (nothing
// listened): the client's channel is its second attempt.
func pairRefused(t *testing.T, port uint16, refused bool) (srv, cli *Channel) {
	t.Helper()
	open := func(addr string) (*verbsio.Context, *cm.Device) {
		ctx, err := verbsio.Open("shm0")
		if err != nil {
			t.Fatal(err)
		}
		gids, err := ctx.QueryGIDTable(1)
		if err != nil {
			t.Fatal(err)
		}
		mp, err := cm.NewUnixMADPort(gids[0].GID)
		if err != nil {
			t.Fatal(err)
		}
		dev, err := cm.Open(ctx, cm.Options{MADPort: mp, Addrs: []netip.Addr{netip.MustParseAddr(addr)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = dev.Close()
			_ = mp.Close()
			_ = ctx.Close()
		})
		return ctx, dev
	}
	sctx, sdev := open("127.0.0.1")
	cctx, cdev := open("127.0.0.2")
	type dialed struct {
		c   *Channel
		err error
	}
	dialDone := make(chan dialed, 1)
	dial := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := Dial(ctx, cctx, netip.MustParseAddr("127.0.0.2"), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), Options{Device: cdev, Timeout: 5 * time.Second})
		dialDone <- dialed{c, err}
	}
	if refused {
		go dial()
		rej := int(mad.AttrREJ - mad.AttrREQ)
		for end := time.Now().Add(10 * time.Second); cdev.Counters().Rx[rej] == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the client's CM received no REJ within 10 s of dialing a port nobody listens on")
			}
		}
	}
	l, err := Listen(sctx, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), Options{Device: sdev, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		var err error
		srv, err = l.Accept(context.Background(), 10*time.Second)
		accepted <- err
	}()
	if !refused {
		dial()
	}
	d := <-dialDone
	if d.err != nil {
		t.Fatal(d.err)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	return srv, d.c
}

// TestChannelAfterRefusal: a client that dialed before the server
// listened (refused, REJ 8, then connected on its next attempt) reads
// and writes on the channel. (Its refused attempt's QP had its receives
// flushed into the channel's CQs, and the first read took that flush for
// the new connection's: rperf -R client and server started together
// failed so under load, each saying the other closed the connection.)
func TestChannelAfterRefusal(t *testing.T) {
	srv, cli := pairRefused(t, 7730, true)
	for _, dir := range []struct {
		name     string
		from, to *Channel
	}{{"server to client", srv, cli}, {"client to server", cli, srv}} {
		msg := []byte("6.06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")
		done := make(chan error, 1)
		go func() {
			_, err := dir.from.Write(msg)
			done <- err
		}()
		got := make([]byte, len(msg))
		dir.to.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(dir.to, got); err != nil {
			t.Fatalf("%s: read: %v", dir.name, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: write: %v", dir.name, err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("%s: got %q, sent %q", dir.name, got, msg)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	if err := cli.Close(); err != nil {
		t.Error(err)
	}
	if err := <-closed; err != nil {
		t.Error(err)
	}
}

// TestChannel: messages cross in order, one SEND each or, past SlotSize,
// in pieces; deadlines end a read that gets nothing; the peer's
// disconnect ends a read with EOF.
func TestChannel(t *testing.T) {
	srv, cli := pair(t, 7710)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16000 bytes: 4 SENDs
	tests := []struct {
		name string
		msg  []byte
	}{
		{"version", []byte("6.06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")},
		{"MTU", []byte("3\x00")},
		{"parameter document", big},
	}
	for _, tt := range tests {
		done := make(chan error, 1)
		go func() {
			_, err := cli.Write(tt.msg)
			done <- err
		}()
		got := make([]byte, len(tt.msg))
		srv.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(srv, got); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: write: %v", tt.name, err)
		}
		if !bytes.Equal(got, tt.msg) {
			t.Fatalf("%s: got %d bytes that differ from the %d sent", tt.name, len(got), len(tt.msg))
		}
	}

	cli.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	if _, err := cli.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the deadline fired after %v", d)
	}

	// The server closes (a DREQ); the client's read ends with EOF.
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	if _, err := cli.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the peer closed: %v, want EOF", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestConnectQPs: three RC QPs connected through rdma_cm between the
// channels' ends carry a SEND each; each side's -u reached its QPs (the
// server's and the client's differ), and the client's -m both sides'
// (through the REQ); the client closes them gracefully
// (DREQ, the server's DREP) before the channels go.
func TestConnectQPs(t *testing.T) {
	srv, cli := pair(t, 7711)
	type end struct {
		c   *Channel
		pd  *verbsio.PD
		cq  *verbsio.CQ
		buf []byte
		mr  *verbsio.MR
		qps []*DataQP
		ack uint8
		mtu verbsio.MTU
	}
	mk := func(c *Channel, ack uint8, mtu verbsio.MTU) *end {
		e := &end{c: c, ack: ack, mtu: mtu}
		var err error
		if e.pd, err = c.dev.AllocPD(); err != nil {
			t.Fatal(err)
		}
		if e.cq, err = c.dev.CreateCQ(16); err != nil {
			t.Fatal(err)
		}
		if e.buf, err = c.dev.Alloc(4096); err != nil {
			t.Fatal(err)
		}
		if e.mr, err = e.pd.RegMR(e.buf, verbsio.AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
		return e
	}
	s, c := mk(srv, 9, 0), mk(cli, 17, verbsio.MTU512)
	spec := func(e *end) QPSpec {
		return QPSpec{N: 3, Type: verbsio.QPTypeRC, PD: e.pd, ACKTimeout: e.ack, PathMTU: e.mtu, Attr: func(int) verbsio.QPInitAttr {
			return verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: e.cq, RecvCQ: e.cq,
				Cap: verbsio.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
		}}
	}
	errc := make(chan error, 1)
	go func() {
		var err error
		s.qps, err = srv.ConnectQPs(context.Background(), spec(s))
		errc <- err
	}()
	var err error
	if c.qps, err = cli.ConnectQPs(context.Background(), spec(c)); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(s.qps) != 3 || len(c.qps) != 3 {
		t.Fatalf("%d and %d QPs, want 3 each", len(s.qps), len(c.qps))
	}
	for _, e := range []*end{s, c} {
		for i, d := range e.qps {
			a, err := d.QP.Query()
			if err != nil {
				t.Fatal(err)
			}
			if a.State != verbsio.QPStateRTS || a.Timeout != e.ack || a.PathMTU != verbsio.MTU512 {
				t.Errorf("server=%v QP %d: state %v, ACK timeout %d, path MTU %v; want RTS, %d (-u) and the client's 512", e.c.Server(), i, a.State, a.Timeout, a.PathMTU, e.ack)
			}
		}
	}
	for i := range c.qps {
		sge := []verbsio.SGE{s.mr.SGE(i*64, 64)}
		if _, err := s.qps[i].QP.PostRecv([]verbsio.RecvWR{{ID: uint64(i), SGL: sge}}); err != nil {
			t.Fatal(err)
		}
		copy(c.buf[i*64:], []byte{byte('a' + i)})
		if _, err := c.qps[i].QP.PostSend([]verbsio.SendWR{{ID: uint64(i), Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled,
			SGL: []verbsio.SGE{c.mr.SGE(i*64, 1)}}}); err != nil {
			t.Fatal(err)
		}
		for _, e := range []*end{c, s} {
			wc, err := pollOne(e.cq, 5*time.Second)
			if err != nil || wc.Status != verbsio.StatusSuccess {
				t.Fatalf("QP %d: %+v %v", i, wc, err)
			}
		}
		if s.buf[i*64] != byte('a'+i) {
			t.Errorf("QP %d carried %q", i, s.buf[i*64])
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.CloseQPs(true) }()
	start := time.Now()
	if err := cli.CloseQPs(true); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > closeWait {
		t.Errorf("the graceful close took %v: a DREQ went unanswered", d)
	}
	// The channels as perftest ends them: the server disconnects, the
	// client waits for that.
	start = time.Now()
	go func() { closed <- srv.Close() }()
	if err := cli.Close(); err != nil {
		t.Error(err)
	}
	if err := <-closed; err != nil {
		t.Error(err)
	}
	if d := time.Since(start); d > closeWait {
		t.Errorf("closing the channels took %v: the client missed the server's DREQ", d)
	}
}

// TestListenQPsFirst: a server that called ListenQPs accepts a client
// that connects before the server reaches ConnectQPs, with no retries
// (perftest 4.5's client has none); without ListenQPs the same client is
// refused at once (REJ 8).
func TestListenQPsFirst(t *testing.T) {
	for i, listenFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "listen first", false: "late listener"}[listenFirst], func(t *testing.T) {
			srv, cli := pair(t, uint16(7721+i))
			cli.opts.Retries = -1
			spec := func(c *Channel) QPSpec {
				pd, err := c.dev.AllocPD()
				if err != nil {
					t.Fatal(err)
				}
				cq, err := c.dev.CreateCQ(8)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cq.Destroy(); _ = pd.Dealloc() })
				return QPSpec{N: 1, Type: verbsio.QPTypeRC, PD: pd, Attr: func(int) verbsio.QPInitAttr {
					return verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: cq, RecvCQ: cq,
						Cap: verbsio.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}
				}}
			}
			sspec, cspec := spec(srv), spec(cli)
			if listenFirst {
				if err := srv.ListenQPs(sspec); err != nil {
					t.Fatal(err)
				}
			}
			errc := make(chan error, 1)
			go func() {
				_, err := cli.ConnectQPs(context.Background(), cspec)
				errc <- err
			}()
			time.Sleep(200 * time.Millisecond) // the client's REQ is answered by now
			if !listenFirst {
				err := <-errc
				if err == nil || !errors.Is(err, errRefused) {
					t.Fatalf("client without a listener: %v, want refused", err)
				}
				return
			}
			if _, err := srv.ConnectQPs(context.Background(), sspec); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("client: %v", err)
			}
			if srv.qpListen != nil {
				t.Error("the test QPs' listener is still there after ConnectQPs")
			}
			_ = cli.Close()
			_ = srv.Close()
		})
	}
}
