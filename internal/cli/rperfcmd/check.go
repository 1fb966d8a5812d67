package rperfcmd

import (
	"errors"
	"slices"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/session"
)

// The rules about a test's values are its configuration's Check (package
// session and the families); the commands build the configuration from
// their flags, call Check, and spell the problem it reports in their
// flags (options.fields maps each configuration field to its flag).

// check runs the test's Check on the configuration the flags make with
// sizes, and returns its first problem as a usage error in the flags'
// terms; problems with the fields in later are left for a later check.
func (o *options) check(sizes []int, later ...string) error {
	var err error
	if o.lat() {
		c := o.latencyConfig(sizes)
		err = c.Check()
	} else {
		c := o.bwConfig(sizes)
		err = c.Check()
	}
	return o.usage(err, later...)
}

// finalCheck is check with the sizes the device takes and nothing left
// for later: the configuration as it will run.
func (o *options) finalCheck(sizes []int) error { return o.check(sizes) }

// usage turns the first problem of err (Problems or a FieldError) about a
// field not in later into a usage error that spells the fields as flags.
func (o *options) usage(err error, later ...string) error {
	var ps session.Problems
	var fe *session.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ps):
	case errors.As(err, &fe):
		ps = session.Problems{fe}
	default:
		return cli.Usagef("%v", err)
	}
	for _, p := range ps {
		if !slices.Contains(later, p.Field) {
			return cli.Usagef("%s", o.text(p, nil))
		}
	}
	return nil
}

// text renders p with its fields spelled as the command's flags: with
// the flag's value for {Name=}, as the user gave it or as the command set
// it. spell, if set, spells the fields it knows first (it returns "" for
// the others). A field without a flag keeps the configuration's name.
func (o *options) text(p *session.FieldError, spell func(field string, withValue bool) string) string {
	return p.Text(func(field string, withValue bool) string {
		if spell != nil {
			if s := spell(field, withValue); s != "" {
				return s
			}
		}
		name, ok := o.fields[field]
		f := o.fs.Lookup(name)
		switch {
		case !ok || f == nil:
			if withValue {
				return field + " " + p.ValueOf(field)
			}
			return field
		case withValue:
			return o.flagText(name)
		}
		return flagLead(f)
	})
}
