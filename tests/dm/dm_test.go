package dm_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/dm"
	"github.com/rperf/rperf/tests/internal/comparetest"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/paths"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
	_ "github.com/rperf/rperf/verbsio/soft"
)

func TestBufferBytesAndFit(t *testing.T) {
	if os.Getpagesize() != 4096 {
		t.Skip("the hand-computed sizes assume 4 KiB pages")
	}
	cases := []struct {
		size int
		typ  verbsio.QPType
		want int
	}{
		{2, verbsio.QPTypeRC, 8192},     // two regions of at least 64 bytes, page-rounded
		{4096, verbsio.QPTypeRC, 8192},  // exactly a page each
		{4097, verbsio.QPTypeRC, 16384}, // two pages each
		{4096, verbsio.QPTypeUD, 16384}, // the GRH's 40 bytes push a UD region past the page
		{128 << 10, verbsio.QPTypeRC, 256 << 10},
	}
	for _, c := range cases {
		if got := dm.BufferBytes(c.size, c.typ); got != c.want {
			t.Errorf("BufferBytes(%d, %s) = %d, want %d", c.size, c.typ, got, c.want)
		}
	}
	attr := verbsio.DeviceAttr{MaxDMSize: 256 << 10}
	got := dm.Fit([]int{2, 64 << 10, 128 << 10, 129 << 10, 256 << 10}, verbsio.QPTypeRC, attr)
	if !slices.Equal(got, []int{2, 64 << 10, 128 << 10}) {
		t.Errorf("Fit = %v", got)
	}
	d := dm.Default(latency.Write)
	if d.Latency.Sizes[0] != 2 || d.Latency.Sizes[len(d.Latency.Sizes)-1] != dm.DefaultMaxSize || d.Latency.Iterations != dm.DefaultIterations || d.Latency.Inline != 0 {
		t.Errorf("Default: %+v", d.Latency)
	}
	if a := dm.Default(latency.Atomic); !slices.Equal(a.Latency.Sizes, []int{session.AtomicSize}) {
		t.Errorf("atomic sizes %v", a.Latency.Sizes)
	}
	v := dm.Default(latency.Write)
	v.Latency.Validate = true
	if err := v.Check(); err == nil || !strings.Contains(err.Error(), "host memory") {
		t.Errorf("validation: %v", err)
	}
}

// Both sides of a write_lat comparison over shm0: each size gives a
// host-memory record and a device-memory one, with ratio and verdict.
func TestRun(t *testing.T) {
	cfg := dm.Default(latency.Write)
	cfg.Latency.Sizes, cfg.Latency.Iterations, cfg.Repetitions = []int{8, 1024}, 200, 3
	cfg.Latency.Params = oob.Params{Test: "dm-lat write-lat"}
	side := func(ctx context.Context, dev *verbsio.Context, connect paths.Connector) ([]reports.Result, error) {
		return dm.Run(ctx, dev, connect, cfg)
	}
	srv, cli := comparetest.Run(t, side, side)
	for side, rs := range map[string][]reports.Result{"client": cli, "server": srv} {
		if len(rs) != 4 {
			t.Fatalf("%s: %d records, want 4", side, len(rs))
		}
		for i, r := range rs {
			wantPath, wantLabel := "generic", "host memory"
			if i%2 == 1 {
				wantPath, wantLabel = "dm", "device memory"
			}
			if r.Path != wantPath || dm.Label(r) != wantLabel || r.Bytes != int64(cfg.Latency.Sizes[i/2]) || r.Repetitions != 3 || r.RatioToGeneric == nil || r.Latency == nil {
				t.Errorf("%s: record %d: %s %d B reps %d", side, i, r.Path, r.Bytes, r.Repetitions)
			}
		}
	}
	// Sizes whose buffers do not fit device memory are refused.
	big := dm.Default(latency.Write)
	big.Latency.Sizes = []int{200 << 10}
	dev, _ := verbsio.Open("shm0")
	defer dev.Close()
	_, err := dm.Run(context.Background(), dev, func(context.Context) (*oob.Conn, error) { t.Fatal("connected"); return nil, nil }, big)
	if err == nil || !strings.Contains(err.Error(), "need 409600 bytes of device memory, more than shm0's 262144") {
		t.Errorf("200 KiB: %v", err)
	}
}
