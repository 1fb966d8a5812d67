package raw

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// bwClient streams Warmup then Iterations frames of size bytes, TxDepth
// outstanding, flow after flow in bursts of FlowsBurst, and times the
// Iterations: post stamps and completion stamps per frame. As perftest,
// it asks for a send completion every CQModFor(size)-th frame and for the
// last one: a completion stands for the frames up to its own, which
// share its stamp.
func (r *runner) bwClient(ctx context.Context, size int) ([]reports.Result, error) {
	c := r.c
	if err := r.buildFrames(size, c.Frame); err != nil {
		return nil, err
	}
	n, mod := c.Iterations, c.CQModFor(size)
	var posted, completed []int64 // per frame; not in duration mode
	if c.Duration == 0 {
		posted, completed = make([]int64, n), make([]int64, n)
	}
	var w waiter
	w.begin(ctx, "waiting for send completions", c.stall())
	// covered: the frames up to the last signaled one posted, which its
	// completion will stand for. more: whether a frame follows, known
	// before the frame before it is posted, which is signaled if not.
	post, covered, done, outstanding, flow, burst := 0, 0, 0, 0, 0, 0
	first, end, last := clock.Now(), clock.Now()+int64(c.Duration), int64(0)
	sw := newSWLimiter(c, size, first)
	for more := c.running(0, end); more || done < covered; {
		if more {
			sw.open(&w)
		}
		staged := 0
		for more && outstanding < c.TxDepth && sw.allows() {
			if posted != nil && post >= c.Warmup {
				posted[post-c.Warmup] = clock.Now()
			}
			more = c.running(post+1, end)
			signaled := (post+1)%mod == 0 || !more
			if err := r.post(r.next(flow), signaled); err != nil {
				return nil, fmt.Errorf("raw test: post frame %d: %w", post, err)
			}
			post++
			if signaled {
				covered = post
			}
			outstanding++
			staged++
			sw.took()
			if burst++; burst == c.FlowsBurst {
				burst, flow = 0, (flow+1)%r.flows()
			}
		}
		if err := r.flush(staged); err != nil {
			return nil, err
		}
		k, err := r.poll(&w, len(r.wcs))
		if err != nil {
			return nil, err
		}
		if k == 0 {
			continue
		}
		now := clock.Now()
		w.progress(now)
		r.sendWCs += k
		for i := range r.wcs[:k] {
			if wc := &r.wcs[i]; wc.Status != verbsio.StatusSuccess {
				return nil, wcError(fmt.Sprintf("frame %d", done), wc)
			}
			upto := min((done/mod+1)*mod, covered) // the frames this completion stands for
			for ; done < upto; done++ {
				if completed != nil && done >= c.Warmup {
					completed[done-c.Warmup] = now
				}
			}
			outstanding = post - done
		}
		last = now
	}
	if done != post {
		return nil, fmt.Errorf("raw test: the send completions stood for %d frames, not the %d signaled of %d posted (CQ moderation %d)", done, covered, post, mod)
	}
	if c.Duration > 0 {
		res, err := reports.NewBandwidthDurationResult(reports.BWDurationSpec{Test: c.Test.Name(), Bytes: int64(size), Messages: int64(done),
			WindowNs: last - first})
		if err != nil {
			return nil, err
		}
		return []reports.Result{res}, nil
	}
	res, err := reports.NewBandwidthResult(reports.BWSpec{Test: c.Test.Name(), Bytes: int64(size), Iterations: int64(n),
		CQMod: mod, Posted: posted, Completed: completed})
	if err != nil {
		return nil, err
	}
	return []reports.Result{res}, nil
}

// bwServer counts the frames of size bytes its rule delivers: Warmup
// plus Iterations of them (duration mode: those of Duration from the
// first), or fewer when the stream stalls for the stall
// timeout (the rest were lost) or a frame of another size arrives (the
// client went on to its next size). The rate is over the frames after the
// first, from the first arrival to the last: the receive completions'
// timestamps where the CQ has them, else when the polls found them.
func (r *runner) bwServer(ctx context.Context, size int) ([]reports.Result, error) {
	c := r.c
	// On the tso path each of the client's sends arrives as per
	// segments of size bytes, which are what this side counts.
	size, per := c.Segments(size)
	warmup := c.Warmup * per
	expected := warmup + c.Iterations*per
	got, measured, others := 0, 0, 0
	// raw-burst-lat's server answers every ReplyEvery-th frame.
	every, owed, outstanding := 0, 0, 0
	if c.Test == session.RawBurstLat {
		every = c.replyEvery()
		if err := r.buildFrames(size, c.Frame); err != nil {
			return nil, err
		}
	}
	var first, last int64
	var w waiter
	w.begin(ctx, fmt.Sprintf("waiting for the first %d-byte frame", size), c.firstWait())
	var end int64 // duration mode: when the first frame's size stops being counted
loop:
	for c.Duration > 0 || got < expected {
		if end != 0 && clock.Now() >= end {
			break
		}
		k, err := r.pollCarried(&w, len(r.wcs))
		var stall *stallError
		switch {
		case err != nil && !errors.As(err, &stall):
			return nil, err
		case err != nil && got > 0:
			break loop // stalled: what did not come was lost
		case err != nil && others > 0:
			return nil, fmt.Errorf("raw test: %d frames arrived, none of %d bytes: run both sides with the same frame size", others, size)
		case err != nil:
			return nil, err
		case k == 0:
			continue
		}
		now := clock.Now()
		other := false
		for i := range r.wcs[:k] {
			wc := &r.wcs[i]
			if wc.Status != verbsio.StatusSuccess {
				return nil, wcError("a receive", wc)
			}
			if wc.Opcode == verbsio.WCSend {
				outstanding-- // a pong or a forwarded frame left
				if c.MacFwd {
					if err := r.repost(wc.ID); err != nil {
						return nil, err
					}
				}
				continue
			}
			n := int(wc.ByteLen)
			if other || n != size && got > 0 && slices.Contains(c.Sizes, n) {
				// A frame of one of the test's later sizes: the client
				// went on. It and what follows it are the next size's
				// to count (carried, reposted there).
				other = true
				r.carry = append(r.carry, *wc)
				continue
			}
			if c.MacFwd && n == size {
				r.forward(int(wc.ID), n) // reposted when its send completes
			} else if err := r.repost(wc.ID); err != nil {
				return nil, err
			}
			if n != size {
				others++ // a stray (a sniffer's)
				continue
			}
			got++
			if got == 1 && c.Duration > 0 {
				end = now + int64(c.Duration)
			}
			if every > 0 && got%every == 0 {
				owed++
			}
			at := now
			if r.clockKHz != 0 {
				ns, _ := verbsio.TimestampClock(wc.Timestamp, r.clockKHz)
				at = int64(ns)
			}
			if got == warmup+1 {
				first = at
				w.begin(ctx, "waiting for frames", c.stall())
			}
			if got > warmup {
				measured++
				last = at
			}
		}
		w.progress(now)
		if owed, outstanding, err = r.pongs(owed, outstanding); err != nil {
			return nil, err
		}
		if outstanding, err = r.forwardHeld(outstanding); err != nil {
			return nil, err
		}
		if other {
			break loop
		}
	}
	w.begin(ctx, "waiting for the last sends' completions", c.stall())
	for owed > 0 || outstanding > 0 || len(r.held) > 0 {
		k, err := r.poll(&w, len(r.wcs))
		if err != nil {
			return nil, err
		}
		for i := range r.wcs[:k] {
			if r.wcs[i].Opcode == verbsio.WCSend {
				outstanding--
				if !c.MacFwd {
					continue
				}
			} else if n := int(r.wcs[i].ByteLen); n != size && slices.Contains(c.Sizes, n) {
				r.carry = append(r.carry, r.wcs[i]) // the next size's
				continue
			}
			if err := r.repost(r.wcs[i].ID); err != nil {
				return nil, err
			}
		}
		if owed, outstanding, err = r.pongs(owed, outstanding); err != nil {
			return nil, err
		}
		if outstanding, err = r.forwardHeld(outstanding); err != nil {
			return nil, err
		}
	}
	if measured < 2 {
		return nil, fmt.Errorf("raw test: %d of %d frames of %d bytes arrived: too few to time", got, expected, size)
	}
	if c.Duration > 0 { // what the client sent is not known here: no loss count
		res, err := reports.NewBandwidthDurationResult(reports.BWDurationSpec{Test: c.Test.Name(), Bytes: int64(size),
			Messages: int64(measured - 1), WindowNs: last - first})
		if err != nil {
			return nil, err
		}
		res.Iterations = int64(measured)
		res.Bandwidth.PeakStatus = reports.PeakReceiver
		return []reports.Result{res}, nil
	}
	res, err := reports.NewBandwidthResult(reports.BWSpec{Test: c.Test.Name(), Bytes: int64(size), Iterations: int64(measured - 1),
		ElapsedNs: last - first, NoPeak: true})
	if err != nil {
		return nil, err
	}
	res.Iterations = int64(measured)
	res.Bandwidth.PeakStatus = reports.PeakReceiver
	res.Bandwidth.LostMessages = int64(expected - got)
	return []reports.Result{res}, nil
}

// latClient runs Warmup then Iterations ping-pongs of size bytes and
// records each round trip: on the software clock from the post of the
// ping to the poll of the pong, and, with CompletionTimestamps, from the
// ping's send completion stamp to the pong's receive completion stamp.
func (r *runner) latClient(ctx context.Context, size int) ([]reports.Result, error) {
	c := r.c
	if err := r.buildFrames(size, c.Frame); err != nil {
		return nil, err
	}
	n := c.Iterations
	if c.Duration > 0 {
		n = 0 // unknown: the recorder keeps up to its default raw samples
	}
	rec, err := reports.NewRecorder(reports.RecorderOptions{Expected: n})
	if err != nil {
		return nil, err
	}
	var tsRec *reports.Recorder
	var mask uint64
	if c.CompletionTimestamps {
		if tsRec, err = reports.NewRecorder(reports.RecorderOptions{Expected: n}); err != nil {
			return nil, err
		}
		attr, err := r.dev.QueryDevice()
		if err != nil {
			return nil, err
		}
		mask = attr.Ext.CompletionTimestampMask
	}
	var w waiter
	start := clock.Now()
	end := start + int64(c.Duration)
	samples := 0
	for i := 0; c.running(i, end); i++ {
		w.begin(ctx, fmt.Sprintf("waiting for the pong to ping %d", i), c.stall())
		t0 := clock.Now()
		if _, err := r.qp.PostSend(r.next(0)); err != nil {
			return nil, fmt.Errorf("raw test: post ping %d: %w", i, err)
		}
		var t1 int64
		var sendTS, recvTS uint64
		sent, answered := false, false
		for !sent || !answered {
			k, err := r.poll(&w, len(r.wcs))
			if err != nil {
				return nil, err
			}
			if k == 0 {
				continue
			}
			now := clock.Now()
			for j := range r.wcs[:k] {
				wc := &r.wcs[j]
				if wc.Status != verbsio.StatusSuccess {
					return nil, wcError(fmt.Sprintf("ping %d", i), wc)
				}
				if wc.Opcode == verbsio.WCSend {
					sent, sendTS = true, wc.Timestamp
					continue
				}
				if _, err := r.qp.PostRecv(r.recv[wc.ID : wc.ID+1]); err != nil {
					return nil, fmt.Errorf("raw test: repost a receive: %w", err)
				}
				if int(wc.ByteLen) != size {
					continue // not the pong: a stray frame the rule let in
				}
				answered, t1, recvTS = true, now, wc.Timestamp
			}
		}
		if i < c.Warmup {
			continue
		}
		samples++
		rec.Record(t1 - t0)
		if tsRec != nil {
			ns, _ := verbsio.TimestampClock((recvTS-sendTS)&mask, r.clockKHz)
			tsRec.Record(int64(ns))
		}
	}
	spec := reports.LatencySpec{Test: c.Test.Name(), Bytes: int64(size), Iterations: int64(samples), Mode: reports.ModeIterations,
		RTTFactor: reports.RTTFactorRoundTrip, Percentiles: c.Percentiles}
	if c.Duration > 0 {
		spec.Mode, spec.ElapsedNs = reports.ModeDuration, clock.Now()-start
	}
	res, err := reports.NewLatencyResult(spec, rec)
	if err != nil {
		return nil, err
	}
	out := []reports.Result{res}
	if tsRec != nil {
		ts, err := reports.NewLatencyResult(spec, tsRec)
		if err != nil {
			return nil, err
		}
		ts.Clock = ClockCompletion
		out = append(out, ts)
	}
	return out, nil
}

// latServer answers Warmup plus Iterations pings of size bytes, each with
// a pong of the same size to the client.
func (r *runner) latServer(ctx context.Context, size int) error {
	c := r.c
	if err := r.buildFrames(size, c.Frame); err != nil {
		return err
	}
	var w waiter
	outstanding := 0
	for i := 0; c.Duration > 0 || i < c.Warmup+c.Iterations; i++ {
		if i == 0 {
			w.begin(ctx, fmt.Sprintf("waiting for the first %d-byte ping", size), c.firstWait())
		} else {
			w.begin(ctx, fmt.Sprintf("waiting for ping %d", i), c.stall())
		}
		for pinged := false; !pinged || outstanding >= c.TxDepth; {
			k, err := r.poll(&w, len(r.wcs))
			var stall *stallError
			if i > 0 && c.Duration > 0 && errors.As(err, &stall) {
				return nil // duration mode: the client is done once it is silent
			}
			if err != nil {
				return err
			}
			if k == 0 {
				continue
			}
			for j := range r.wcs[:k] {
				wc := &r.wcs[j]
				if wc.Status != verbsio.StatusSuccess {
					return wcError(fmt.Sprintf("pong %d", i), wc)
				}
				if wc.Opcode == verbsio.WCSend {
					outstanding--
					continue
				}
				if _, err := r.qp.PostRecv(r.recv[wc.ID : wc.ID+1]); err != nil {
					return fmt.Errorf("raw test: repost a receive: %w", err)
				}
				pinged = pinged || int(wc.ByteLen) == size
			}
		}
		if _, err := r.qp.PostSend(r.next(0)); err != nil {
			return fmt.Errorf("raw test: post pong %d: %w", i, err)
		}
		outstanding++
	}
	w.begin(ctx, "waiting for the last pong's completion", c.stall())
	for outstanding > 0 {
		k, err := r.poll(&w, len(r.wcs))
		if err != nil {
			return err
		}
		for j := range r.wcs[:k] {
			if r.wcs[j].Opcode == verbsio.WCSend {
				outstanding--
			}
		}
	}
	return nil
}

// repost posts receive slot id again.
func (r *runner) repost(id uint64) error {
	if _, err := r.qp.PostRecv(r.recv[id : id+1]); err != nil {
		return fmt.Errorf("raw test: repost a receive: %w", err)
	}
	return nil
}

// forward swaps the MAC addresses of the n-byte frame in receive slot
// and holds the slot for forwardHeld (MacFwd).
func (r *runner) forward(slot, n int) {
	b := r.buf[r.recvOff+slot*r.rslot:][:n]
	var mac [6]byte
	copy(mac[:], b[0:6])
	copy(b[0:6], b[6:12])
	copy(b[6:12], mac[:])
	r.fsgl[slot].Length = uint32(n)
	r.held = append(r.held, slot)
}

// forwardHeld sends the held frames back out, as many as the send queue
// has room for, and returns the sends outstanding.
func (r *runner) forwardHeld(outstanding int) (int, error) {
	k := 0
	for ; k < len(r.held) && outstanding < r.c.TxDepth; k, outstanding = k+1, outstanding+1 {
		slot := r.held[k]
		if _, err := r.qp.PostSend(r.fwd[slot : slot+1]); err != nil {
			return 0, fmt.Errorf("raw test: forward a frame: %w", err)
		}
	}
	n := copy(r.held, r.held[k:])
	r.held = r.held[:n]
	return outstanding, nil
}

// pongs posts the burst-lat pongs owed, as many as the send queue has
// room for, and returns how many are still owed and outstanding.
func (r *runner) pongs(owed, outstanding int) (int, int, error) {
	for ; owed > 0 && outstanding < r.c.TxDepth; owed, outstanding = owed-1, outstanding+1 {
		if _, err := r.qp.PostSend(r.next(0)); err != nil {
			return 0, 0, fmt.Errorf("raw test: post a pong: %w", err)
		}
	}
	return owed, outstanding, nil
}

// burstClient is raw-burst-lat's client (perftest's LAT_BY_BW): it posts
// Warmup then Iterations frames of size bytes in bursts of BurstSize (on
// the burst path staged with SendPending and flushed once per burst),
// each burst once the previous one's sends completed and, with a
// software rate, no earlier than the rate allows. The server answers
// every ReplyEvery-th frame with a pong; each sample is a pong's arrival
// (when a poll found it) less the post of the frame that asked for it, a
// round trip under the burst load, halved as perftest does.
func (r *runner) burstClient(ctx context.Context, size int) ([]reports.Result, error) {
	c := r.c
	if err := r.buildFrames(size, c.Frame); err != nil {
		return nil, err
	}
	burst := c.BurstSize
	if burst == 0 {
		burst = c.TxDepth
	}
	// One burst's time at the rate, in ns (software pacing only).
	var gap int64
	if c.RateMbps > 0 && !c.HWPacing {
		gap = int64(float64(burst*size*8) * 1e3 / c.RateMbps)
	}
	every := c.replyEvery()
	total := c.Warmup + c.Iterations
	asked := make([]int64, total/every) // the post times of the frames that ask for a pong
	rec, err := reports.NewRecorder(reports.RecorderOptions{Expected: len(asked)})
	if err != nil {
		return nil, err
	}
	pongs := 0
	// take handles a batch of completions: sends count toward the burst,
	// pongs become samples.
	take := func(n int, now int64, sent int) (int, error) {
		done := 0
		for i := range r.wcs[:n] {
			wc := &r.wcs[i]
			if wc.Status != verbsio.StatusSuccess {
				return 0, wcError(fmt.Sprintf("frame %d", sent), wc)
			}
			if wc.Opcode == verbsio.WCSend {
				done++
				continue
			}
			if _, err := r.qp.PostRecv(r.recv[wc.ID : wc.ID+1]); err != nil {
				return 0, fmt.Errorf("raw test: repost a receive: %w", err)
			}
			if int(wc.ByteLen) != size || pongs == len(asked) {
				continue // a stray frame the rule let in
			}
			if (pongs+1)*every > c.Warmup { // the frame that asked was measured
				rec.Record(now - asked[pongs])
			}
			pongs++
		}
		return done, nil
	}
	var w waiter
	next := clock.Now()
	for sent, flow, fb := 0, 0, 0; sent < total; {
		// Until the next burst is due, pongs are taken as they come (as
		// perftest polls through its gap), so that their time is theirs.
		for gap > 0 && clock.Now() < next {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if n, err := r.cq.Poll(r.wcs); err != nil {
				return nil, fmt.Errorf("raw test: poll: %w", err)
			} else if n > 0 {
				if _, err := take(n, clock.Now(), sent); err != nil {
					return nil, err
				}
			}
		}
		next += gap
		k := min(burst, total-sent)
		for i := range k {
			t := clock.Now()
			if err := r.post(r.next(flow), true); err != nil {
				return nil, fmt.Errorf("raw test: post frame %d: %w", sent+i, err)
			}
			if (sent+i+1)%every == 0 {
				asked[(sent+i+1)/every-1] = t
			}
			if fb++; fb == c.FlowsBurst {
				fb, flow = 0, (flow+1)%r.flows()
			}
		}
		if err := r.flush(k); err != nil { // the burst path: the burst leaves now
			return nil, err
		}
		w.begin(ctx, "waiting for send completions", c.stall())
		for done := 0; done < k; {
			n, err := r.poll(&w, len(r.wcs))
			if err != nil {
				return nil, err
			}
			if n == 0 {
				continue
			}
			d, err := take(n, clock.Now(), sent+done)
			if err != nil {
				return nil, err
			}
			done += d
		}
		sent += k
	}
	w.begin(ctx, "waiting for the pongs", c.stall())
	for pongs < len(asked) {
		n, err := r.poll(&w, len(r.wcs))
		if err != nil {
			var stall *stallError
			if errors.As(err, &stall) {
				return nil, fmt.Errorf("raw test: %d of %d pongs came, then none for %v: the rest were lost (run the server with a larger -r, or send smaller bursts); are both sides given the same --reply_every?",
					pongs, len(asked), stall.limit)
			}
			return nil, err
		}
		if n > 0 {
			if _, err := take(n, clock.Now(), total); err != nil {
				return nil, err
			}
			w.progress(clock.Now())
		}
	}
	res, err := reports.NewLatencyResult(reports.LatencySpec{Test: c.Test.Name(), Bytes: int64(size), Iterations: int64(c.Iterations),
		Mode: reports.ModeIterations, RTTFactor: reports.RTTFactorRoundTrip, Percentiles: c.Percentiles}, rec)
	if err != nil {
		return nil, err
	}
	return []reports.Result{res}, nil
}

// swLimiter is perftest's software rate limiter (--rate_limit_type SW) on
// raw-bw's client: frames leave in bursts of BurstSize (0: the tx depth),
// each burst due one burst's time at the rate after the one before it.
// A burst that starts late is credited for at most one gap, so a stall
// does not turn into a run at line rate. The zero limiter (no software
// rate) allows every frame.
type swLimiter struct {
	burst, left int
	gap, next   int64 // one burst's time at the rate; when the next burst is due (ns)
}

func newSWLimiter(c *Config, size int, start int64) swLimiter {
	if c.RateMbps <= 0 || c.HWPacing {
		return swLimiter{}
	}
	burst := c.BurstSize
	if burst == 0 {
		burst = c.TxDepth
	}
	return swLimiter{burst: burst, gap: int64(float64(burst*size*8) * 1e3 / c.RateMbps), next: start}
}

// open starts the next burst when the last one is spent and the next is
// due; the wait for it counts as progress, not as a stall.
func (l *swLimiter) open(w *waiter) {
	if l.gap == 0 || l.left > 0 {
		return
	}
	now := clock.Now()
	if now < l.next {
		return
	}
	l.left = l.burst
	l.next = max(l.next, now-l.gap) + l.gap
	w.progress(now)
}

// allows says whether the current burst has a frame left.
func (l *swLimiter) allows() bool { return l.gap == 0 || l.left > 0 }

// took counts a frame posted from the current burst.
func (l *swLimiter) took() {
	if l.gap != 0 {
		l.left--
	}
}
