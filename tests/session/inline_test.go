package session_test

import (
	"testing"

	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
)

// TestSendsInline pins perftest's rule for the inline flag, for both
// families: the size the test asked for decides, never what the device
// granted (rxe grants 16 bytes or more for a request of 0), and READs and
// atomics never go inline (rxe fails them with LOC_PROT_ERR; atomic-bw
// once did exactly that on rxe0).
func TestSendsInline(t *testing.T) {
	tests := []struct {
		name   string
		test   session.Test
		path   sendpath.Path
		inline int
		sizes  []int
		size   int
		want   bool
	}{
		{"write_bw -I 0", session.WriteBW, sendpath.Generic, 0, []int{2}, 2, false},
		{"write_bw -I 64 at 64", session.WriteBW, sendpath.Generic, 64, []int{64}, 64, true},
		{"write_bw -I 64 at 65", session.WriteBW, sendpath.Generic, 64, []int{65}, 65, false},
		{"send_bw -I 128", session.SendBW, sendpath.Generic, 128, []int{2, 128}, 2, true},
		{"write_lat default at 2", session.WriteLat, sendpath.Generic, -1, []int{2}, 2, true},
		{"send_lat -I 64 at 65", session.SendLat, sendpath.Generic, 64, []int{65}, 65, false},
		{"inline path raises to the largest size", session.WriteBW, sendpath.Inline, 0, []int{2, 4096}, 4096, true},
		{"dm never", session.WriteLat, sendpath.DM, 64, []int{8}, 8, false},
		{"read_bw never", session.ReadBW, sendpath.Generic, 64, []int{8}, 8, false},
		{"read_lat never", session.ReadLat, sendpath.Generic, 64, []int{8}, 8, false},
		{"atomic_bw never", session.AtomicBW, sendpath.Generic, 64, []int{8}, 8, false},
		{"atomic_lat never", session.AtomicLat, sendpath.Generic, 64, []int{8}, 8, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := session.Default(tt.test)
			c.Path, c.Sizes = tt.path, tt.sizes
			if tt.inline >= 0 {
				c.Inline = tt.inline
			}
			if got := c.SendsInline(tt.size); got != tt.want {
				t.Errorf("SendsInline(%d) = %v, want %v (inline %d)", tt.size, got, tt.want, c.Inline)
			}
		})
	}
}
