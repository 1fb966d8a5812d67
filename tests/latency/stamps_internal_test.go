package latency

import (
	"slices"
	"testing"

	"github.com/rperf/rperf/reports"
)

// TestStampSampler checks the completion-timestamp samples against
// figures computed by hand: the difference of consecutive stamps, masked
// to the clock's bits and converted with hca_core_clock, from the
// completion the software clock would start from (iterations mode) or
// between completions whose posts lay in the sample window (duration
// mode).
func TestStampSampler(t *testing.T) {
	const mask48 = 1<<48 - 1
	cases := []struct {
		name  string
		khz   uint64
		mask  uint64
		dur   bool
		first int64
		ts    []uint64
		in    []bool // duration mode
		want  []int64
	}{
		{
			// 156.25 MHz (6.4 ns a tick), no warm-up: the first
			// completion only starts the first sample.
			name: "156250kHz", khz: 156250, mask: mask48, first: 1,
			ts:   []uint64{1000, 1100, 1350, 1400},
			want: []int64{640, 1600, 320}, // 100, 250 and 50 ticks
		},
		{
			// The clock's 48 bits wrap between two completions:
			// 2^48-10 to 5 is 15 ticks.
			name: "wrap", khz: 156250, mask: mask48, first: 1,
			ts:   []uint64{mask48 - 19, mask48 - 9, 5},
			want: []int64{64, 96}, // 10 and 15 ticks
		},
		{
			// 2 warm-up iterations: first is Warmup+1, so the samples
			// are the differences ending at the 4th and 5th stamp.
			name: "warmup", khz: 1_000_000, mask: ^uint64(0), first: 3,
			ts:   []uint64{0, 10, 20, 30, 45},
			want: []int64{10, 15},
		},
		{
			// 1 GHz reference clock of 1 MHz: a tick is 1 us.
			name: "1MHz", khz: 1000, mask: ^uint64(0), first: 1,
			ts:   []uint64{7, 9, 12},
			want: []int64{2000, 3000},
		},
		{
			// Duration mode: a sample needs both completions' posts
			// in the window.
			name: "duration", khz: 1_000_000, mask: ^uint64(0), dur: true,
			ts:   []uint64{100, 200, 300, 450, 500, 700},
			in:   []bool{false, true, true, true, false, false},
			want: []int64{100, 150},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, err := reports.NewRecorder(reports.RecorderOptions{Expected: len(c.ts)})
			if err != nil {
				t.Fatal(err)
			}
			ts := &stampSampler{rec: rec, khz: c.khz, mask: c.mask, dur: c.dur, first: c.first}
			for i, s := range c.ts {
				ts.take(s, c.dur && c.in[i])
			}
			if got := rec.Samples(); !slices.Equal(got, c.want) {
				t.Errorf("samples %v, want %v", got, c.want)
			}
			var sum int64
			for _, w := range c.want {
				sum += w
			}
			if ts.span != sum {
				t.Errorf("span %d ns, want %d", ts.span, sum)
			}
		})
	}
}

// TestStampSamplerFollowsSampler checks that a run's stamp sampler takes
// the software sampler's warm-up and mode, so that both clocks count the
// same iterations.
func TestStampSamplerFollowsSampler(t *testing.T) {
	cfg := Default(Write)
	cfg.Warmup = 7
	r := &runner{cfg: &cfg}
	var err error
	sm := r.newSampler(0)
	if sm.first != 8 || sm.dur {
		t.Fatalf("sampler first %d dur %v", sm.first, sm.dur)
	}
	// A sampler in duration mode says whether its last post lay in the
	// window.
	cfg.Duration, cfg.Margin = 4e9, 1e9
	if r.rec, err = reports.NewRecorder(reports.RecorderOptions{}); err != nil {
		t.Fatal(err)
	}
	sm = r.newSampler(0)
	for _, c := range []struct {
		post int64
		in   bool
	}{{5e8, false}, {1e9, true}, {2.9e9, true}, {3e9, false}} {
		sm.stamp(c.post)
		if got := sm.inWindow(); got != c.in {
			t.Errorf("post at %d ns: inWindow %v, want %v", c.post, got, c.in)
		}
	}
}
