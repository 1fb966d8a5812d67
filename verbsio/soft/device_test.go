package soft_test

import (
	"errors"
	"net"
	"os"
	"reflect"
	"testing"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/udp"
	"github.com/rperf/rperf/verbsio/verbstest"
	"golang.org/x/sys/unix"
)

// The engine's device limits, as docs/verbsio.md ("Device limits") states
// them. They are written out here, not read from the engine's constants,
// so that a change to a limit is a change to this test and the document.
const (
	wantMaxQP       = 4096
	wantMaxQPWR     = 32768
	wantMaxSGE      = 32
	wantMaxCQ       = 4096
	wantMaxCQE      = 131072
	wantMaxMR       = 16384
	wantMaxPD       = 4096
	wantMaxRdAtomic = 128
	wantMaxSRQ      = 1024
	wantMaxAH       = 16384
	wantMaxInline   = 1024
	wantMaxDM       = 256 << 10
	wantPaceMinKbps = 1000
	wantPaceMaxKbps = 100_000_000
)

// wantDevice is what QueryDevice reports on every built-in device, before
// a fabric's own fields (GUIDs, message size, TSO, send paths).
func wantDevice() verbsio.DeviceAttr {
	return verbsio.DeviceAttr{
		FWVer: "rperf-engine 1.0", MaxMRSize: 1 << 40, PageSizeCap: uint64(os.Getpagesize()),
		MaxQP: wantMaxQP, MaxQPWR: wantMaxQPWR,
		// RC_RNR_NAK_GEN, SRQ_RESIZE, PORT_ACTIVE_EVENT, SYS_IMAGE_GUID
		DeviceCapFlags: 1<<12 | 1<<13 | 1<<10 | 1<<11,
		MaxSGE:         wantMaxSGE, MaxSGERD: wantMaxSGE, MaxCQ: wantMaxCQ, MaxCQE: wantMaxCQE,
		MaxMR: wantMaxMR, MaxPD: wantMaxPD,
		MaxQPRdAtom: wantMaxRdAtomic, MaxQPInitRdAtom: wantMaxRdAtomic, MaxResRdAtom: wantMaxRdAtomic * wantMaxQP,
		AtomicCap: verbsio.AtomicGlob, MaxSRQ: wantMaxSRQ, MaxSRQWR: wantMaxQPWR, MaxSRQSGE: wantMaxSGE,
		MaxAH: wantMaxAH, MaxPkeys: 1, PhysPortCnt: 1, MaxInlineData: wantMaxInline, MaxDMSize: wantMaxDM,
		PacketPacing: verbsio.PacingCaps{RateLimitMinKbps: wantPaceMinKbps, RateLimitMaxKbps: wantPaceMaxKbps,
			SupportedQP: []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD}},
		Interfaces: []verbsio.InterfaceCap{{Family: verbsio.FamilyQPBurst, Version: 1}, {Family: verbsio.FamilyCQPoll, Version: 1}},
		// Completions are stamped in ns of CLOCK_REALTIME: a 64-bit
		// clock at 1 GHz (1,000,000 kHz).
		Ext: &verbsio.DeviceAttrEx{CompletionTimestampMask: ^uint64(0), HCACoreClock: 1_000_000,
			DeviceCapFlagsEx: 1<<12 | 1<<13 | 1<<10 | 1<<11, NumCompVectors: 1},
	}
}

// freeUDPPort returns a UDP port of 127.0.0.1 nobody had bound a moment ago.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestQueryDevice checks every device and port attribute of shm0 and
// udp_lo against the documented values.
func TestQueryDevice(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	loAddrs, err := lo.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	gso, _ := udp.GSOSupported()
	port := freeUDPPort(t)

	shm := wantDevice()
	shm.MaxMsgSize = 1 << 30
	shm.SendPaths = []string{"generic", "burst", "inline", "dm", "dv"}
	udpDev := wantDevice()
	udpDev.MaxMsgSize = 1 << 31
	udpDev.SendPaths = []string{"generic", "burst", "inline", "dm", "dv"}
	if gso {
		// As many 4096-byte packets (and their 32 header bytes) as fit
		// the 65000 bytes of one UDP GSO send: 15.
		udpDev.TSO = verbsio.TSOCaps{MaxTSO: 15 * 4096, SupportedQP: []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD}}
		udpDev.SendPaths = []string{"generic", "burst", "inline", "dm", "tso", "dv"}
	}
	for _, tc := range []struct {
		dev  string
		open verbsio.OpenOptions
		want verbsio.DeviceAttr
		port verbsio.PortAttr
	}{
		{"shm0", verbsio.OpenOptions{}, shm, verbsio.PortAttr{State: verbsio.PortActive, MaxMTU: verbsio.MTU4096, ActiveMTU: verbsio.MTU4096,
			GIDTblLen: 1, MaxMsgSize: 1 << 30, PkeyTblLen: 1, MaxVLNum: 1, PhysState: 5, LinkLayer: verbsio.LinkLayerUnspecified}},
		// lo's MTU is 65536: the active MTU is the largest, 4096. A
		// context on another port than 4791 reports it as its LID.
		{"udp_lo", verbsio.OpenOptions{UDPPort: port}, udpDev, verbsio.PortAttr{State: verbsio.PortActive, MaxMTU: verbsio.MTU4096,
			ActiveMTU: verbsio.MTU4096, GIDTblLen: len(loAddrs), PortCapFlags: 1 << 16, MaxMsgSize: 1 << 31, LID: uint16(port),
			PkeyTblLen: 1, MaxVLNum: 1, PhysState: 5, LinkLayer: verbsio.LinkLayerEthernet, Netdev: "lo"}},
	} {
		t.Run(tc.dev, func(t *testing.T) {
			ctx, err := verbsio.OpenWith(tc.dev, tc.open)
			if err != nil {
				t.Fatal(err)
			}
			defer ctx.Close()
			got, err := ctx.QueryDevice()
			if err != nil {
				t.Fatal(err)
			}
			// The node GUID is derived (from the host name on shm, the
			// netdev on udp); it is a locally administered EUI-64, the
			// same for every context of the device.
			if got.NodeGUID>>56 != 0x02 || got.SysImageGUID != got.NodeGUID || got.NodeGUID != ctx.Device.NodeGUID {
				t.Errorf("node GUID %#x, system image GUID %#x, device list %#x: want one locally administered GUID",
					got.NodeGUID, got.SysImageGUID, ctx.Device.NodeGUID)
			}
			tc.want.NodeGUID, tc.want.SysImageGUID = got.NodeGUID, got.NodeGUID
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("QueryDevice:\n got %+v\nwant %+v", got, tc.want)
			}
			pa, err := ctx.QueryPort(1)
			if err != nil {
				t.Fatal(err)
			}
			if pa != tc.port {
				t.Errorf("QueryPort(1):\n got %+v\nwant %+v", pa, tc.port)
			}
			if _, err := ctx.QueryPort(2); !errors.Is(err, unix.EINVAL) {
				t.Errorf("QueryPort(2): %v, want EINVAL (one port)", err)
			}
			gids, err := ctx.QueryGIDTable(1)
			if err != nil || len(gids) != tc.port.GIDTblLen {
				t.Errorf("GID table: %d entries (%v), want %d", len(gids), err, tc.port.GIDTblLen)
			}
			checkLimits(t, ctx, got)
			checkQPLimits(t, tc.dev, verbsio.OpenOptions{UDPPort: -1}, got) // the pair takes ports of its own
		})
	}
}

// checkLimits creates objects at each reported limit, which must work, and
// one past it, which must fail with EINVAL: the limits are the engine's
// true ones.
func checkLimits(t *testing.T, ctx *verbsio.Context, a verbsio.DeviceAttr) {
	t.Helper()
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	cq, err := ctx.CreateCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	qp := func(cp verbsio.QPCap) error {
		q, err := pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: cp})
		if err == nil {
			q.Destroy()
		}
		return err
	}
	one := verbsio.QPCap{MaxSendWR: 1, MaxRecvWR: 1}
	with := func(f func(*verbsio.QPCap)) verbsio.QPCap { c := one; f(&c); return c }
	cqOf := func(n int) error {
		c, err := ctx.CreateCQ(n)
		if err == nil {
			c.Destroy()
		}
		return err
	}
	srq := func(wr, sge int) error {
		s, err := pd.CreateSRQ(verbsio.SRQInitAttr{MaxWR: wr, MaxSGE: sge})
		if err == nil {
			s.Destroy()
		}
		return err
	}
	dm := func(n int) error {
		d, err := ctx.AllocDM(n, 0)
		if err == nil {
			d.Free()
		}
		return err
	}
	for _, l := range []struct {
		name string
		try  func(n int) error
		max  int
	}{
		{"max_qp_wr (send)", func(n int) error { return qp(with(func(c *verbsio.QPCap) { c.MaxSendWR = n })) }, a.MaxQPWR},
		{"max_qp_wr (receive)", func(n int) error { return qp(with(func(c *verbsio.QPCap) { c.MaxRecvWR = n })) }, a.MaxQPWR},
		{"max_sge (send)", func(n int) error { return qp(with(func(c *verbsio.QPCap) { c.MaxSendSGE = n })) }, a.MaxSGE},
		{"max_sge (receive)", func(n int) error { return qp(with(func(c *verbsio.QPCap) { c.MaxRecvSGE = n })) }, a.MaxSGE},
		{"max_inline_data", func(n int) error { return qp(with(func(c *verbsio.QPCap) { c.MaxInlineData = n })) }, a.MaxInlineData},
		{"max_cqe", cqOf, a.MaxCQE},
		{"max_srq_wr", func(n int) error { return srq(n, 1) }, a.MaxSRQWR},
		{"max_srq_sge", func(n int) error { return srq(1, n) }, a.MaxSRQSGE},
		{"max_dm_size", dm, int(a.MaxDMSize)},
	} {
		if err := l.try(l.max); err != nil {
			t.Errorf("%s %d (the limit): %v", l.name, l.max, err)
		}
		if err := l.try(l.max + 1); err == nil {
			t.Errorf("%s %d (past the limit) was accepted", l.name, l.max+1)
		} else if l.name != "max_dm_size" && !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s %d (past the limit): %v, want EINVAL", l.name, l.max+1, err)
		}
	}
}

// checkQPLimits connects a pair with the most outstanding READs and
// atomics the device reports (and fails one past it), then paces it at
// both ends of the pacing range (and fails just outside).
func checkQPLimits(t *testing.T, dev string, open verbsio.OpenOptions, a verbsio.DeviceAttr) {
	t.Helper()
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: dev, Open: open, NoConnect: true})
	connect := func(n int) error {
		o := verbsio.ConnectOptions{Access: verbstest.AllAccess &^ verbsio.AccessLocalWrite, MaxRdAtomic: uint8(n)}
		if err := p.A.QP.Connect(p.A.Endpoint(), p.B.Endpoint(), o); err != nil {
			p.A.QP.Modify(&verbsio.QPAttr{State: verbsio.QPStateReset}, verbsio.QPAttrState)
			return err
		}
		return nil
	}
	if a.MaxQPRdAtom != a.MaxQPInitRdAtom {
		t.Fatalf("max_qp_rd_atom %d and max_qp_init_rd_atom %d differ; Connect sets both from one option", a.MaxQPRdAtom, a.MaxQPInitRdAtom)
	}
	if err := connect(a.MaxQPRdAtom + 1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("connect with max_rd_atomic %d (past the limit): %v, want EINVAL", a.MaxQPRdAtom+1, err)
	}
	if err := connect(a.MaxQPRdAtom); err != nil {
		t.Fatalf("connect with max_rd_atomic %d (the limit): %v", a.MaxQPRdAtom, err)
	}
	if err := p.B.QP.Connect(p.B.Endpoint(), p.A.Endpoint(), verbsio.ConnectOptions{Access: verbsio.AccessRemoteWrite}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		kbps uint32
		ok   bool
	}{
		{a.PacketPacing.RateLimitMinKbps, true}, {a.PacketPacing.RateLimitMinKbps - 1, false},
		{a.PacketPacing.RateLimitMaxKbps, true}, {a.PacketPacing.RateLimitMaxKbps + 1, false},
	} {
		attr := verbsio.QPAttr{State: verbsio.QPStateRTS, RateLimit: r.kbps}
		err := p.A.QP.Modify(&attr, verbsio.QPAttrState|verbsio.QPAttrRateLimit)
		if r.ok && err != nil {
			t.Errorf("rate_limit %d kbit/s (in range): %v", r.kbps, err)
		}
		if !r.ok && !errors.Is(err, unix.EINVAL) {
			t.Errorf("rate_limit %d kbit/s (out of range): %v, want EINVAL", r.kbps, err)
		}
	}
	checkMsgSize(t, p, connect, a)
}

// checkMsgSize posts an RDMA WRITE of max_msg_sz + 1 bytes, which must
// fail locally (LOC_LEN_ERR), and one of max_msg_sz bytes to a wrong rkey,
// which must pass the local checks and fail at the target
// (REM_ACCESS_ERR) before a byte moves. The source is two SGEs over one
// region of half the size, never written (it costs no memory).
func checkMsgSize(t *testing.T, p *verbstest.Pair, connect func(int) error, a verbsio.DeviceAttr) {
	t.Helper()
	half := a.MaxMsgSize / 2
	src := make([]byte, half+1)
	mr, err := p.A.PD.RegMR(src, verbsio.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	for _, c := range []struct {
		n    uint64
		want verbsio.Status
	}{
		{a.MaxMsgSize + 1, verbsio.StatusLocLenErr},
		{a.MaxMsgSize, verbsio.StatusRemAccessErr},
	} {
		p.A.QP.Modify(&verbsio.QPAttr{State: verbsio.QPStateReset}, verbsio.QPAttrState)
		if err := connect(16); err != nil {
			t.Fatal(err)
		}
		sgl := []verbsio.SGE{mr.SGE(0, int(half)), mr.SGE(0, int(c.n-half))}
		wr := verbsio.SendWR{ID: 7, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: sgl,
			Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey() ^ 0x5a5a}}
		if _, err := p.A.QP.PostSend([]verbsio.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		if wc := verbstest.PollOne(t, p.A.CQ); wc.Status != c.want {
			t.Errorf("a %d-byte WRITE (max_msg_sz %d): %s, want %s", c.n, a.MaxMsgSize, wc.Status, c.want)
		}
	}
}
