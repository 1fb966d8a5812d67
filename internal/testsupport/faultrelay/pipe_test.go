package faultrelay

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"testing"
	"time"
)

// pipeRun feeds a pipe n numbered datagrams of size bytes, one per
// microsecond of a synthetic clock, and returns what it sent, in order.
type pipeRun struct {
	in  [][]byte
	out [][]byte
	p   *pipe
}

func datagram(i, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(i))
	for j := 8; j < size; j++ {
		b[j] = byte(i*7 + j)
	}
	return b
}

func seqOf(b []byte) int { return int(binary.BigEndian.Uint64(b)) }

var epoch = time.Unix(1_700_000_000, 0)

func runPipe(t *testing.T, seed uint64, f Faults, n, size int) *pipeRun {
	t.Helper()
	if err := f.validate(); err != nil {
		t.Fatal(err)
	}
	r := &pipeRun{}
	r.p = newPipe(seed, AtoB, f, func(b []byte) error {
		r.out = append(r.out, clone(b))
		return nil
	})
	now := epoch
	for i := 0; i < n; i++ {
		b := datagram(i, size)
		r.in = append(r.in, b)
		r.p.ingest(now, clone(b), 0, len(b), classFault)
		r.p.flush(now)
		now = now.Add(time.Microsecond)
	}
	r.p.flush(now.Add(time.Hour))
	if r.p.pending() != 0 {
		t.Fatalf("%d datagrams still pending after the final flush", r.p.pending())
	}
	return r
}

// within reports whether count is a plausible binomial(n, p) draw: inside
// five standard deviations (plus one, for tiny p).
func within(count uint64, n int, p float64) bool {
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(count)-mean) <= 5*sd+1
}

func TestPipeFaithfulWithoutFaults(t *testing.T) {
	r := runPipe(t, 1, Faults{}, 1000, 100)
	if !slices.EqualFunc(r.in, r.out, bytes.Equal) {
		t.Fatal("output differs from input")
	}
	c := r.p.c.snapshot()
	if want := (Counters{Received: 1000, Forwarded: 1000}); c != want {
		t.Errorf("counters %+v, want %+v", c, want)
	}
}

func TestPipeFaultRates(t *testing.T) {
	const n = 4000
	tests := []struct {
		name  string
		f     Faults
		count func(Counters) uint64
		p     float64
		check func(t *testing.T, r *pipeRun, c Counters)
	}{
		{"drop 1%", Faults{Drop: 0.01}, func(c Counters) uint64 { return c.Dropped }, 0.01, checkDrop},
		{"drop 30%", Faults{Drop: 0.3}, func(c Counters) uint64 { return c.Dropped }, 0.3, checkDrop},
		{"duplicate 5%", Faults{Duplicate: 0.05}, func(c Counters) uint64 { return c.Duplicated }, 0.05, checkDuplicate},
		{"duplicate 50%", Faults{Duplicate: 0.5}, func(c Counters) uint64 { return c.Duplicated }, 0.5, checkDuplicate},
		{"reorder 5%", Faults{Reorder: 0.05}, func(c Counters) uint64 { return c.Reordered }, 0.05, checkReorder},
		{"reorder 20%", Faults{Reorder: 0.2}, func(c Counters) uint64 { return c.Reordered }, 0.2 * 0.8, checkReorder}, // a hold needs an empty slot
		{"corrupt bit 10%", Faults{Corrupt: 0.1}, func(c Counters) uint64 { return c.Corrupted }, 0.1, checkCorrupt(CorruptBit, 0, 0)},
		{"corrupt byte 10%", Faults{Corrupt: 0.1, CorruptMode: CorruptByte}, func(c Counters) uint64 { return c.Corrupted }, 0.1, checkCorrupt(CorruptByte, 0, 0)},
		{"corrupt bit in [8,12)", Faults{Corrupt: 0.5, CorruptFrom: 8, CorruptTo: 12}, func(c Counters) uint64 { return c.Corrupted }, 0.5, checkCorrupt(CorruptBit, 8, 12)},
		{"corrupt byte from 40", Faults{Corrupt: 0.5, CorruptMode: CorruptByte, CorruptFrom: 40}, func(c Counters) uint64 { return c.Corrupted }, 0.5, checkCorrupt(CorruptByte, 40, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runPipe(t, 42, tt.f, n, 64)
			c := r.p.c.snapshot()
			if got := tt.count(c); !within(got, n, tt.p) {
				t.Errorf("%d of %d affected, want about %.0f", got, n, tt.p*n)
			}
			if c.Received != n {
				t.Errorf("Received %d, want %d", c.Received, n)
			}
			if want := n - c.Dropped + c.Duplicated; c.Forwarded != want {
				t.Errorf("Forwarded %d, want Received-Dropped+Duplicated = %d", c.Forwarded, want)
			}
			tt.check(t, r, c)
		})
	}
}

// checkDrop: the output is the input minus exactly Dropped datagrams, in
// order.
func checkDrop(t *testing.T, r *pipeRun, c Counters) {
	t.Helper()
	if uint64(len(r.out)) != uint64(len(r.in))-c.Dropped {
		t.Fatalf("%d out, want %d", len(r.out), uint64(len(r.in))-c.Dropped)
	}
	for i := 1; i < len(r.out); i++ {
		if seqOf(r.out[i]) <= seqOf(r.out[i-1]) {
			t.Fatalf("order broken at %d", i)
		}
	}
}

// checkDuplicate: every datagram appears once or, Duplicated times in all,
// twice in a row.
func checkDuplicate(t *testing.T, r *pipeRun, c Counters) {
	t.Helper()
	dups := 0
	next := 0
	for i := 0; i < len(r.out); i++ {
		if seqOf(r.out[i]) != next || !bytes.Equal(r.out[i], r.in[next]) {
			t.Fatalf("out[%d] = #%d, want #%d", i, seqOf(r.out[i]), next)
		}
		if i+1 < len(r.out) && bytes.Equal(r.out[i+1], r.out[i]) {
			dups++
			i++
		}
		next++
	}
	if uint64(dups) != c.Duplicated {
		t.Errorf("saw %d duplicates, counted %d", dups, c.Duplicated)
	}
}

// checkReorder: every datagram appears once; each hold not ended by the
// timeout shows as a datagram overtaken by exactly one successor.
func checkReorder(t *testing.T, r *pipeRun, c Counters) {
	t.Helper()
	if len(r.out) != len(r.in) {
		t.Fatalf("%d out, want %d", len(r.out), len(r.in))
	}
	seen := make([]bool, len(r.in))
	inversions := 0
	for i, b := range r.out {
		s := seqOf(b)
		if seen[s] {
			t.Fatalf("#%d twice", s)
		}
		seen[s] = true
		if i > 0 && s < seqOf(r.out[i-1]) {
			inversions++
			if seqOf(r.out[i-1]) != s+1 {
				t.Errorf("#%d released after #%d, want right after #%d", s, seqOf(r.out[i-1]), s+1)
			}
		}
	}
	if want := c.Reordered - c.ReorderTimeouts; uint64(inversions) != want {
		t.Errorf("%d inversions, want Reordered-ReorderTimeouts = %d", inversions, want)
	}
	if c.ReorderTimeouts > 1 { // only the last datagram can wait out its timeout
		t.Errorf("ReorderTimeouts %d, want at most 1", c.ReorderTimeouts)
	}
}

// checkCorrupt: exactly Corrupted outputs differ from their input, each in
// one byte (one bit for CorruptBit) inside [from, to).
func checkCorrupt(mode CorruptMode, from, to int) func(t *testing.T, r *pipeRun, c Counters) {
	return func(t *testing.T, r *pipeRun, c Counters) {
		t.Helper()
		if len(r.out) != len(r.in) {
			t.Fatalf("%d out, want %d", len(r.out), len(r.in))
		}
		damaged := 0
		for i, b := range r.out {
			in := r.in[i]
			var diff []int
			for j := range b {
				if b[j] != in[j] {
					diff = append(diff, j)
				}
			}
			if len(diff) == 0 {
				continue
			}
			damaged++
			j := diff[0]
			if len(diff) != 1 {
				t.Fatalf("#%d: %d bytes changed, want 1", i, len(diff))
			}
			if j < from || (to != 0 && j >= to) {
				t.Errorf("#%d: byte %d changed, outside [%d, %d)", i, j, from, to)
			}
			if flips := bits.OnesCount8(b[j] ^ in[j]); mode == CorruptBit && flips != 1 {
				t.Errorf("#%d: %d bits flipped, want 1", i, flips)
			}
		}
		if uint64(damaged) != c.Corrupted {
			t.Errorf("%d damaged, counted %d", damaged, c.Corrupted)
		}
	}
}

func TestPipeDeterministic(t *testing.T) {
	f := Faults{Drop: 0.1, Duplicate: 0.1, Reorder: 0.1, Corrupt: 0.1}
	a := runPipe(t, 7, f, 500, 32)
	b := runPipe(t, 7, f, 500, 32)
	if !slices.EqualFunc(a.out, b.out, bytes.Equal) || a.p.c.snapshot() != b.p.c.snapshot() {
		t.Error("same seed, different results")
	}
	c := runPipe(t, 8, f, 500, 32)
	if slices.EqualFunc(a.out, c.out, bytes.Equal) {
		t.Error("different seeds, identical results")
	}
}

func TestPipeFateDependsOnlyOnIndex(t *testing.T) {
	// The n-th eligible datagram meets the same fate whatever the
	// datagrams around it look like, and whatever passes ineligible.
	f := Faults{Drop: 0.3}
	a := runPipe(t, 3, f, 300, 16)
	g := f
	g.Match = func(p []byte) bool { return len(p) == 40 }
	var got []int
	p := newPipe(3, AtoB, g, func(b []byte) error {
		if len(b) == 40 {
			got = append(got, seqOf(b))
		}
		return nil
	})
	for i := 0; i < 300; i++ {
		other := datagram(1000+i, 24) // ineligible, interleaved
		p.ingest(epoch, other, 0, len(other), classFault)
		b := datagram(i, 40) // longer payloads
		p.ingest(epoch, b, 0, len(b), classFault)
		p.flush(epoch)
	}
	var want []int
	for _, b := range a.out {
		want = append(want, seqOf(b))
	}
	if !slices.Equal(got, want) {
		t.Error("fates changed with ineligible traffic interleaved")
	}
	if c := p.c.snapshot(); c.Passed != 300 || c.Received != 600 {
		t.Errorf("Passed %d Received %d, want 300 and 600", c.Passed, c.Received)
	}
}

func TestPipeMaxFaults(t *testing.T) {
	tests := []struct {
		name string
		f    Faults
		want Counters
	}{
		{"drop first three", Faults{Drop: 1, MaxFaults: 3}, Counters{Received: 10, Dropped: 3, Forwarded: 7}},
		{"duplicate two", Faults{Duplicate: 1, MaxFaults: 2}, Counters{Received: 10, Duplicated: 2, Forwarded: 12}},
		{"corrupt four", Faults{Corrupt: 1, MaxFaults: 4}, Counters{Received: 10, Corrupted: 4, Forwarded: 10}},
		{"drop and duplicate share the budget", Faults{Drop: 1, Duplicate: 1, MaxFaults: 5}, Counters{Received: 10, Dropped: 5, Forwarded: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runPipe(t, 1, tt.f, 10, 16)
			if c := r.p.c.snapshot(); c != tt.want {
				t.Errorf("counters %+v, want %+v", c, tt.want)
			}
		})
	}
	r := runPipe(t, 1, Faults{Drop: 1, MaxFaults: 3}, 10, 16)
	if got := seqOf(r.out[0]); got != 3 {
		t.Errorf("first forwarded #%d, want #3", got)
	}
}

func TestPipeSetFaultsResetsBudget(t *testing.T) {
	var out int
	p := newPipe(1, BtoA, Faults{Drop: 1, MaxFaults: 2}, func([]byte) error { out++; return nil })
	feed := func(n int) {
		for i := 0; i < n; i++ {
			p.ingest(epoch, datagram(i, 16), 0, 16, classFault)
			p.flush(epoch)
		}
	}
	feed(5)
	p.setFaults(Faults{Drop: 1, MaxFaults: 1})
	feed(5)
	if c := p.c.snapshot(); c.Dropped != 3 || out != 7 {
		t.Errorf("Dropped %d, forwarded %d; want 3 and 7", c.Dropped, out)
	}
}

func TestPipeDelayAndDeadline(t *testing.T) {
	var out []time.Time
	now := epoch
	p := newPipe(1, AtoB, Faults{Delay: 10 * time.Millisecond}, func([]byte) error { out = append(out, now); return nil })
	if !p.deadline().IsZero() {
		t.Fatal("deadline set on an empty pipe")
	}
	p.ingest(now, datagram(0, 16), 0, 16, classFault)
	p.flush(now)
	if len(out) != 0 {
		t.Fatal("delayed datagram sent at once")
	}
	if got, want := p.deadline(), epoch.Add(10*time.Millisecond); !got.Equal(want) {
		t.Fatalf("deadline %v, want %v", got, want)
	}
	now = epoch.Add(9 * time.Millisecond)
	p.flush(now)
	if len(out) != 0 {
		t.Fatal("sent before its delay")
	}
	now = epoch.Add(10 * time.Millisecond)
	p.flush(now)
	if len(out) != 1 || p.c.snapshot().Delayed != 1 {
		t.Fatalf("sent %d, Delayed %d; want 1 and 1", len(out), p.c.snapshot().Delayed)
	}
}

func TestPipeJitterSpreadsDelay(t *testing.T) {
	f := Faults{Delay: time.Millisecond, Jitter: 10 * time.Millisecond}
	var dues []time.Duration
	p := newPipe(5, AtoB, f, func([]byte) error { return nil })
	for i := 0; i < 200; i++ {
		p.ingest(epoch, datagram(i, 16), 0, 16, classFault)
	}
	for _, it := range p.q {
		dues = append(dues, it.due.Sub(epoch))
	}
	slices.Sort(dues)
	if dues[0] < time.Millisecond || dues[len(dues)-1] >= 11*time.Millisecond {
		t.Errorf("delays span [%v, %v], want within [1ms, 11ms)", dues[0], dues[len(dues)-1])
	}
	if dues[len(dues)-1]-dues[0] < 5*time.Millisecond {
		t.Errorf("delays span only %v", dues[len(dues)-1]-dues[0])
	}
}

func TestPipeReorderTimeout(t *testing.T) {
	var out []int
	p := newPipe(1, AtoB, Faults{Reorder: 1, MaxFaults: 1, ReorderTimeout: 5 * time.Millisecond},
		func(b []byte) error { out = append(out, seqOf(b)); return nil })
	p.ingest(epoch, datagram(0, 16), 0, 16, classFault)
	p.flush(epoch)
	if len(out) != 0 || p.pending() != 1 {
		t.Fatalf("held datagram: out %v, pending %d", out, p.pending())
	}
	if got := p.deadline(); !got.Equal(epoch.Add(5 * time.Millisecond)) {
		t.Fatalf("deadline %v, want the hold's timeout", got)
	}
	p.flush(epoch.Add(5 * time.Millisecond))
	if !slices.Equal(out, []int{0}) {
		t.Fatalf("out %v after the timeout, want [0]", out)
	}
	if c := p.c.snapshot(); c.Reordered != 1 || c.ReorderTimeouts != 1 {
		t.Errorf("Reordered %d ReorderTimeouts %d, want 1 and 1", c.Reordered, c.ReorderTimeouts)
	}
}

func TestFaultsValidate(t *testing.T) {
	tests := []struct {
		name string
		f    Faults
		ok   bool
	}{
		{"zero", Faults{}, true},
		{"all certain", Faults{Drop: 1, Duplicate: 1, Reorder: 1, Corrupt: 1}, true},
		{"range", Faults{Corrupt: 1, CorruptFrom: 4, CorruptTo: 8}, true},
		{"drop above 1", Faults{Drop: 1.5}, false},
		{"negative duplicate", Faults{Duplicate: -0.1}, false},
		{"NaN reorder", Faults{Reorder: math.NaN()}, false},
		{"unknown mode", Faults{CorruptMode: 9}, false},
		{"empty range", Faults{CorruptFrom: 8, CorruptTo: 8}, false},
		{"negative range", Faults{CorruptFrom: -1}, false},
		{"negative delay", Faults{Delay: -time.Second}, false},
		{"negative max faults", Faults{MaxFaults: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.f.validate(); (err == nil) != tt.ok {
				t.Errorf("validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestDirectionString(t *testing.T) {
	for d, want := range map[Direction]string{AtoB: "A->B", BtoA: "B->A", 7: "Direction(7)"} {
		if got := d.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(d), got, want)
		}
	}
}
