package bw

import (
	"testing"

	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
)

// TestSendsInline pins perftest's rule for the inline flag: the size the
// test asked for decides, never what the device granted (rxe grants 16
// bytes or more for a request of 0), and READ and atomics never go
// inline (rxe fails them with LOC_PROT_ERR; atomic-bw once did exactly
// that on rxe0).
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
		{"write default -I 0", session.WriteBW, sendpath.Generic, 0, []int{2}, 2, false},
		{"write -I 64 at 64", session.WriteBW, sendpath.Generic, 64, []int{64}, 64, true},
		{"write -I 64 at 65", session.WriteBW, sendpath.Generic, 64, []int{65}, 65, false},
		{"send -I 128", session.SendBW, sendpath.Generic, 128, []int{2, 128}, 2, true},
		{"inline path raises to the largest size", session.WriteBW, sendpath.Inline, 0, []int{2, 4096}, 4096, true},
		{"dm never", session.WriteBW, sendpath.DM, 64, []int{8}, 8, false},
		{"read never", session.ReadBW, sendpath.Generic, 64, []int{8}, 8, false},
		{"atomic never", session.AtomicBW, sendpath.Generic, 64, []int{8}, 8, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default(tt.test)
			c.Path, c.Inline, c.Sizes = tt.path, tt.inline, tt.sizes
			if got := c.SendsInline(tt.size); got != tt.want {
				t.Errorf("SendsInline(%d) = %v, want %v", tt.size, got, tt.want)
			}
		})
	}
}
