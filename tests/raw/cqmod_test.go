package raw_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/tests/raw"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
)

// TestRawBWCQMod: raw-bw's client asks for a send completion every CQ
// moderation frames and for the last, on every path, as perftest does:
// with -Q k, ceil(frames/k) completions for the warm-up and the
// iterations; by default 100 capped at the tx depth, and 1 for sends
// above 8 KiB. The frames all leave (the engine's count), and bad
// moderations are refused.
func TestRawBWCQMod(t *testing.T) {
	p := netns.Setup(t, netns.Options{})
	a, b := openEnd(t, p.A), openEnd(t, p.B)
	const n, warm = 1000, 8
	tso := 54 + 9*1000 // a TCP tso send of nine 1000-byte segments: above 8 KiB
	for _, tc := range []struct {
		name       string
		path       sendpath.Path
		size, mss  int
		cqMod, tx  int
		wantMod    int
		duration   time.Duration
		iterations int
	}{
		{"generic default", sendpath.Generic, 64, 0, 0, 128, 100, 0, n},
		{"generic -Q 1", sendpath.Generic, 64, 0, 1, 128, 1, 0, n},
		{"generic -Q 7", sendpath.Generic, 64, 0, 7, 128, 7, 0, n},
		{"generic -Q 512 capped at -t 64", sendpath.Generic, 64, 0, 512, 64, 64, 0, n},
		{"generic default capped at -t 16", sendpath.Generic, 64, 0, 0, 16, 16, 0, n},
		{"burst default", sendpath.Burst, 64, 0, 0, 128, 100, 0, n},
		{"burst -Q 13", sendpath.Burst, 64, 0, 13, 128, 13, 0, n},
		{"inline -Q 32", sendpath.Inline, 128, 0, 32, 128, 32, 0, n},
		{"tso default above 8 KiB", sendpath.TSO, tso, 1000, 0, 128, 1, 0, 100},
		{"tso -Q 10", sendpath.TSO, tso, 1000, 10, 128, 10, 0, 100},
		{"generic duration -Q 50", sendpath.Generic, 64, 0, 50, 128, 50, 300 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := raw.Default(session.RawBW)
			c.Frame = frames(a, b, 6000, 7000)
			c.Frame.TCP = tc.path == sendpath.TSO
			c.Sizes, c.Path, c.MSS, c.CQMod, c.TxDepth = []int{tc.size}, tc.path, tc.mss, tc.cqMod, tc.tx
			c.Iterations, c.Warmup, c.Duration = tc.iterations, warm, tc.duration
			if tc.duration > 0 {
				c.Iterations, c.Warmup = 0, 0
			}
			c.StallTimeout = 5 * time.Second
			if got := c.CQModFor(tc.size); got != tc.wantMod {
				t.Fatalf("CQModFor(%d) = %d, want %d", tc.size, got, tc.wantMod)
			}
			before := a.dev.Counters()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, wcs, err := raw.RunCountingSends(ctx, a.dev, &c)
			if err != nil {
				t.Fatal(err)
			}
			sends := c.Warmup + c.Iterations
			if tc.duration > 0 {
				sends = int(res[0].Iterations) // every frame posted completed
			} else if res[0].Iterations != int64(tc.iterations) {
				t.Errorf("%d frames measured, want %d", res[0].Iterations, tc.iterations)
			}
			if want := (sends + tc.wantMod - 1) / tc.wantMod; wcs != want || sends == 0 {
				t.Errorf("%d send completions for %d sends with CQ moderation %d, want %d", wcs, sends, tc.wantMod, want)
			}
			after := a.dev.Counters()
			frames := sends
			if tc.path == sendpath.TSO {
				frames = sends * 9
				if d := after["tx_tso_sends"] - before["tx_tso_sends"]; d != uint64(sends) {
					t.Errorf("engine: %d TSO sends, want %d", d, sends)
				}
			}
			if d := after["tx_frames"] - before["tx_frames"]; d != uint64(frames) || after["tx_errors"] != before["tx_errors"] {
				t.Errorf("engine: %d frames sent (%d errors), want %d", d, after["tx_errors"]-before["tx_errors"], frames)
			}
			t.Logf("%d sends, %d completions, %.3f Mpps", sends, wcs, res[0].MsgRateMpps)
		})
	}
}

// TestRawCQModCheck: a moderation outside 1 to 1024, or on a side with
// no sends to moderate, is refused, naming the field.
func TestRawCQModCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		tune func(c *raw.Config)
		want string
	}{
		{"zero is the default", func(c *raw.Config) { c.CQMod = 0 }, ""},
		{"1024", func(c *raw.Config) { c.CQMod = 1024 }, ""},
		{"negative", func(c *raw.Config) { c.CQMod = -1 }, "CQ moderation must be between 1 and 1024"},
		{"1025", func(c *raw.Config) { c.CQMod = 1025 }, "CQ moderation must be between 1 and 1024"},
		{"server", func(c *raw.Config) { c.CQMod, c.Server = 8, true }, "only raw-bw's client moderates its send completions"},
		{"raw-lat", func(c *raw.Config) { c.Test, c.CQMod = session.RawLat, 8 }, "only raw-bw's client moderates its send completions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := goodConfig()
			tc.tune(&c)
			err := c.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "CQMod")):
				t.Errorf("%v, want a CQMod problem %q", err, tc.want)
			}
		})
	}
}
