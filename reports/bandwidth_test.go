package reports

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBWAverage(t *testing.T) {
	tests := []struct {
		name                     string
		bytes, messages, elapsed int64
		want                     BWRates
	}{
		{
			// 65536 B × 1000 in 10 ms = 6.5536e9 B/s.
			// MiB/s: 6.5536e9 / 1048576 = 6250. Gb/s: 6.5536e9 × 8 / 1e9 = 52.4288
			// (the 8× trap: 6.5536 GB/s is bytes, not bits). Mpps: 1000 / 0.01 s / 1e6 = 0.1.
			name: "64KiB", bytes: 65536, messages: 1000, elapsed: 10_000_000,
			want: BWRates{MiBps: 6250, Gbps: 52.4288, Mpps: 0.1},
		},
		{
			// 2 B × 1e6 in 1 s: 2e6 B/s = 1.9073486328125 MiB/s (2e6/2^20),
			// 0.016 Gb/s, 1 Mpps. MiB (2^20) vs MB (10^6): 1.907 vs 2.
			name: "2B", bytes: 2, messages: 1_000_000, elapsed: 1_000_000_000,
			want: BWRates{MiBps: 1.9073486328125, Gbps: 0.016, Mpps: 1},
		},
		{
			// 1 MiB × 100 in 8 ms = 104857600 B / 0.008 s = 1.31072e10 B/s
			// = 12500 MiB/s = 104.8576 Gb/s; 100 / 0.008 s = 12500 msg/s = 0.0125 Mpps.
			name: "1MiB", bytes: 1 << 20, messages: 100, elapsed: 8_000_000,
			want: BWRates{MiBps: 12500, Gbps: 104.8576, Mpps: 0.0125},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BWAverage(tt.bytes, tt.messages, tt.elapsed)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, approx); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			// Gb/s and MiB/s describe the same rate: Gb/s = MiB/s × 2^20 × 8 / 1e9.
			if r := got.Gbps / (got.MiBps * (1 << 20) * 8 / 1e9); r < 1-1e-12 || r > 1+1e-12 {
				t.Errorf("units disagree: %v Gb/s vs %v MiB/s", got.Gbps, got.MiBps)
			}
		})
	}
	for _, bad := range [][3]int64{{-1, 1, 1}, {1, -1, 1}, {1, 1, 0}} {
		if _, err := BWAverage(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("BWAverage%v: no error", bad)
		}
	}
}

func TestFindPeakWindow(t *testing.T) {
	// X marks a timestamp perftest never stamps; the search must not read it.
	const X = -1 << 40
	tests := []struct {
		name              string
		posted, completed []int64
		postList, cqMod   int
		want              PeakWindow
	}{
		{
			// All windows (i ≤ j), t = C[j]-P[i], k = j-i+1:
			// (0,0) 100/1  (0,1) 110/2=55  (0,2) 120/3=40  (0,3) 200/4=50
			// (1,1) 100/1  (1,2) 110/2=55  (1,3) 190/3≈63  (2,2) 100  (2,3) 180/2=90  (3,3) 170
			// → best (0,2), 40 ns per message.
			name:   "every message stamped",
			posted: []int64{0, 10, 20, 30}, completed: []int64{100, 110, 120, 200},
			postList: 1, cqMod: 1,
			want: PeakWindow{First: 0, Last: 2, Ns: 120, Messages: 3},
		},
		{
			// cq_mod 2, n = 5: completions stamped at j = 1, 3 and the last, 4
			// (5 % 2 ≠ 0). For i = 0: (0,1) 60/2=30, (0,3) 100/4=25, (0,4) 150/5=30;
			// i = 1: j from roundUp(2,2)-1 = 1: (1,1) 50, (1,3) 90/3=30, (1,4) 140/4=35;
			// i = 2: j from 3: (2,3) 80/2=40, (2,4) 130/3≈43; i = 3: (3,3) 70, (3,4) 120/2=60;
			// i = 4: j from 5 (none), last (4,4) 110. Best (0,3), 25 ns/msg.
			name:   "cq_mod 2 with a final partial CQE",
			posted: []int64{0, 10, 20, 30, 40}, completed: []int64{X, 60, X, 100, 150},
			postList: 1, cqMod: 2,
			want: PeakWindow{First: 0, Last: 3, Ns: 100, Messages: 4},
		},
		{
			// post_list 2: windows start only at i = 0, 2 (posted[1], posted[3]
			// unstamped). i=0: (0,0) 50, (0,1) 60/2=30, (0,2) 90/3=30, (0,3) 92/4=23;
			// i=2: (2,2) 70, (2,3) 72/2=36. Best (0,3), 23 ns/msg.
			name:   "post_list 2",
			posted: []int64{0, X, 20, X}, completed: []int64{50, 60, 90, 92},
			postList: 2, cqMod: 1,
			want: PeakWindow{First: 0, Last: 3, Ns: 92, Messages: 4},
		},
		{
			// Ties keep the first window found: (0,0) 10/1 and (0,1) 20/2 tie.
			name:   "tie keeps first",
			posted: []int64{0, 5}, completed: []int64{10, 20},
			postList: 1, cqMod: 1,
			want: PeakWindow{First: 0, Last: 0, Ns: 10, Messages: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindPeakWindow(tt.posted, tt.completed, tt.postList, tt.cqMod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestFindPeakWindowErrors(t *testing.T) {
	tests := []struct {
		name              string
		posted, completed []int64
		postList, cqMod   int
	}{
		{"empty", nil, nil, 1, 1},
		{"length mismatch", []int64{0, 1}, []int64{5}, 1, 1},
		{"post list 0", []int64{0}, []int64{5}, 0, 1},
		{"cq mod 0", []int64{0}, []int64{5}, 1, 0},
		{"completion before post", []int64{0, 50}, []int64{40, 45}, 1, 1},
	}
	for _, tt := range tests {
		if _, err := FindPeakWindow(tt.posted, tt.completed, tt.postList, tt.cqMod); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

func TestBWPeak(t *testing.T) {
	// Best window 40 ns per 4096 B message: 4096 / 40e-9 = 1.024e11 B/s
	// = 97656.25 MiB/s = 819.2 Gb/s; 1/40 ns = 25 Mpps.
	got, w, err := BWPeak(4096, []int64{0, 10, 20, 30}, []int64{100, 110, 120, 200}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(BWRates{MiBps: 97656.25, Gbps: 819.2, Mpps: 25}, got, approx); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if w.NsPerMessage() != 40 {
		t.Errorf("NsPerMessage = %v, want 40", w.NsPerMessage())
	}
}

// stamps returns perftest-like timestamps for n messages: posted every gap
// ns, each completing lat ns after its post.
func stamps(n int, gap, lat int64) (posted, completed []int64) {
	posted, completed = make([]int64, n), make([]int64, n)
	for i := range n {
		posted[i] = int64(i) * gap
		completed[i] = posted[i] + lat
	}
	return posted, completed
}

func TestNewBandwidthResult(t *testing.T) {
	// 100 messages posted every 100 ns, each done 1000 ns later: elapsed =
	// C[99] - P[0] = 9900 + 1000 = 10900 ns. Average with 1000 B:
	// 1000·100 / 10900e-9 = 9.174311926605505e9 B/s → /2^20 = 8749.305... MiB/s,
	// ×8/1e9 = 73.39449541284404 Gb/s; 100/10900e-9/1e6 = 9.174311926605505 Mpps.
	// Peak: the whole run is the best window (t_ij/k falls as the window
	// grows): 10900/100 = 109 ns/msg → 1000/109e-9 = 9.174311926605505e9 B/s,
	// equal to the average here.
	posted, completed := stamps(100, 100, 1000)
	const bps = 1000 * 100 / 10900e-9
	want := Result{Test: "write_bw", Bytes: 1000, Iterations: 100, Mode: ModeIterations, ElapsedNs: 10900,
		Bandwidth: &Bandwidth{
			BWPeakGbps: bps * 8 / 1e9, BWAvgGbps: bps * 8 / 1e9,
			BWPeakMiBps: bps / (1 << 20), BWAvgMiBps: bps / (1 << 20),
			MsgRateMpps: 100 / 10900e-9 / 1e6, PeakStatus: PeakMeasured,
		}}
	got, err := NewBandwidthResult(BWSpec{Test: "write_bw", Bytes: 1000, Iterations: 100, Posted: posted, Completed: completed})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}

	// Two QPs: #iterations counts messages (50 per QP × 2).
	got, err = NewBandwidthResult(BWSpec{Test: "write_bw", Bytes: 1000, Iterations: 50, QPs: 2, Posted: posted, Completed: completed})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("2 QPs (-want +got)\n%s", diff)
	}
}

func TestNewBandwidthResultPeakDisabled(t *testing.T) {
	// Over the limit: no stamps needed, elapsed given; 20001 × 1000 B in 20.001 ms
	// = 1e9 B/s = 953.67431640625 MiB/s = 8 Gb/s, 1.00005 Mpps... (20001/20.001e-3/1e6 = 1).
	over, err := NewBandwidthResult(BWSpec{Test: "send_bw", Bytes: 1000, Iterations: 20001, ElapsedNs: 20_001_000})
	if err != nil {
		t.Fatal(err)
	}
	want := &Bandwidth{BWAvgGbps: 8, BWAvgMiBps: 1e9 / (1 << 20), MsgRateMpps: 1, PeakStatus: PeakOverIterationLimit}
	if diff := cmp.Diff(want, over.Bandwidth, approx); diff != "" {
		t.Errorf("over limit (-want +got)\n%s", diff)
	}
	// Exactly at the limit the peak is still measured (perftest: iters > 20000).
	posted, completed := stamps(PeakIterationLimit, 10, 100)
	at, err := NewBandwidthResult(BWSpec{Bytes: 8, Iterations: PeakIterationLimit, CQMod: 100, PostList: 100, Posted: posted, Completed: completed})
	if err != nil {
		t.Fatal(err)
	}
	if at.PeakStatus != PeakMeasured || at.BWPeakGbps <= 0 {
		t.Errorf("at the limit: status %q peak %v", at.PeakStatus, at.BWPeakGbps)
	}
	// -N: disabled by the user.
	off, err := NewBandwidthResult(BWSpec{Bytes: 8, Iterations: 10, NoPeak: true, ElapsedNs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if off.PeakStatus != PeakDisabled || off.BWPeakGbps != 0 || off.BWPeakMiBps != 0 {
		t.Errorf("NoPeak: status %q peak %v/%v", off.PeakStatus, off.BWPeakGbps, off.BWPeakMiBps)
	}
	// Peak asked for without stamps: an error, not a silent 0.
	if _, err := NewBandwidthResult(BWSpec{Bytes: 8, Iterations: 10, ElapsedNs: 1000}); err == nil {
		t.Error("peak without stamps: no error")
	}
}

func TestNewBandwidthDurationResult(t *testing.T) {
	// 4096 B × 1,000,000 messages in a 1 s window: 4.096e9 B/s = 3906.25 MiB/s
	// = 32.768 Gb/s; 1 Mpps. The peak is never measured in duration mode.
	got, err := NewBandwidthDurationResult(BWDurationSpec{Test: "write_bw", Bytes: 4096, Messages: 1_000_000, WindowNs: 1_000_000_000})
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Test: "write_bw", Bytes: 4096, Iterations: 1_000_000, Mode: ModeDuration, ElapsedNs: 1_000_000_000,
		Bandwidth: &Bandwidth{BWAvgMiBps: 3906.25, BWAvgGbps: 32.768, MsgRateMpps: 1, PeakStatus: PeakDurationMode}}
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestBandwidthPlus(t *testing.T) {
	a := Bandwidth{BWPeakGbps: 10, BWAvgGbps: 9, BWPeakMiBps: 1192, BWAvgMiBps: 1073, MsgRateMpps: 1, PeakStatus: PeakMeasured, LostMessages: 2}
	b := Bandwidth{BWPeakGbps: 0, BWAvgGbps: 8, BWPeakMiBps: 0, BWAvgMiBps: 954, MsgRateMpps: 0.5, PeakStatus: PeakDurationMode, LostMessages: 5}
	want := Bandwidth{BWPeakGbps: 10, BWAvgGbps: 17, BWPeakMiBps: 1192, BWAvgMiBps: 2027, MsgRateMpps: 1.5, PeakStatus: PeakDurationMode, LostMessages: 7}
	if diff := cmp.Diff(want, a.Plus(b)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// BenchmarkFindPeakWindow times the worst case perftest allows: 20000
// messages, post_list 1, cq_mod 1 (2·10^8 windows).
func BenchmarkFindPeakWindow(b *testing.B) {
	posted, completed := stamps(PeakIterationLimit, 100, 1000)
	for b.Loop() {
		if _, err := FindPeakWindow(posted, completed, 1, 1); err != nil {
			b.Fatal(err)
		}
	}
}
