package reports

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rperf/rperf/internal/testsupport/golden"
)

func ptr[T any](v T) *T { return &v }

// goldenDocument builds a document covering every record kind from fixed
// inputs.
func goldenDocument(t *testing.T) *Document {
	t.Helper()
	env := GatherEnv(fixedSystem(map[string]string{
		"/proc/sys/kernel/osrelease": "6.18.44-fc-v769\n",
		"/proc/cpuinfo":              "model name\t: Intel(R) Xeon(R) Processor\n",
	}))
	env.OS, env.Arch = "linux", "amd64" // fixed whatever runs the test
	env.Provider, env.Fabric, env.Device, env.MTU, env.SendPath = "soft", "shm", "soft_0", 4096, "wr"
	env.Extra = map[string]string{"numa_node": "0"}
	doc := NewDocument(env)

	lat := latencyResult(t, LatencySpec{Test: "write_lat", Bytes: 2, Iterations: 11, Mode: ModeIterations, RTTFactor: 2},
		RecorderOptions{Expected: 10}, seq(10))
	dur := latencyResult(t, LatencySpec{Test: "write_lat", Bytes: 2, Iterations: 10000, Mode: ModeDuration, RTTFactor: 2,
		ElapsedNs: 20_000_000}, RecorderOptions{RawLimit: 5}, seq(10))
	posted, completed := stamps(100, 100, 1000)
	bw, err := NewBandwidthResult(BWSpec{Test: "write_bw", Bytes: 1000, Iterations: 100, Posted: posted, Completed: completed})
	if err != nil {
		t.Fatal(err)
	}
	bwd, err := NewBandwidthDurationResult(BWDurationSpec{Test: "write_bw", Bytes: 4096, Messages: 1_000_000, WindowNs: 1_000_000_000})
	if err != nil {
		t.Fatal(err)
	}
	paced := bwd
	paced.Path, paced.RatioToGeneric = "burst", ptr(1.25)
	paced.RequestedMbps, paced.AchievedMbps, paced.ErrorPct = ptr(30000.0), ptr(32768.0), ptr(9.2266666)
	gaps, err := NewRecorder(RecorderOptions{Expected: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []int64{1000, 1100, 900, 1000} {
		gaps.Record(g)
	}
	if paced.Gap, err = NewGap(gaps, 1000, nil); err != nil {
		t.Fatal(err)
	}
	paced.ExcludedMessages = 2
	rep := bwd
	rep.Path, rep.RatioToGeneric, rep.Verdict = "dv", ptr(1.5), VerdictBetter
	rep.Repetitions, rep.Merit, rep.MeritMin, rep.MeritMax = 5, MeritMsgRate, ptr(0.9), ptr(1.1)
	rep.Merits = []float64{1, 0.9, 1.05, 1.1, 0.95}
	doc.Results = append(doc.Results, lat, dur, bw, bwd, paced, rep)
	return doc
}

var hdrField = regexp.MustCompile(`"hdr": "[^"]*"`)

// TestGoldenDocument compares the JSON of goldenDocument with
// testdata/golden_v1.json. The hdr values are compared after decoding
// (zlib output may differ between Go releases), everything else byte for byte.
func TestGoldenDocument(t *testing.T) {
	doc := goldenDocument(t)
	var buf bytes.Buffer
	if err := doc.Write(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "golden_v1.json")
	want, ok := golden.Want(t, path, buf.Bytes())
	if !ok {
		return
	}
	norm := func(b []byte) string { return hdrField.ReplaceAllString(string(b), `"hdr": "…"`) }
	if diff := cmp.Diff(norm(want), norm(buf.Bytes())); diff != "" {
		t.Errorf("JSON differs from %s (-want +got); run go test -update if intended\n%s", path, diff)
	}
	old, err := Read(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range doc.Results {
		if r.Latency == nil {
			continue
		}
		hw, err1 := DecodeHDR(old.Results[i].HDR)
		hg, err2 := DecodeHDR(r.HDR)
		if err1 != nil || err2 != nil || !hw.Equals(hg) {
			t.Errorf("result %d: hdr differs from golden (%v, %v)", i, err1, err2)
		}
	}
}

func TestDocumentRoundTrip(t *testing.T) {
	doc := goldenDocument(t)
	var buf bytes.Buffer
	if err := doc.Write(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc, got); diff != "" {
		t.Errorf("round trip (-wrote +read)\n%s", diff)
	}
	// And through a file.
	name := filepath.Join(t.TempDir(), "r.json")
	if err := doc.WriteFile(name); err != nil {
		t.Fatal(err)
	}
	got, err = ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc, got); diff != "" {
		t.Errorf("file round trip (-wrote +read)\n%s", diff)
	}
}

func TestReadRejects(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
	}{
		{"unknown schema", `{"schema": "rperf/v2", "env": {}, "results": []}`, `unknown schema "rperf/v2": this build reads "rperf/v1"`},
		{"perftest json", `{"test_info": {"test": "RDMA_Write_Latency_Test"}, "results": {"t_avg": 1.5}}`, `no "schema" field`},
		{"schema not a string", `{"schema": 1}`, "not JSON"},
		{"not json", `#bytes #iterations`, "not JSON"},
		{"bad field type", `{"schema": "rperf/v1", "results": [{"bytes": "two"}]}`, "read document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	// Fields a newer v1 writer adds are ignored.
	d, err := Read(strings.NewReader(`{"schema": "rperf/v1", "future": 1, "env": {"host": "h"}}`))
	if err != nil || d.Env.Host != "h" || d.Results == nil {
		t.Errorf("forward compatible read: %+v, %v", d, err)
	}
}

func TestWriteRejects(t *testing.T) {
	var buf bytes.Buffer
	if err := (&Document{Schema: "rperf/v0"}).Write(&buf); err == nil {
		t.Error("writing schema rperf/v0: no error")
	}
	// A NaN cannot be written as JSON: an error, not a corrupt file.
	bad := &Document{Results: []Result{{Bandwidth: &Bandwidth{BWAvgGbps: nan()}}}}
	if err := bad.Write(&buf); err == nil {
		t.Error("writing NaN: no error")
	}
	// An empty document still has "results": [].
	buf.Reset()
	if err := (&Document{}).Write(&buf); err != nil || !strings.Contains(buf.String(), `"results": []`) {
		t.Errorf("empty document: %v\n%s", err, buf.String())
	}
}

func nan() float64 { z := 0.0; return z / z }
