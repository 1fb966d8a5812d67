package faultrelay

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Direction names one way through a forwarder.
type Direction int

// The two directions.
const (
	AtoB Direction = iota // from endpoint A to endpoint B
	BtoA                  // from endpoint B to endpoint A
)

// String returns "A->B" or "B->A".
func (d Direction) String() string {
	switch d {
	case AtoB:
		return "A->B"
	case BtoA:
		return "B->A"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// CorruptMode says how a datagram is corrupted.
type CorruptMode int

// Corruption modes.
const (
	// CorruptBit flips one random bit of one random byte.
	CorruptBit CorruptMode = iota
	// CorruptByte replaces one random byte with a different value.
	CorruptByte
)

// DefaultReorderTimeout is how long a held datagram waits for a successor
// when Faults.ReorderTimeout is zero.
const DefaultReorderTimeout = 20 * time.Millisecond

// DefaultMaxDuration bounds a forwarder's life when Config.MaxDuration is
// zero.
const DefaultMaxDuration = 2 * time.Minute

// Faults configures the faults of one direction. The zero value forwards
// everything faithfully.
type Faults struct {
	// Drop, Duplicate, Reorder and Corrupt are probabilities in [0, 1],
	// drawn independently for each eligible datagram; a dropped datagram
	// suffers nothing else.
	Drop, Duplicate, Reorder, Corrupt float64

	// CorruptMode picks bit flips (the default) or byte replacement.
	CorruptMode CorruptMode
	// CorruptFrom and CorruptTo restrict corruption to payload bytes
	// [CorruptFrom, CorruptTo), offsets into the UDP payload; CorruptTo 0
	// means the end of the payload. A datagram with no byte in the range is
	// not corrupted (and not counted).
	CorruptFrom, CorruptTo int
	// FixChecksum (Wire only) recomputes the UDP checksum after corrupting,
	// so the receiving kernel delivers the datagram and only an end-to-end
	// check such as the ICRC can catch the damage. Without it the receiver's
	// UDP checksum rejects a corrupted datagram (unless the sender sent
	// IPv4 checksum 0, as RoCEv2 may). Relay always delivers corrupted
	// datagrams: it sends them through a socket, which checksums anew.
	FixChecksum bool

	// Delay is added to every eligible datagram, plus a uniform random
	// duration in [0, Jitter).
	Delay, Jitter time.Duration
	// ReorderTimeout bounds how long a held datagram waits for the next
	// one; 0 means DefaultReorderTimeout.
	ReorderTimeout time.Duration

	// MaxFaults, when positive, caps the faults (drops, corruptions,
	// duplications and holds) in this direction; later datagrams cross
	// faithfully, apart from Delay and Jitter. Drop: 1 with MaxFaults: 3
	// drops exactly the first three eligible datagrams.
	MaxFaults int

	// Match, when set, makes only datagrams whose UDP payload it accepts
	// eligible for faults (and Delay); others are forwarded at once,
	// untouched, and counted as Passed. It runs on the forwarder's goroutine
	// for the direction and must not keep or modify the slice.
	Match func(payload []byte) bool
}

func (f *Faults) validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"drop", f.Drop}, {"duplicate", f.Duplicate}, {"reorder", f.Reorder}, {"corrupt", f.Corrupt}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("%s probability %v outside [0, 1]", p.name, p.v)
		}
	}
	switch {
	case f.CorruptMode != CorruptBit && f.CorruptMode != CorruptByte:
		return fmt.Errorf("unknown corrupt mode %d", f.CorruptMode)
	case f.CorruptFrom < 0 || f.CorruptTo < 0:
		return fmt.Errorf("negative corrupt range [%d, %d)", f.CorruptFrom, f.CorruptTo)
	case f.CorruptTo != 0 && f.CorruptTo <= f.CorruptFrom:
		return fmt.Errorf("empty corrupt range [%d, %d)", f.CorruptFrom, f.CorruptTo)
	case f.Delay < 0 || f.Jitter < 0 || f.ReorderTimeout < 0:
		return fmt.Errorf("negative delay %v, jitter %v or reorder timeout %v", f.Delay, f.Jitter, f.ReorderTimeout)
	case f.MaxFaults < 0:
		return fmt.Errorf("negative max faults %d", f.MaxFaults)
	}
	return nil
}

// Counters describe what one direction did. Every datagram counted in
// Received ends up dropped, discarded, forwarded (once, or twice if
// duplicated) or still queued.
type Counters struct {
	// Received counts the UDP datagrams read from this direction's sender
	// (for Wire, after cutting GSO super-packets into datagrams).
	Received uint64
	// Passed counts received datagrams that were not eligible for faults
	// (Faults.Match refused them, or Wire's port filter did).
	Passed uint64
	// Forwarded counts datagrams sent on, duplicates included.
	Forwarded uint64
	// Dropped, Corrupted, Duplicated, Reordered and Delayed count datagrams
	// that suffered each fault. Reordered counts holds, ReorderTimeouts
	// the held datagrams released by timeout rather than after a successor.
	Dropped, Corrupted, Duplicated, Reordered, ReorderTimeouts, Delayed uint64
	// Discarded counts datagrams not forwarded for a reason other than a
	// fault: over Config.MaxDatagrams, or no known peer to send to.
	Discarded uint64
	// Errors counts failed sends and reads, and malformed frames.
	Errors uint64
	// Other counts non-UDP frames (ARP, neighbour discovery, fragments)
	// that Wire forwarded untouched. Always 0 for Relay.
	Other uint64
}

// Stats holds the counters of both directions.
type Stats struct {
	AtoB, BtoA Counters
}

// counters is the concurrently updated form of Counters.
type counters struct {
	received, passed, forwarded                                       atomic.Uint64
	dropped, corrupted, duplicated, reordered, reorderTimeouts, delay atomic.Uint64
	discarded, errors, other                                          atomic.Uint64
}

func (c *counters) snapshot() Counters {
	return Counters{
		Received:        c.received.Load(),
		Passed:          c.passed.Load(),
		Forwarded:       c.forwarded.Load(),
		Dropped:         c.dropped.Load(),
		Corrupted:       c.corrupted.Load(),
		Duplicated:      c.duplicated.Load(),
		Reordered:       c.reordered.Load(),
		ReorderTimeouts: c.reorderTimeouts.Load(),
		Delayed:         c.delay.Load(),
		Discarded:       c.discarded.Load(),
		Errors:          c.errors.Load(),
		Other:           c.other.Load(),
	}
}
