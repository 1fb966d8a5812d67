package session

import (
	"fmt"

	"github.com/rperf/rperf/verbsio"
)

// Completion timestamps (Spec.CompletionTimestamps): the session's CQs
// are created with the timestamp flag, so that every completion carries
// the device's stamp of when it completed.

// TimestampFlags are the fields a timestamping session's CQs deliver: the
// standard ones and the completion timestamp (the Accelerated Verbs
// slides' WC_BASE | WC_TS).
const TimestampFlags = verbsio.WCExStandard | verbsio.WCExTS

// CheckTimestamps reports whether a device with attributes attr stamps
// completions: it must report the bits of its clock
// (completion_timestamp_mask) and the clock's rate (hca_core_clock), which
// converts its ticks into time. dev names the device in the error.
func CheckTimestamps(attr verbsio.DeviceAttr, dev string) error {
	var mask, khz uint64
	if attr.Ext != nil {
		mask, khz = attr.Ext.CompletionTimestampMask, attr.Ext.HCACoreClock
	}
	switch {
	case mask == 0:
		return fmt.Errorf("%s does not stamp completions (completion_timestamp_mask 0; rdiag info -v %s shows it): measure on the software clock alone, without completion timestamps", dev, dev)
	case khz == 0:
		return fmt.Errorf("%s stamps completions but reports no clock rate to convert them (hca_core_clock 0, completion_timestamp_mask %#x; rdiag info -v %s shows both): measure on the software clock alone, without completion timestamps", dev, mask, dev)
	}
	return nil
}

// createCQ creates one of the session's CQs of cqe entries: with the
// timestamp flag when the spec asks for completion timestamps.
func (s *Session) createCQ(cqe int) (*verbsio.CQ, error) {
	if !s.Spec.CompletionTimestamps {
		return s.Dev.CreateCQ(cqe)
	}
	return s.Dev.CreateCQEx(verbsio.CQInitAttr{CQE: cqe, WCFlags: TimestampFlags})
}
