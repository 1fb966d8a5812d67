package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
)

// The send paths through the binary: --path on the test commands, rperf
// paths, rperf dm-lat and rperf pacing, with --loopback and as separate
// server and client processes, short runs over shm0.

// readRecords parses a document and checks its env; it returns the
// document and each record as generic JSON, to check field names.
func readRecords(t *testing.T, path, sendPath string) (*reports.Document, []map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := reports.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var generic struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	wantFabric := map[string]string{"shm0": "shm", "udp_lo": "udp"}
	if e := doc.Env; wantFabric[e.Device] == "" || e.Fabric != wantFabric[e.Device] || e.SendPath != sendPath || e.MTU != 4096 || e.Clock.Name == "" {
		t.Errorf("%s: env %+v, want send_path %q", path, e, sendPath)
	}
	return doc, generic.Results
}

func hasFields(t *testing.T, what string, rec map[string]any, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if _, ok := rec[f]; !ok {
			t.Errorf("%s has no %q: %v", what, f, rec)
		}
	}
}

func TestPathFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		test string
		path string
		line string // the header's send-path line; the path if empty
	}{
		{[]string{"send-bw", "--path", "burst", "-s", "64", "-n", "500", "-l", "8"}, "send_bw", "burst", ""},
		{[]string{"write-lat", "--path", "dm", "-n", "100"}, "write_lat", "dm", ""},
		{[]string{"send-lat", "--path", "dv", "-n", "100"}, "send_lat", "dv", ""},
		{[]string{"write-bw", "--path", "inline", "-s", "512", "-n", "500"}, "write_bw", "inline", ""},
		{[]string{"write-bw", "-d", "udp_lo", "--udp-port", "0", "--path", "tso", "-s", "65536", "-n", "200"}, "write_bw", "tso", "tso; segmenter: kernel"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			r := rperf(t, append(c.args, "--loopback", "--json", out)...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
			}
			line := c.line
			if line == "" {
				line = c.path
			}
			if !strings.Contains(r.stdout, " Send path       : "+line+"\n") {
				t.Errorf("no send path line in:\n%s", r.stdout)
			}
			doc, recs := readRecords(t, out, c.path)
			if len(doc.Results) != 1 || doc.Results[0].Test != c.test || doc.Results[0].Path != c.path || recs[0]["path"] != c.path {
				t.Errorf("records: %+v", doc.Results)
			}
		})
	}
	// Refusals: the test, the device, the other flags.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"write-lat", "--path", "burst"}, 2, "--path burst does not apply to write-lat: the qp_burst family posts SENDs only"},
		{[]string{"send-bw", "--path", "tso"}, 4, "--path tso: shm0 does not support the tso send path; it supports generic, burst, inline, dm, dv"},
		{[]string{"send-bw", "--path", "inline", "-s", "4K"}, 2, "--path inline: 4096-byte messages do not fit shm0's max_inline_data 1024"},
		{[]string{"send-bw", "--path", "burst", "-q", "2"}, 2, "--path burst runs one QP"},
		{[]string{"write-lat", "--path", "warp"}, 2, `--path warp: "warp" is not a send path; use generic, burst, inline, dm, tso, dv`},
	} {
		r := rperf(t, append(c.args, "--loopback")...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("rperf %v: exit %d, stderr %q; want exit %d saying %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}

// checkComparison checks a paths or dm-lat document: per size, one
// record per path, generic first, with the comparison's fields.
func checkComparison(t *testing.T, path, test string, paths []string, sizes []int64, reps int) {
	t.Helper()
	doc, recs := readRecords(t, path, "paths")
	if len(doc.Results) != len(paths)*len(sizes) {
		t.Fatalf("%s: %d records, want %d", path, len(doc.Results), len(paths)*len(sizes))
	}
	for i, r := range doc.Results {
		p, size := paths[i%len(paths)], sizes[i/len(paths)]
		if r.Test != test || r.Bytes != size || r.Path != p || r.Repetitions != reps || r.RatioToGeneric == nil {
			t.Errorf("%s: record %d: %s %d B path %q reps %d", path, i, r.Test, r.Bytes, r.Path, r.Repetitions)
			continue
		}
		hasFields(t, path+" record "+p, recs[i], "path", "ratio_to_generic", "repetitions", "merit", "merits", "merit_min", "merit_max")
		if p == "generic" {
			if *r.RatioToGeneric != 1 {
				t.Errorf("%s: generic's ratio %v", path, *r.RatioToGeneric)
			}
		} else if r.Verdict == "" {
			t.Errorf("%s: %s has no verdict", path, p)
		}
	}
	if doc.Env.Extra["repetitions"] != strconv.Itoa(reps) || doc.Env.Extra["paths"] != strings.Join(paths, ", ") {
		t.Errorf("%s: env.extra %v", path, doc.Env.Extra)
	}
}

func TestPathsLoopback(t *testing.T) {
	out := filepath.Join(t.TempDir(), "p.json")
	r := rperf(t, "paths", "--loopback", "-n", "2000", "--reps", "3", "--json", out)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("stderr not empty when it is not a terminal: %q", r.stderr)
	}
	for _, want := range []string{"Send path comparison: Send BW Test", " Not run         : tso: shm0 does not support", " send_bw, 64 B, median of 3 repetitions per path",
		" path    MsgRate[Mpps]", " generic ", " burst ", " dv ", "reference"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}
	checkComparison(t, out, "send_bw", []string{"generic", "burst", "inline", "dm", "dv"}, []int64{64}, 3)
}

// A latency comparison as a server and a client started separately: both
// measure, both write the comparison.
func TestPathsServerAndClient(t *testing.T) {
	dir := t.TempDir()
	args := []string{"paths", "--test", "send-lat", "--paths", "generic,inline,dv", "-n", "300", "--reps", "2", "-s", "32"}
	srv, port := server(t, append(args, "--json", filepath.Join(dir, "server.json"))...)
	cli := rperf(t, append(args, "127.0.0.1", "-p", port, "--json", filepath.Join(dir, "client.json"))...)
	if cli.code != 0 {
		t.Fatalf("client exit %d; stderr: %s", cli.code, cli.stderr)
	}
	if code := srv.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("server exit %d; stderr: %s", code, srv.errb.String())
	}
	for _, side := range []string{"client", "server"} {
		checkComparison(t, filepath.Join(dir, side+".json"), "send_lat", []string{"generic", "inline", "dv"}, []int64{32}, 2)
	}
	// Peers that disagree on the paths refuse to run.
	srv, port = server(t, append(args, "--json", filepath.Join(dir, "s2.json"))...)
	bad := rperf(t, "paths", "--test", "send-lat", "--paths", "generic,dv", "-n", "300", "--reps", "2", "-s", "32", "127.0.0.1", "-p", port)
	if bad.code != 2 || !strings.Contains(bad.stderr, "peers disagree") || !strings.Contains(bad.stderr, "--paths") {
		t.Errorf("mismatched --paths: exit %d, stderr %q", bad.code, bad.stderr)
	}
	srv.wait(t, 30*time.Second)
}

func TestPathsRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"paths", "--paths", "dv,burst"}, 2, "include generic"},
		{[]string{"paths", "--test", "write-lat", "--paths", "generic,burst"}, 2, "--paths: burst does not apply to write-lat"},
		{[]string{"paths", "--paths", "generic,tso"}, 4, "shm0 does not support the tso send path"},
		{[]string{"paths", "--path", "dv"}, 2, "--path picks one path; paths compares several (--paths)"},
		{[]string{"paths", "--reps", "0"}, 2, "--reps 0"},
		{[]string{"paths", "-D", "4"}, 2, "fixed number of iterations"},
		{[]string{"paths", "--test", "ping-bw"}, 2, "--test ping-bw: not a test paths runs"},
		{[]string{"dm-lat", "--test", "send-bw"}, 2, "--test send-bw: not a test dm-lat runs; use one of send-lat, write-lat, read-lat, atomic-lat"},
	} {
		r := rperf(t, append(c.args, "--loopback")...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("rperf %v: exit %d, stderr %q; want exit %d saying %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}

func TestDMLat(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dm.json")
	r := rperf(t, "dm-lat", "--loopback", "-a", "--max-size", "64", "-n", "300", "--reps", "2", "--json", out)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	for _, want := range []string{"Device memory vs host memory: RDMA_Write Latency Test", " host memory ", " device memory ", " write_lat, 64 B, median of 2 repetitions per path"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}
	checkComparison(t, out, "write_lat", []string{"generic", "dm"}, []int64{2, 4, 8, 16, 32, 64}, 2)

	// A server and a client, read_lat: the passive server says so.
	dir := t.TempDir()
	args := []string{"dm-lat", "--test", "read-lat", "-s", "128", "-n", "200", "--reps", "1"}
	srv, port := server(t, args...)
	cli := rperf(t, append(args, "127.0.0.1", "-p", port, "--json", filepath.Join(dir, "c.json"))...)
	if cli.code != 0 {
		t.Fatalf("client exit %d; stderr: %s", cli.code, cli.stderr)
	}
	if code := srv.wait(t, 30*time.Second); code != 0 || !strings.Contains(srv.stdout(), "This side is passive") {
		t.Fatalf("server exit %d; stdout %s; stderr: %s", code, srv.stdout(), srv.errb.String())
	}
	checkComparison(t, filepath.Join(dir, "c.json"), "read_lat", []string{"generic", "dm"}, []int64{128}, 1)
}

// checkPacing checks a pacing document: one record per rate with the
// pacing fields, and the gap distribution where the side measured it.
func checkPacing(t *testing.T, path string, rates []float64, gaps bool) {
	t.Helper()
	doc, recs := readRecords(t, path, "generic")
	if len(doc.Results) != len(rates) {
		t.Fatalf("%s: %d records, want %d", path, len(doc.Results), len(rates))
	}
	for i, r := range doc.Results {
		if r.Test != "pacing" || r.RequestedMbps == nil || *r.RequestedMbps != rates[i] || r.AchievedMbps == nil || *r.AchievedMbps <= 0 ||
			r.ErrorPct == nil || r.Iterations < 10 || r.ExcludedMessages != 1 {
			t.Errorf("%s: record %d: %+v", path, i, r)
			continue
		}
		hasFields(t, path, recs[i], "requested_mbps", "achieved_mbps", "error_pct", "excluded_messages")
		if !gaps {
			continue
		}
		hasFields(t, path, recs[i], "gap", "bw_avg_gbps", "msg_rate_mpps", "elapsed_ns")
		gap := recs[i]["gap"].(map[string]any)
		hasFields(t, path+" gap", gap, "samples", "expected_us", "min_us", "max_us", "mean_us", "stdev_us", "percentiles", "hdr")
		g := r.Gap
		if g.Samples != r.Iterations-1 || g.Percentiles["50"] <= 0 || g.Percentiles["99.99"] < g.Percentiles["50"] || g.ExpectedUs != 4096*8/rates[i] {
			t.Errorf("%s: %v Mb/s: gap %+v", path, rates[i], g)
		}
		h, err := reports.DecodeHDR(g.HDR)
		if err != nil || h.TotalCount() != g.Samples {
			t.Errorf("%s: gap hdr: %v", path, err)
		}
	}
}

func TestPacingLoopback(t *testing.T) {
	out := filepath.Join(t.TempDir(), "pacing.json")
	r := rperf(t, "pacing", "--loopback", "--rates", "50,200", "--rate-duration", "150ms", "--json", out)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("stderr not empty when it is not a terminal: %q", r.stderr)
	}
	for _, want := range []string{"Packet Pacing Test", " requested[Mb/s] achieved[Mb/s]  error[%]  #messages    gap[usec]", "receives and measures"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}
	checkPacing(t, out, []float64{50, 200}, true)
}

func TestPacingServerAndClient(t *testing.T) {
	dir := t.TempDir()
	args := []string{"pacing", "--rates", "100", "--rate-bytes", "400K"}
	srv, port := server(t, append(args, "--json", filepath.Join(dir, "server.json"))...)
	cli := rperf(t, append(args, "127.0.0.1", "-p", port, "--json", filepath.Join(dir, "client.json"))...)
	if cli.code != 0 {
		t.Fatalf("client exit %d; stderr: %s", cli.code, cli.stderr)
	}
	if code := srv.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("server exit %d; stderr: %s", code, srv.errb.String())
	}
	checkPacing(t, filepath.Join(dir, "client.json"), []float64{100}, true)
	checkPacing(t, filepath.Join(dir, "server.json"), []float64{100}, false)
	if !strings.Contains(srv.stdout(), "sends (the client receives and measures)") {
		t.Errorf("server output:\n%s", srv.stdout())
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pacing", "--rates", "0.5"}, 2, "0.5 Mb/s is outside shm0's pacing range, 1 to 100000 Mb/s"},
		{[]string{"pacing", "--rates", "fast"}, 2, `"fast" is not a rate in Mb/s`},
		{[]string{"pacing", "--rate-bytes", "1M", "--rate-duration", "1s"}, 2, "--rate-bytes and --rate-duration conflict"},
		{[]string{"pacing", "--rates", "10", "--tolerance", "3"}, 2, "--tolerance sets when the default sweep stops"},
		{[]string{"pacing", "-q", "2"}, 2, "unknown shorthand flag: 'q'"},
	} {
		r := rperf(t, append(c.args, "--loopback")...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("rperf %v: exit %d, stderr %q; want exit %d saying %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}
