package latency

import (
	"fmt"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// Completion timestamps (Config.CompletionTimestamps).
//
// The software clock's sample is perftest's: the time between two
// consecutive posts of this side, a whole cycle of the test (a ping-pong's
// round trip, a READ's or atomic's post to the next post). The device's
// clock cannot stamp a post; it stamps completions. The same cycle, timed
// by the device, is the time between two consecutive completions of one
// kind on this side:
//
//   - send_lat: the receive completions of the peer's SENDs, the moment
//     each of its messages arrived (halved, as the software figure);
//   - write_lat: the completions of our RDMA WRITEs (the peer's WRITEs
//     land in memory and complete nothing on this side; on RC a WRITE
//     completes when the peer acknowledged it; halved);
//   - read_lat, atomic_lat: the completions of our READs or atomics, when
//     the data came back.
//
// Both clocks time the same cycles, so over a run their sums, and their
// means, differ only by where the first and the last stamp fall; what
// differs is the spread: a software sample holds the host's jitter in
// reaching its post, a device sample the device's between completions.
// In iterations mode the warm-up's and the first cycle's completions are
// left out as the software clock leaves out their posts; in duration mode
// a completion counts when this side's last post lay in the sample window
// (the device's clock is not the software clock and cannot be compared
// with the window's bounds), and perftest's line (t_avg, tps) is the
// counted cycles over their time on the device's clock.

// checkStamps is Config.Check's rule about CompletionTimestamps: the
// burst path's cq_poll family counts completions and returns none of
// their timestamps.
func (c *Config) checkStamps() *session.FieldError {
	if c.CompletionTimestamps && c.Path == sendpath.Burst {
		return session.NewFieldError("Path", c.Path, "{Path=} and {CompletionTimestamps} conflict: the burst path counts completions (the cq_poll family) and reads none of their timestamps").
			WithFix("take completion timestamps on another path")
	}
	return nil
}

// stampSampler records a run's samples from completion timestamps: the
// difference of consecutive stamps of one kind, converted to nanoseconds
// with the device's clock rate.
type stampSampler struct {
	rec   *reports.Recorder
	khz   uint64 // hca_core_clock
	mask  uint64 // completion_timestamp_mask: the clock's bits
	dur   bool
	first int64  // iterations mode: record the delta ending at completion index >= first
	n     int64  // completions taken
	prev  uint64 // the last stamp
	in    bool   // duration mode: the last completion counted
	span  int64  // the samples' sum: the device's time over the counted cycles
}

// newStampSampler returns the sampler of a run with the software sampler
// sm; rec holds its samples.
func newStampSampler(rec *reports.Recorder, attr verbsio.DeviceAttr, sm *sampler) *stampSampler {
	return &stampSampler{rec: rec, khz: attr.Ext.HCACoreClock, mask: attr.Ext.CompletionTimestampMask, dur: sm.dur, first: sm.first}
}

// take takes the stamp of the next completion; in says, in duration
// mode, whether the post before it lay in the sample window.
func (t *stampSampler) take(ts uint64, in bool) {
	p := t.n
	t.n++
	var record bool
	if t.dur {
		record = in && t.in
		t.in = in
	} else {
		record = p >= t.first
	}
	if record {
		ns, _ := verbsio.TimestampClock((ts-t.prev)&t.mask, t.khz)
		t.rec.Record(int64(ns))
		t.span += int64(ns)
	}
	t.prev = ts
}

// inWindow says whether sm's last post lay in the sample window (duration
// mode).
func (sm *sampler) inWindow() bool {
	return sm.dur && sm.posts > 0 && sm.ph.Sampling(sm.prev)
}

// stampsOf returns the run's stamp sampler, nil without completion
// timestamps.
func (r *runner) stampsOf(sm *sampler) *stampSampler {
	if r.tsRec == nil {
		return nil
	}
	r.tsRec.Reset()
	r.tsOK = false
	r.tsm = newStampSampler(r.tsRec, r.s.DevAttr, sm)
	return r.tsm
}

// startStamps readies the recorder of the completion-timestamp samples on
// a side that measures with completion timestamps.
func (r *runner) startStamps(opts reports.RecorderOptions) error {
	if !r.cfg.CompletionTimestamps || r.passiveServer {
		return nil
	}
	if err := session.CheckTimestamps(r.s.DevAttr, r.s.Dev.Device.Name); err != nil {
		return err
	}
	rec, err := reports.NewRecorder(opts)
	if err != nil {
		return err
	}
	r.tsRec = rec
	return nil
}

// stampResult builds the size's completion-timestamp result with the
// software result's spec: the companion Run reports after it. In duration
// mode perftest's line (t_avg, tps) comes from the counted cycles and
// their time on the device's clock, not from the software clock's window.
func (r *runner) stampResult(spec reports.LatencySpec, size int) error {
	if r.tsRec == nil || r.tsm == nil {
		return nil
	}
	if spec.Mode == reports.ModeDuration {
		spec.Iterations, spec.ElapsedNs = r.tsRec.Count(), r.tsm.span
		if spec.Iterations == 0 || spec.ElapsedNs <= 0 {
			return fmt.Errorf("%d B: no cycle inside the sample window from completion timestamps; run longer (-D)", size)
		}
	}
	res, err := reports.NewLatencyResult(spec, r.tsRec)
	if err != nil {
		return fmt.Errorf("%d B, from completion timestamps: %w", size, err)
	}
	res.Clock = reports.ClockCompletion
	r.tsRes, r.tsOK = res, true
	return nil
}

// Companion is the last size's result from completion timestamps
// (session.Companion), if the run took them.
func (r *runner) Companion() (reports.Result, bool) {
	res, ok := r.tsRes, r.tsOK
	r.tsOK = false
	return res, ok
}
