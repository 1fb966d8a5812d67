package faultrelay

import (
	"container/heap"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// errNoPeer is what a send function returns when it has nowhere to send:
// the datagram counts as Discarded rather than as an error.
var errNoPeer = errors.New("no known peer")

// class says how a datagram handed to a pipe is treated.
type class int

const (
	classFault class = iota // eligible for faults (subject to Faults.Match)
	classPass               // forwarded untouched, counted as Passed
	classOther              // a non-UDP frame, forwarded untouched, counted as Other
)

// pipe is the fault engine of one direction. A single goroutine calls
// ingest, flush and deadline; SetFaults swaps the configuration through an
// atomic pointer, and the counters are atomic, so those two are the only
// state shared with other goroutines.
type pipe struct {
	faults atomic.Pointer[Faults]
	c      counters

	rng  *rand.Rand
	send func(b []byte) error
	// fixChecksum, if set, recomputes the UDP checksum of b after
	// corruption (Wire with Faults.FixChecksum).
	fixChecksum func(b []byte)

	cur  *Faults // the configuration the fault budget belongs to
	used int     // faults spent under cur

	seq       uint64
	q         itemHeap
	held      *item
	heldUntil time.Time
}

type item struct {
	due   time.Time
	seq   uint64
	b     []byte
	other bool // a non-UDP frame: not counted as Forwarded
}

type itemHeap []*item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)   { *h = append(*h, x.(*item)) }
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

// newPipe returns a pipe for direction d whose random stream is fixed by
// seed and d.
func newPipe(seed uint64, d Direction, f Faults, send func([]byte) error) *pipe {
	p := &pipe{
		rng:  rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15^uint64(d+1))),
		send: send,
	}
	p.faults.Store(&f)
	return p
}

// setFaults installs a new configuration; its fault budget starts afresh.
func (p *pipe) setFaults(f Faults) { p.faults.Store(&f) }

// push queues b for sending at due, after everything queued before with the
// same due time.
func (p *pipe) push(due time.Time, b []byte) {
	p.seq++
	heap.Push(&p.q, &item{due: due, seq: p.seq, b: b})
}

// ingest takes one datagram received at now. b is what send will get (the
// datagram, or a whole frame for Wire), payload is b[off:off+n]. ingest
// copies b if it keeps it; the caller may reuse b when ingest returns. Call
// flush afterwards to send what is due.
func (p *pipe) ingest(now time.Time, b []byte, off, n int, cl class) {
	switch cl {
	case classOther:
		p.c.other.Add(1)
		p.seq++
		heap.Push(&p.q, &item{due: now, seq: p.seq, b: clone(b), other: true})
		return
	case classPass:
		p.c.received.Add(1)
		p.c.passed.Add(1)
		p.pushReleasing(now, clone(b), false)
		return
	}
	p.c.received.Add(1)
	f := p.faults.Load()
	if f != p.cur {
		p.cur, p.used = f, 0
	}
	payload := b[off : off+n]
	if f.Match != nil && !f.Match(payload) {
		p.c.passed.Add(1)
		p.pushReleasing(now, clone(b), false)
		return
	}

	// The same draws for every eligible datagram, whatever its fate, so
	// that the n-th datagram's fate depends only on the seed and n.
	uDrop, uCorrupt, uDup, uReorder := p.rng.Float64(), p.rng.Float64(), p.rng.Float64(), p.rng.Float64()
	pos, alt, uJitter := p.rng.Uint64(), p.rng.Uint64(), p.rng.Float64()

	budget := func() bool {
		if f.MaxFaults > 0 && p.used >= f.MaxFaults {
			return false
		}
		p.used++
		return true
	}
	if uDrop < f.Drop && budget() {
		p.c.dropped.Add(1)
		return
	}
	buf := clone(b)
	if uCorrupt < f.Corrupt {
		lo, hi := f.CorruptFrom, n
		if f.CorruptTo != 0 && f.CorruptTo < hi {
			hi = f.CorruptTo
		}
		if lo < hi && budget() {
			corrupt(buf[off+lo:off+hi], f.CorruptMode, pos, alt)
			if f.FixChecksum && p.fixChecksum != nil {
				p.fixChecksum(buf)
			}
			p.c.corrupted.Add(1)
		}
	}
	dup := uDup < f.Duplicate && budget()
	if dup {
		p.c.duplicated.Add(1)
	}
	delay := f.Delay
	if f.Jitter > 0 {
		delay += time.Duration(uJitter * float64(f.Jitter))
	}
	if delay > 0 {
		p.c.delay.Add(1)
	}
	due := now.Add(delay)
	if uReorder < f.Reorder && p.held == nil && budget() {
		p.c.reordered.Add(1)
		timeout := f.ReorderTimeout
		if timeout == 0 {
			timeout = DefaultReorderTimeout
		}
		p.held, p.heldUntil = &item{b: buf}, due.Add(timeout)
		if dup {
			p.push(due, buf) // the copy goes on time; the original waits
		}
		return
	}
	p.pushReleasing(due, buf, dup)
}

// pushReleasing queues b (twice if dup) and then any held datagram right
// after it.
func (p *pipe) pushReleasing(due time.Time, b []byte, dup bool) {
	p.push(due, b)
	if dup {
		p.push(due, b)
	}
	if p.held != nil {
		p.push(due, p.held.b)
		p.held = nil
	}
}

// flush sends everything due at now and releases a held datagram whose
// timeout has passed.
func (p *pipe) flush(now time.Time) {
	if p.held != nil && !now.Before(p.heldUntil) {
		p.c.reorderTimeouts.Add(1)
		p.push(now, p.held.b)
		p.held = nil
	}
	for len(p.q) > 0 && !p.q[0].due.After(now) {
		it := heap.Pop(&p.q).(*item)
		switch err := p.send(it.b); {
		case errors.Is(err, errNoPeer):
			p.c.discarded.Add(1)
		case err != nil:
			p.c.errors.Add(1)
		case !it.other:
			p.c.forwarded.Add(1)
		}
	}
}

// deadline returns when flush next has work, or the zero time if nothing is
// queued or held.
func (p *pipe) deadline() time.Time {
	var t time.Time
	if len(p.q) > 0 {
		t = p.q[0].due
	}
	if p.held != nil && (t.IsZero() || p.heldUntil.Before(t)) {
		t = p.heldUntil
	}
	return t
}

// pending reports how many datagrams are queued or held.
func (p *pipe) pending() int {
	n := len(p.q)
	if p.held != nil {
		n++
	}
	return n
}

// corrupt damages one byte of b, chosen by pos; alt picks the bit to flip
// or the value to add.
func corrupt(b []byte, mode CorruptMode, pos, alt uint64) {
	i := pos % uint64(len(b))
	switch mode {
	case CorruptByte:
		b[i] += byte(1 + alt%255) // never adds 0 mod 256: the byte changes
	default:
		b[i] ^= 1 << (alt % 8)
	}
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
