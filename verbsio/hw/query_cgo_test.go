//go:build linux && cgo && ibverbs

package hw

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rperf/rperf/internal/testsupport/devinfotest"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/hw/internal/fakeverbs"
	"golang.org/x/sys/unix"
)

// These tests run the control path of the ibverbs build (QueryDevice,
// QueryPort, QueryGIDTable, the inline probe, Close) against fakeverbs'
// struct rperf_verbs table, whose calls refuse what libibverbs and
// rdma_rxe refuse.

// rxeDevice is rxe0 of the rxe VM (Linux 6.1, rdma-core 44, one vCPU) as
// ibv_query_device_ex answered for it: the values its ibv_devinfo -v
// printed (internal/testsupport/devinfotest/testdata/rxe0), and the 512
// bytes of inline data rxe grants at most. QueryDevice must turn it into
// devinfotest.RXE0's DeviceAttr.
func rxeDevice() fakeverbs.Device {
	return fakeverbs.Device{
		FWVer: "0.0.0", NodeGUID: 0x505400fffe770001, SysImageGUID: 0x505400fffe770001,
		MaxMRSize: ^uint64(0), PageSizeCap: 0xfffff000, VendorID: 0xffffff,
		MaxQP: 1048560, MaxQPWR: 1048576, DeviceCapFlags: 0x01223c76, MaxSGE: 32, MaxSGERD: 32,
		MaxCQ: 1048576, MaxCQE: 32767, MaxMR: 524287, MaxPD: 1048576, MaxQPRdAtom: 128,
		MaxResRdAtom: 258048, MaxQPInitRdAtom: 128, AtomicCap: 1, MaxMW: 524287,
		MaxMcastGrp: 8192, MaxMcastQPAttach: 56, MaxTotalMcastQPAttach: 458752, MaxAH: 32767,
		MaxSRQ: 917503, MaxSRQWR: 1048576, MaxSRQSGE: 27, MaxPkeys: 64, LocalCAAckDelay: 15,
		PhysPortCnt: 1, DeviceCapFlagsEx: 0x1223c76, NumCompVectors: 1, MaxInline: 512,
	}
}

func rxePort() fakeverbs.Port {
	return fakeverbs.Port{State: 4, MaxMTU: 5, ActiveMTU: 3, GIDTblLen: 1024, PortCapFlags: 0x00010000,
		MaxMsgSz: 0x800000, PkeyTblLen: 1, MaxVLNum: 1, ActiveWidth: 1, ActiveSpeed: 1, PhysState: 5, LinkLayer: 2}
}

// fakeContext is a context on f's control path.
func fakeContext(t *testing.T, f *fakeverbs.Fake) *hwContext {
	t.Helper()
	c := newContext("fake", f.Context(), f.Verbs())
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func TestFakeQueryDeviceRXE(t *testing.T) {
	f := newFake(t)
	f.SetDevice(rxeDevice())
	f.SetPort(1, rxePort())
	c := fakeContext(t, f)
	got, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := devinfotest.RXE0()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("QueryDevice (-want +got):\n%s", d)
	}
	if pds, cqs, qps := f.Live(); pds+cqs+qps != 0 {
		t.Errorf("the inline probe left %d PDs, %d CQs, %d QPs behind", pds, cqs, qps)
	}
	// Doubling from 64 up to 1024 (refused), then bisecting 512..1024
	// (all refused): created were the QP without inline data and 64, 128,
	// 256, 512.
	if n := f.QPsCreated(); n != 1+4 {
		t.Errorf("the probe created %d QPs, want 5 (0, 64, 128, 256, 512 granted)", n)
	}
	// The answer is kept: a second query creates no QP.
	before := f.QPsCreated()
	if again, err := c.QueryDevice(); err != nil || again.MaxInlineData != 512 {
		t.Errorf("second QueryDevice: %d, %v", again.MaxInlineData, err)
	}
	if f.QPsCreated() != before {
		t.Errorf("the second QueryDevice probed again")
	}
}

func TestFakeInlineProbe(t *testing.T) {
	// rxe grants 16 bytes per send SGE even when asked for less, so the
	// probe's one-SGE QPs always get at least 16.
	for _, c := range []struct {
		max, want int
	}{
		{0, 16}, {1, 16}, {16, 16}, {17, 17}, {63, 63}, {64, 64}, {65, 65}, {100, 100},
		{220, 220}, {511, 511}, {512, 512}, {1000, 1000}, {4096, 4096}, {65535, 65535},
		{65536, 65536}, {1 << 20, 65536},
	} {
		f := newFake(t)
		d := rxeDevice()
		d.MaxInline = uint32(c.max)
		f.SetDevice(d)
		f.SetPort(1, rxePort())
		ctx := fakeContext(t, f)
		got, err := ctx.QueryDevice()
		if err != nil {
			t.Fatal(err)
		}
		if got.MaxInlineData != c.want || attrListed(got, "MaxInlineData") {
			t.Errorf("device max %d: MaxInlineData %d (unknown: %v), want %d", c.max, got.MaxInlineData, got.Unknown, c.want)
		}
		// At most two QPs per bit of the answer: the search is bounded.
		if n := f.QPsCreated(); n > 2*17+1 {
			t.Errorf("device max %d: %d QPs created", c.max, n)
		}
		if pds, cqs, qps := f.Live(); pds+cqs+qps != 0 {
			t.Errorf("device max %d: %d PDs, %d CQs, %d QPs left", c.max, pds, cqs, qps)
		}
	}
}

func attrListed(a verbsio.DeviceAttr, name string) bool {
	for _, u := range a.Unknown {
		if u == name {
			return true
		}
	}
	return false
}

func TestFakeInlineProbeRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*fakeverbs.Fake)
	}{
		{"no PD", func(f *fakeverbs.Fake) { f.FailAllocPD(unix.EPERM) }},
		{"no QP", func(f *fakeverbs.Fake) { f.FailCreateQP(unix.ENOMEM) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			f.SetDevice(rxeDevice())
			f.SetPort(1, rxePort())
			c.set(f)
			got, err := fakeContext(t, f).QueryDevice()
			if err != nil {
				t.Fatalf("QueryDevice failed with the probe: %v", err)
			}
			if got.MaxInlineData != 0 || !attrListed(got, "MaxInlineData") {
				t.Errorf("MaxInlineData %d, unknown %v; want it listed as unknown", got.MaxInlineData, got.Unknown)
			}
			if pds, cqs, qps := f.Live(); pds+cqs+qps != 0 {
				t.Errorf("%d PDs, %d CQs, %d QPs left", pds, cqs, qps)
			}
		})
	}
}

// TestFakeQueryDeviceFields gives every field of ibv_device_attr_ex its
// own value, so a field read into the wrong place shows.
func TestFakeQueryDeviceFields(t *testing.T) {
	f := newFake(t)
	f.SetDevice(fakeverbs.Device{
		FWVer: "1.2.3", NodeGUID: 0x0102030405060708, SysImageGUID: 0x1112131415161718,
		MaxMRSize: 101, PageSizeCap: 102, VendorID: 103, VendorPartID: 104, HWVer: 105,
		MaxQP: 106, MaxQPWR: 107, DeviceCapFlags: 108, MaxSGE: 109, MaxSGERD: 110, MaxCQ: 111,
		MaxCQE: 112, MaxMR: 113, MaxPD: 114, MaxQPRdAtom: 115, MaxEERdAtom: 116, MaxResRdAtom: 117,
		MaxQPInitRdAtom: 118, MaxEEInitRdAtom: 119, AtomicCap: 2, MaxEE: 120, MaxRDD: 121, MaxMW: 122,
		MaxRawIPv6QP: 123, MaxRawEthyQP: 124, MaxMcastGrp: 125, MaxMcastQPAttach: 126,
		MaxTotalMcastQPAttach: 127, MaxAH: 128, MaxFMR: 129, MaxMapPerFMR: 130, MaxSRQ: 131,
		MaxSRQWR: 132, MaxSRQSGE: 133, MaxPkeys: 134, LocalCAAckDelay: 135, PhysPortCnt: 2,
		ODPGeneral: 3, ODPRC: 0x3f, ODPUC: 1, ODPUD: 2, ODPXRC: 4,
		CompletionTimestampMask: 0xffffffffffff, HCACoreClock: 156250, DeviceCapFlagsEx: 1<<32 | 108,
		TSOMax: 262144, TSOQPTs: 1<<4 | 1<<8,
		RSSQPTs: 1 << 8, RSSMaxTables: 136, RSSMaxTableSize: 137, RSSHashFields: 0x3ff, RSSHashFunction: 1,
		MaxWQTypeRQ: 138, PacingMin: 1, PacingMax: 100000000, PacingQPTs: 1<<2 | 1<<8, RawPacketCaps: 0xf,
		TMMaxRndvHdrSize: 139, TMMaxNumTags: 140, TMFlags: 1, TMMaxOps: 141, TMMaxSGE: 142,
		CQModMaxCount: 143, CQModMaxPeriod: 144, MaxDMSize: 145, PhysPortCntEx: 2,
		NumCompVectors: 7, MaxInline: 220,
	})
	f.SetPort(1, fakeverbs.Port{MaxMsgSz: 146})
	got, err := fakeContext(t, f).QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	qp := func(ts ...verbsio.QPType) []verbsio.QPType { return ts }
	want := verbsio.DeviceAttr{
		FWVer: "1.2.3", NodeGUID: 0x0102030405060708, SysImageGUID: 0x1112131415161718,
		VendorID: 103, VendorPartID: 104, HWVer: 105, MaxMRSize: 101, PageSizeCap: 102,
		MaxQP: 106, MaxQPWR: 107, DeviceCapFlags: 1<<32 | 108, MaxSGE: 109, MaxSGERD: 110, MaxCQ: 111,
		MaxCQE: 112, MaxMR: 113, MaxPD: 114, MaxQPRdAtom: 115, MaxQPInitRdAtom: 118, MaxResRdAtom: 117,
		AtomicCap: verbsio.AtomicGlob, MaxSRQ: 131, MaxSRQWR: 132, MaxSRQSGE: 133, MaxAH: 128,
		MaxPkeys: 134, LocalCAAckDelay: 135, PhysPortCnt: 2,
		MaxInlineData: 220, MaxMsgSize: 146,
		TSO: verbsio.TSOCaps{MaxTSO: 262144, SupportedQP: qp(verbsio.QPTypeUD, verbsio.QPTypeRawPacket)},
		PacketPacing: verbsio.PacingCaps{RateLimitMinKbps: 1, RateLimitMaxKbps: 100000000,
			SupportedQP: qp(verbsio.QPTypeRC, verbsio.QPTypeRawPacket)},
		MaxDMSize: 145, RawPacketCaps: 0xf, SendPaths: []string{"generic", "inline"},
		Ext: &verbsio.DeviceAttrEx{
			MaxEERdAtom: 116, MaxEEInitRdAtom: 119, MaxEE: 120, MaxRDD: 121, MaxMW: 122, MaxRawIPv6QP: 123,
			MaxRawEthyQP: 124, MaxMcastGrp: 125, MaxMcastQPAttach: 126, MaxTotalMcastQPAttach: 127,
			MaxFMR: 129, MaxMapPerFMR: 130,
			ODP:                     verbsio.ODPCaps{General: 3, RC: 0x3f, UC: 1, UD: 2, XRC: 4},
			CompletionTimestampMask: 0xffffffffffff, HCACoreClock: 156250, DeviceCapFlagsEx: 1<<32 | 108,
			RSS: verbsio.RSSCaps{SupportedQP: qp(verbsio.QPTypeRawPacket), MaxRWQIndirectionTables: 136,
				MaxRWQIndirectionTableSize: 137, RxHashFieldsMask: 0x3ff, RxHashFunction: 1},
			MaxWQTypeRQ:    138,
			TM:             verbsio.TMCaps{MaxRndvHdrSize: 139, MaxNumTags: 140, Flags: 1, MaxOps: 141, MaxSGE: 142},
			CQMod:          verbsio.CQModCaps{MaxCQCount: 143, MaxCQPeriod: 144},
			NumCompVectors: 7,
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("QueryDevice (-want +got):\n%s", d)
	}
}

// TestFakeQueryDeviceLegacy: a provider without the extended query
// answers ibv_query_device only; the extended fields are listed unknown,
// the rest of ibv_device_attr is still reported.
func TestFakeQueryDeviceLegacy(t *testing.T) {
	f := newFake(t)
	d := rxeDevice()
	d.Legacy = true
	d.TSOMax = 65536 // not read: only the extended query has it
	f.SetDevice(d)
	f.SetPort(1, rxePort())
	got, err := fakeContext(t, f).QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"TSO", "PacketPacing", "MaxDMSize", "RawPacketCaps", "ODPCaps",
		"CompletionTimestampMask", "HCACoreClock", "DeviceCapFlagsEx", "RSSCaps", "MaxWQTypeRQ", "TMCaps", "CQModCaps"} {
		if !attrListed(got, name) {
			t.Errorf("%s not listed unknown (Unknown %v)", name, got.Unknown)
		}
	}
	if got.TSO.MaxTSO != 0 || got.Ext == nil || got.Ext.MaxMW != 524287 || got.Ext.NumCompVectors != 1 ||
		got.MaxQP != 1048560 || got.MaxInlineData != 512 || attrListed(got, "MaxInlineData") {
		t.Errorf("legacy answer: %+v, Ext %+v", got, got.Ext)
	}
}

func TestFakeQueryPort(t *testing.T) {
	f := newFake(t)
	d := rxeDevice()
	d.PhysPortCnt = 2
	f.SetDevice(d)
	p := rxePort()
	p.PortCapFlags2, p.BadPkeyCntr, p.QKeyViolCntr, p.SubnetTimeout, p.InitTypeReply = 0x21, 3, 4, 18, 5
	p.LID, p.SMLID, p.LMC, p.SMSL = 7, 1, 2, 3
	f.SetPort(2, p)
	c := fakeContext(t, f)
	got, err := c.QueryPort(2)
	if err != nil {
		t.Fatal(err)
	}
	want := verbsio.PortAttr{State: verbsio.PortActive, MaxMTU: verbsio.MTU4096, ActiveMTU: verbsio.MTU1024,
		GIDTblLen: 1024, PortCapFlags: 0x00010000, MaxMsgSize: 0x800000, LID: 7, SMLID: 1, LMC: 2, SMSL: 3,
		MaxVLNum: 1, PkeyTblLen: 1, ActiveWidth: 1, ActiveSpeed: 1, PhysState: 5, LinkLayer: verbsio.LinkLayerEthernet,
		Ext: &verbsio.PortAttrEx{PortCapFlags2: 0x21, BadPkeyCntr: 3, QKeyViolCntr: 4, SubnetTimeout: 18, InitTypeReply: 5}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("QueryPort(2) (-want +got):\n%s", d)
	}
	for _, port := range []uint8{0, 3} {
		if _, err := c.QueryPort(port); !errors.Is(err, unix.EINVAL) {
			t.Errorf("QueryPort(%d) = %v, want EINVAL", port, err)
		}
	}
}

func TestFakeQueryGIDTable(t *testing.T) {
	f := newFake(t)
	d := rxeDevice()
	d.PhysPortCnt = 2
	f.SetDevice(d)
	f.SetPort(1, rxePort())
	p2 := rxePort()
	p2.GIDTblLen = 4
	f.SetPort(2, p2)
	ll := mustGIDBytes(t, "fe80::5054:ff:fe77:1")
	v4 := mustGIDBytes(t, "::ffff:10.77.0.1")
	f.SetGIDs([]fakeverbs.GID{
		{GID: ll, Index: 0, Port: 1, Type: 2, NdevIfindex: 1},
		{GID: v4, Index: 1, Port: 1, Type: 2, NdevIfindex: 1},
		{GID: v4, Index: 3, Port: 2, Type: 1},
	})
	c := fakeContext(t, f)
	got, err := c.QueryGIDTable(1)
	if err != nil {
		t.Fatal(err)
	}
	want := []verbsio.GIDEntry{
		{Index: 0, GID: ll, Type: verbsio.GIDTypeRoCEv2, Netdev: "lo"},
		{Index: 1, GID: v4, Type: verbsio.GIDTypeRoCEv2, Netdev: "lo"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("port 1 (-want +got):\n%s", d)
	}
	got, err = c.QueryGIDTable(2)
	if err != nil || len(got) != 1 || got[0].Index != 3 || got[0].Type != verbsio.GIDTypeRoCEv1 || got[0].Netdev != "" {
		t.Errorf("port 2: %+v, %v", got, err)
	}
	if _, err := c.QueryGIDTable(3); !errors.Is(err, unix.EINVAL) {
		t.Errorf("port 3: %v, want EINVAL", err)
	}
}

func mustGIDBytes(t *testing.T, s string) [16]byte {
	t.Helper()
	g, err := verbsio.ParseGID(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestFakeClose: Close closes the device through the table once, and a
// closed context refuses queries.
func TestFakeClose(t *testing.T) {
	f := newFake(t)
	f.SetDevice(rxeDevice())
	c := newContext("fake", f.Context(), f.Verbs())
	if err := c.Close(); err != nil || f.Closed() != 1 {
		t.Fatalf("Close = %v, close_device calls %d", err, f.Closed())
	}
	if err := c.Close(); err != nil || f.Closed() != 1 {
		t.Errorf("second Close = %v, close_device calls %d", err, f.Closed())
	}
	if _, err := c.QueryDevice(); !errors.Is(err, unix.EBADF) {
		t.Errorf("QueryDevice after Close = %v, want EBADF", err)
	}
}
