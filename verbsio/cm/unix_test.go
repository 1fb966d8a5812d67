package cm

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
)

// unixSide is a shm0 context whose CM talks over a UnixMADPort and answers
// for the loopback addresses.
func unixSide(t *testing.T) *side {
	t.Helper()
	ctx, err := verbsio.Open("shm0")
	if err != nil {
		t.Fatal(err)
	}
	gids, err := ctx.QueryGIDTable(1)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := NewUnixMADPort(gids[0].GID)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := Open(ctx, Options{MADPort: mp, Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}})
	if err != nil {
		t.Fatal(err)
	}
	pd, _ := ctx.AllocPD()
	cq, _ := ctx.CreateCQ(64)
	s := &side{ctx: ctx, dev: dev, addr: gids[0].GID.Addr(), pd: pd, cq: cq, ch: NewEventChannel()}
	t.Cleanup(func() {
		s.ch.Close()
		_ = dev.Close()
		_ = mp.Close()
		_ = ctx.Close()
	})
	return s
}

// TestUnixMADPort: two shm0 engines connect through rdma_cm over Unix
// datagram sockets, the client naming the server by the loopback address
// and port only; the server's GID comes with its REP, and data flows.
func TestUnixMADPort(t *testing.T) {
	srv, cli := unixSide(t), unixSide(t)
	l, err := srv.ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.BindAddr(netip.MustParseAddrPort("[::1]:7500")); err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(4); err != nil {
		t.Fatal(err)
	}
	// Another port cannot listen on the same service.
	other := unixSide(t)
	l2, _ := other.ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
	if err := l2.BindAddr(netip.AddrPortFrom(other.addr, 7500)); err != nil {
		t.Fatal(err)
	}
	if err := l2.Listen(1); !errors.Is(err, unix.EADDRINUSE) {
		t.Errorf("a second listener on the service: %v", err)
	}

	id := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.MustParseAddrPort("[::1]:7500"))
	cqp, err := id.CreateQP(cli.pd, cli.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Connect(&ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	req := srv.event(t, EventConnectRequest)
	if req.ID.RemoteAddr().Addr() != cli.addr {
		t.Errorf("request from %v", req.ID.RemoteAddr())
	}
	sqp, err := req.ID.CreateQP(srv.pd, srv.qp(t, verbsio.QPTypeRC))
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ID.Accept(&ConnParam{RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	cli.event(t, EventEstablished)
	srv.event(t, EventEstablished)
	if r := id.Route(); r.DGID != verbsio.GIDFromAddr(srv.addr) {
		t.Errorf("the client's route leads to %v, not the server's GID %v", r.DGID, srv.addr)
	}
	exchange(t, cli, cqp, srv, sqp)
	disconnect(t, cli, id, srv, req.ID)

	// Nobody listens on 7501: the REQ goes nowhere and times out; with
	// the default timeouts that is minutes, so only check it was dropped.
	id2 := cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, netip.MustParseAddrPort("[::1]:7501"))
	before := cli.dev.mp.(*UnixMADPort).Dropped()
	if err := id2.Connect(&ConnParam{QPNum: 9}); err != nil {
		t.Fatal(err)
	}
	if got := cli.dev.mp.(*UnixMADPort).Dropped(); got != before+1 {
		t.Errorf("dropped %d -> %d", before, got)
	}
	_ = id2.Destroy()
}

// TestCrossProcess: the server is another process (this test binary run
// again as cmChild); the client reaches it by address and port only: on
// shm0 [::1]:port over Unix sockets, on udp_lo 127.0.0.1:port over the
// engines' QP1s, each engine on a UDP port of its own (the client's CM
// told the server's, the server learning the client's from its MADs).
func TestCrossProcess(t *testing.T) {
	for _, fabric := range []string{"shm", "udp_lo"} {
		t.Run(fabric, func(t *testing.T) { crossProcess(t, fabric) })
	}
}

func crossProcess(t *testing.T, fabric string) {
	port := 7600 + os.Getpid()%300
	env := []string{"RPERF_CM_CHILD=" + strconv.Itoa(port)}
	var cli *side
	dst := netip.AddrPortFrom(netip.IPv6Loopback(), uint16(port))
	if fabric == "udp_lo" {
		udpPort := freeUDPPort(t)
		env = append(env, "RPERF_CM_CHILD_UDP="+strconv.Itoa(int(udpPort)))
		ctx, _ := udpContext(t)
		dev, err := Open(ctx, Options{PeerMADPort: func(netip.Addr) uint16 { return udpPort }})
		if err != nil {
			t.Fatal(err)
		}
		pd, _ := ctx.AllocPD()
		cq, _ := ctx.CreateCQ(64)
		cli = &side{ctx: ctx, dev: dev, addr: lo4, pd: pd, cq: cq, ch: NewEventChannel()}
		t.Cleanup(func() {
			cli.ch.Close()
			_ = dev.Close()
			_ = ctx.Close()
		})
		dst = netip.AddrPortFrom(lo4, uint16(port))
	} else {
		cli = unixSide(t)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("child output:\n%s", out.String())
		}
	}()
	var id *ID
	// The child needs a moment to listen: retry while rejected or lost.
	for try := 0; ; try++ {
		if try == 100 {
			t.Fatal("the child never accepted")
		}
		id = cli.resolve(t, PortSpaceTCP, verbsio.QPTypeRC, dst)
		if _, err := id.CreateQP(cli.pd, cli.qp(t, verbsio.QPTypeRC)); err != nil {
			t.Fatal(err)
		}
		if err := id.Connect(&ConnParam{RetryCount: 7, RNRRetryCount: 7, PrivateData: []byte("from the parent")}); err != nil {
			t.Fatal(err)
		}
		if e, err := cli.ch.GetEvent(200 * time.Millisecond); err == nil && e.Type == EventEstablished {
			break
		}
		_ = id.DestroyQP()
		_ = id.Destroy()
		time.Sleep(50 * time.Millisecond)
	}
	src, _ := cli.ctx.Alloc(4096)
	copy(src, "hello, child")
	mr, _ := cli.pd.RegMR(src, verbsio.AccessLocalWrite)
	if _, err := id.QP().PostSend([]verbsio.SendWR{{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{mr.SGE(0, 16)}}}); err != nil {
		t.Fatal(err)
	}
	// The child disconnects once it has the message.
	cli.event(t, EventDisconnected)
	_ = id.Disconnect()
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("child: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("the child did not finish")
	}
}

// TestMain runs the server half of TestUnixCrossProcess when the test
// binary is started as that child.
func TestMain(m *testing.M) {
	if env := os.Getenv("RPERF_CM_CHILD"); env != "" {
		port, _ := strconv.Atoi(env)
		udpPort, _ := strconv.Atoi(os.Getenv("RPERF_CM_CHILD_UDP"))
		if err := cmChild(uint16(port), udpPort); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cmChild accepts one connection on [::1]:port of shm0 or, with udpPort,
// on 127.0.0.1:port of udp_lo on that UDP port, with the CM's defaults,
// receives a message, disconnects.
func cmChild(port uint16, udpPort int) error {
	name, o, laddr := "shm0", verbsio.OpenOptions{}, netip.IPv6Loopback()
	if udpPort != 0 {
		name, o.UDPPort, laddr = "udp_lo", udpPort, netip.MustParseAddr("127.0.0.1")
	}
	ctx, err := verbsio.OpenWith(name, o)
	if err != nil {
		return err
	}
	defer ctx.Close()
	// The defaults: shm0's CM on a UnixMADPort answering for the loopback
	// addresses, udp_lo's on the engine's QP1.
	dev, err := Open(ctx, Options{})
	if err != nil {
		return err
	}
	defer dev.Close()
	ch := NewEventChannel()
	next := func(want EventType) (*Event, error) {
		e, err := ch.GetEvent(wait)
		if err != nil {
			return nil, fmt.Errorf("waiting for %s: %w", want, err)
		}
		if e.Type != want {
			return nil, fmt.Errorf("event %s, want %s", e.Type, want)
		}
		return e, nil
	}
	l, _ := ch.CreateID(nil, PortSpaceTCP, verbsio.QPTypeRC)
	if err := l.BindAddr(netip.AddrPortFrom(laddr, port)); err != nil {
		return err
	}
	if err := l.Listen(1); err != nil {
		return err
	}
	req, err := next(EventConnectRequest)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(req.Conn.PrivateData, []byte("from the parent")) {
		return fmt.Errorf("private data %q", req.Conn.PrivateData[:16])
	}
	pd, _ := ctx.AllocPD()
	cq, _ := ctx.CreateCQ(16)
	qp, err := req.ID.CreateQP(pd, verbsio.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbsio.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	dst, _ := ctx.Alloc(4096)
	mr, _ := pd.RegMR(dst, verbsio.AccessLocalWrite)
	if _, err := qp.PostRecv([]verbsio.RecvWR{{ID: 1, SGL: []verbsio.SGE{mr.SGE(0, 64)}}}); err != nil {
		return err
	}
	if err := req.ID.Accept(&ConnParam{RNRRetryCount: 7}); err != nil {
		return err
	}
	if _, err := next(EventEstablished); err != nil {
		return err
	}
	wcs := make([]verbsio.WC, 1)
	for deadline := time.Now().Add(wait); ; time.Sleep(time.Millisecond) {
		if n, _ := cq.Poll(wcs); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("nothing received")
		}
	}
	if !bytes.HasPrefix(dst, []byte("hello, child")) {
		return fmt.Errorf("received %q", dst[:12])
	}
	if err := req.ID.Disconnect(); err != nil {
		return err
	}
	_, err = next(EventDisconnected)
	return err
}

// TestUnixRefused: a request to a loopback port nobody listens on is
// refused as the kernel refuses it: REJECTED with reason 8 for RC,
// UNREACHABLE with SIDR status 1 ("service ID not supported") for UD, at
// once, not after the CM's retries.
func TestUnixRefused(t *testing.T) {
	tests := []struct {
		name   string
		ps     PortSpace
		qpType verbsio.QPType
		want   EventType
		status int
	}{
		{"RC", PortSpaceTCP, verbsio.QPTypeRC, EventRejected, 8},
		{"UD", PortSpaceUDP, verbsio.QPTypeUD, EventUnreachable, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cli := unixSide(t)
			id := cli.resolve(t, tt.ps, tt.qpType, netip.AddrPortFrom(netip.IPv6Loopback(), 7599))
			if _, err := id.CreateQP(cli.pd, cli.qp(t, tt.qpType)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := id.Connect(&ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
				t.Fatal(err)
			}
			e := cli.event(t, tt.want)
			if e.Status != tt.status || time.Since(start) > time.Second {
				t.Fatalf("%s status %d after %v, want status %d at once", e.Type, e.Status, time.Since(start), tt.status)
			}
		})
	}
}
