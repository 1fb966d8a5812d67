package pace

import "testing"

func TestBucket(t *testing.T) {
	// 8 Mb/s = 1,000,000 bytes/s = 1 byte per microsecond, burst 1000 B.
	b := New(8_000_000, 1000)
	now := int64(1_000_000)
	if !b.Take(1000, now) {
		t.Fatal("a full bucket refused its burst")
	}
	if b.Take(1, now) {
		t.Fatal("an empty bucket gave a byte")
	}
	if w := b.Wait(500, now); w != 500_000 {
		t.Fatalf("wait for 500 B = %d ns, want 500000", w)
	}
	if b.Take(500, now+499_999) {
		t.Fatal("took 500 B a nanosecond early")
	}
	if !b.Take(500, now+500_000) {
		t.Fatal("refused 500 B on time")
	}
	// Idle time refills only up to the burst.
	if !b.Take(1000, now+10_000_000_000) || b.Take(1, now+10_000_000_000) {
		t.Fatal("burst not capped")
	}
}

// TestLongRunExact paces a stream on fake time and checks the achieved
// rate over a long run is exact to the nanosecond of the last packet.
func TestLongRunExact(t *testing.T) {
	cases := []struct {
		bps, pkt uint64
	}{
		{10_000_000, 1024}, {1_000_000_000, 4096}, {1_000_000, 64}, {99_999_999, 1500},
	}
	for _, c := range cases {
		b := New(c.bps, c.pkt)
		now := int64(0)
		b.Take(c.pkt, now) // the first packet empties the bucket
		const n = 100000
		for i := 1; i < n; i++ {
			now += b.Wait(c.pkt, now)
			if !b.Take(c.pkt, now) {
				t.Fatalf("refused after waiting")
			}
		}
		// n-1 packets after the first took exactly (n-1)*pkt*8/bps s.
		want := float64(n-1) * float64(c.pkt) * 8 / float64(c.bps) * 1e9
		if d := float64(now) - want; d < -1 || d > float64(n) {
			t.Errorf("%d b/s, %d B: %d ns for %d packets, want %.0f (error %.0f ns)", c.bps, c.pkt, now, n, want, d)
		}
	}
}

func TestUnlimited(t *testing.T) {
	var b *Bucket
	if !b.Take(1<<40, 0) || b.Wait(1<<40, 0) != 0 {
		t.Fatal("nil bucket limits")
	}
	z := New(0, 0)
	if !z.Take(1<<40, 0) {
		t.Fatal("rate 0 limits")
	}
}

func TestAllocs(t *testing.T) {
	b := New(1e9, 4096)
	n := int64(0)
	if a := testing.AllocsPerRun(1000, func() { n += 1000; b.Take(100, n) }); a != 0 {
		t.Fatal("allocates")
	}
}

// TestLargerThanBurst paces 1 MB messages through a 4 KB bucket: each
// leaves when the bucket is full and the debt keeps the average exact.
func TestLargerThanBurst(t *testing.T) {
	b := New(80_000_000, 4096) // 10 MB/s
	now := int64(0)
	b.Take(1<<20, now)
	for i := 1; i < 100; i++ {
		now += b.Wait(1<<20, now)
		if !b.Take(1<<20, now) {
			t.Fatal("refused after waiting")
		}
	}
	// Each message after the first waits for its 1 MiB to be paid back
	// (the bucket goes from full-minus-1-MiB to full): 99 MiB at 10 MB/s.
	want := float64(99<<20) / 10e6 * 1e9
	if d := float64(now) - want; d < -100 || d > 100 {
		t.Errorf("took %d ns, want %.0f", now, want)
	}
}

// TestLateSenderKeepsSchedule: a sender one packet deep that comes back a
// little late every time (under LateTolerance) keeps the exact rate; one
// late by more lost the lateness (it was idle) but never bursts more than
// the bucket.
func TestLateSenderKeepsSchedule(t *testing.T) {
	const pkt = 1000
	cases := []struct {
		late     int64
		wantLoss bool
	}{
		{0, false}, {60, false}, {LateTolerance / 2, false}, {LateTolerance * 3, true},
	}
	for _, c := range cases {
		b := New(8_000_000, pkt) // 1 byte per microsecond: 1 ms per packet
		now := int64(0)
		b.Take(pkt, now)
		const n = 10000
		for i := 1; i < n; i++ {
			now += b.Wait(pkt, now) + c.late
			if !b.Take(pkt, now) {
				t.Fatalf("late %d: refused after waiting", c.late)
			}
			if b.tokens > int64(pkt)*1e9 {
				t.Fatalf("late %d: %d byte-ns left after a packet, more than a burst", c.late, b.tokens)
			}
		}
		want := int64(n-1) * 1_000_000
		loss := now - want
		if c.wantLoss && loss < int64(n-1)*c.late {
			t.Errorf("late %d ns each time: %d ns behind the schedule, want the lateness lost", c.late, loss)
		}
		if !c.wantLoss && (loss < 0 || loss > c.late+1000) {
			t.Errorf("late %d ns each time: %d ns behind the schedule after %d packets, want it kept", c.late, loss, n)
		}
	}
}

// TestDebt: sends larger than the burst drive the bucket into debt, which
// later polls pay back however seldom they come (here every 5 ms, longer
// than the burst takes to refill): the long-run rate holds.
func TestDebt(t *testing.T) {
	b := New(8_000_000, 4096) // 1 byte per microsecond
	now := int64(0)
	const big, n, poll = 65536, 100, 5_000_000
	var last int64
	for i := 0; i < n; {
		if b.Take(big, now) {
			last = now
			i++
		}
		now += poll
	}
	// Each send leaves when the bucket is full again: 65536 us after
	// the one before, give or take a poll.
	want := int64(n-1) * big * 1000
	if last < want || last > want+int64(n)*poll {
		t.Errorf("%d sends of %d B at 1 B/us took %d ns, want about %d ns", n, big, last, want)
	}
}

// TestTakeDue: a backlogged sender (held by the bucket, back late by a
// fixed amount every time) keeps the exact rate while its lateness is
// within one burst's time, and never has more than two bursts (the burst
// and one burst of catch-up) to send back to back; Take, for the same
// sender, loses every lateness above LateTolerance.
func TestTakeDue(t *testing.T) {
	const pkt = 1000 // 1 ms per packet at 1 byte per microsecond
	cases := []struct {
		late     int64
		due      bool
		wantLoss int64 // ns lost per packet
	}{
		{late: 0, due: true},
		{late: LateTolerance / 2, due: true},
		{late: 300_000, due: true},
		{late: 999_000, due: true},
		{late: 300_000, due: false, wantLoss: 300_000},
		// Late by 3 ms every packet: each return sends two packets (one
		// burst of catch-up), so 2 ms of every 3 are lost per pair.
		{late: 3_000_000, due: true, wantLoss: 1_000_000},
	}
	for _, c := range cases {
		b := New(8_000_000, pkt)
		now := int64(0)
		b.Take(pkt, now)
		const n = 10000
		sent := 1
		for sent < n {
			due := now + b.Wait(pkt, now)
			now = due + c.late
			took := false
			if c.due {
				took = b.TakeDue(pkt, now, due)
			} else {
				took = b.Take(pkt, now)
			}
			if !took {
				t.Fatalf("late %d: refused after waiting", c.late)
			}
			sent++
			if b.tokens > int64(pkt)*1e9 {
				t.Fatalf("late %d: %d byte-ns left after a packet, more than a burst", c.late, b.tokens)
			}
			for sent < n && b.Take(pkt, now) { // what else may go back to back
				sent++
			}
		}
		// The exact schedule: packet k leaves at k ms.
		behind := now - int64(n-1)*1_000_000
		switch {
		case c.wantLoss == 0 && (behind < 0 || behind > c.late+1000):
			t.Errorf("late %d (due %v): %d ns behind after %d packets, want the schedule kept", c.late, c.due, behind, n)
		case c.wantLoss != 0 && (behind < int64(n-2)*c.wantLoss*9/10 || behind > int64(n)*c.wantLoss*11/10):
			t.Errorf("late %d (due %v): %d ns behind after %d packets, want about %d per packet", c.late, c.due, behind, n, c.wantLoss)
		}
	}
}

// TestCatchUp: with SetCatchUp, a backlogged sender (queue packets
// posted, posted again once all left, as rperf raw-bw reposts after
// completions) that stalls while held every 50 packets keeps the exact
// schedule while each stall is within the catch-up time, also when its
// queue runs dry during the catch-up, and loses only the excess of a
// longer stall. However late the sender, no packet leaves before its time
// in the schedule less the burst, and never more than the burst and the
// catch-up time's worth leave back to back.
func TestCatchUp(t *testing.T) {
	const (
		pkt     = 1000      // 1 ms per packet at 1 byte per microsecond
		catchUp = 5_000_000 // 5 ms: five packets
		n       = 2000
	)
	cases := []struct {
		name     string
		stall    int64 // a stall this long every 50 packets, while held
		queue    int   // packets posted at once
		repost   int64 // how long the sender takes to post again
		wantLoss int64 // ns behind the schedule per stall
	}{
		{name: "stalls within the catch-up", stall: 4_000_000, queue: 64},
		{name: "a stall over it loses the excess", stall: 8_000_000, queue: 64, wantLoss: 3_000_000},
		{name: "queue runs dry in the catch-up", stall: 4_900_000, queue: 2, repost: 300_000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := New(8_000_000, pkt)
			b.SetCatchUp(catchUp)
			var now, due int64
			at := make([]int64, 0, n) // departures
			queued, nextStall := c.queue, 50
			for len(at) < n {
				if queued == 0 {
					now += c.repost
					queued = c.queue
				}
				var took bool
				if due != 0 {
					took, due = b.TakeDue(pkt, now, due), 0
				} else {
					took = b.Take(pkt, now)
				}
				if !took {
					due = now + b.Wait(pkt, now)
					now = due
					if len(at) >= nextStall {
						now += c.stall
						nextStall += 50
					}
					continue
				}
				at = append(at, now)
				queued--
			}
			run := 1
			for k, a := range at {
				// Packet k may leave once k+1 packets less the burst
				// (one packet) are paid: at k ms.
				if a < int64(k)*1_000_000 {
					t.Fatalf("packet %d left at %d ns, ahead of the schedule (%d)", k, a, int64(k)*1_000_000)
				}
				if k > 0 && a == at[k-1] {
					run++
				} else {
					run = 1
				}
				if run > 1+catchUp/1_000_000 {
					t.Fatalf("%d packets back to back at %d ns: more than the burst and the catch-up time's", run, a)
				}
			}
			stalls := int64(n/50 - 1)
			behind := at[n-1] - int64(n-1)*1_000_000
			switch {
			case c.wantLoss == 0 && behind > 0:
				t.Errorf("%d ns behind the schedule after %d packets and %d stalls of %d ns, want it kept", behind, n, stalls, c.stall)
			case c.wantLoss != 0 && (behind < stalls*c.wantLoss*9/10 || behind > (stalls+1)*c.wantLoss*11/10):
				t.Errorf("%d ns behind after %d stalls of %d ns, want about %d per stall", behind, stalls, c.stall, c.wantLoss)
			}
		})
	}
}

// TestCatchUpIdle: credit a held sender could not spend (its queue ran
// dry) is kept while it comes back within the catch-up time, and gone
// once it stayed away longer: an idle bucket holds its burst only. The
// default (no SetCatchUp) credits at most one burst.
func TestCatchUpIdle(t *testing.T) {
	const pkt = 1000 // 1 ms per packet at 1 byte per microsecond
	cases := []struct {
		catchUp, back int64
		want          int // packets that leave back to back when it comes back
	}{
		{catchUp: 5_000_000, back: 100_000, want: 4},   // 4 ms of credit, 0.1 ms more
		{catchUp: 5_000_000, back: 2_000_000, want: 6}, // grown to the bound: the burst and 5 ms
		{catchUp: 5_000_000, back: 6_000_000, want: 1}, // idle: the burst
		{catchUp: 0, back: 100_000, want: 1},           // one burst's credit, spent
	}
	for _, c := range cases {
		b := New(8_000_000, pkt)
		b.SetCatchUp(c.catchUp)
		b.Take(pkt, 0)
		due := b.Wait(pkt, 0)
		now := due + 4_000_000 // held, and back 4 ms late
		if !b.TakeDue(pkt, now, due) {
			t.Fatal("refused a late sender")
		}
		// Its queue held one packet: now empty, it posts more later.
		now += c.back
		got := 0
		for got < 100 && b.Take(pkt, now) {
			got++
		}
		if got != c.want {
			t.Errorf("catch-up %d ns, back %d ns after its queue ran dry: %d packets back to back, want %d", c.catchUp, c.back, got, c.want)
		}
	}
}
