package session

import (
	"errors"
	"fmt"
	"strings"
)

// Checks: every rule about a test's configuration lives in a Check (the
// shared part's in Config.Check, a family's own in its Config.Check) and
// reports a FieldError naming the field, what is wrong and how to fix it.
// Callers spell the fields their own way: rperf's commands as their flags.

// Limits perftest applies to its parameters (perftest_parameters.h),
// which Check enforces.
const (
	MinIterations = 5     // MIN_ITER, -n
	MaxTxDepth    = 15000 // -t
	MaxRxDepth    = 15000 // -r
	MaxInline     = 1024  // -I
)

// FieldError is a problem with one field of a test's configuration: what
// is wrong with it and how to fix it. Reason and Fix may name fields of
// the configuration as {Name}, or as {Name=} for the name with the
// field's value, so that each reader spells them its own way (Text):
// Error by the Go field ("TxDepth 8"), a command line by its flag
// ("-t 8"). A Reason that starts with a reference names its own subject;
// any other is about Field, and the message starts with it and its value.
type FieldError struct {
	Field  string // the field at fault, e.g. "TxDepth"
	Value  string // its value
	Reason string // what is wrong
	Fix    string // how to fix it; empty when Reason says it
	// Values are the values of the other fields Reason and Fix name.
	Values map[string]string
}

// prose spells, in Error, the fields whose Go name reads badly in a
// sentence.
var prose = map[string]string{"Validate": "data validation"}

// Error spells each field by its Go name, with its value for {Name=}.
func (e *FieldError) Error() string {
	return e.Text(func(field string, withValue bool) string {
		if !withValue {
			if p, ok := prose[field]; ok {
				return p
			}
			return field
		}
		return strings.TrimSpace(field + " " + e.ValueOf(field))
	})
}

// ValueOf returns the value of field: Value for Field, else from Values.
func (e *FieldError) ValueOf(field string) string {
	if field == e.Field {
		return e.Value
	}
	return e.Values[field]
}

// Text renders the error with every field it names spelled by
// spell(field, withValue), withValue for a {Name=} reference.
func (e *FieldError) Text(spell func(field string, withValue bool) string) string {
	msg := e.Reason
	if e.Field != "" && !strings.HasPrefix(msg, "{") {
		msg = "{" + e.Field + "=}: " + msg
	}
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(msg, '{')
		j := strings.IndexByte(msg[i+1:], '}')
		if i < 0 || j < 0 {
			b.WriteString(msg)
			return b.String()
		}
		ref := msg[i+1 : i+1+j]
		name, withValue := strings.CutSuffix(ref, "=")
		b.WriteString(msg[:i])
		b.WriteString(spell(name, withValue))
		msg = msg[i+2+j:]
	}
}

// NewFieldError returns a FieldError about field, whose value is value,
// with the reason format formats.
func NewFieldError(field string, value any, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Value: fmt.Sprint(value), Reason: fmt.Sprintf(format, args...)}
}

// WithFix sets the error's Fix and returns it.
func (e *FieldError) WithFix(format string, args ...any) *FieldError {
	e.Fix = fmt.Sprintf(format, args...)
	return e
}

// WithValue records the value of another field the error names and
// returns it.
func (e *FieldError) WithValue(field string, value any) *FieldError {
	if e.Values == nil {
		e.Values = map[string]string{}
	}
	e.Values[field] = fmt.Sprint(value)
	return e
}

// Problems are what a Check found, in the order of its rules. The first
// is what stops a run, and Error is its message; errors.As finds each
// FieldError.
type Problems []*FieldError

// Error is the first problem's message.
func (p Problems) Error() string {
	if len(p) == 0 {
		return "no problem"
	}
	return p[0].Error()
}

// Unwrap returns the problems.
func (p Problems) Unwrap() []error {
	errs := make([]error, len(p))
	for i, e := range p {
		errs[i] = e
	}
	return errs
}

// Add appends the problems err holds: a *FieldError, Problems, or any
// other error as a FieldError of no field. nil adds nothing.
func (p *Problems) Add(err error) {
	var ps Problems
	var fe *FieldError
	switch {
	case err == nil:
	case errors.As(err, &ps):
		*p = append(*p, ps...)
	case errors.As(err, &fe):
		if fe != nil {
			*p = append(*p, fe)
		}
	default:
		*p = append(*p, &FieldError{Reason: err.Error()})
	}
}

// AddField appends one problem; nil adds nothing.
func (p *Problems) AddField(e *FieldError) {
	if e != nil {
		*p = append(*p, e)
	}
}

// Err returns the problems as an error, nil when there are none.
func (p Problems) Err() error {
	if len(p) == 0 {
		return nil
	}
	return p
}

// CheckTxDepth checks a send queue depth: 1 to MaxTxDepth.
func CheckTxDepth(n int) error {
	if n < 1 || n > MaxTxDepth {
		return NewFieldError("TxDepth", n, "tx depth must be between 1 and %d", MaxTxDepth)
	}
	return nil
}

// CQ moderation, as perftest's bandwidth tests (raw_ethernet_bw too)
// have it: a send completion is asked for every CQ-moderation-th message.
const (
	DefaultCQMod = 100 // perftest's DEF_CQ_MOD
	// CQModSizeLimit is the size above which CQ moderation falls to 1
	// unless set explicitly (perftest's MSG_SIZE_CQ_MOD_LIMIT).
	CQModSizeLimit = 8192
	MaxCQMod       = 1024 // perftest -Q's limit
)

// CheckCQMod checks an explicit CQ moderation (perftest -Q; 0 means
// perftest's rule, CQModFor): 1 to MaxCQMod.
func CheckCQMod(n int) error {
	if n < 1 || n > MaxCQMod {
		return NewFieldError("CQMod", n, "CQ moderation must be between 1 and %d", MaxCQMod)
	}
	return nil
}

// CQModFor is the CQ moderation of messages of size bytes with tx
// outstanding at most, as perftest sets it: the explicit one (-Q) or,
// for 0, DefaultCQMod, or 1 above CQModSizeLimit; either capped at tx.
func CQModFor(explicit, tx, size int) int {
	switch {
	case explicit > 0:
		return max(min(explicit, tx), 1)
	case size > CQModSizeLimit:
		return 1
	}
	return max(min(DefaultCQMod, tx), 1)
}

// CheckRxDepth checks the receives kept posted per QP: 1 to MaxRxDepth.
func CheckRxDepth(n int) error {
	if n < 1 || n > MaxRxDepth {
		return NewFieldError("RxDepth", n, "rx depth must be between 1 and %d", MaxRxDepth)
	}
	return nil
}

// CheckOutReads checks an explicit READ/atomic depth (Config.OutReads
// other than 0, which means the device's maximum): at least 1.
func CheckOutReads(n int) error {
	if n < 1 {
		return NewFieldError("OutReads", n, "outstanding reads must be at least 1")
	}
	return nil
}

// checkSizes checks the message sizes of test t: at least one, none below
// a byte, and AtomicSize each for atomics.
func checkSizes(t Test, sizes []int) *FieldError {
	if len(sizes) == 0 {
		return NewFieldError("Sizes", sizes, "no message size")
	}
	for _, s := range sizes {
		if s < 1 {
			return NewFieldError("Sizes", sizes, "message size %d is below 1", s)
		}
		if t.Verb() == Atomic && s != AtomicSize {
			return NewFieldError("Sizes", sizes, "atomic operations move %d bytes, not %d", AtomicSize, s)
		}
	}
	return nil
}
