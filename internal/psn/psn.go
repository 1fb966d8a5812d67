// Package psn implements 24-bit packet sequence number arithmetic for the
// InfiniBand and RoCE transports.
//
// A PSN is a 24-bit counter that wraps from 0xffffff to 0. Comparisons use
// serial-number arithmetic (as in RFC 1982): a PSN q is after p when the
// forward distance from p to q, taken modulo 2^24, is in [1, 2^23). Two PSNs
// exactly 2^23 apart are not ordered: Diff returns -2^23 for them, neither
// Before nor After holds, and Compare returns +1 both ways. Callers that keep
// windows smaller than 2^23, as every IBA transport does, never meet it.
//
// All functions ignore bits above the 24th of their inputs.
package psn

// PSN is a 24-bit packet sequence number. Only the low 24 bits are
// meaningful; every function here masks its inputs.
type PSN uint32

const (
	// Bits is the width of a PSN.
	Bits = 24
	// Mask selects the valid bits of a PSN.
	Mask = 1<<Bits - 1
	// Modulus is the number of distinct PSNs.
	Modulus = 1 << Bits
	// Half is half the PSN space: the largest forward distance that counts
	// as "after" is Half-1.
	Half = 1 << (Bits - 1)
)

// Valid reports whether v fits in 24 bits.
func Valid(v uint32) bool { return v&^Mask == 0 }

// Add returns p advanced by n (n may be negative), modulo 2^24.
func (p PSN) Add(n int) PSN { return PSN((int64(p) + int64(n)) & Mask) }

// Next returns p+1 modulo 2^24.
func (p PSN) Next() PSN { return (p + 1) & Mask }

// Forward returns the forward distance from p to q: how many increments
// take p to q, in [0, 2^24).
func (p PSN) Forward(q PSN) uint32 { return uint32(q-p) & Mask }

// Diff returns q-p as a signed distance in [-2^23, 2^23): positive when q is
// after p, negative when q is before p.
func Diff(p, q PSN) int32 {
	d := int32(uint32(q-p) & Mask)
	if d >= Half {
		d -= Modulus
	}
	return d
}

// Before reports whether p comes before q in serial order.
func (p PSN) Before(q PSN) bool { return Diff(p, q) > 0 }

// After reports whether p comes after q in serial order.
func (p PSN) After(q PSN) bool { return Diff(q, p) > 0 }

// Compare returns -1 when p is before q, 0 when they are equal (in their
// low 24 bits) and +1 when p is after q.
func Compare(p, q PSN) int {
	switch d := Diff(p, q); {
	case d > 0:
		return -1
	case d < 0:
		return 1
	}
	return 0
}

// Max returns whichever of p and q is later in serial order.
func Max(p, q PSN) PSN {
	if p.Before(q) {
		return q & Mask
	}
	return p & Mask
}

// InWindow reports whether q lies in the half-open window [start, start+size)
// modulo 2^24. A size of 0 is an empty window; sizes of 2^24 or more cover
// every PSN.
func InWindow(start PSN, size uint32, q PSN) bool {
	if size >= Modulus {
		return true
	}
	return start.Forward(q) < size
}
