package pacing

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/internal/pairtest"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

func TestPlanRate(t *testing.T) {
	c := Default()
	// 4096-byte messages at 100 Mb/s: a gap of 4096 × 8 / 10^8 s =
	// 327.68 µs; one second is 10^8 / 32768 = 3051.76 messages, so 3052.
	// The bucket holds max(0, 4096, 4096) bytes: one message excluded.
	p := c.PlanRate(100)
	if p.Excluded != 1 || p.Measured != 3052 || p.GapNs != 327680 || p.Total() != 3053 {
		t.Errorf("100 Mb/s: %+v", p)
	}
	if want := 2*time.Duration(3052*327680) + time.Second; p.Cap != want {
		t.Errorf("cap %v, want %v", p.Cap, want)
	}
	// 1 Mb/s for 100 ms: 3.05 messages, raised to MinMeasured.
	c.RateDuration = 100 * time.Millisecond
	if p := c.PlanRate(1); p.Measured != MinMeasured {
		t.Errorf("1 Mb/s for 100 ms: %d measured, want %d", p.Measured, MinMeasured)
	}
	// A 10000-byte burst of 1500-byte messages: ceil(10000/1500) = 7
	// leave back to back. A byte count: ceil(1 MB / 1500) = 667.
	c = Default()
	c.Size, c.Burst, c.RateBytes = 1500, 10000, 1_000_000
	if p := c.PlanRate(50); p.Excluded != 7 || p.Measured != 667 || p.GapNs != 240000 {
		t.Errorf("1500 B, burst 10000, 1 MB at 50 Mb/s: %+v", p)
	}
	// Small messages: the bucket still holds MinBurst.
	c = Default()
	c.Size = 64
	if p := c.PlanRate(10); p.Excluded != 64 {
		t.Errorf("64-byte messages: %d excluded, want 4096/64 = 64", p.Excluded)
	}
	if EffectiveBurst(0, 9000) != 9000 || EffectiveBurst(20000, 9000) != 20000 || EffectiveBurst(100, 64) != MinBurst {
		t.Error("EffectiveBurst")
	}
}

func TestFollows(t *testing.T) {
	cases := []struct {
		req, got, tol float64
		want          bool
	}{
		{1000, 1000, 5, true},
		{1000, 950, 5, true}, // exactly 5% below
		{1000, 949.9, 5, false},
		{1000, 1200, 5, true}, // above is following (the limit failing shows in error_pct)
		{1000, 999, 0, false},
	}
	for _, c := range cases {
		if got := Follows(c.req, c.got, c.tol); got != c.want {
			t.Errorf("Follows(%v, %v, %v) = %v", c.req, c.got, c.tol, got)
		}
	}
}

func TestSweep(t *testing.T) {
	c := Default()
	pc := verbsio.PacingCaps{RateLimitMinKbps: 1000, RateLimitMaxKbps: 10_000_000}
	got := c.Sweep(pc)
	want := []float64{1, 10, 100, 1000, 2000, 5000, 10000}
	if len(got) != len(want) {
		t.Fatalf("sweep %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sweep %v, want %v", got, want)
		}
	}
	c.Rates = []float64{3, 7}
	if got := c.Sweep(pc); len(got) != 2 || got[1] != 7 {
		t.Errorf("explicit rates: %v", got)
	}
	c.Rates = []float64{0.5}
	if err := c.CheckDevice(pc, "shm0"); err == nil || !strings.Contains(err.Error(), "outside shm0's pacing range, 1 to 10000 Mb/s") {
		t.Errorf("0.5 Mb/s: %v", err)
	}
	if err := c.CheckDevice(verbsio.PacingCaps{}, "hw0"); err == nil || !strings.Contains(err.Error(), "no packet pacing") {
		t.Errorf("no pacing: %v", err)
	}
	c.Rates = []float64{-1}
	if err := c.Check(); err == nil {
		t.Error("a negative rate passed Check")
	}
}

// The receiver's arithmetic on hand-made stamps: 2 excluded messages,
// then arrivals 1000 ns apart but for one 3000 ns gap.
func TestArrivals(t *testing.T) {
	rec, _ := reports.NewRecorder(reports.RecorderOptions{})
	a := arrivals{excluded: 2, rec: rec}
	for _, ts := range []int64{0, 5, 10_000, 11_000, 12_000, 15_000, 16_000} {
		a.add(ts)
	}
	// Measured: 10000 .. 16000, five messages, four gaps (1000, 1000,
	// 3000, 1000): 4 × 1250 bytes = 40000 bits in 6000 ns = 6666.67 Mb/s.
	plan := Plan{Excluded: 2, GapNs: 1500}
	r, err := a.record(1250, 5000, plan, []float64{50, 100})
	if err != nil {
		t.Fatal(err)
	}
	if r.Iterations != 5 || r.ElapsedNs != 6000 || math.Abs(*r.AchievedMbps-20000.0/3) > 1e-9 || math.Abs(*r.ErrorPct-100.0/3) > 1e-9 {
		t.Errorf("record: iterations %d elapsed %d achieved %v error %v", r.Iterations, r.ElapsedNs, *r.AchievedMbps, *r.ErrorPct)
	}
	g := r.Gap
	if g.Samples != 4 || g.MinUs != 1 || g.MaxUs != 3 || g.MeanUs != 1.5 || g.ExpectedUs != 1.5 || g.Percentiles["50"] != 1 || g.Percentiles["100"] != 3 {
		t.Errorf("gap: %+v", g)
	}
	if r.ExcludedMessages != 2 || *r.RequestedMbps != 5000 || r.MsgRateMpps <= 0 {
		t.Errorf("record: %+v", r)
	}
	// Too few: nothing to measure.
	rec.Reset()
	b := arrivals{excluded: 3, rec: rec}
	b.add(1)
	b.add(2)
	b.add(3)
	b.add(4)
	if _, err := b.record(1250, 5000, plan, nil); err == nil || !strings.Contains(err.Error(), "nothing to measure") {
		t.Errorf("one measured message: %v", err)
	}
}

// Judging a measured stream on a machine others use.
const (
	// pacedBudget bounds how long a rate is measured again while the
	// machine leaves its stream too disturbed to judge.
	pacedBudget = 3 * time.Second
	// regular is how far, in percent, the 10th and 90th percentile gaps
	// of an undisturbed stream are from its median at most.
	regular = 5.0
)

// timed runs cfg on both sides over shm0 and returns each side's records
// and, for each rate, the time between the client's OnRate (before the
// barrier that lets the sender start) and its OnResult (after the last
// arrival), and what the sender's thread did on the CPUs meanwhile.
func timed(t *testing.T, cfg Config) (srv, cli []reports.Result, took []time.Duration, ran []threadRun) {
	t.Helper()
	cliCfg, srvCfg := cfg, cfg
	var start time.Time
	cliCfg.OnRate = func(int, float64) { start = time.Now() }
	cliCfg.OnResult = func(reports.Result) { took = append(took, time.Since(start)) }
	// The sender's goroutine stays on one thread for the rate, whose
	// kernel clocks then say how long the pacer could run.
	var at threadRun
	var tid int
	srvCfg.OnRate = func(int, float64) {
		runtime.LockOSThread()
		tid = unix.Gettid()
		at = readThreadRun(t, tid)
	}
	srvCfg.OnResult = func(reports.Result) {
		ran = append(ran, readThreadRun(t, tid).since(at))
		runtime.UnlockOSThread()
	}
	srv, cli = pairtest.MustResults(t, pairtest.Shm0, Run, srvCfg, cliCfg)
	if len(took) != len(cli) || len(ran) != len(srv) {
		t.Fatalf("%d client and %d server records, %d timed and %d with the sender's CPU time", len(cli), len(srv), len(took), len(ran))
	}
	return srv, cli, took, ran
}

// threadRun is what a thread did on the CPUs (its schedstat): how long it
// ran, and how many times it was put on a CPU.
type threadRun struct {
	ran    time.Duration
	slices int64
}

func readThreadRun(t *testing.T, tid int) threadRun {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		// Linux keeps it with CONFIG_SCHED_INFO, which every
		// distribution kernel has.
		t.Fatalf("the sender thread's CPU time: %v", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		t.Fatalf("schedstat %q: want three fields", b)
	}
	ns, err1 := strconv.ParseInt(f[0], 10, 64)
	n, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("schedstat %q: %v %v", b, err1, err2)
	}
	return threadRun{ran: time.Duration(ns), slices: n}
}

func (r threadRun) since(before threadRun) threadRun {
	return threadRun{ran: r.ran - before.ran, slices: r.slices - before.slices}
}

// cpuSlack is what the sender's thread may run in a rate beyond its paced
// messages: the barrier and the report exchange (it sleeps in both),
// setting and lifting the limit, the record (under the race detector).
const cpuSlack = 3 * time.Millisecond

// notSlowerRunning checks, whatever the scheduler does, that the pacer
// was not slower than requested while the sender could run. The engine
// paces on the sender's thread, which spins from the first message to
// the last: each stretch on a CPU of length L releases at least L/e
// messages at interval e (a message due while the thread was off leaves
// when it is back, the lateness of one message kept), so a working pacer
// needs no more CPU time than the measured messages' intervals (plus
// cpuSlack); load only takes CPU time away. A pacer slower by x releases
// at most L/(e(1+x)) + 1 per stretch, so the check catches one slower by
// more than catches (in percent), which grows with the number of
// stretches the scheduler cut the stream into (+Inf: too many to tell).
func notSlowerRunning(r reports.Result, run threadRun, tolerance float64) (catches float64, err error) {
	e := time.Duration(r.Gap.ExpectedUs * 1000)
	bound := time.Duration(float64(time.Duration(r.Iterations)*e)*(1+tolerance/100)) + cpuSlack
	if run.ran > bound {
		return 0, fmt.Errorf("the sender ran %v on a CPU for %d paced messages; the rate needs %v of it (%d intervals of %v, %v%% tolerance, %v for the rest): the pacer held messages longer than the rate",
			run.ran.Round(time.Microsecond), r.Iterations, bound.Round(time.Microsecond), r.Iterations, e, tolerance, cpuSlack)
	}
	if left := r.Iterations - run.slices - 1; left > 0 {
		return 100 * (float64(bound)/float64(time.Duration(left)*e) - 1), nil
	}
	return math.Inf(1), nil
}

// notFaster checks, whatever the scheduler does, that a rate's stream
// was not faster than requested: a bucket that starts with the excluded
// messages' tokens lets the last of the measured ones go no sooner than
// measured intervals after the start, so the stream took at least that
// (took, from timed). The 1% is the bucket's granularity (kb/s).
func notFaster(r reports.Result, took time.Duration) error {
	least := time.Duration(float64(r.Iterations) * r.Gap.ExpectedUs * 1000 * 0.99)
	if took < least {
		return fmt.Errorf("%d paced messages arrived within %v of the start; the rate lets them take %v: the limit was not applied",
			r.Iterations+r.ExcludedMessages, took, least)
	}
	return nil
}

// notSlower checks that a rate's stream was not slower than requested:
// the gaps of an undisturbed stream, whose 10th and 90th percentiles are
// within regular percent of its median, have the interval as their
// median. A disturbed stream is not judged (judged is false): on a busy
// machine a sender that lost its CPU for less than an interval lengthens
// one gap (a bucket one message deep keeps no credit), and a receiver
// that lost it bunches arrivals, so its gaps no longer tell the pacer's
// interval. notFaster holds every stream to the rate.
func notSlower(r reports.Result, tolerance float64) (judged bool, err error) {
	e := r.Gap.ExpectedUs * 1000
	h, err := reports.DecodeHDR(r.Gap.HDR)
	if err != nil {
		return false, err
	}
	p10, p50, p90 := float64(h.ValueAtQuantile(10)), float64(h.ValueAtQuantile(50)), float64(h.ValueAtQuantile(90))
	if p50 <= e/2 || p10 < p50*(1-regular/100) || p90 > p50*(1+regular/100) {
		return false, nil
	}
	if math.Abs(p50-e) > e*tolerance/100 {
		return true, fmt.Errorf("the gaps of an undisturbed stream (p10 %.2f us, p90 %.2f us) have a median of %.2f us, the rate implies %.2f us",
			p10/1000, p90/1000, p50/1000, e/1000)
	}
	return true, nil
}

// TestNotSlower: an undisturbed stream is judged by its median gap, a
// disturbed one not at all.
func TestNotSlower(t *testing.T) {
	const size, mbps = 1000, 80.0 // an interval of 100 us
	record := func(gapsNs ...int64) reports.Result {
		rec, _ := reports.NewRecorder(reports.RecorderOptions{})
		a := arrivals{rec: rec}
		now := int64(0)
		a.add(now)
		for _, g := range gapsNs {
			now += g
			a.add(now)
		}
		r, err := a.record(size, mbps, Plan{GapNs: 100_000}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	steady := func(n int, g int64) []int64 {
		gs := make([]int64, n)
		for i := range gs {
			gs[i] = g
		}
		return gs
	}
	cases := []struct {
		name   string
		gaps   []int64
		judged bool
		want   string
	}{
		{"paced", steady(100, 100_000), true, ""},
		{"paced, a stall", append(steady(99, 100_000), 5_000_000), true, ""},
		{"too slow", steady(100, 150_000), true, "a median of 150.0"},
		{"slightly too slow", steady(100, 106_000), true, "a median of 106.0"},
		{"a late receiver's bunches", append(append(steady(60, 100_000), 4_000_000), steady(39, 1_000)...), false, ""},
		{"a late sender's gaps", append(steady(70, 100_000), steady(30, 130_000)...), false, ""},
		{"all bunched", steady(100, 2_000), false, ""},
	}
	for _, c := range cases {
		judged, err := notSlower(record(c.gaps...), 5)
		if judged != c.judged || c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: judged %v, %v; want judged %v and %q", c.name, judged, err, c.judged, c.want)
		}
	}
}

// catchesText says what notSlowerRunning's resolution catches.
func catchesText(catches float64) string {
	if math.IsInf(catches, 1) {
		return "cut into too many stretches to tell a slow pacer"
	}
	return fmt.Sprintf("catches a pacer %.1f%% slower than the rate or more", catches)
}

// TestPacedStream: two explicit rates on shm0; the engine's token bucket
// makes the stream follow each request in both directions, and both sides
// report the same figures. Not faster (notFaster) and not slower while the
// sender ran (notSlowerRunning, on the sender thread's CPU time from the
// kernel) are judged on every stream, whatever else the machine runs.
// Where the machine left a stream undisturbed, its gaps are judged too
// (notSlower, to within the tolerance); a rate whose streams were all
// disturbed is measured again, alone, within pacedBudget (a measurement
// cut short by the rate's cap, which only a sender kept off the CPUs for
// that long meets, counts as disturbed), and if
// none was undisturbed the test says how slow a pacer the CPU-time
// judgement would have caught.
func TestPacedStream(t *testing.T) {
	cfg := Default()
	cfg.Rates, cfg.RateDuration = []float64{20, 400}, 150*time.Millisecond
	cfg.Params = oob.Params{Test: "pacing"}
	// A receive posted for every message of the longest rate (1832 at
	// 400 Mb/s): a receiver kept off the CPUs cannot make the sender
	// wait for a receive (RNR), spinning without sending, which
	// notSlowerRunning would take for a slow pacer.
	cfg.RxDepth = 2048
	deadline := time.Now().Add(pacedBudget)
	rates := cfg.Rates
	catches := map[float64]float64{} // per rate, the best resolution of notSlowerRunning
	for attempt := 1; ; attempt++ {
		c := cfg
		c.Rates = rates
		srv, cli, took, ran := timed(t, c)
		if len(cli) != len(rates) || len(srv) != len(rates) {
			t.Fatalf("%d client and %d server records, want %d each", len(cli), len(srv), len(rates))
		}
		var again []float64
		for i, r := range cli {
			want := rates[i]
			plan := cfg.PlanRate(want)
			// A stream is cut short only at the rate's cap: on a machine
			// that kept the sender off the CPUs that long.
			cut := r.Iterations != plan.Measured
			if *r.RequestedMbps != want || r.Gap == nil || r.ExcludedMessages != 1 || cut && (r.Iterations > plan.Measured || took[i] < plan.Cap) {
				t.Errorf("%v Mb/s (%d messages planned, cap %v, took %v): %+v", want, plan.Measured, plan.Cap, took[i], r)
				continue
			}
			// The figures are consistent with each other.
			if *r.AchievedMbps <= 0 || math.Abs(*r.ErrorPct-(*r.AchievedMbps-want)/want*100) > 1e-9 ||
				math.Abs(*r.AchievedMbps-float64(cfg.Size)*float64(r.Iterations-1)*8000/float64(r.ElapsedNs)) > 1e-9 {
				t.Errorf("%v Mb/s: achieved %v Mb/s (%+.2f%%) over %d ns", want, *r.AchievedMbps, *r.ErrorPct, r.ElapsedNs)
			}
			if math.Abs(r.Gap.ExpectedUs-plan.GapNs/1000) > 1e-9 || r.Gap.Samples != r.Iterations-1 {
				t.Errorf("%v Mb/s: gap %+v", want, r.Gap)
			}
			s := srv[i]
			if *s.AchievedMbps != *r.AchievedMbps || s.Iterations != r.Iterations || s.Gap != nil {
				t.Errorf("%v Mb/s: the server's record %+v differs from the client's", want, s)
			}
			if err := notFaster(r, took[i]); err != nil {
				t.Errorf("%v Mb/s: %v", want, err)
			}
			res, err := notSlowerRunning(r, ran[i], cfg.Tolerance)
			if err != nil {
				t.Errorf("%v Mb/s: %v", want, err)
			}
			if best, ok := catches[want]; !ok || res < best {
				catches[want] = res
			}
			judged, err := notSlower(r, cfg.Tolerance)
			judged = judged && !cut
			t.Logf("attempt %d, %v Mb/s: achieved %.3f Mb/s (%+.3f%%) in %v; gap p50 %.2f us, p99 %.2f us (the rate implies %.2f us); gaps judged %v; the sender ran %v in %d stretches (%s)",
				attempt, want, *r.AchievedMbps, *r.ErrorPct, took[i].Round(time.Millisecond), r.Gap.Percentiles["50"], r.Gap.Percentiles["99"], r.Gap.ExpectedUs, judged,
				ran[i].ran.Round(time.Microsecond), ran[i].slices, catchesText(res))
			switch {
			case err != nil && judged:
				t.Errorf("%v Mb/s: not paced at the requested rate: %v", want, err)
			case !judged:
				again = append(again, want)
			}
		}
		if t.Failed() || len(again) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, want := range again {
				t.Logf("%v Mb/s: this machine disturbed every stream in %d attempts (gaps spread more than %v%% around their median: busy CPUs); not slower was judged on the sender's CPU time at best to this resolution: %s",
					want, attempt, regular, catchesText(catches[want]))
			}
			return
		}
		rates = again
	}
}

// A window smaller than the completion cadence still completes (every
// message signaled).
func TestSmallWindow(t *testing.T) {
	cfg := Default()
	cfg.Rates, cfg.RateBytes, cfg.TxDepth = []float64{500}, 256<<10, 1
	cfg.Params = oob.Params{Test: "pacing"}
	_, cli := pairtest.MustShm0(t, Run, cfg)
	if len(cli) != 1 || cli[0].Iterations != 64 {
		t.Fatalf("records %+v", cli)
	}
}

// The default sweep stops after the first rate the stream cannot follow,
// and every rate ends within its cap.
func TestDefaultSweepStops(t *testing.T) {
	if testing.Short() {
		t.Skip("a sweep up to what shm0 sustains")
	}
	cfg := Default()
	cfg.RateDuration = 20 * time.Millisecond
	cfg.Params = oob.Params{Test: "pacing"}
	start := time.Now()
	_, cli, took, _ := timed(t, cfg)
	if len(cli) == 0 {
		t.Fatal("no records")
	}
	last := cli[len(cli)-1]
	for i, r := range cli {
		// No rate went faster than requested, the last one included.
		if err := notFaster(r, took[i]); err != nil {
			t.Errorf("%v Mb/s: %v", *r.RequestedMbps, err)
		}
		if i < len(cli)-1 && !Follows(*r.RequestedMbps, *r.AchievedMbps, cfg.Tolerance) {
			t.Errorf("the sweep went on after %v Mb/s, achieved %v", *r.RequestedMbps, *r.AchievedMbps)
		}
	}
	if len(cli) < len(DefaultRates) && Follows(*last.RequestedMbps, *last.AchievedMbps, cfg.Tolerance) {
		t.Errorf("the sweep stopped at %v Mb/s, which it followed (%v)", *last.RequestedMbps, *last.AchievedMbps)
	}
	t.Logf("swept %d rates in %v; last %v Mb/s achieved %.1f", len(cli), time.Since(start).Round(time.Millisecond), *last.RequestedMbps, *last.AchievedMbps)
}
