package sendpath

import (
	"strings"
	"testing"

	"github.com/rperf/rperf/verbsio"
)

func TestParseAndNames(t *testing.T) {
	for _, p := range All {
		q, err := Parse(" " + strings.ToUpper(p.String()) + " ")
		if err != nil || q != p {
			t.Errorf("Parse(%s) = %v, %v", p, q, err)
		}
	}
	if _, err := Parse("wr"); err == nil || !strings.Contains(err.Error(), "use generic, burst, inline, dm, tso, dv") {
		t.Errorf("Parse(wr): %v", err)
	}
	if Names([]Path{Generic, DV}) != "generic, dv" || Path(9).String() != "Path(9)" {
		t.Error("names")
	}
	if Generic.Segmenter() != verbsio.SegmentDefault || TSO.Segmenter() != verbsio.SegmentKernel {
		t.Error("segmenters")
	}
	udp, shm := verbsio.DeviceInfo{Fabric: "udp"}, verbsio.DeviceInfo{Fabric: "shm"}
	gso, nogso := verbsio.DeviceAttr{TSO: verbsio.TSOCaps{MaxTSO: 64000}}, verbsio.DeviceAttr{}
	for _, c := range []struct {
		seg  verbsio.Segmenter
		d    verbsio.DeviceInfo
		attr verbsio.DeviceAttr
		want string
	}{
		{verbsio.SegmentKernel, udp, gso, "kernel"},
		{verbsio.SegmentEngine, udp, gso, "engine"},
		{verbsio.SegmentDefault, udp, gso, "kernel (the provider's default)"},
		{verbsio.SegmentDefault, udp, nogso, "engine (the provider's default)"},
		{verbsio.SegmentKernel, shm, gso, ""},
	} {
		if got := SegmenterName(c.seg, c.d, c.attr); got != c.want {
			t.Errorf("SegmenterName(%s, %s): %q, want %q", c.seg, c.d.Fabric, got, c.want)
		}
	}
}

func TestSupported(t *testing.T) {
	a := verbsio.DeviceAttr{SendPaths: []string{"dv", "generic", "tso", "warp"}}
	if got := Names(Supported(a)); got != "generic, tso, dv" {
		t.Errorf("Supported = %s", got)
	}
	if got := Names(Supported(verbsio.DeviceAttr{})); got != "generic" {
		t.Errorf("no list: %s", got)
	}
	if err := CheckDevice(Burst, a, "x0"); err == nil || err.Error() != "x0 does not support the burst send path; it supports generic, tso, dv" {
		t.Errorf("CheckDevice: %v", err)
	}
	if err := CheckDevice(DV, a, "x0"); err != nil {
		t.Error(err)
	}
}

// TestApplies is the table of which path applies to which test.
func TestApplies(t *testing.T) {
	ops := []verbsio.Opcode{verbsio.OpSend, verbsio.OpRDMAWrite, verbsio.OpRDMARead, verbsio.OpAtomicFetchAdd}
	// Rows: the path; columns: send, write, read, atomic; latency then
	// bandwidth, over RC.
	want := map[Path]string{
		Generic: "++++ ++++",
		Burst:   "+--- +---",
		Inline:  "++-- ++--",
		DM:      "++++ ++++",
		TSO:     "---- ++--",
		DV:      "++-- ++--",
	}
	for p, w := range want {
		var got strings.Builder
		for _, bw := range []bool{false, true} {
			if bw {
				got.WriteByte(' ')
			}
			for _, op := range ops {
				if Applies(p, Test{Op: op, Bandwidth: bw, Type: verbsio.QPTypeRC}) == nil {
					got.WriteByte('+')
				} else {
					got.WriteByte('-')
				}
			}
		}
		if got.String() != w {
			t.Errorf("%s applies %q, want %q", p, got.String(), w)
		}
	}
	if Applies(Burst, Test{Op: verbsio.OpSend, Type: verbsio.QPTypeUD}) == nil || Applies(Burst, Test{Op: verbsio.OpSend, Type: verbsio.QPTypeUC}) != nil {
		t.Error("burst over UD/UC")
	}
	if Applies(DV, Test{Op: verbsio.OpSend, Type: verbsio.QPTypeUD}) == nil || Applies(Path(9), Test{}) == nil {
		t.Error("dv over UD, unknown path")
	}
}
