package paths_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/internal/comparetest"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/paths"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/verbsio"
	_ "github.com/rperf/rperf/verbsio/soft"
)

func TestSchedule(t *testing.T) {
	ps := []sendpath.Path{sendpath.Generic, sendpath.Burst, sendpath.DV}
	var got []string
	for _, r := range paths.Schedule(ps, 3) {
		got = append(got, r.Path.String())
	}
	// Each repetition starts one path later: every path is first once.
	want := "generic burst dv burst dv generic dv generic burst"
	if strings.Join(got, " ") != want {
		t.Errorf("schedule %q, want %q", strings.Join(got, " "), want)
	}
	runs := paths.Schedule(ps, 2)
	if len(runs) != 6 || runs[5].Index != 5 || runs[5].Count != 6 || runs[5].Repetition != 1 || runs[5].Repetitions != 2 {
		t.Errorf("run fields: %+v", runs[5])
	}
}

func TestSummarise(t *testing.T) {
	bwr := func(bytes int64, mpps float64) reports.Result {
		return reports.Result{Test: "send_bw", Bytes: bytes, Bandwidth: &reports.Bandwidth{MsgRateMpps: mpps}}
	}
	ps := []sendpath.Path{sendpath.Generic, sendpath.DV}
	got := map[sendpath.Path][][]reports.Result{
		// Three repetitions of two sizes each.
		sendpath.Generic: {{bwr(64, 2), bwr(4096, 1)}, {bwr(64, 2.2), bwr(4096, 1.1)}, {bwr(64, 1.8), bwr(4096, 0.9)}},
		sendpath.DV:      {{bwr(64, 3), bwr(4096, 1)}, {bwr(64, 3.1), bwr(4096, 0.95)}, {bwr(64, 2.9), bwr(4096, 1.05)}},
	}
	for p, runs := range got {
		for _, rs := range runs {
			for i := range rs {
				rs[i].Path = p.String()
			}
		}
	}
	out, err := paths.Summarise(ps, got)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		bytes   int64
		path    string
		mpps    float64
		ratio   float64
		verdict string
	}{
		{64, "generic", 2, 1, ""}, {64, "dv", 3, 1.5, reports.VerdictBetter},
		{4096, "generic", 1, 1, ""}, {4096, "dv", 1, 1, reports.VerdictSame},
	}
	if len(out) != len(want) {
		t.Fatalf("%d records, want %d", len(out), len(want))
	}
	for i, w := range want {
		r := out[i]
		if r.Bytes != w.bytes || r.Path != w.path || r.MsgRateMpps != w.mpps || *r.RatioToGeneric != w.ratio || r.Verdict != w.verdict || r.Repetitions != 3 {
			t.Errorf("record %d: %d B %s %v Mpps ratio %v %q reps %d; want %+v", i, r.Bytes, r.Path, r.MsgRateMpps, *r.RatioToGeneric, r.Verdict, r.Repetitions, w)
		}
	}
	// A passive side has nothing to summarise.
	if out, err := paths.Summarise(ps, map[sendpath.Path][][]reports.Result{sendpath.Generic: {nil}, sendpath.DV: {nil}}); out != nil || err != nil {
		t.Errorf("passive: %v, %v", out, err)
	}
}

func TestCheck(t *testing.T) {
	l := latency.Default(latency.Write)
	b := bw.Default(bw.Send)
	cases := []struct {
		cfg  paths.Config
		want string
	}{
		{paths.Config{Paths: []sendpath.Path{sendpath.Generic}}, "exactly one test"},
		{paths.Config{Latency: &l, Bandwidth: &b, Paths: []sendpath.Path{sendpath.Generic}}, "exactly one test"},
		{paths.Config{Latency: &l, Paths: []sendpath.Path{sendpath.DV}}, "must include generic"},
		{paths.Config{Latency: &l, Paths: []sendpath.Path{sendpath.Generic, sendpath.Burst}}, "posts SENDs only"},
		{paths.Config{Bandwidth: &b, Paths: []sendpath.Path{sendpath.Generic, sendpath.Generic}}, "twice"},
	}
	for _, c := range cases {
		if err := c.cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg.Paths, err, c.want)
		}
	}
}

// runPair runs a comparison on both sides over shm0, each run on a
// connection of its own, and returns both sides' records.
func runPair(t *testing.T, cfg paths.Config) (srv, cli []reports.Result) {
	t.Helper()
	srvCfg, cliCfg := cfg, cfg
	var runs []paths.Step
	cliCfg.OnStep = func(r paths.Step) { runs = append(runs, r) }
	srv, cli = comparetest.Run(t,
		func(ctx context.Context, dev *verbsio.Context, connect paths.Connector) ([]reports.Result, error) {
			return paths.Run(ctx, dev, connect, srvCfg)
		},
		func(ctx context.Context, dev *verbsio.Context, connect paths.Connector) ([]reports.Result, error) {
			return paths.Run(ctx, dev, connect, cliCfg)
		})
	if len(runs) != len(cfg.Paths)*cfg.Repetitions {
		t.Errorf("%d runs announced, want %d", len(runs), len(cfg.Paths)*cfg.Repetitions)
	}
	return srv, cli
}

func checkRecords(t *testing.T, side string, rs []reports.Result, ps []sendpath.Path, sizes []int, reps int) {
	t.Helper()
	if len(rs) != len(ps)*len(sizes) {
		t.Fatalf("%s: %d records, want %d", side, len(rs), len(ps)*len(sizes))
	}
	for i, r := range rs {
		p, size := ps[i%len(ps)], sizes[i/len(ps)]
		if r.Path != p.String() || r.Bytes != int64(size) || r.Repetitions != reps || r.RatioToGeneric == nil || r.MeritMin == nil || r.MeritMax == nil ||
			!(*r.MeritMin <= *r.MeritMax) {
			t.Errorf("%s: record %d: %s %d B reps %d ratio %v", side, i, r.Path, r.Bytes, r.Repetitions, r.RatioToGeneric)
			continue
		}
		if p == sendpath.Generic && (*r.RatioToGeneric != 1 || r.Verdict != "") || p != sendpath.Generic && r.Verdict == "" {
			t.Errorf("%s: %s: ratio %v verdict %q", side, p, *r.RatioToGeneric, r.Verdict)
		}
	}
}

// Every shm0 path of a SEND bandwidth test, both sides measuring.
func TestBandwidthPaths(t *testing.T) {
	b := bw.Default(bw.Send)
	b.Sizes, b.Iterations, b.PostList = []int{64}, 2000, 8
	b.Params = oob.Params{Test: "paths send-bw"}
	ps := []sendpath.Path{sendpath.Generic, sendpath.Burst, sendpath.Inline, sendpath.DM, sendpath.DV}
	srv, cli := runPair(t, paths.Config{Bandwidth: &b, Paths: ps, Repetitions: 3})
	checkRecords(t, "client", cli, ps, b.Sizes, 3)
	checkRecords(t, "server", srv, ps, b.Sizes, 3)
}

// A latency test over two sizes; the passive server of read_lat has no
// records.
func TestLatencyPaths(t *testing.T) {
	l := latency.Default(latency.Write)
	l.Sizes, l.Iterations, l.Inline = []int{8, 512}, 200, 0
	l.Params = oob.Params{Test: "paths write-lat"}
	ps := []sendpath.Path{sendpath.Generic, sendpath.Inline, sendpath.DM, sendpath.DV}
	srv, cli := runPair(t, paths.Config{Latency: &l, Paths: ps, Repetitions: 2})
	checkRecords(t, "client", cli, ps, l.Sizes, 2)
	checkRecords(t, "server", srv, ps, l.Sizes, 2)

	r := latency.Default(latency.Read)
	r.Iterations = 100
	r.Params = oob.Params{Test: "paths read-lat"}
	ps = []sendpath.Path{sendpath.Generic, sendpath.DM}
	srv, cli = runPair(t, paths.Config{Latency: &r, Paths: ps, Repetitions: 1})
	checkRecords(t, "client", cli, ps, r.Sizes, 1)
	if len(srv) != 0 {
		t.Errorf("passive server: %d records", len(srv))
	}
}
