// Package pace is a token bucket for per-QP packet pacing: a rate in
// bytes per second, a burst (the most bytes that may leave back to back),
// and a clock the caller passes in, so tests run on fake time.
//
// The bucket is exact in integer arithmetic: tokens are counted in
// byte-nanoseconds (bytes x 1e9), so no rounding error accumulates however
// long a paced stream runs. A send larger than the burst may leave once
// the bucket is full and drives it into debt, which later sends wait out:
// the long-run rate stays exact for any message size. A Bucket is not safe
// for concurrent use.
package pace

// LateTolerance is how late, in nanoseconds, a sender may come back to a
// full bucket and keep its place in the schedule: the tokens of that
// lateness stay in the bucket above its burst. A sender that polls a
// little late for every packet (the bucket one packet deep) would
// otherwise lose the lateness each time and fall short of the rate. A
// bucket full for longer is idle and holds its burst exactly.
const LateTolerance = 5_000

// Bucket is a token bucket. The zero value is unlimited.
type Bucket struct {
	rate   uint64 // bytes per second; 0: unlimited
	burst  uint64 // bucket depth, bytes
	tokens int64  // byte-nanoseconds available (negative: debt)
	last   int64  // clock reading of the last refill, ns
	init   bool
	// catchUp is the most lateness, ns, TakeDue credits; 0: one
	// burst's time (SetCatchUp).
	catchUp int64
}

// New returns a bucket of rate bits per second holding up to burst bytes
// (at least one packet of the size the caller sends, or no packet could
// ever leave). It starts full.
func New(bitsPerSecond uint64, burst uint64) *Bucket {
	b := &Bucket{}
	b.Set(bitsPerSecond, burst)
	return b
}

// Set changes the rate and burst; a rate of 0 means unlimited.
func (b *Bucket) Set(bitsPerSecond uint64, burst uint64) {
	b.rate = bitsPerSecond / 8
	b.burst = max(burst, 1)
	b.tokens = int64(b.burst) * 1e9
	b.init = false
}

// SetCatchUp sets how late, in nanoseconds, a backlogged sender may come
// back (TakeDue) and keep its schedule; 0, the default, is the time one
// burst takes at the rate. The lateness up to d is credited: the sender
// catches up back to back, never ahead of the schedule it was held to.
// Credit it could not spend because its queue ran dry is kept, and grows
// with the schedule, while it comes back within d (a sender that was late
// is late to post more too); a bucket left alone longer holds its burst.
// A sender late by more than d loses the rest. So no more than the burst
// and d's worth of the rate ever leave back to back.
//
// This is for a pacer that runs only when its sender does (the engine's:
// a descheduled thread sends nothing until it runs again), where losing
// every lateness above one burst loses the rate on a busy machine: a
// thread waiting a scheduler tick or two (4 ms at HZ=250) for a CPU.
func (b *Bucket) SetCatchUp(d int64) { b.catchUp = max(d, 0) }

// Rate is the rate in bits per second (0: unlimited).
func (b *Bucket) Rate() uint64 { return b.rate * 8 }

// Burst is the depth in bytes.
func (b *Bucket) Burst() uint64 { return b.burst }

func (b *Bucket) refill(now int64) {
	if !b.init {
		b.last, b.init = now, true
		return
	}
	if now <= b.last {
		return
	}
	dt := now - b.last
	b.last = now
	limit := int64(b.burst) * 1e9
	r := int64(b.rate)
	if b.catchUp > 0 && b.tokens > limit {
		// Catch-up credit its sender had no frames for (SetCatchUp):
		// kept, and still growing with the schedule, while it comes
		// back within the catch-up time; dropped once it was idle.
		if dt > b.catchUp {
			b.tokens = limit
			return
		}
		b.tokens = min(b.tokens+dt*r, limit+b.catchUp*r)
		return
	}
	if dt > (limit-b.tokens)/r+1+LateTolerance {
		b.tokens = limit // idle long enough to pay any debt and fill (avoids overflow)
		return
	}
	t := b.tokens + dt*r
	if t > limit+LateTolerance*r {
		// Full for longer than the tolerance: the sender was idle, not
		// late, and the bucket holds its burst and no more.
		t = limit
	}
	b.tokens = t
}

func (b *Bucket) need(n uint64) int64 { return int64(min(n, b.burst)) * 1e9 }

// Take spends n bytes if the bucket holds them at time now and reports
// whether it did. An unlimited bucket always does.
func (b *Bucket) Take(n uint64, now int64) bool {
	if b == nil || b.rate == 0 {
		return true
	}
	b.refill(now)
	return b.spend(n)
}

func (b *Bucket) spend(n uint64) bool {
	if b.tokens < b.need(n) {
		return false
	}
	b.tokens -= int64(n) * 1e9
	return true
}

// TakeDue is Take for a sender the bucket held back until due (the time
// Wait named) that comes back at now: a backlogged sender, not an idle
// one. Its lateness, up to the time one burst takes at the rate (or
// SetCatchUp's), is kept: a sender whose polls come late (a busy CPU, a
// descheduled thread) catches up back to back and holds the rate, as a
// NIC pacing its own queue would.
func (b *Bucket) TakeDue(n uint64, now, due int64) bool {
	if b == nil || b.rate == 0 {
		return true
	}
	b.refill(now)
	if late := now - due; late > LateTolerance {
		r := int64(b.rate)
		late = min(late, max(int64(b.burst)*1e9/r, b.catchUp))
		b.tokens = max(b.tokens, b.need(n)+late*r)
	}
	return b.spend(n)
}

// Wait returns how many nanoseconds from now until n bytes are available
// (0 if they are).
func (b *Bucket) Wait(n uint64, now int64) int64 {
	if b == nil || b.rate == 0 {
		return 0
	}
	b.refill(now)
	need := b.need(n)
	if b.tokens >= need {
		return 0
	}
	r := int64(b.rate)
	return (need - b.tokens + r - 1) / r
}
