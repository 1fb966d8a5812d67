package sysfs

import "testing"

func TestMTU(t *testing.T) {
	for m := MTU256; m <= MTU4096; m++ {
		back, ok := MTUFromBytes(m.Bytes())
		if !ok || back != m {
			t.Errorf("MTUFromBytes(%d) = %v, %v", m.Bytes(), back, ok)
		}
	}
	if _, ok := MTUFromBytes(1500); ok {
		t.Error("MTUFromBytes(1500) ok, want false")
	}
	if got := MTU(0).Bytes(); got != 0 {
		t.Errorf("MTU(0).Bytes() = %d", got)
	}
}

func TestRoCEMTU(t *testing.T) {
	tests := []struct {
		netdev, overhead int
		want             MTU
	}{
		{1500, RXEHeaderOverhead, MTU1024}, // the rxe capture
		{1500, RoCEHeaderOverhead, MTU1024},
		{9000, RoCEHeaderOverhead, MTU4096},
		{4200, RoCEHeaderOverhead, MTU4096},
		{4191, RoCEHeaderOverhead, MTU2048}, // 4096 needs 4192
		{4192, RoCEHeaderOverhead, MTU4096},
		{2144, RoCEHeaderOverhead, MTU2048},
		{2143, RoCEHeaderOverhead, MTU1024},
		{1110, RXEHeaderOverhead, MTU1024}, // rxe's smaller allowance keeps 1024 ...
		{1110, RoCEHeaderOverhead, MTU512}, // ... where iboe_get_mtu drops to 512
		{352, RoCEHeaderOverhead, MTU256},
		{351, RoCEHeaderOverhead, 0},
		{0, RoCEHeaderOverhead, 0},
	}
	for _, tt := range tests {
		if got := RoCEMTU(tt.netdev, tt.overhead); got != tt.want {
			t.Errorf("RoCEMTU(%d, %d) = %v, want %v", tt.netdev, tt.overhead, got, tt.want)
		}
	}
}

func TestRoCEOverheadFor(t *testing.T) {
	tests := []struct {
		machine string
		want    int
	}{
		{"rxe", RXEHeaderOverhead},
		{"roce", RoCEHeaderOverhead},
		{"ib", RoCEHeaderOverhead},
	}
	for _, tt := range tests {
		d := mustFS(t, tt.machine).Report().Devices[0]
		if got := RoCEOverheadFor(d); got != tt.want {
			t.Errorf("RoCEOverheadFor(%s) = %d, want %d", tt.machine, got, tt.want)
		}
	}
	// siw has a parent but is an RNIC, not soft RoCE.
	siw := mustFS(t, "missing").Report().Devices[2]
	if IsSoftRoCE(siw) {
		t.Errorf("IsSoftRoCE(%s) = true", siw.Name)
	}
}
