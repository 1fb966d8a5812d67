//go:build linux && cgo && ibverbs

package hw

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// The tests in this file need an RDMA device (any: mlx5, rxe, siw, ...).
// Where libibverbs lists none they skip. RPERF_TEST_DEVICE picks one by
// name; RPERF_TEST_PORT its port (default 1).

func TestDevicesListsWithoutError(t *testing.T) {
	devs, err := Provider{}.Devices()
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	if devs == nil {
		t.Errorf("Devices returned nil, want an empty list")
	}
	for _, d := range devs {
		if d.Name == "" || d.Provider != ProviderName || d.Fabric != "" {
			t.Errorf("device %+v", d)
		}
	}
}

func TestOpenUnknownDevice(t *testing.T) {
	_, err := Provider{}.Open("rperf-no-such-device")
	if !errors.Is(err, unix.ENODEV) {
		t.Errorf("Open of a missing device = %v, want ENODEV", err)
	}
}

// testDevice opens the device under test, or skips.
func testDevice(t testing.TB) (*verbsio.Context, uint8) {
	t.Helper()
	devs, err := Provider{}.Devices()
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	if len(devs) == 0 {
		t.Skip("no RDMA device exists: ibv_get_device_list returned 0 devices")
	}
	info := devs[0]
	if name := os.Getenv("RPERF_TEST_DEVICE"); name != "" {
		found := false
		for _, d := range devs {
			if d.Name == name {
				info, found = d, true
			}
		}
		if !found {
			t.Fatalf("RPERF_TEST_DEVICE=%s: no such device (have %v)", name, devs)
		}
	}
	impl, err := Provider{}.Open(info.Name)
	if err != nil {
		t.Fatalf("Open(%s): %v", info.Name, err)
	}
	ctx := verbsio.NewContext(info, impl)
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	port := uint8(1)
	if p := os.Getenv("RPERF_TEST_PORT"); p == "2" {
		port = 2
	}
	return ctx, port
}

func TestDeviceQuery(t *testing.T) {
	ctx, port := testDevice(t)
	da, err := ctx.QueryDevice()
	if err != nil {
		t.Fatalf("QueryDevice: %v", err)
	}
	if da.PhysPortCnt < 1 || da.MaxQP < 1 || da.MaxCQE < 1 || da.MaxQPWR < 1 || da.MaxSGE < 1 {
		t.Errorf("implausible limits: %+v", da)
	}
	t.Logf("%s: fw %s, max_qp %d, max_qp_wr %d, TSO %+v, pacing %+v, max_dm %d, raw caps %#x, unknown %v",
		ctx.Device.Name, da.FWVer, da.MaxQP, da.MaxQPWR, da.TSO, da.PacketPacing, da.MaxDMSize, da.RawPacketCaps, da.Unknown)
	pa, err := ctx.QueryPort(port)
	if err != nil {
		t.Fatalf("QueryPort(%d): %v", port, err)
	}
	if !pa.MaxMTU.Valid() || !pa.ActiveMTU.Valid() || pa.GIDTblLen < 1 || pa.MaxMsgSize == 0 {
		t.Errorf("implausible port: %+v", pa)
	}
	if _, err := ctx.QueryPort(uint8(da.PhysPortCnt + 1)); err == nil {
		t.Errorf("QueryPort of a port past the last one succeeded")
	}
	gids, err := ctx.QueryGIDTable(port)
	if err != nil {
		t.Fatalf("QueryGIDTable: %v", err)
	}
	for _, g := range gids {
		if g.GID.IsZero() || g.Index < 0 || g.Index >= pa.GIDTblLen {
			t.Errorf("GID entry %+v", g)
		}
	}
	if pa.LinkLayer == verbsio.LinkLayerEthernet && pa.State == verbsio.PortActive && len(gids) == 0 {
		t.Errorf("active RoCE port without GIDs")
	}
	if da.Ext == nil || da.Ext.NumCompVectors < 1 {
		t.Errorf("no extended attributes or no completion vector: %+v", da.Ext)
	}
	if pa.Ext == nil {
		t.Errorf("no port_cap_flags2, counters, subnet timeout")
	}

	// MaxInlineData is what the device grants: an RC QP gets it, and one
	// byte more is refused.
	if da.MaxInlineData < 1 {
		t.Fatalf("MaxInlineData %d (unknown: %v)", da.MaxInlineData, da.Unknown)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	qpCap := verbsio.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: da.MaxInlineData}
	qp, err := pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: qpCap})
	if err != nil {
		t.Fatalf("RC QP with the reported max_inline_data %d: %v", da.MaxInlineData, err)
	}
	if got := qp.Cap().MaxInlineData; got < da.MaxInlineData {
		t.Errorf("granted max_inline_data %d < the reported %d", got, da.MaxInlineData)
	}
	qpCap.MaxInlineData++
	if qp2, err := pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: qpCap}); err == nil {
		t.Errorf("an RC QP with %d bytes of inline data, one more than reported, was granted %d", qpCap.MaxInlineData, qp2.Cap().MaxInlineData)
	}
	t.Logf("%s: max_inline_data %d", ctx.Device.Name, da.MaxInlineData)
}

func TestDeviceMemory(t *testing.T) {
	ctx, _ := testDevice(t)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := ctx.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(buf, verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite|verbsio.AccessRemoteRead)
	if err != nil {
		t.Fatalf("RegMR of Alloc'd memory: %v", err)
	}
	if err := ctx.Free(buf); !errors.Is(err, unix.EBUSY) {
		t.Errorf("Free of registered memory = %v, want EBUSY", err)
	}
	if err := mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Free(buf); err != nil {
		t.Errorf("Free: %v", err)
	}
	if err := ctx.Free(make([]byte, 10)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Free of Go memory = %v, want EINVAL", err)
	}

	// Go memory is pinned for the region's lifetime.
	goBuf := make([]byte, 64<<10)
	gmr, err := pd.RegMR(goBuf, verbsio.AccessLocalWrite)
	if err != nil {
		t.Fatalf("RegMR of Go memory: %v", err)
	}
	runtime.GC()
	if err := gmr.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Errorf("Dealloc: %v", err)
	}
}

// rcPair creates two RC QPs on one CQ and connects them to each other
// through port.
func rcPair(t testing.TB, ctx *verbsio.Context, pd *verbsio.PD, cq *verbsio.CQ, port uint8) (a, b *verbsio.QP) {
	t.Helper()
	pa, err := ctx.QueryPort(port)
	if err != nil {
		t.Fatal(err)
	}
	if pa.State != verbsio.PortActive {
		t.Skipf("port %d is %s, not active", port, pa.State)
	}
	ah := verbsio.AHAttr{DLID: pa.LID, PortNum: port}
	if pa.LinkLayer == verbsio.LinkLayerEthernet {
		gids, err := ctx.QueryGIDTable(port)
		if err != nil || len(gids) == 0 {
			t.Fatalf("RoCE port without a GID: %v", err)
		}
		g := gids[0]
		for _, e := range gids {
			if e.Type == verbsio.GIDTypeRoCEv2 {
				g = e
				break
			}
		}
		ah = verbsio.AHAttr{PortNum: port, IsGlobal: true, DGID: g.GID, SGIDIndex: uint8(g.Index), HopLimit: 64}
	}
	mk := func() *verbsio.QP {
		qp, err := pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: verbsio.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatalf("CreateQP: %v", err)
		}
		return qp
	}
	a, b = mk(), mk()
	mtu := min(pa.ActiveMTU, verbsio.MTU1024)
	for _, p := range [][2]*verbsio.QP{{a, b}, {b, a}} {
		qp, peer := p[0], p[1]
		steps := []struct {
			attr verbsio.QPAttr
			mask verbsio.QPAttrMask
		}{
			{verbsio.QPAttr{State: verbsio.QPStateInit, PortNum: port,
				AccessFlags: verbsio.AccessLocalWrite | verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead},
				verbsio.QPAttrState | verbsio.QPAttrPkeyIndex | verbsio.QPAttrPort | verbsio.QPAttrAccessFlags},
			{verbsio.QPAttr{State: verbsio.QPStateRTR, PathMTU: mtu, DestQPN: peer.QPN(), RQPSN: 0x100,
				MaxDestRdAtomic: 1, MinRNRTimer: 12, AH: ah},
				verbsio.QPAttrState | verbsio.QPAttrAV | verbsio.QPAttrPathMTU | verbsio.QPAttrDestQPN |
					verbsio.QPAttrRQPSN | verbsio.QPAttrMaxDestRdAtomic | verbsio.QPAttrMinRNRTimer},
			{verbsio.QPAttr{State: verbsio.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 0x100, MaxRdAtomic: 1},
				verbsio.QPAttrState | verbsio.QPAttrTimeout | verbsio.QPAttrRetryCnt | verbsio.QPAttrRNRRetry |
					verbsio.QPAttrSQPSN | verbsio.QPAttrMaxQPRdAtomic},
		}
		for _, s := range steps {
			if err := qp.Modify(&s.attr, s.mask); err != nil {
				t.Fatalf("Modify to %s: %v", s.attr.State, err)
			}
		}
		qa, err := qp.Query()
		if err != nil || qa.State != verbsio.QPStateRTS || qa.DestQPN != peer.QPN() {
			t.Fatalf("Query after RTS = %+v, %v", qa, err)
		}
	}
	return a, b
}

// pollN polls cq until n completions arrived, waiting on the channel.
func pollN(t *testing.T, cq *verbsio.CQ, n int) []verbsio.WC {
	t.Helper()
	out := make([]verbsio.WC, 0, n)
	wcs := make([]verbsio.WC, n)
	deadline := time.Now().Add(5 * time.Second)
	for len(out) < n {
		got, err := cq.Poll(wcs[:n-len(out)])
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		out = append(out, wcs[:got]...)
		if len(out) < n {
			if err := cq.Wait(time.Until(deadline)); err != nil {
				t.Fatalf("Wait with %d of %d completions: %v", len(out), n, err)
			}
		}
	}
	for _, wc := range out {
		if wc.Status != verbsio.StatusSuccess {
			t.Fatalf("completion %+v: %s", wc, wc.Status.Text())
		}
	}
	return out
}

func TestDeviceRCTraffic(t *testing.T) {
	ctx, port := testDevice(t)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	a, b := rcPair(t, ctx, pd, cq, port)
	buf, err := ctx.Alloc(16 << 10)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(buf, verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite|verbsio.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	goBuf := make([]byte, 4096)
	gmr, err := pd.RegMR(goBuf, verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "hello from rperf over libibverbs")
	msg := buf[:32]

	// SEND a -> b into b's receive buffer at 4096.
	if n, err := b.PostRecv([]verbsio.RecvWR{{ID: 100, SGL: []verbsio.SGE{mr.SGE(4096, 1024)}}}); n != 1 || err != nil {
		t.Fatalf("PostRecv = %d, %v", n, err)
	}
	if n, err := a.PostSend([]verbsio.SendWR{{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled,
		SGL: []verbsio.SGE{mr.SGE(0, 32)}}}); n != 1 || err != nil {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	wcs := pollN(t, cq, 2)
	if !bytes.Equal(buf[4096:4128], msg) {
		t.Errorf("SEND delivered %q", buf[4096:4128])
	}
	for _, wc := range wcs {
		if wc.ID == 100 && (wc.Opcode != verbsio.WCRecv || wc.ByteLen != 32 || wc.QPN != b.QPN()) {
			t.Errorf("receive completion %+v", wc)
		}
	}

	// A batch: RDMA WRITE into Alloc'd memory and into pinned Go memory,
	// then a READ back; one crossing.
	batch := []verbsio.SendWR{
		{ID: 2, Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{mr.SGE(0, 32)},
			Remote: verbsio.RemoteAddr{Addr: mr.Addr() + 8192, RKey: mr.RKey()}},
		{ID: 3, Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{mr.SGE(0, 32)},
			Remote: verbsio.RemoteAddr{Addr: gmr.Addr() + 100, RKey: gmr.RKey()}},
		{ID: 4, Opcode: verbsio.OpRDMARead, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{mr.SGE(12288, 32)},
			Remote: verbsio.RemoteAddr{Addr: mr.Addr() + 8192, RKey: mr.RKey()}},
	}
	if n, err := a.PostSend(batch); n != 3 || err != nil {
		t.Fatalf("PostSend batch = %d, %v", n, err)
	}
	pollN(t, cq, 1)
	runtime.GC()
	if !bytes.Equal(buf[8192:8224], msg) || !bytes.Equal(goBuf[100:132], msg) || !bytes.Equal(buf[12288:12320], msg) {
		t.Errorf("RDMA results: alloc %q go %q read %q", buf[8192:8224], goBuf[100:132], buf[12288:12320])
	}

	// A bad rkey is a completion status, not a Go error.
	bad := []verbsio.SendWR{{ID: 5, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{mr.SGE(0, 8)},
		Remote: verbsio.RemoteAddr{Addr: mr.Addr(), RKey: mr.RKey() ^ 0xff}}}
	if n, err := a.PostSend(bad); n != 1 || err != nil {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	var wc [1]verbsio.WC
	deadline := time.Now().Add(5 * time.Second)
	for {
		if n, _ := cq.Poll(wc[:]); n == 1 {
			break
		}
		if err := cq.Wait(time.Until(deadline)); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
	if wc[0].Status != verbsio.StatusRemAccessErr {
		t.Errorf("bad rkey completed with %s, want REM_ACCESS_ERR", wc[0].Status)
	}

	// Close releases everything; the QP answers EBADF afterwards.
	if err := ctx.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := a.PostSend(batch); !errors.Is(err, unix.EBADF) {
		t.Errorf("PostSend after Close = %v, want EBADF", err)
	}
}

// TestDeviceInlineOnlyForSendAndWrite checks on the device what
// fakeverbs' execute mode models: inline data is for SEND and RDMA WRITE.
// On an RDMA READ or an atomic the request either is refused at post
// (EINVAL) or completes with an error and flushes what follows; rxe
// accepts the post and fails the completion with LOC_PROT_ERR (seen on
// rxe0 in the VM: READ, FETCH_AND_ADD and CMP_AND_SWAP alike, signaled
// or not, and the QP goes to ERR).
func TestDeviceInlineOnlyForSendAndWrite(t *testing.T) {
	all := verbsio.AccessLocalWrite | verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead | verbsio.AccessRemoteAtomic
	for _, op := range []verbsio.Opcode{verbsio.OpRDMAWrite, verbsio.OpRDMARead, verbsio.OpAtomicFetchAdd, verbsio.OpAtomicCmpSwp} {
		t.Run(op.String(), func(t *testing.T) {
			ctx, port := testDevice(t)
			pd, err := ctx.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			cq, err := ctx.CreateCQ(16)
			if err != nil {
				t.Fatal(err)
			}
			a, b := rcPair(t, ctx, pd, cq, port)
			for _, q := range []*verbsio.QP{a, b} {
				if err := q.Modify(&verbsio.QPAttr{AccessFlags: all}, verbsio.QPAttrAccessFlags); err != nil {
					t.Fatal(err)
				}
			}
			if a.Cap().MaxInlineData < 8 {
				t.Skipf("the device granted %d bytes of inline data", a.Cap().MaxInlineData)
			}
			buf, err := ctx.Alloc(16 << 10)
			if err != nil {
				t.Fatal(err)
			}
			mr, err := pd.RegMR(buf, all)
			if err != nil {
				t.Fatal(err)
			}
			remote := verbsio.RemoteAddr{Addr: mr.Addr() + 8192, RKey: mr.RKey()}
			wrs := []verbsio.SendWR{
				{ID: 1, Opcode: op, Flags: verbsio.SendSignaled | verbsio.SendInline, SGL: []verbsio.SGE{mr.SGE(0, 8)},
					Remote: remote, Atomic: verbsio.AtomicArgs{CompareAdd: 1}},
				{ID: 2, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{mr.SGE(0, 8)}, Remote: remote},
			}
			n, err := a.PostSend(wrs)
			if op != verbsio.OpRDMAWrite && n == 0 && errors.Is(err, unix.EINVAL) {
				t.Logf("refused at post: %v", err)
				return
			}
			if n != 2 || err != nil {
				t.Fatalf("PostSend = %d, %v", n, err)
			}
			wcs := pollAll(t, cq, 2)
			if op == verbsio.OpRDMAWrite {
				if wcs[0].Status != verbsio.StatusSuccess || wcs[1].Status != verbsio.StatusSuccess {
					t.Errorf("inline RDMA WRITE completions %s, %s; want SUCCESS", wcs[0].Status, wcs[1].Status)
				}
				return
			}
			t.Logf("%s with inline data completed with %s, then %s", op, wcs[0].Status, wcs[1].Status)
			if wcs[0].ID != 1 || wcs[0].Status == verbsio.StatusSuccess || wcs[1].Status != verbsio.StatusWRFlushErr {
				t.Errorf("completions %d %s, %d %s; want an error, then WR_FLUSH_ERR", wcs[0].ID, wcs[0].Status, wcs[1].ID, wcs[1].Status)
			}
			if strings.HasPrefix(ctx.Device.Name, "rxe") && wcs[0].Status != verbsio.StatusLocProtErr {
				t.Errorf("rxe completed it with %s; fakeverbs models LOC_PROT_ERR", wcs[0].Status)
			}
		})
	}
}

// pollAll polls cq until n completions arrived, whatever their status.
func pollAll(t *testing.T, cq *verbsio.CQ, n int) []verbsio.WC {
	t.Helper()
	wcs := make([]verbsio.WC, n)
	got := 0
	deadline := time.Now().Add(5 * time.Second)
	for got < n {
		k, err := cq.Poll(wcs[got:])
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		got += k
		if got < n {
			if err := cq.Wait(time.Until(deadline)); err != nil {
				t.Fatalf("Wait with %d of %d completions: %v", got, n, err)
			}
		}
	}
	return wcs
}

// TestDevicePostTakesCompletion checks where a signaled RDMA WRITE's
// completion is taken: rxe completes a request inside ibv_post_send, so
// the post's own crossing takes it (postPoll) and Poll returns it
// without crossing again; on a NIC it comes later, through Poll.
func TestDevicePostTakesCompletion(t *testing.T) {
	ctx, port := testDevice(t)
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := ctx.CreateCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := rcPair(t, ctx, pd, cq, port)
	buf, err := ctx.Alloc(16 << 10)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(buf, verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	wr := []verbsio.SendWR{{ID: 7, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{mr.SGE(0, 8)},
		Remote: verbsio.RemoteAddr{Addr: mr.Addr() + 8192, RKey: mr.RKey()}}}
	taken := 0
	const posts = 20
	for range posts {
		if _, err := a.PostSend(wr); err != nil {
			t.Fatal(err)
		}
		if h := cq.Impl().(*hwCQ); h.tail > h.head {
			taken++
		}
		if wcs := pollAll(t, cq, 1); wcs[0].ID != 7 || wcs[0].Status != verbsio.StatusSuccess {
			t.Fatalf("completion %+v", wcs[0])
		}
	}
	t.Logf("%s: %d of %d completions taken by the post", ctx.Device.Name, taken, posts)
	if strings.HasPrefix(ctx.Device.Name, "rxe") && taken < posts/2 {
		t.Errorf("rxe completes while posting, yet the post took %d of %d completions", taken, posts)
	}
}

// TestDeviceCQEx runs RDMA WRITEs into an extended CQ of the standard
// fields, polled through ibv_start_poll, and asks for completion
// timestamps: a device that reports a completion clock (hca_core_clock
// and completion_timestamp_mask) must stamp every completion, increasing;
// one that reports none must refuse the CQ with EOPNOTSUPP.
func TestDeviceCQEx(t *testing.T) {
	ctx, port := testDevice(t)
	attr, err := ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	stamps := attr.Ext != nil && attr.Ext.HCACoreClock != 0 && attr.Ext.CompletionTimestampMask != 0
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := ctx.Alloc(16 << 10)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(buf, verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	for _, flags := range []verbsio.CQWCFlags{verbsio.WCExStandard, verbsio.WCExStandard | verbsio.WCExTS} {
		cq, err := ctx.CreateCQEx(verbsio.CQInitAttr{CQE: 16, WCFlags: flags})
		if flags.Timestamped() && !stamps {
			if !errors.Is(err, unix.EOPNOTSUPP) {
				t.Errorf("%s reports no completion clock, yet CreateCQEx(%s) = %v, want EOPNOTSUPP", ctx.Device.Name, flags, err)
			}
			if err == nil {
				cq.Destroy()
			}
			continue
		}
		if err != nil {
			t.Fatalf("CreateCQEx(%s): %v", flags, err)
		}
		a, _ := rcPair(t, ctx, pd, cq, port)
		var last uint64
		for i := range 10 {
			wr := []verbsio.SendWR{{ID: uint64(i), Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{mr.SGE(0, 8)},
				Remote: verbsio.RemoteAddr{Addr: mr.Addr() + 8192, RKey: mr.RKey()}}}
			if _, err := a.PostSend(wr); err != nil {
				t.Fatal(err)
			}
			wc := pollAll(t, cq, 1)[0]
			if wc.ID != uint64(i) || wc.Status != verbsio.StatusSuccess || wc.Opcode != verbsio.WCRDMAWrite || wc.QPN != a.QPN() {
				t.Fatalf("%s: completion %+v", flags, wc)
			}
			if flags.Timestamped() && (wc.Timestamp == 0 || wc.Timestamp < last) {
				t.Errorf("%s: completion %d stamped %d after %d", flags, i, wc.Timestamp, last)
			}
			last = wc.Timestamp
		}
		t.Logf("%s: %s: 10 completions through ibv_start_poll, last stamp %d", ctx.Device.Name, flags, last)
	}
}
