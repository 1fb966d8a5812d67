package compare

import (
	"testing"

	"github.com/rperf/rperf/reports"
)

// A generic record matches a record that names no path (written before
// send paths existed, or by a test run without --path), and no other.
func TestKeyOfGenericPath(t *testing.T) {
	plain := reports.Result{Test: "send_bw", Bytes: 64}
	generic := reports.Result{Test: "send_bw", Bytes: 64, Path: "generic"}
	dv := reports.Result{Test: "send_bw", Bytes: 64, Path: "dv"}
	if KeyOf(plain) != KeyOf(generic) || KeyOf(generic).String() != "send_bw 64B" {
		t.Errorf("generic %v, no path %v", KeyOf(generic), KeyOf(plain))
	}
	if KeyOf(dv) == KeyOf(generic) || KeyOf(dv).String() != "send_bw 64B path=dv" {
		t.Errorf("dv %v", KeyOf(dv))
	}
}
