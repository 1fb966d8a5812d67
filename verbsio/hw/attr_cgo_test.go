//go:build linux && cgo && ibverbs

package hw

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rperf/rperf/verbsio"
)

func TestQPAttrTranslation(t *testing.T) {
	gid := verbsio.GIDFromAddr(netip.MustParseAddr("fe80::5054:ff:fe77:1"))
	a := verbsio.QPAttr{
		State: verbsio.QPStateRTS, CurState: verbsio.QPStateRTR, PathMTU: verbsio.MTU4096,
		QKey: 0x11111111, RQPSN: 0xabcdef, SQPSN: 0x123456, DestQPN: 0xfedcba,
		AccessFlags: verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead,
		Cap:         verbsio.QPCap{MaxSendWR: 1, MaxRecvWR: 2, MaxSendSGE: 3, MaxRecvSGE: 4, MaxInlineData: 5},
		AH: verbsio.AHAttr{DLID: 0x17, SL: 3, PortNum: 2, IsGlobal: true, DGID: gid, SGIDIndex: 3,
			HopLimit: 64, TrafficClass: 106, FlowLabel: 0xbeef},
		PkeyIndex: 1, PortNum: 2, Timeout: 14, RetryCnt: 7, RNRRetry: 6, MinRNRTimer: 12,
		MaxRdAtomic: 16, MaxDestRdAtomic: 8, SQDrainNotify: true, RateLimit: 1000,
	}
	all := qpAttrAll | verbsio.QPAttrRateLimit
	c := qpAttrToC(&a, all)
	if d := cmp.Diff(a, qpAttrFromC(&c)); d != "" {
		t.Errorf("round trip with every mask bit (-want +got):\n%s", d)
	}
	if c.qp_state != 3 || c.path_mtu != 5 || c.dest_qp_num != 0xfedcba || c.ah_attr.is_global != 1 || c.ah_attr.grh.sgid_index != 3 {
		t.Errorf("C attributes: %+v", c)
	}

	// Only the masked fields are translated.
	c = qpAttrToC(&a, verbsio.QPAttrState|verbsio.QPAttrPkeyIndex|verbsio.QPAttrPort|verbsio.QPAttrAccessFlags)
	want := verbsio.QPAttr{State: verbsio.QPStateRTS, PkeyIndex: 1, PortNum: 2, AccessFlags: a.AccessFlags}
	if d := cmp.Diff(want, qpAttrFromC(&c)); d != "" {
		t.Errorf("RESET->INIT mask (-want +got):\n%s", d)
	}
}

func TestAHAttrTranslation(t *testing.T) {
	for _, a := range []verbsio.AHAttr{
		{DLID: 0x1, SL: 0, PortNum: 1}, // InfiniBand, no GRH
		{PortNum: 1, IsGlobal: true, DGID: verbsio.GIDFromAddr(netip.MustParseAddr("10.0.0.2")), SGIDIndex: 1, HopLimit: 1},
	} {
		c := ahAttrToC(&a)
		if d := cmp.Diff(a, ahAttrFromC(&c)); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	}
	// Without IsGlobal the GRH stays zero even if the caller filled it.
	c := ahAttrToC(&verbsio.AHAttr{PortNum: 1, SGIDIndex: 5, HopLimit: 9})
	if c.is_global != 0 || c.grh.sgid_index != 0 || c.grh.hop_limit != 0 {
		t.Errorf("GRH filled without IsGlobal: %+v", c.grh)
	}
}
