package devinfo

// Value is a field a source may not know. The zero Value is a field that
// does not apply and is left out; Unknown gives the reason to print
// instead of a value.
type Value[T any] struct {
	V   T
	OK  bool   // known: V is the value
	Why string // unknown: why ("unknown: not in sysfs"); "" and !OK: left out
}

// Known returns a known value.
func Known[T any](v T) Value[T] { return Value[T]{V: v, OK: true} }

// Unknown returns an unknown value with the reason printed for it.
func Unknown[T any](why string) Value[T] { return Value[T]{Why: why} }

// Ptr returns the address of a copy of the value when it is known, else
// nil (for JSON, where null is unknown).
func (v Value[T]) Ptr() *T {
	if !v.OK {
		return nil
	}
	x := v.V
	return &x
}

// from returns Known(*p), or Unknown(why) when p is nil.
func from[T any](p *T, why string) Value[T] {
	if p == nil {
		return Unknown[T](why)
	}
	return Known(*p)
}
